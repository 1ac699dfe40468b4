// A loaded model ready to run: validates inputs, infers and folds shapes once per
// input signature, then executes the remaining nodes on the CPU.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/thread_pool.h"
#include "graph/graph.h"
#include "passes/shape_inference.h"

namespace vlrt {

struct SessionOptions {
  int threads = 0;  // <= 0: all cores
};

using TensorMap = std::map<std::string, Tensor>;

class Session {
 public:
  Session(Model model, SessionOptions options = {});

  const Model& model() const { return model_; }
  ThreadPool& pool() { return *pool_; }

  // Checks names, dtypes, ranks and fixed/symbolic dimensions of the inputs
  // against the model's declaration; fails naming the input and the expected shape.
  void check_inputs(const TensorMap& inputs) const;

  // Shapes, dtypes and folded values for the given input shapes (cached).
  const InferredGraph& infer(const TensorMap& inputs);

  // Runs the whole graph; returns every graph output.
  TensorMap run(const TensorMap& inputs);

 private:
  Model model_;
  std::unique_ptr<ThreadPool> pool_;
  std::map<std::string, InferredGraph> inferred_;  // by input signature
  std::vector<std::vector<std::string>> release_after_;  // per node: values last read there
};

// Opset range whose semantics vlrt implements.
inline constexpr int64_t kMinOpset = 7;
inline constexpr int64_t kMaxOpset = 18;

}  // namespace vlrt
