// Semantics of the recurrent family (RNN, GRU, LSTM, com.microsoft.DynamicQuantizeLSTM) that the
// schema and every backend share: attributes parsed and checked once, the activation functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace vlrt {

enum class RnnKind { rnn, gru, lstm };

enum class RnnActivationKind {
  sigmoid,
  tanh,
  relu,
  affine,
  leaky_relu,
  thresholded_relu,
  scaled_tanh,
  hard_sigmoid,
  elu,
  softsign,
  softplus
};

struct RnnActivation {
  RnnActivationKind kind = RnnActivationKind::sigmoid;
  float alpha = 0, beta = 0;
  double operator()(double x) const;
};

struct RnnAttrs {
  RnnKind kind = RnnKind::lstm;
  std::string direction;  // forward, reverse or bidirectional
  int64_t num_directions = 1;
  int64_t hidden_size = -1;  // -1: not given, taken from R
  int64_t layout = 0;        // 0: X is [seq, batch, input]; 1: [batch, seq, input]
  std::optional<float> clip;
  bool input_forget = false;         // LSTM
  bool linear_before_reset = false;  // GRU
  // activations_per_direction() functions for each direction, forward direction first.
  std::vector<RnnActivation> activations;
};

// Gates stacked in W and R: RNN 1, GRU 3 (z, r, h), LSTM 4 (i, o, f, c).
int64_t rnn_gate_count(RnnKind kind);
// RNN 1 (f), GRU 2 (f, g), LSTM 3 (f, g, h).
int64_t rnn_activation_count(RnnKind kind);
// RNN, GRU, LSTM or com.microsoft.DynamicQuantizeLSTM (an LSTM).
RnnKind rnn_kind(const Node& node);

// The node's attributes, checked: direction, layout, activations with their alpha and beta
// (alpha and beta are consumed in order by the activations that take them; missing ones get
// the defaults of the ONNX ops of the same name), clip.
RnnAttrs rnn_attrs(const Node& node);

}  // namespace vlrt
