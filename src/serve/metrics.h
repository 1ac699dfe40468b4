// A small Prometheus registry: counters, gauges and histograms with labels, rendered in
// the text exposition format (version 0.0.4). Thread-safe; one mutex, since updates are a
// few per request.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace vlrt::serve {

using Labels = std::vector<std::pair<std::string, std::string>>;

class Metrics {
 public:
  // Declares a family; a name may be declared once. Histogram bounds are ascending upper
  // bounds, "+Inf" is implied.
  void counter(const std::string& name, const std::string& help);
  void gauge(const std::string& name, const std::string& help);
  void histogram(const std::string& name, const std::string& help, std::vector<double> bounds);

  void add(const std::string& name, const Labels& labels = {}, double v = 1);  // counter or gauge
  void set(const std::string& name, const Labels& labels, double v);           // gauge
  void observe(const std::string& name, const Labels& labels, double v);       // histogram

  // The current value of a counter or gauge (0 when never set).
  double value(const std::string& name, const Labels& labels = {}) const;
  std::string render() const;

 private:
  enum class Type { counter, gauge, histogram };
  struct Series {
    double value = 0;              // counter, gauge; histogram: sum
    std::vector<uint64_t> counts;  // histogram: per bucket, not cumulative; last is +Inf
  };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> bounds;
    std::map<std::string, Series> series;  // by rendered label set
  };
  Family& family(const std::string& name, Type type);

  mutable std::mutex mu_;
  std::map<std::string, Family> families_;
};

// {a="x",b="y"} with Prometheus escaping; "" for no labels.
std::string render_labels(const Labels& labels);

}  // namespace vlrt::serve
