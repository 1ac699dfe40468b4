#!/usr/bin/env python3
"""Reference vectors for the recurrent ops (RNN, GRU, LSTM, com.microsoft.DynamicQuantizeLSTM).

Writes tests/fixtures/recurrent/<case>/: model.onnx (one node; every input but X is an
initializer), X.npy, and one .npy per output as computed by onnxruntime. layout=1 cases are
computed by onnxruntime on the transposed layout-0 model, which is what layout=1 means.

Needs numpy, onnx and onnxruntime (python3 -m pip install -r tools/requirements.txt).
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "recurrent")
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4, "DynamicQuantizeLSTM": 4}
rng = np.random.default_rng(20261125)


def rand(*shape, scale=0.5):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def make_model(op, inputs, attrs, outputs, domain=""):
    """inputs: list of (name, array or None); the first is the graph input X."""
    names = [name if arr is not None else "" for name, arr in inputs]
    while names and names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, outputs, domain=domain, **attrs)
    x = inputs[0][1]
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(x.shape))]
    inits = [numpy_helper.from_array(arr, name) for name, arr in inputs[1:] if arr is not None]
    graph_outputs = [helper.make_value_info(o, helper.make_tensor_type_proto(TensorProto.FLOAT, None))
                     for o in outputs if o]
    graph = helper.make_graph([node], op.lower(), graph_inputs, graph_outputs, inits)
    opsets = [helper.make_opsetid("", 14)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def run(model, x):
    # One thread: with more, onnxruntime's quantized LSTM splits the batch into blocks of rows that
    # it quantizes apart, which depends on its thread count; on one it quantizes the whole batch.
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, {"X": x})))


def case(name, op, seq, batch, inp, hidden, direction="forward", bias=True, lens=None, init_h=False,
         init_c=False, peephole=False, layout=0, outputs=None, domain="", **attrs):
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    x = rand(seq, batch, inp, scale=1.0)
    w = rand(nd, g * hidden, inp)
    r = rand(nd, g * hidden, hidden)
    b = rand(nd, 2 * g * hidden) if bias else None
    sl = np.array(lens, dtype=np.int32) if lens is not None else None
    h0 = rand(nd, batch, hidden) if init_h else None
    c0 = rand(nd, batch, hidden) if init_c else None
    p = rand(nd, 3 * hidden) if peephole else None
    if outputs is None:
        outputs = ["Y", "Y_h", "Y_c"] if g == 4 else ["Y", "Y_h"]
    attrs = dict(attrs, hidden_size=hidden, direction=direction)
    inputs = [("X", x), ("W", w), ("R", r), ("B", b), ("sequence_lens", sl), ("initial_h", h0)]
    if g == 4:
        inputs += [("initial_c", c0), ("P", p)]
    if op == "DynamicQuantizeLSTM":
        inputs = quantize_weights(inputs, attrs.pop("per_channel"), attrs.pop("signed"))
    ref = run(make_model(op, inputs, attrs, outputs, domain), x)
    if layout == 1:
        # X [batch, seq, input], Y [batch, seq, nd, hidden], states [batch, nd, hidden].
        attrs["layout"] = 1
        inputs = [(n, a if a is None or n in ("W", "R", "B", "P", "sequence_lens") else
                   a.transpose(1, 0, 2).copy()) for n, a in inputs]
        ref = {k: (v.transpose(2, 0, 1, 3) if k == "Y" else v.transpose(1, 0, 2)).copy() for k, v in ref.items()}
        x = inputs[0][1]
    model = make_model(op, inputs, attrs, outputs, domain)
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    np.save(os.path.join(d, "X.npy"), x)
    for k, v in ref.items():
        np.save(os.path.join(d, k + ".npy"), v.astype(np.float32))
    print(name, {k: v.shape for k, v in ref.items()})


def quantize_weights(inputs, per_channel, signed):
    """W, R [nd, rows, k] -> quantized [nd, k, rows] with scales and zero points (ORT's layout)."""
    table = dict(inputs)
    out = [(n, a) for n, a in inputs if n not in ("W", "R")]
    qt, lo, hi = (np.int8, -128, 127) if signed else (np.uint8, 0, 255)
    quant = {}
    for n in ("W", "R"):
        f = table[n].transpose(0, 2, 1)  # [nd, k, rows]
        axis = (1,) if per_channel else (1, 2)
        mn = np.minimum(f.min(axis=axis), 0)
        mx = np.maximum(f.max(axis=axis), 0)
        if signed:  # onnxruntime takes int8 weights only with zero point 0
            scale = (np.maximum(mx, -mn) / hi).astype(np.float32)
            zp = np.zeros_like(scale).astype(qt)
        else:
            scale = ((mx - mn) / (hi - lo)).astype(np.float32)
            zp = np.clip(np.round(lo - mn / scale), lo, hi).astype(qt)
        s = scale[:, None, :] if per_channel else scale[:, None, None]
        z = zp[:, None, :] if per_channel else zp[:, None, None]
        q = np.clip(np.round(f / s) + z.astype(np.float32), lo, hi).astype(qt)
        quant[n] = (q, scale, zp)
    out.insert(1, ("W", quant["W"][0]))
    out.insert(2, ("R", quant["R"][0]))
    while len(out) < 8:
        out.append((f"unused{len(out)}", None))
    out += [("W_scale", quant["W"][1]), ("W_zero_point", quant["W"][2]),
            ("R_scale", quant["R"][1]), ("R_zero_point", quant["R"][2])]
    return out


def main():
    case("lstm_bidirectional_lens_peepholes", "LSTM", 4, 3, 3, 5, direction="bidirectional", lens=[4, 1, 3],
         init_h=True, init_c=True, peephole=True)
    case("lstm_reverse_layout1_clip", "LSTM", 3, 2, 4, 3, direction="reverse", init_h=True, init_c=True,
         layout=1, clip=0.4)
    case("lstm_input_forget_activations", "LSTM", 3, 2, 2, 3, direction="bidirectional", peephole=True,
         input_forget=1, outputs=["", "Y_h", "Y_c"],
         activations=["HardSigmoid", "LeakyRelu", "Softsign", "Sigmoid", "ScaledTanh", "Elu"],
         activation_alpha=[0.3, 0.05, 0.9, 0.7], activation_beta=[0.45, 1.3])
    case("gru_bidirectional_lbr_lens", "GRU", 4, 3, 3, 4, direction="bidirectional", lens=[2, 4, 3],
         init_h=True, linear_before_reset=1)
    case("gru_reverse_layout1_clip", "GRU", 3, 2, 3, 4, direction="reverse", init_h=True, layout=1, clip=0.3)
    case("gru_activations", "GRU", 3, 2, 2, 3, outputs=["Y", ""],
         activations=["HardSigmoid", "Softplus"], activation_alpha=[0.25], activation_beta=[0.4])
    case("rnn_bidirectional_lens", "RNN", 4, 3, 3, 4, direction="bidirectional", lens=[1, 4, 2], init_h=True)
    case("rnn_layout1_activations", "RNN", 3, 2, 2, 3, direction="bidirectional", layout=1, init_h=True,
         activations=["Affine", "ThresholdedRelu"], activation_alpha=[0.8, 0.1], activation_beta=[0.2])
    case("rnn_relu_clip", "RNN", 3, 2, 2, 3, bias=False, activations=["Relu"], clip=0.6)
    case("dqlstm_per_tensor_uint8", "DynamicQuantizeLSTM", 3, 2, 3, 4, domain="com.microsoft",
         init_h=True, init_c=True, per_channel=False, signed=False)
    case("dqlstm_bidirectional_per_channel_int8", "DynamicQuantizeLSTM", 3, 2, 3, 4, domain="com.microsoft",
         direction="bidirectional", lens=[3, 2], peephole=True, per_channel=True, signed=True)
    # Long enough that X's and H's dynamic uint8 quantization moves the result well past float error.
    case("dqlstm_long_reverse_uint8", "DynamicQuantizeLSTM", 12, 3, 5, 6, domain="com.microsoft",
         direction="reverse", lens=[12, 7, 9], init_h=True, per_channel=False, signed=False)
    # The form quantized CRNN text recognizers ship: bidirectional, int8 weights per tensor, both
    # initial states; one batch item ends early, so its zeroed state rows join H's quantization.
    case("dqlstm_bidirectional_int8_states", "DynamicQuantizeLSTM", 16, 2, 8, 8, domain="com.microsoft",
         direction="bidirectional", lens=[16, 11], init_h=True, init_c=True, per_channel=False, signed=True)


if __name__ == "__main__":
    sys.exit(main())
