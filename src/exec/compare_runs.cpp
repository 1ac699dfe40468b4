#include "exec/compare_runs.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <set>

namespace vlrt {

ValueDiff compare_values(const Tensor& a, const Tensor& b) {
  ValueDiff d;
  d.dtype_a = a.dtype(), d.dtype_b = b.dtype();
  d.shape_a = a.shape(), d.shape_b = b.shape();
  d.comparable = d.dtype_a == d.dtype_b && d.shape_a == d.shape_b;
  if (!d.comparable) return d;
  std::vector<double> va = a.to_double_vector(), vb = b.to_double_vector();
  const double inf = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < va.size(); i++) {
    double x = va[i], y = vb[i];
    bool nx = std::isnan(x), ny = std::isnan(y);
    d.nan_a = d.nan_a || nx;
    d.nan_b = d.nan_b || ny;
    if (std::isfinite(x)) d.peak_a = std::max(d.peak_a, std::abs(x));
    if ((nx && ny) || x == y) continue;
    d.max_abs = std::max(d.max_abs, nx || ny ? inf : std::abs(x - y));
  }
  d.max_rel = d.max_abs / std::max(d.peak_a, kRelativeErrorFloor);
  return d;
}

bool within(const ValueDiff& d, const Tolerance& tol) {
  return d.comparable && d.max_abs <= tol.atol + tol.rtol * d.peak_a;
}

std::vector<size_t> RunComparison::worst(size_t n) const {
  std::vector<size_t> idx;
  for (size_t i = 0; i < rows.size(); i++)
    if (rows[i].diff.comparable) idx.push_back(i);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](size_t x, size_t y) { return rows[x].diff.max_rel > rows[y].diff.max_rel; });
  if (idx.size() > n) idx.resize(n);
  return idx;
}

size_t shared_value_names(const Graph& a, const Graph& b) {
  std::set<std::string> names;
  for (auto& n : a.nodes) names.insert(n.outputs.begin(), n.outputs.end());
  size_t shared = 0;
  for (auto& n : b.nodes)
    for (auto& o : n.outputs) shared += !o.empty() && names.count(o);
  return shared;
}

namespace {

// The device each node of the session's graph ran on, by output value name.
std::map<std::string, std::string> devices_by_value(Session& s, const TensorMap& inputs) {
  const Plan& plan = s.plan(signature_of(inputs));
  std::map<std::string, std::string> devices;
  const auto& nodes = s.model().graph.nodes;
  for (size_t i = 0; i < nodes.size() && i < plan.node_device.size(); i++)
    for (auto& o : nodes[i].outputs) devices[o] = plan.node_device[i].str();
  return devices;
}

// Runs the session with `observer` shown every node output, and without it afterwards.
void run_observed(Session& s, const TensorMap& inputs, ValueObserver observer) {
  struct Reset {
    Executor& e;
    ~Reset() { e.set_value_observer(nullptr); }
  } reset{s.executor()};
  s.executor().set_value_observer(std::move(observer));
  s.run(inputs);
}

// The first run's values until the second makes its own: in memory while they fit the budget, the
// tensors past it appended to a temporary file that is unlinked at once (it goes with the
// descriptor, whatever happens).
class HeldValues {
 public:
  explicit HeldValues(size_t budget) : budget_(budget) {}
  ~HeldValues() {
    if (fd_ >= 0) ::close(fd_);
  }
  HeldValues(const HeldValues&) = delete;
  HeldValues& operator=(const HeldValues&) = delete;

  void put(const std::string& name, const Tensor& t) {
    forget(name);  // a value made twice (a Loop's body) keeps its last
    if (!t.is_tensor() || in_memory_ + t.nbytes() <= budget_) {
      in_memory_ += t.is_tensor() ? t.nbytes() : 0;
      memory_[name] = t;
      return;
    }
    spilled_[name] = {t.dtype(), t.shape(), end_};
    write_all(t.raw(), t.nbytes());
  }

