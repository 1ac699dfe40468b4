#include "ops/recurrent_semantics.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/error.h"

namespace vlrt {

namespace {

struct ActivationInfo {
  const char* name;  // lower case
  RnnActivationKind kind;
  bool takes_alpha, takes_beta;
  float alpha, beta;  // defaults
};

constexpr ActivationInfo kActivations[] = {
    {"sigmoid", RnnActivationKind::sigmoid, false, false, 0, 0},
    {"tanh", RnnActivationKind::tanh, false, false, 0, 0},
    {"relu", RnnActivationKind::relu, false, false, 0, 0},
    {"affine", RnnActivationKind::affine, true, true, 1.0f, 0.0f},
    {"leakyrelu", RnnActivationKind::leaky_relu, true, false, 0.01f, 0},
    {"thresholdedrelu", RnnActivationKind::thresholded_relu, true, false, 1.0f, 0},
    {"scaledtanh", RnnActivationKind::scaled_tanh, true, true, 1.0f, 1.0f},
    {"hardsigmoid", RnnActivationKind::hard_sigmoid, true, true, 0.2f, 0.5f},
    {"elu", RnnActivationKind::elu, true, false, 1.0f, 0},
    {"softsign", RnnActivationKind::softsign, false, false, 0, 0},
    {"softplus", RnnActivationKind::softplus, false, false, 0, 0},
};

std::vector<std::string> default_activations(RnnKind kind) {
  switch (kind) {
    case RnnKind::rnn:
      return {"Tanh"};
    case RnnKind::gru:
      return {"Sigmoid", "Tanh"};
    case RnnKind::lstm:
      return {"Sigmoid", "Tanh", "Tanh"};
  }
  return {};
}

}  // namespace

double RnnActivation::operator()(double x) const {
  switch (kind) {
    case RnnActivationKind::sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case RnnActivationKind::tanh:
      return std::tanh(x);
    case RnnActivationKind::relu:
      return std::max(0.0, x);
    case RnnActivationKind::affine:
      return alpha * x + beta;
    case RnnActivationKind::leaky_relu:
      return x >= 0 ? x : alpha * x;
    case RnnActivationKind::thresholded_relu:
      return x > alpha ? x : 0.0;
    case RnnActivationKind::scaled_tanh:
      return alpha * std::tanh(beta * x);
    case RnnActivationKind::hard_sigmoid:
      return std::clamp(alpha * x + beta, 0.0, 1.0);
    case RnnActivationKind::elu:
      return x >= 0 ? x : alpha * (std::exp(x) - 1.0);
    case RnnActivationKind::softsign:
      return x / (1.0 + std::abs(x));
    case RnnActivationKind::softplus:
      return x > 30 ? x : std::log1p(std::exp(x));
  }
  return x;
}

int64_t rnn_gate_count(RnnKind kind) { return kind == RnnKind::rnn ? 1 : kind == RnnKind::gru ? 3 : 4; }
int64_t rnn_activation_count(RnnKind kind) { return kind == RnnKind::rnn ? 1 : kind == RnnKind::gru ? 2 : 3; }

RnnKind rnn_kind(const Node& node) {
  if (node.op_type == "RNN") return RnnKind::rnn;
  if (node.op_type == "GRU") return RnnKind::gru;
  return RnnKind::lstm;
}

RnnAttrs rnn_attrs(const Node& node) {
  RnnAttrs a;
  a.kind = rnn_kind(node);
  a.direction = node.attr_string("direction", "forward");
  VLRT_CHECK(a.direction == "forward" || a.direction == "reverse" || a.direction == "bidirectional",
             "direction '", a.direction, "' is not one of forward, reverse, bidirectional");
  a.num_directions = a.direction == "bidirectional" ? 2 : 1;
  if (node.has_attr("hidden_size")) {
    a.hidden_size = node.attr_int("hidden_size", 0);
    VLRT_CHECK(a.hidden_size > 0, "hidden_size must be positive, got ", a.hidden_size);
  }
  a.layout = node.attr_int("layout", 0);
  VLRT_CHECK(a.layout == 0 || a.layout == 1,
             "layout must be 0 ([seq, batch, input]) or 1 ([batch, seq, input]), got ", a.layout);
  if (node.has_attr("clip")) {
    a.clip = node.attr_float("clip", 0);
    VLRT_CHECK(*a.clip > 0, "clip must be positive, got ", *a.clip);
  }
  a.input_forget = node.attr_int("input_forget", 0) != 0;
  a.linear_before_reset = node.attr_int("linear_before_reset", 0) != 0;

  int64_t per_dir = rnn_activation_count(a.kind);
  std::vector<std::string> names;
  if (auto it = node.attrs.find("activations"); it != node.attrs.end()) names = it->second.strings;
  if (names.empty()) names = default_activations(a.kind);
  if (int64_t(names.size()) == per_dir && a.num_directions == 2) {
    std::vector<std::string> forward = names;  // the same functions for both directions
    names.insert(names.end(), forward.begin(), forward.end());
  }
  VLRT_CHECK(int64_t(names.size()) == per_dir * a.num_directions, "activations has ", names.size(),
             " functions, expected ", per_dir, " per direction (", per_dir * a.num_directions, " for ",
             a.num_directions, " direction", a.num_directions == 2 ? "s" : "", ")");
  std::vector<float> alphas = node.attr_floats("activation_alpha"),
                     betas = node.attr_floats("activation_beta");
  size_t next_alpha = 0, next_beta = 0;
  for (const std::string& name : names) {
    std::string lower = name;
    std::transform(lower.begin(), lower.end(), lower.begin(),
                   [](unsigned char c) { return char(std::tolower(c)); });
    const ActivationInfo* info = nullptr;
    for (const ActivationInfo& i : kActivations)
      if (lower == i.name) info = &i;
    VLRT_CHECK(info, "unknown activation '", name,
               "' (expected one of Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, ScaledTanh, "
               "HardSigmoid, Elu, Softsign, Softplus)");
    RnnActivation f{info->kind, info->alpha, info->beta};
    if (info->takes_alpha && next_alpha < alphas.size()) f.alpha = alphas[next_alpha++];
    if (info->takes_beta && next_beta < betas.size()) f.beta = betas[next_beta++];
    a.activations.push_back(f);
  }
  return a;
}

}  // namespace vlrt
