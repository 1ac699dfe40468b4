#!/usr/bin/env python3
"""Writes tests/fixtures/quantization/<case>/: a one-node model.onnx, its inputs and the outputs
onnxruntime computes for them, as <value name>.npy. Run with a python3 that has numpy, onnx and
onnxruntime: python3 tools/make_quant_vectors.py"""
import os
import shutil

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "quantization")
rng = np.random.default_rng(7)
NP_TO_ONNX = {np.dtype(k): v for k, v in [(np.float32, TensorProto.FLOAT), (np.uint8, TensorProto.UINT8),
                                          (np.int8, TensorProto.INT8), (np.int32, TensorProto.INT32)]}


def q(shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


def f(shape, lo=-4.0, hi=4.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def scalar(v, dtype):
    return np.array(v, dtype=dtype)


def case(name, op, inputs, outputs=1, domain="", opset=None, **attrs):
    """inputs: list of (name, array) pairs; None for an omitted optional input."""
    names = [n if a is not None else "" for n, a in ((p or ("", None)) for p in inputs)]
    given = [p for p in inputs if p is not None and p[1] is not None]
    out_names = [f"y{i}" for i in range(outputs)]
    node = helper.make_node(op, names, out_names, domain=domain, **attrs)
    graph = helper.make_graph(
        [node], name,
        [helper.make_tensor_value_info(n, NP_TO_ONNX[a.dtype], a.shape) for n, a in given],
        [helper.make_empty_tensor_value_info(n) for n in out_names])
    opsets = [helper.make_opsetid("", opset or 13)]
    if domain:
        opsets.append(helper.make_opsetid(domain, 1))
    model = helper.make_model(graph, opset_imports=opsets, ir_version=8)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    results = sess.run(None, {n: a for n, a in given})
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    onnx.save(model, os.path.join(d, "model.onnx"))
    for n, a in given:
        np.save(os.path.join(d, n + ".npy"), a)
    for n, r in zip(out_names, results):
        np.save(os.path.join(d, n + ".npy"), np.asarray(r))


def standard():
    ties = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 300, -300, 0.1, 1.0, 127.5, -128.5], np.float32)
    case("quantize_per_tensor_u8", "QuantizeLinear",
         [("x", ties), ("scale", scalar(1.0, np.float32)), ("zp", scalar(128, np.uint8))])
    case("quantize_per_axis_i8", "QuantizeLinear",
         [("x", f((2, 3, 4), -100, 100)), ("scale", np.array([0.5, 0.25, 2], np.float32)),
          ("zp", np.array([-3, 0, 7], np.int8))], axis=1)
    case("quantize_no_zero_point", "QuantizeLinear", [("x", f((5,), -2, 300)), ("scale", scalar(0.75, np.float32))])
    case("dequantize_per_axis_u8", "DequantizeLinear",
         [("x", q((3, 2, 2), np.uint8)), ("scale", np.array([0.5, 0.1, 3], np.float32)),
          ("zp", np.array([1, 128, 255], np.uint8))], axis=0)
    case("dequantize_int32", "DequantizeLinear", [("x", q((6,), np.int32)), ("scale", scalar(1e-3, np.float32))])
    case("dynamic_quantize", "DynamicQuantizeLinear", [("x", f((3, 5), -1.3, 2.7))], outputs=3, opset=11)
    case("dynamic_quantize_positive", "DynamicQuantizeLinear", [("x", f((7,), 0.5, 9))], outputs=3, opset=11)
    case("matmul_integer_batched", "MatMulInteger",
         [("a", q((2, 3, 4), np.uint8)), ("b", q((4, 5), np.int8)), ("azp", scalar(12, np.uint8)),
          ("bzp", scalar(-3, np.int8))], opset=10)
    case("conv_integer_pads_group", "ConvInteger",
         [("x", q((1, 4, 5, 5), np.uint8)), ("w", q((4, 2, 3, 3), np.uint8)), ("xzp", scalar(100, np.uint8)),
          ("wzp", scalar(7, np.uint8))], opset=10, pads=[1, 0, 1, 2], strides=[2, 1], group=2)
    case("qlinear_conv_per_channel", "QLinearConv",
         [("x", q((1, 3, 6, 6), np.uint8)), ("xs", scalar(0.02, np.float32)), ("xzp", scalar(120, np.uint8)),
          ("w", q((4, 3, 3, 3), np.int8)), ("ws", np.array([0.01, 0.02, 0.005, 0.03], np.float32)),
          ("wzp", np.zeros(4, np.int8)), ("ys", scalar(0.3, np.float32)), ("yzp", scalar(130, np.uint8)),
          ("bias", rng.integers(-2000, 2000, 4).astype(np.int32))], opset=10, pads=[1, 1, 1, 1], dilations=[1, 2])
    case("qlinear_conv_i8", "QLinearConv",
         [("x", q((2, 2, 4, 4), np.int8)), ("xs", scalar(0.05, np.float32)), ("xzp", scalar(-4, np.int8)),
          ("w", q((3, 2, 2, 2), np.int8)), ("ws", scalar(0.01, np.float32)), ("wzp", scalar(0, np.int8)),
          ("ys", scalar(0.2, np.float32)), ("yzp", scalar(5, np.int8))], opset=10, strides=[2, 2])
    case("qlinear_matmul_3d", "QLinearMatMul",
         [("a", q((2, 3, 4), np.uint8)), ("as", scalar(0.03, np.float32)), ("azp", scalar(113, np.uint8)),
          ("b", q((4, 5), np.uint8)), ("bs", scalar(0.02, np.float32)), ("bzp", scalar(114, np.uint8)),
          ("ys", scalar(0.05, np.float32)), ("yzp", scalar(118, np.uint8))], opset=10)
    case("qlinear_matmul_i8_per_column", "QLinearMatMul",
         [("a", q((3, 4), np.int8)), ("as", scalar(0.03, np.float32)), ("azp", scalar(-2, np.int8)),
          ("b", q((4, 5), np.int8)), ("bs", np.array([0.02, 0.01, 0.03, 0.04, 0.05], np.float32)),
          ("bzp", np.zeros(5, np.int8)), ("ys", scalar(0.15, np.float32)), ("yzp", scalar(3, np.int8))], opset=10)


