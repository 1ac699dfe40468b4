#include "passes/export_lint.h"

#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "passes/canonicalize.h"
#include "passes/shape_inference.h"

namespace vlrt {

namespace {

// Every dynamic dimension is at a base size, then one at a time at another size: 224 and 448 are
// multiples of the usual strides, patch and window sizes (7, 14, 16, 32) and unlikely export sizes.
// A graph that fails at 224 everywhere (a baked Reshape without -1) is probed from 1 to 224.
struct ProbeSizes {
  int64_t base, alt;
};
constexpr ProbeSizes kProbeSizes{224, 448};
constexpr ProbeSizes kFallbackSizes{1, 224};
// The other size tried when a dimension fails at the first: 224 or 448 can pass a limit of the
// model (a text length padded to 77) where a small size does not.
constexpr int64_t kRetrySize = 3;
// Export-time sizes tried when mapping a Reshape's input axes onto its output axes.
constexpr int64_t kMaxExportSize = 16;

const char* kAdvice =
    "Re-export with the dimension dynamic: give it in torch.onnx.export's dynamic_axes and do not call "
    "int() on tensor sizes while tracing (use x.shape[i] or -1 in view/reshape); onnxruntime runs such a "
    "model at another size without an error";

struct Dimension {
  std::string key;    // the symbol, or the input and axis of an unnamed dynamic axis
  std::string label;  // as messages name it
};

std::string dimension_key(const ValueDecl& d, size_t axis) {
  return d.dims[axis].param.empty() ? cat("\x01", d.name, ":", axis) : d.dims[axis].param;
}

std::vector<Dimension> dynamic_dimensions(const Model& model) {
  std::vector<Dimension> dims;
  for (auto& d : model.graph.inputs)
    for (size_t axis = 0; axis < d.dims.size(); axis++) {
      if (d.dims[axis].value >= 0) continue;
      std::string key = dimension_key(d, axis);
      bool seen = false;
      for (auto& known : dims) seen = seen || known.key == key;
      if (!seen)
        dims.push_back({key, d.dims[axis].param.empty() ? cat("axis ", axis, " of input '", d.name, "'")
                                                         : cat("'", d.dims[axis].param, "'")});
    }
  return dims;
}

// Shape inference with every dynamic dimension at the base size but `varied` (a key) at the other.
InferredGraph probe(const Model& model, Backend& host, const std::string& varied, ProbeSizes sizes) {
  std::unordered_map<std::string, ValueInfo> inputs;
  for (auto& d : model.graph.inputs) {
    ValueInfo v;
    v.dtype = d.dtype;
    v.shape_known = true;
    for (size_t axis = 0; axis < d.dims.size(); axis++)
      v.shape.push_back(d.dims[axis].value >= 0 ? d.dims[axis].value
                        : dimension_key(d, axis) == varied ? sizes.alt
                                                           : sizes.base);
    inputs[d.name] = v;
  }
  return infer_shapes(model, inputs, host);
}

const ValueInfo* known_shape(const InferredGraph& g, const std::string& v) {
  auto it = g.values.find(v);
  return it == g.values.end() || !it->second.shape_known ? nullptr : &it->second;
}

std::optional<std::vector<int64_t>> known_ints(const InferredGraph& g, const std::string& v) {
  const ValueInfo* info = known_shape(g, v);
  if (!info || !info->value || (info->dtype != DType::i64 && info->dtype != DType::i32)) return std::nullopt;
  return info->value->to_int64_vector();
}

// A size that is v0 at the base probe and v1 at the other, taken as affine in the dimension, at size s.
std::optional<int64_t> size_at(ProbeSizes p, int64_t v0, int64_t v1, int64_t s) {
  int64_t num = (v1 - v0) * (s - p.base);
  if (num % (p.alt - p.base) != 0) return std::nullopt;
  int64_t v = v0 + num / (p.alt - p.base);
  return v >= 1 ? std::optional<int64_t>(v) : std::nullopt;
}

std::string shape_text(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); i++) s += cat(i ? ", " : "", v[i]);
  return s + "]";
}

