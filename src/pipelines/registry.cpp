// The pipelines this build has. Each is defined in its own folder; a new one is one line
// here. (A static initializer in its own file would not do: the linker leaves out of a static
// library the files nothing refers to.)
#include "pipelines/pipeline.h"

namespace vlrt {

PipelineInfo grounding_pipeline();  // pipelines/grounding/pipeline.cpp
PipelineInfo segment_pipeline();    // pipelines/segment/pipeline.cpp
PipelineInfo tag_pipeline();        // pipelines/tagging/pipeline.cpp

const std::vector<PipelineInfo>& pipelines() {
  static const std::vector<PipelineInfo> all = {grounding_pipeline(), segment_pipeline(), tag_pipeline()};
  return all;
}

}  // namespace vlrt
