// Runs the subgraphs of If, Loop, Scan and SequenceMap on the host: each subgraph is a model of its
// own (a child Session: canonicalized and folded once, planned per input signature)
// whose inputs are the subgraph's formal inputs and the outer-scope values it reads, but for the
// enclosing graph's initializers, which are its own; it runs on the enclosing session's host
// backend and thread pool.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace vlrt {

class Backend;
class Session;

// A Loop runs at most this many iterations unless a session allows more (--max-loop-iterations):
// a model from outside cannot keep a run busy for ever. A trip count above it without a
// condition is refused before the first iteration; a loop with a condition (exporters give
// while loops a trip count of 2^63 - 1) is stopped when it reaches the limit.
inline constexpr int64_t kDefaultMaxLoopIterations = 1'000'000;

class ControlFlowRunner {
 public:
  // max_loop_iterations: 0 for no limit. The bodies run on `host`, the enclosing session's host backend.
  ControlFlowRunner(const Model& parent, const Node& node, int threads, int64_t max_loop_iterations,
                    std::shared_ptr<Backend> host);
  ~ControlFlowRunner();

  // `inputs`: the node's inputs (nullptr: omitted), then the values of implicit_inputs(node)
  // in that order, all on the host. Returns one tensor per node output (undefined where unused).
  std::vector<Tensor> run(const std::vector<const Tensor*>& inputs);

 private:
  struct Body {
    std::unique_ptr<Session> session;
    std::vector<std::string> formal;  // the subgraph's inputs
    std::vector<std::string> outer;   // the enclosing values it reads
    std::vector<ValueDecl> outputs;
  };
  Body& body(const std::string& attr);
  // Runs a subgraph on its formal inputs; outer-scope values come from the node's inputs.
  std::vector<Tensor> call(Body& b, const std::vector<Tensor>& formal);
  std::vector<Tensor> run_if();
  std::vector<Tensor> run_loop();
  std::vector<Tensor> run_scan();
  std::vector<Tensor> run_sequence_map();

  const Model& parent_;
  const Node& node_;
  int threads_;
  int64_t max_loop_iterations_;
  std::shared_ptr<Backend> host_;
  std::vector<std::string> implicit_;   // implicit_inputs(node), found once: a walk of every subgraph
  std::map<std::string, Body> bodies_;  // by attribute name
  std::map<std::string, const Tensor*> outer_values_;  // the run in progress: implicit input values
  std::vector<const Tensor*> inputs_;                  // the run in progress: the node's inputs
};

}  // namespace vlrt