// A Reshape's two probes: its input's shapes and its shape input's values.
struct ReshapeProbes {
  ProbeSizes sizes;
  Shape in0, in1;
  std::vector<int64_t> shape0, shape1;
  bool allowzero = false;
  std::vector<bool> literal;  // per entry: it comes from an initializer or a Constant
  // An entry that does not follow the dimension: the same at both probes, neither -1 nor a copy of
  // the input's size.
  bool steady(size_t k) const {
    return shape0[k] == shape1[k] && shape0[k] != -1 && (shape0[k] != 0 || allowzero);
  }
  // A steady literal entry: where a size is baked (a steady entry computed from Shape follows a
  // fixed axis, such as H / window in Swin's window_reverse, or a size baked earlier in the graph).
  bool fixed(size_t k) const { return literal[k] && steady(k); }
};

// The input and output shapes at export-time size s, when the shapes are consistent there.
std::optional<std::pair<Shape, Shape>> reshape_at(const ReshapeProbes& r, int64_t s) {
  Shape in, out;
  for (size_t k = 0; k < r.in0.size(); k++) {
    auto v = size_at(r.sizes, r.in0[k], r.in1[k], s);
    if (!v) return std::nullopt;
    in.push_back(*v);
  }
  int64_t known = 1, minus_one = -1;
  for (size_t k = 0; k < r.shape0.size(); k++) {
    int64_t v = r.shape0[k];
    if (r.shape0[k] != r.shape1[k]) {
      auto at = size_at(r.sizes, r.shape0[k], r.shape1[k], s);
      if (!at) return std::nullopt;
      v = *at;
    } else if (v == 0 && !r.allowzero) {
      if (k >= in.size()) return std::nullopt;
      v = in[k];
    }
    if (v == -1) minus_one = int64_t(k);
    else if (v < 1) return std::nullopt;
    else known *= v;
    out.push_back(v);
  }
  int64_t total = shape_numel(in);
  if (minus_one >= 0) {
    if (total % known != 0) return std::nullopt;
    out[size_t(minus_one)] = total / known;
  } else if (known != total) {
    return std::nullopt;
  }
  return std::pair{in, out};
}

// A fixed output axis holding s itself in a group of axes (input axes onto output axes with equal
// products, in row-major order at export size s) whose input axes carry the dimension while its
// output axes are all steady entries: the dimension has nowhere to go in that group.
std::optional<size_t> baked_axis(const ReshapeProbes& r, const Shape& in, const Shape& out, int64_t s) {
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    size_t first_in = i, first_out = j;
    int64_t pi = 1, pj = 1;
    while (i < in.size() || j < out.size()) {
      bool took_in = i > first_in, took_out = j > first_out;
      if (took_in && took_out && pi == pj) break;
      bool take_in = j >= out.size() || (i < in.size() && (!took_in || (took_out && pi <= pj)));
      if (take_in) pi *= in[i++];
      else pj *= out[j++];
    }
    bool carries = false, all_steady = j > first_out;
    for (size_t k = first_in; k < i; k++) carries = carries || r.in0[k] != r.in1[k];
    for (size_t k = first_out; k < j; k++) all_steady = all_steady && r.steady(k);
    if (!carries || !all_steady) continue;
    for (size_t k = first_out; k < j; k++)
      if (out[k] == s && r.fixed(k)) return k;
  }
  return std::nullopt;
}

class Linter {
 public:
  // Inferred as a session infers it: older-opset forms rewritten first.
  Linter(const Model& model, Backend& host) : model_(model), host_(host) {
    canonicalize(model_);
    for (auto& n : model_.graph.nodes)
      for (auto& o : n.outputs) producers_[o] = &n;
  }

  ExportLintReport run() {
    for (auto& d : model_.graph.inputs)
      if (!d.has_shape || d.dtype == DType::undefined || d.kind != ValueKind::tensor) {
        report_.notes.push_back(cat("input '", d.name, "' declares no tensor shape: the export lint needs every "
                                    "input's shape and did not run"));
        return std::move(report_);
      }
    std::vector<Dimension> dims = dynamic_dimensions(model_);
    if (dims.empty()) return std::move(report_);
    InferredGraph base;
    sizes_ = kProbeSizes;
    try {
      base = probe(model_, host_, "", sizes_);
    } catch (const OutOfMemory&) {
      throw;
    } catch (const Error& first) {
      sizes_ = kFallbackSizes;
      try {
        base = probe(model_, host_, "", sizes_);
      } catch (const OutOfMemory&) {
        throw;
      } catch (const Error& e) {
        report_.notes.push_back(cat("shape inference fails with every dynamic dimension at ", kProbeSizes.base,
                                    " and at ", kFallbackSizes.base, ", so the export lint did not run: ",
                                    first.what()));
        return std::move(report_);
      }
    }
    for (auto& dim : dims) lint_dimension(dim, base);
    return std::move(report_);
  }