def contrib():
    ms = "com.microsoft"
    for op in ["QLinearAdd", "QLinearMul"]:
        for t in [np.uint8, np.int8]:
            case(f"{op.lower()}_{np.dtype(t).name}", op,
                 [("a", q((2, 3, 4), t)), ("as", scalar(0.05, np.float32)), ("azp", scalar(3, t)),
                  ("b", q((3, 1), t)), ("bs", scalar(0.03, np.float32)), ("bzp", scalar(-2 if t == np.int8 else 9, t)),
                  ("cs", scalar(0.07 if op == "QLinearAdd" else 0.4, np.float32)), ("czp", scalar(5, t))], domain=ms)
    all_u8 = np.arange(256, dtype=np.uint8).reshape(4, 64)
    all_i8 = (np.arange(256) - 128).astype(np.int8).reshape(4, 64)
    for name, x, t in [("u8", all_u8, np.uint8), ("i8", all_i8, np.int8)]:
        case(f"qlinear_sigmoid_{name}", "QLinearSigmoid",
             [("x", x), ("xs", scalar(0.05, np.float32)), ("xzp", scalar(10, t)), ("ys", scalar(1 / 256, np.float32)),
              ("yzp", scalar(0, t))], domain=ms)
        case(f"qlinear_leaky_relu_{name}", "QLinearLeakyRelu",
             [("x", x), ("xs", scalar(0.1, np.float32)), ("xzp", scalar(20, t)), ("ys", scalar(0.07, np.float32)),
              ("yzp", scalar(-5 if t == np.int8 else 60, t))], domain=ms, alpha=0.3)
    case("qlinear_concat", "QLinearConcat",
         [("ys", scalar(0.1, np.float32)), ("yzp", scalar(128, np.uint8)),
          ("x0", q((2, 2, 3), np.uint8)), ("x0s", scalar(0.1, np.float32)), ("x0zp", scalar(128, np.uint8)),
          ("x1", q((2, 1, 3), np.uint8)), ("x1s", scalar(0.27, np.float32)), ("x1zp", scalar(100, np.uint8))],
         domain=ms, axis=1)
    for last in [0, 1]:
        case(f"qlinear_global_average_pool_{'nhwc' if last else 'nchw'}", "QLinearGlobalAveragePool",
             [("x", q((2, 3, 4, 5), np.uint8)), ("xs", scalar(0.05, np.float32)), ("xzp", scalar(100, np.uint8)),
              ("ys", scalar(0.03, np.float32)), ("yzp", scalar(90, np.uint8))], domain=ms, channels_last=last)
    gemm = [("a", q((3, 4), np.uint8)), ("as", scalar(0.02, np.float32)), ("azp", scalar(120, np.uint8)),
            ("b", q((5, 4), np.int8)), ("bs", np.array([0.01, 0.02, 0.03, 0.015, 0.05], np.float32)),
            ("bzp", np.zeros(5, np.int8)), ("c", rng.integers(-500, 500, 5).astype(np.int32))]
    case("qgemm_float", "QGemm", gemm, domain=ms, transB=1, alpha=0.5)
    case("qgemm_quantized", "QGemm", gemm + [("ys", scalar(0.04, np.float32)), ("yzp", scalar(128, np.uint8))],
         domain=ms, transB=1)
    case("dynamic_quantize_matmul", "DynamicQuantizeMatMul",
         [("a", f((2, 3, 4))), ("b", q((4, 5), np.int8)), ("bs", np.array([0.01, 0.02, 0.03, 0.015, 0.05], np.float32)),
          ("bzp", np.zeros(5, np.int8)), ("bias", f((5,)))], domain=ms)
    case("matmul_integer_to_float", "MatMulIntegerToFloat",
         [("a", q((2, 3, 4), np.uint8)), ("b", q((4, 5), np.uint8)), ("as", scalar(0.02, np.float32)),
          ("bs", scalar(0.03, np.float32)), ("azp", scalar(120, np.uint8)), ("bzp", scalar(110, np.uint8)),
          ("bias", f((5,)))], domain=ms)
    pool = [("x", q((1, 3, 5, 6), np.uint8)), ("xs", scalar(0.05, np.float32)), ("xzp", scalar(100, np.uint8)),
            ("ys", scalar(0.03, np.float32)), ("yzp", scalar(90, np.uint8))]
    case("qlinear_average_pool_pads", "QLinearAveragePool", pool, domain=ms, kernel_shape=[3, 2], strides=[2, 2],
         pads=[1, 0, 1, 1])
    case("qlinear_average_pool_include_pad", "QLinearAveragePool", pool, domain=ms, kernel_shape=[3, 3],
         pads=[1, 1, 1, 1], count_include_pad=1)
    case("qlinear_average_pool_nhwc_ceil", "QLinearAveragePool",
         [("x", q((2, 5, 4, 3), np.int8)), ("xs", scalar(0.05, np.float32)), ("xzp", scalar(-3, np.int8)),
          ("ys", scalar(0.02, np.float32)), ("yzp", scalar(4, np.int8))], domain=ms, kernel_shape=[2, 2],
         strides=[2, 2], ceil_mode=1, channels_last=1)


if __name__ == "__main__":
    shutil.rmtree(ROOT, ignore_errors=True)
    standard()
    contrib()
