"""Small model pairs for `vlrt check`'s tests (tests/exec/test_compare_runs.cpp,
tests/apps/test_cli_check.cpp).

Writes tests/fixtures/check/:
  base.onnx          x[1,4,8,8] -> Conv -> Relu -> Mul(scale) -> Add(shift) -> GlobalAveragePool -> Flatten
  shift_fault.onnx   base with one element of the initializer `shift` changed: node `add` is the
                     first value that differs
  shift_shape.onnx   base with `shift` of shape [2,4,1,1]: `add` onwards have another shape
  renamed.onnx       base with every value but the input renamed: no node output name in common
  other_input.onnx   base whose input is x[1,4,16,16]: not the same inputs as base
Run with `python3 tools/make_check_models.py` (onnx, numpy).
"""
import os

import numpy as np
import onnx
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "check")


def make(name, shift, prefix="", side=8):
    rng = np.random.default_rng(7)
    w = rng.uniform(-0.5, 0.5, (4, 4, 3, 3)).astype(np.float32)
    b = rng.uniform(-0.1, 0.1, 4).astype(np.float32)
    scale = rng.uniform(0.5, 1.5, (1, 4, 1, 1)).astype(np.float32)
    p = lambda v: v if v == "x" else prefix + v  # noqa: E731  (the input keeps its name)
    inits = [numpy_helper.from_array(a, p(n)) for n, a in
             [("w", w), ("b", b), ("scale", scale), ("shift", shift)]]
    nodes = [
        h.make_node("Conv", [p("x"), p("w"), p("b")], [p("conv_out")], name=p("conv"), pads=[1, 1, 1, 1]),
        h.make_node("Relu", [p("conv_out")], [p("relu_out")], name=p("relu")),
        h.make_node("Mul", [p("relu_out"), p("scale")], [p("mul_out")], name=p("mul")),
        h.make_node("Add", [p("mul_out"), p("shift")], [p("add_out")], name=p("add")),
        h.make_node("GlobalAveragePool", [p("add_out")], [p("gap_out")], name=p("gap")),
        h.make_node("Flatten", [p("gap_out")], [p("y")], name=p("flatten")),
    ]
    batch = shift.shape[0]
    graph = h.make_graph(nodes, "check", [h.make_tensor_value_info(p("x"), TP.FLOAT, [1, 4, side, side])],
                         [h.make_tensor_value_info(p("y"), TP.FLOAT, [batch, 4])], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 17)], producer_name="vlrt-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(OUT, name + ".onnx"))


def main():
    os.makedirs(OUT, exist_ok=True)
    shift = np.array([0.1, -0.2, 0.3, -0.4], np.float32).reshape(1, 4, 1, 1)
    make("base", shift)
    fault = shift.copy()
    fault[0, 2, 0, 0] += 0.5
    make("shift_fault", fault)
    make("shift_shape", np.concatenate([shift, shift]))
    make("renamed", shift, prefix="other_")
    make("other_input", shift, side=16)


if __name__ == "__main__":
    main()