 private:
  // The dimension at the other size, then at kRetrySize if that fails. A failure is reported after
  // the Reshapes are linted at a size that passes, so that a Reshape flagged there is not repeated.
  void lint_dimension(const Dimension& dim, const InferredGraph& base) {
    std::string failure;
    for (int64_t alt : {sizes_.alt, kRetrySize}) {
      if (alt == sizes_.base) continue;
      try {
        lint_reshapes(dim, {sizes_.base, alt}, base, probe(model_, host_, dim.key, {sizes_.base, alt}), "");
        break;
      } catch (const OutOfMemory&) {
        throw;
      } catch (const Error& e) {
        if (failure.empty()) failure = e.what();
      }
    }
    if (!failure.empty()) add_failure(dim, base, failure);
  }

  bool reported(const std::string& node) const {
    for (auto& f : report_.findings)
      if (f.node == node) return true;
    return false;
  }

  struct EntrySource {
    std::string value, description;
    bool literal = false;  // an initializer or a Constant's output
  };

  // Where entry k of the shape value v comes from: through Concat to an initializer, a Constant's
  // output or a computed value.
  EntrySource source_of(const InferredGraph& base, std::string v, int64_t k) const {
    for (;;) {
      auto p = producers_.find(v);
      if (p == producers_.end() || p->second->op_type != "Concat") break;
      bool found = false;
      for (auto& in : p->second->inputs) {
        const ValueInfo* info = known_shape(base, in);
        if (!info || info->shape.size() != 1) return {v, cat("'", v, "'"), false};
        if (k < info->shape[0]) {
          v = in;
          found = true;
          break;
        }
        k -= info->shape[0];
      }
      if (!found) break;
    }
    auto values = known_ints(base, v);
    std::string text = values ? cat(" = ", shape_text(*values)) : "";
    if (model_.graph.initializers.count(v)) return {v, cat("initializer '", v, "'", text), true};
    auto p = producers_.find(v);
    if (p != producers_.end() && p->second->op_type == "Constant")
      return {v, cat("constant '", v, "'", text, " (node '", p->second->name, "')"), true};
    return {v, cat("value '", v, "'", text), false};
  }

  // Reshapes whose shapes are known at both probes (`alt` may hold only the values upstream of a
  // node that fails there: `failure` then says how). Returns how many were flagged.
  size_t lint_reshapes(const Dimension& dim, ProbeSizes sizes, const InferredGraph& base,
                       const InferredGraph& alt, const std::string& failure) {
    size_t flagged = 0;
    for (auto& n : model_.graph.nodes) {
      if (n.op_type != "Reshape" || !n.domain.empty() || n.inputs.size() < 2 || reported(n.name)) continue;
      const ValueInfo *in0 = known_shape(base, n.inputs[0]), *in1 = known_shape(alt, n.inputs[0]);
      auto shape0 = known_ints(base, n.inputs[1]), shape1 = known_ints(alt, n.inputs[1]);
      if (!in0 || !in1 || !shape0 || !shape1 || in0->shape.size() != in1->shape.size() ||
          shape0->size() != shape1->size())
        continue;
      ReshapeProbes r{sizes, in0->shape, in1->shape, *shape0, *shape1, n.attr_int("allowzero", 0) != 0, {}};
      for (size_t k = 0; k < shape0->size(); k++) r.literal.push_back(source_of(base, n.inputs[1], int64_t(k)).literal);
      for (int64_t s = 1; s <= kMaxExportSize; s++) {
        auto shapes = reshape_at(r, s);
        if (!shapes) continue;
        auto axis = baked_axis(r, shapes->first, shapes->second, s);
        if (!axis) continue;
        EntrySource source = source_of(base, n.inputs[1], int64_t(*axis));
        const ValueInfo* out1 = known_shape(alt, n.outputs[0]);
        std::string effect =
            !out1 ? (failure.empty() ? "at another size it fails" : failure)
                  : cat("at ", dim.label, " = ", sizes.alt, " it gives ", shape_text(out1->shape),
                        failure.empty() ? " and the items are mixed with no error" : cat(", then ", failure));
        report_.findings.push_back(
            {n.name, n.op_type, source.value, dim.label,
             cat("node '", n.name, "' (Reshape): its shape ", source.description, " holds the fixed size ", r.shape0[*axis],
                 " at output axis ", *axis, " where the input's axes carrying dimension ", dim.label,
                 " belong: the size ", dim.label, " had at export (apparently ", s, ") is baked in; ", effect,
                 ". ", kAdvice)});
        flagged++;
        break;
      }
    }
    return flagged;
  }