  // The value and its removal from the store; nothing when the first run did not make it.
  std::optional<Tensor> take(const std::string& name) {
    if (auto it = memory_.find(name); it != memory_.end()) {
      Tensor t = it->second;
      forget(name);
      return t;
    }
    auto it = spilled_.find(name);
    if (it == spilled_.end()) return std::nullopt;
    Tensor t(it->second.dtype, it->second.shape);
    read_all(t.raw(), t.nbytes(), it->second.offset);
    spilled_.erase(it);
    return t;
  }

  size_t size() const { return memory_.size() + spilled_.size(); }

 private:
  void forget(const std::string& name) {
    if (auto it = memory_.find(name); it != memory_.end()) {
      in_memory_ -= it->second.is_tensor() ? it->second.nbytes() : 0;
      memory_.erase(it);
    }
    spilled_.erase(name);  // its bytes stay in the file, unread
  }

  struct Spilled {
    DType dtype;
    Shape shape;
    off_t offset;
  };

  void open_file() {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/vlrt-check-XXXXXX";
    fd_ = ::mkstemp(path_.data());
    if (fd_ < 0)
      fail("cannot create a temporary file in ", path_.substr(0, path_.rfind('/')),
           " for the first run's values: ", std::strerror(errno),
           "; set TMPDIR to a writable folder with room for them");
    ::unlink(path_.c_str());
  }

  void write_all(const void* data, size_t n) {
    if (fd_ < 0) open_file();
    const char* p = static_cast<const char*>(data);
    for (size_t done = 0; done < n;) {
      ssize_t w = ::pwrite(fd_, p + done, n - done, end_ + off_t(done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0)
        fail("cannot hold the first run's values in a temporary file in ", path_.substr(0, path_.rfind('/')),
             ": ", w < 0 ? std::strerror(errno) : "nothing written", " after ", (end_ + off_t(done)) >> 20,
             " MiB; free disk space there or set TMPDIR to a folder with more");
      done += size_t(w);
    }
    end_ += off_t(n);
  }

  void read_all(void* data, size_t n, off_t offset) const {
    char* p = static_cast<char*>(data);
    for (size_t done = 0; done < n;) {
      ssize_t r = ::pread(fd_, p + done, n - done, offset + off_t(done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0)
        fail("cannot read back the first run's values from their temporary file: ",
             r < 0 ? std::strerror(errno) : "unexpected end of file");
      done += size_t(r);
    }
  }

  size_t budget_, in_memory_ = 0;
  std::map<std::string, Tensor> memory_;
  std::map<std::string, Spilled> spilled_;
  int fd_ = -1;
  off_t end_ = 0;
  std::string path_;
};

}  // namespace

RunComparison compare_runs(Session& a, Session& b, const TensorMap& inputs, const Tolerance& tol,
                           size_t memory_budget) {
  HeldValues values_a(memory_budget);
  run_observed(a, inputs,
               [&](const Node&, const std::string& value, const Tensor& t) { values_a.put(value, t); });

  // b's values are compared as they are made, so that one run's values are held at a time.
  RunComparison result;
  std::map<std::string, ValueDiff> diffs;
  std::set<std::string> made_by_b;
  run_observed(b, inputs, [&](const Node&, const std::string& value, const Tensor& t) {
    made_by_b.insert(value);
    std::optional<Tensor> from_a = values_a.take(value);
    if (!from_a) return;
    if (!from_a->is_tensor() || !t.is_tensor()) {
      result.non_tensor_skipped++;
    } else {
      diffs[value] = compare_values(*from_a, t);
    }
  });
  result.only_a = values_a.size();

  auto devices_a = devices_by_value(a, inputs), devices_b = devices_by_value(b, inputs);
  for (auto& node : a.model().graph.nodes) {
    for (auto& value : node.outputs) {
      auto it = diffs.find(value);
      if (it == diffs.end()) continue;
      NodeComparison row{node.name,        node.op_type, value, devices_a[value],
                         devices_b[value], it->second,   true};
      row.within = within(row.diff, tol);
      if (!row.within && result.first_over < 0) result.first_over = int(result.rows.size());
      result.rows.push_back(std::move(row));
    }
  }
  result.only_b = made_by_b.size() - diffs.size() - result.non_tensor_skipped;
  return result;
}

}  // namespace vlrt
