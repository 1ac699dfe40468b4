#!/usr/bin/env python3
"""Writes models/integrity: tiny models for the integrity tests.

- ext_affine.onnx + ext_affine.weights: y = x * w + b with w and b (float[4]) stored as
  external data in one file, so the tests can delete or cut it.
- nan_weights.onnx: y = x + w where w is only NaN and Inf, as a failed fp16 export leaves it.

    python3 tools/make_integrity_models.py   (needs numpy, onnx)
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "models", "integrity")


def model(nodes, inits, name):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
        inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="vlrt-tools")
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    w = numpy_helper.from_array(np.array([1, 2, 3, 4], np.float32), "w")
    b = numpy_helper.from_array(np.array([0.5, -0.5, 0.25, -0.25], np.float32), "b")
    ext = model([helper.make_node("Mul", ["x", "w"], ["xw"], name="mul"),
                 helper.make_node("Add", ["xw", "b"], ["y"], name="add")], [w, b], "ext_affine")
    onnx.save_model(ext, os.path.join(OUT, "ext_affine.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="ext_affine.weights", size_threshold=0)

    bad = numpy_helper.from_array(np.array([np.nan, np.inf, -np.inf, np.nan], np.float32), "w")
    onnx.save(model([helper.make_node("Add", ["x", "w"], ["y"], name="add")], [bad], "nan_weights"),
              os.path.join(OUT, "nan_weights.onnx"))
    print("wrote", sorted(os.listdir(OUT)))


if __name__ == "__main__":
    main()