  // The node a shape-inference error names (its message starts with the node's label).
  const Node* failing_node(const std::string& what) const {
    const Node* node = nullptr;
    for (auto& n : model_.graph.nodes)
      if (what.rfind(n.label(), 0) == 0) node = &n;
    return node;
  }

  // Shape inference of only the nodes `node` depends on, with `dim` at the other size: they pass
  // there, as the graph is inferred in order and fails first at `node`.
  InferredGraph probe_upstream(const Dimension& dim, const Node& node) const {
    std::unordered_set<const Node*> upstream;
    std::vector<const Node*> stack{&node};
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (auto& in : n->inputs) {
        auto p = producers_.find(in);
        if (p != producers_.end() && upstream.insert(p->second).second) stack.push_back(p->second);
      }
    }
    Model prefix;
    prefix.opsets = model_.opsets;
    prefix.graph.inputs = model_.graph.inputs;
    prefix.graph.initializers = model_.graph.initializers;
    for (auto& n : model_.graph.nodes)
      if (upstream.count(&n)) prefix.graph.nodes.push_back(n);
    return probe(prefix, host_, dim.key, sizes_);
  }

  void add_failure(const Dimension& dim, const InferredGraph& base, const std::string& what) {
    const Node* node = failing_node(what);
    if (node && reported(node->name)) return;
    std::string failure = cat("shape inference fails when ", dim.label, " is ", sizes_.alt, " (it passes at ",
                              sizes_.base, "): ", what);
    // The usual cause: a Reshape upstream whose shape constant holds the export-time size, where
    // the dimension is carried on (into a -1) until a node that meets it at the other size fails.
    if (node) {
      try {
        if (lint_reshapes(dim, sizes_, base, probe_upstream(dim, *node), failure) > 0) return;
      } catch (const OutOfMemory&) {
        throw;
      } catch (const Error&) {
        // A subgraph reading an outer value whose producer is not upstream: the failure alone.
      }
    }
    EntrySource source;
    if (node) {
      static const std::unordered_map<std::string, size_t> kShapeInput = {
          {"Reshape", 1}, {"Expand", 1}, {"Tile", 1}, {"ConstantOfShape", 0}, {"Slice", 2}};
      auto it = kShapeInput.find(node->op_type);
      if (it != kShapeInput.end() && it->second < node->inputs.size() && known_ints(base, node->inputs[it->second]))
        source = source_of(base, node->inputs[it->second], 0);
    }
    // A failure not traced to a constant is more likely a limit of the model (a text length
    // padded to a maximum) than a baked size: a note, not a finding.
    if (!source.literal) {
      report_.notes.push_back(failure);
      return;
    }
    report_.findings.push_back(
        {node->name, node->op_type, source.value, dim.label,
         cat(failure, ". The size ", dim.label, " had at export is probably baked into a shape constant",
             " (", source.description, "). ", kAdvice)});
  }

  Model model_;
  Backend& host_;
  std::unordered_map<std::string, const Node*> producers_;
  ProbeSizes sizes_ = kProbeSizes;
  ExportLintReport report_;
};

}  // namespace

ExportLintReport lint_baked_sizes(const Model& model, Backend& host) { return Linter(model, host).run(); }

}  // namespace vlrt
