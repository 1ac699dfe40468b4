// The decoder as exported returns `present` with the whole past (the Concat of past and new
// keys that attention reads) and `logits` for every position; a generation step needs only the
// positions it added and the last logits. This rewrite slices the outputs inside the graph, so
// that a step copies S new positions and one row of logits off the device instead of the whole
// cache and S rows: on a real model (28 layers, 4096 tokens) that is hundreds of megabytes a
// token. The output names stay; their sequence axis becomes the step's tokens (one for logits).
#pragma once

#include <cstdint>

#include "graph/graph.h"

namespace vlrt::vlm {

// `present.{i}.key/value` [B,kvh,P+S,hd] -> their last S positions (S = inputs_embeds' axis 1),
// `logits` [B,S,V] -> [B,1,V]. Fails naming the output when the decoder lacks one.
void keep_new_positions(Model& decoder, int64_t layers);

}  // namespace vlrt::vlm
