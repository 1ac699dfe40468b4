// Batch sizing: the planned peak memory for batch 1, 2, 4, ... and the largest
// batch whose plan fits every device's budget, computed instead of found by
// running out of memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "plan/plan.h"

namespace vlrt {

struct BatchPoint {
  int64_t batch = 0;
  size_t bytes = 0;  // weights + activation peak + prepared state on the most loaded device
  bool fits = false;
};

struct BatchSizing {
  std::string symbol;              // the batch dimension's name ("" when the model has none)
  std::vector<BatchPoint> points;  // 1, 2, 4, ... and the values probed between
  int64_t max_batch = 0;           // 0: not even batch 1 fits
};

// Plans the model for one batch size; fails (vlrt::Error) when it cannot be planned
// within the caps.
using PlanForBatch = std::function<Plan(int64_t batch)>;
// Each device's budget: its --memory cap, else what it reports as its capacity.
using BudgetFn = std::function<size_t(const Device&)>;

// Probes powers of two up to `limit`, then bisects between the last batch that fits
// and the first that does not, so max_batch is exact.
BatchSizing size_batches(const PlanForBatch& plan_for, const BudgetFn& budget, int64_t limit = 1024);

}  // namespace vlrt
