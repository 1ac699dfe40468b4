#include "serve/metrics.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "core/error.h"

namespace vlrt::serve {

namespace {

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back exactly
  return std::string(buf, r.ptr);
}

// Series keys are rendered label sets; a histogram bucket adds le="..." to them.
std::string with_le(const std::string& labels, const std::string& le) {
  std::string l = "le=\"" + le + "\"";
  return labels.empty() ? "{" + l + "}" : labels.substr(0, labels.size() - 1) + "," + l + "}";
}

}  // namespace

std::string render_labels(const Labels& labels) {
  if (labels.empty()) return "";
  std::string s = "{";
  for (auto& [k, v] : labels) {
    if (s.size() > 1) s += ",";
    s += k + "=\"";
    for (char c : v) {
      if (c == '\\')
        s += "\\\\";
      else if (c == '"')
        s += "\\\"";
      else if (c == '\n')
        s += "\\n";
      else
        s += c;
    }
    s += "\"";
  }
  return s + "}";
}

void Metrics::counter(const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lk(mu_);
  VLRT_CHECK(!families_.count(name), "metric ", name, " declared twice");
  families_[name] = Family{Type::counter, help, {}, {}};
}

void Metrics::gauge(const std::string& name, const std::string& help) {
  std::lock_guard<std::mutex> lk(mu_);
  VLRT_CHECK(!families_.count(name), "metric ", name, " declared twice");
  families_[name] = Family{Type::gauge, help, {}, {}};
}

void Metrics::histogram(const std::string& name, const std::string& help, std::vector<double> bounds) {
  std::lock_guard<std::mutex> lk(mu_);
  VLRT_CHECK(!families_.count(name), "metric ", name, " declared twice");
  VLRT_CHECK(std::is_sorted(bounds.begin(), bounds.end()), "histogram ", name, ": bounds must ascend");
  families_[name] = Family{Type::histogram, help, std::move(bounds), {}};
}

Metrics::Family& Metrics::family(const std::string& name, Type type) {
  auto it = families_.find(name);
  VLRT_CHECK(it != families_.end(), "metric ", name, " was not declared");
  VLRT_CHECK(it->second.type == type || (type == Type::gauge && it->second.type == Type::counter), "metric ",
             name, " used as another type");
  return it->second;
}

void Metrics::add(const std::string& name, const Labels& labels, double v) {
  std::lock_guard<std::mutex> lk(mu_);
  family(name, Type::gauge).series[render_labels(labels)].value += v;
}

void Metrics::set(const std::string& name, const Labels& labels, double v) {
  std::lock_guard<std::mutex> lk(mu_);
  Family& f = family(name, Type::gauge);
  VLRT_CHECK(f.type == Type::gauge, "metric ", name, " is a counter; counters only go up");
  f.series[render_labels(labels)].value = v;
}

void Metrics::observe(const std::string& name, const Labels& labels, double v) {
  std::lock_guard<std::mutex> lk(mu_);
  Family& f = family(name, Type::histogram);
  Series& s = f.series[render_labels(labels)];
  if (s.counts.empty()) s.counts.assign(f.bounds.size() + 1, 0);
  size_t b =
      size_t(std::lower_bound(f.bounds.begin(), f.bounds.end(), v) - f.bounds.begin());  // le: v <= bound
  s.counts[b]++;
  s.value += v;
}

double Metrics::value(const std::string& name, const Labels& labels) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = families_.find(name);
  if (it == families_.end()) return 0;
  auto s = it->second.series.find(render_labels(labels));
  return s == it->second.series.end() ? 0 : s->second.value;
}

std::string Metrics::render() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string out;
  for (auto& [name, f] : families_) {
    const char* type = f.type == Type::counter ? "counter" : f.type == Type::gauge ? "gauge" : "histogram";
    out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + type + "\n";
    for (auto& [labels, s] : f.series) {
      if (f.type != Type::histogram) {
        out += name + labels + " " + number(s.value) + "\n";
        continue;
      }
      uint64_t cumulative = 0;
      for (size_t b = 0; b < s.counts.size(); b++) {
        cumulative += s.counts[b];
        std::string le = b < f.bounds.size() ? number(f.bounds[b]) : "+Inf";
        out += name + "_bucket" + with_le(labels, le) + " " + std::to_string(cumulative) + "\n";
      }
      out += name + "_sum" + labels + " " + number(s.value) + "\n";
      out += name + "_count" + labels + " " + std::to_string(cumulative) + "\n";
    }
  }
  return out;
}

}  // namespace vlrt::serve
