#!/usr/bin/env python3
"""Writes tests/fixtures/qdq_fusion/<case>/: a small QDQ model.onnx (QuantizeLinear/DequantizeLinear
around float ops), its input x.npy, the output y.npy that onnxruntime computes with its default graph
optimizations (which fuse the QDQ groups into integer ops), and step.npy, the output's quantization
step. It prints the ops onnxruntime's optimized graph runs, the rewrites vlrt's fuse_qdq pass must match.
Run with a python3 that has numpy, onnx and onnxruntime: python3 tools/make_qdq_fusion_vectors.py"""
import collections
import os
import shutil
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "qdq_fusion")
rng = np.random.default_rng(11)


def init(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def qdq(value, scale, zp, out):
    """value -> QuantizeLinear -> DequantizeLinear -> out, with the initializers scale and zp."""
    return [helper.make_node("QuantizeLinear", [value, scale, zp], [value + "_q"]),
            helper.make_node("DequantizeLinear", [value + "_q", scale, zp], [out])]


def activation(name, scale, zp):
    return [init(name + "_s", np.float32(scale)), init(name + "_zp", np.uint8(zp))]


def conv_weights(name, m, c, k):
    ws = rng.uniform(0.002, 0.02, m).astype(np.float32)
    return [init(name + "_wq", rng.integers(-127, 128, (m, c, k, k)).astype(np.int8)), init(name + "_ws", ws),
            init(name + "_wzp", np.zeros(m, np.int8)),
            init(name + "_bq", rng.integers(-2000, 2000, m).astype(np.int32))], ws


def conv(name, x, x_scale, out, pads=1):
    """DQ(int8 per-channel weights), DQ(int32 bias) -> Conv reading x (a DQ output)."""
    return [helper.make_node("DequantizeLinear", [name + "_wq", name + "_ws", name + "_wzp"], [name + "_w"], axis=0),
            helper.make_node("DequantizeLinear", [name + "_bq", name + "_bs"], [name + "_b"], axis=0),
            helper.make_node("Conv", [x, name + "_w", name + "_b"], [out], pads=[pads] * 4)]


def conv_inits(name, m, c, k, x_scale):
    inits, ws = conv_weights(name, m, c, k)
    return inits + [init(name + "_bs", (x_scale * ws).astype(np.float32))]


def model(nodes, inits, inputs, outputs=("y",)):
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def save(name, m, feeds, step):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.log_severity_level = 3
    with tempfile.TemporaryDirectory() as tmp:
        so.optimized_model_filepath = os.path.join(tmp, "opt.onnx")
        sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
        ops = collections.Counter(n.op_type for n in onnx.load(so.optimized_model_filepath).graph.node)
    results = sess.run(None, feeds)
    d = os.path.join(ROOT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    onnx.save(m, os.path.join(d, "model.onnx"))
    for k, v in feeds.items():
        np.save(os.path.join(d, k + ".npy"), v)
    for o, r in zip([o.name for o in m.graph.output], results):
        np.save(os.path.join(d, o + ".npy"), r)
    np.save(os.path.join(d, "step.npy"), np.float32(step))
    print(f"{name:<24} onnxruntime runs: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))


def conv_case(name, x_scale_input=False, float_reader=None):
    """x -> Q/DQ -> Conv (per-channel int8 weights, int32 bias) -> Q/DQ -> y."""
    x = rng.uniform(-2, 2, (1, 3, 6, 6)).astype(np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "x_s", "x_zp"], ["x_q"]),
             helper.make_node("DequantizeLinear", ["x_q", "x_scale" if x_scale_input else "x_s", "x_zp"], ["x_d"])]
    nodes += conv("c", "x_d", 0.02, "c_out") + qdq("c_out", "y_s", "y_zp", "y")
    inits = activation("x", 0.02, 120) + activation("y", 0.05, 128) + conv_inits("c", 4, 3, 3, 0.02)
    inputs, feeds, outputs = [("x", x.shape)], {"x": x}, ["y"]
    if x_scale_input:
        inputs.append(("x_scale", []))
        feeds["x_scale"] = np.array(0.02, np.float32)
    if float_reader:
        nodes.append(helper.make_node("Sigmoid", [float_reader], ["s"]))
        outputs.append("s")
    save(name, model(nodes, inits, inputs, outputs), feeds, 0.05)


def matmul_case():
    x = rng.uniform(-1, 1, (2, 3, 8)).astype(np.float32)
    nodes = qdq("x", "x_s", "x_zp", "x_d") + [
        helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_zp"], ["w_d"]),
        helper.make_node("MatMul", ["x_d", "w_d"], ["m"])] + qdq("m", "y_s", "y_zp", "y")
    inits = activation("x", 0.01, 100) + activation("y", 0.02, 130) + [
        init("w_q", rng.integers(-127, 128, (8, 5)).astype(np.int8)), init("w_s", np.float32(0.004)),
        init("w_zp", np.int8(0))]
    save("matmul", model(nodes, inits, [("x", x.shape)]), {"x": x}, 0.02)


def add_case():
    x = rng.uniform(-1, 1, (1, 4, 5)).astype(np.float32)
    nodes = qdq("x", "x_s", "x_zp", "x_d") + [helper.make_node("Sigmoid", ["x"], ["t"])] + \
        qdq("t", "t_s", "t_zp", "t_d") + [helper.make_node("Add", ["x_d", "t_d"], ["a"])] + qdq("a", "y_s", "y_zp", "y")
    inits = activation("x", 0.0081, 128) + activation("t", 0.0039, 0) + activation("y", 0.0117, 90)
    save("add", model(nodes, inits, [("x", x.shape)]), {"x": x}, 0.0117)


def reshape_case():
    """Conv -> Q/DQ -> Reshape -> Q/DQ (same parameters) -> MatMul: the Reshape runs on uint8."""
    x = rng.uniform(-2, 2, (1, 3, 4, 4)).astype(np.float32)
    nodes = qdq("x", "x_s", "x_zp", "x_d") + conv("c", "x_d", 0.02, "c_out") + qdq("c_out", "c_s", "c_zp", "c_d")
    nodes += [helper.make_node("Reshape", ["c_d", "shape"], ["r"])] + qdq("r", "c_s", "c_zp", "r_d")
    nodes += [helper.make_node("DequantizeLinear", ["w_q", "w_s", "w_zp"], ["w_d"]),
              helper.make_node("MatMul", ["r_d", "w_d"], ["m"])] + qdq("m", "y_s", "y_zp", "y")
    inits = activation("x", 0.02, 120) + activation("c", 0.04, 128) + activation("y", 0.1, 128) + \
        conv_inits("c", 4, 3, 3, 0.02) + [init("shape", np.array([1, 64], np.int64)),
                                          init("w_q", rng.integers(-127, 128, (64, 6)).astype(np.int8)),
                                          init("w_s", np.float32(0.003)), init("w_zp", np.int8(0))]
    save("reshape_between", model(nodes, inits, [("x", x.shape)]), {"x": x}, 0.1)


def main():
    conv_case("conv_per_channel_bias")
    # The DQ of x also feeds a float Sigmoid: onnxruntime gives the Conv its own copy and fuses.
    conv_case("dq_read_twice", float_reader="x_d")
    # The Conv's output also feeds a float Sigmoid: no QLinearConv.
    conv_case("conv_output_read_twice", float_reader="c_out")
    # x's scale is computed (a graph input): no QLinearConv.
    conv_case("computed_scale", x_scale_input=True)
    matmul_case()
    add_case()
    reshape_case()


if __name__ == "__main__":
    main()
