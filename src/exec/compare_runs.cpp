#include "exec/compare_runs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
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

}  // namespace

RunComparison compare_runs(Session& a, Session& b, const TensorMap& inputs, const Tolerance& tol) {
  std::map<std::string, Tensor> values_a;
  run_observed(a, inputs,
               [&](const Node&, const std::string& value, const Tensor& t) { values_a[value] = t; });

  // b's values are compared as they are made, so that one run's values are held at a time.
  RunComparison result;
  std::map<std::string, ValueDiff> diffs;
  std::set<std::string> made_by_b;
  run_observed(b, inputs, [&](const Node&, const std::string& value, const Tensor& t) {
    made_by_b.insert(value);
    auto it = values_a.find(value);
    if (it == values_a.end()) return;
    if (!it->second.is_tensor() || !t.is_tensor()) {
      result.non_tensor_skipped++;
    } else {
      diffs[value] = compare_values(it->second, t);
    }
    values_a.erase(it);
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
