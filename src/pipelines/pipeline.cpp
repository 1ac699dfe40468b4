#include "pipelines/pipeline.h"

#include <algorithm>

namespace vlrt {

int64_t Pipeline::max_batch(const Request& request) {
  BatchSizing s = session().size_batches(signature(request, 1), 64);
  return std::max<int64_t>(1, s.max_batch);
}

const PipelineInfo& find_pipeline(const std::string& name) {
  std::string names;
  for (auto& p : pipelines()) {
    if (p.name == name) return p;
    names += (names.empty() ? "" : ", ") + p.name;
  }
  fail("no pipeline named '", name, "'; the pipelines are ", names);
}

}  // namespace vlrt
