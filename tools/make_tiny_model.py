#!/usr/bin/env python3
"""Writes models/tiny: a small CNN classifier (random weights, fixed seed) with a
symbolic batch dimension, an input image and the outputs ONNX Runtime computes
for it. Used by `make demo` and the end-to-end tests until the demo detector exists.

    python3 tools/make_tiny_model.py   (needs numpy, onnx, onnxruntime)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "models", "tiny")


def main():
    rng = np.random.default_rng(7)

    def w(name, *shape):
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(np.float32), name)

    inits = [w("conv1.w", 8, 3, 3, 3), w("conv1.b", 8), w("conv2.w", 16, 8, 3, 3), w("conv2.b", 16),
             w("fc.w", 10, 16), w("fc.b", 10)]
    nodes = [
        helper.make_node("Conv", ["image", "conv1.w", "conv1.b"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.w", "conv2.b"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
        helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(
        nodes, "tiny_cnn",
        [helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])],
        [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", 10])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="vlrt-tools")
    model.ir_version = 8
    onnx.checker.check_model(model)
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, "tiny_cnn.onnx")
    onnx.save(model, path)

    image = rng.random((1, 3, 32, 32), dtype=np.float32)
    np.save(os.path.join(OUT, "image.npy"), image)
    import onnxruntime as ort
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    (probs,) = sess.run(None, {"image": image})
    np.save(os.path.join(OUT, "expected_probs.npy"), probs)
    print("wrote", path, "probs", probs.round(4))


if __name__ == "__main__":
    main()
