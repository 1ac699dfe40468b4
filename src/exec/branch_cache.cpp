#include "exec/branch_cache.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string_view>

namespace vlrt {

Branch find_branch(const Plan& plan, const std::vector<std::string>& inputs) {
  Branch b;
  b.inputs = inputs;
  std::vector<bool> made(plan.slots.size(), false);  // by the branch, or one of its inputs
  for (auto& [name, slot] : plan.inputs)
    if (std::find(inputs.begin(), inputs.end(), name) != inputs.end()) made[size_t(slot)] = true;
  b.in_branch.assign(plan.steps.size(), false);
  for (size_t si = 0; si < plan.steps.size(); si++) {
    const Step& s = plan.steps[si];
    bool reads_branch = false, only_branch = true;
    for (int k : s.inputs) {
      if (k < 0 || plan.slots[size_t(k)].constant) continue;
      reads_branch = reads_branch || made[size_t(k)];
      only_branch = only_branch && made[size_t(k)];
    }
    if (!reads_branch || !only_branch) continue;
    b.in_branch[si] = true;
    b.steps++;
    for (int k : s.outputs)
      if (k >= 0) made[size_t(k)] = true;
  }
  std::vector<bool> boundary(plan.slots.size(), false);
  for (size_t si = 0; si < plan.steps.size(); si++) {
    if (b.in_branch[si]) continue;
    for (int k : plan.steps[si].inputs)
      if (k >= 0) boundary[size_t(k)] = true;
  }
  for (int k : plan.outputs) boundary[size_t(k)] = true;
  for (size_t si = 0; si < plan.steps.size(); si++) {
    if (!b.in_branch[si]) continue;
    for (int k : plan.steps[si].outputs) {
      if (k < 0 || !boundary[size_t(k)]) continue;
      b.boundary.push_back(k);
      b.boundary_bytes += plan.slots[size_t(k)].bytes;
    }
  }
  return b;
}

uint64_t content_hash(const std::vector<Tensor>& tensors) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  for (const Tensor& t : tensors) {
    mix(uint64_t(t.dtype()));
    for (int64_t d : t.shape()) mix(uint64_t(d));
    mix(std::hash<std::string_view>{}(std::string_view(static_cast<const char*>(t.raw()), t.nbytes())));
  }
  return h;
}

namespace {

bool same_content(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); i++)
    if (a[i].dtype() != b[i].dtype() || a[i].shape() != b[i].shape() ||
        std::memcmp(a[i].raw(), b[i].raw(), a[i].nbytes()) != 0)
      return false;
  return true;
}

}  // namespace

std::shared_ptr<const BranchValues> BranchCache::find(const std::string& plan_key,
                                                      const std::vector<Tensor>& inputs) {
  uint64_t hash = content_hash(inputs);
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->hash != hash || it->plan_key != plan_key || !same_content(it->values->inputs, inputs)) continue;
    entries_.splice(entries_.begin(), entries_, it);
    stats_.hits++;
    return entries_.front().values;
  }
  stats_.misses++;
  return nullptr;
}

void BranchCache::insert(const std::string& plan_key, BranchValues values) {
  if (stats_.capacity == 0 || !values.complete) return;
  uint64_t hash = content_hash(values.inputs);
  entries_.push_front({plan_key, hash, std::make_shared<const BranchValues>(std::move(values))});
  while (entries_.size() > stats_.capacity) entries_.pop_back();
  stats_.entries = entries_.size();
}

}  // namespace vlrt
