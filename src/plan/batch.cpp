#include "plan/batch.h"

#include <algorithm>

namespace vlrt {

BatchSizing size_batches(const PlanForBatch& plan_for, const BudgetFn& budget, int64_t limit) {
  BatchSizing s;
  auto probe = [&](int64_t b) {
    BatchPoint p;
    p.batch = b;
    try {
      Plan plan = plan_for(b);
      p.fits = true;
      for (auto& dp : plan.devices) {
        size_t used = dp.total_bytes();
        p.bytes = std::max(p.bytes, used);
        size_t limit_bytes = dp.cap ? dp.cap : budget(dp.device);
        if (limit_bytes && used > limit_bytes) p.fits = false;
      }
    } catch (const Unsupported&) {
      throw;
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error&) {
      p.fits = false;  // could not be planned within the caps
    }
    s.points.push_back(p);
    return p.fits;
  };
  int64_t good = 0, bad = 0;
  for (int64_t b = 1; b <= limit; b *= 2) {
    if (probe(b)) {
      good = b;
    } else {
      bad = b;
      break;
    }
  }
  while (bad && bad - good > 1) {
    int64_t mid = (good + bad) / 2;
    if (probe(mid)) good = mid;
    else bad = mid;
  }
  std::sort(s.points.begin(), s.points.end(), [](auto& a, auto& b) { return a.batch < b.batch; });
  s.max_batch = good;
  return s;
}

}  // namespace vlrt
