"""Small If/Loop/Scan models and their onnxruntime outputs for tests/exec/test_control_flow.cpp.

Writes tests/fixtures/control_flow/<name>.onnx, <name>.in_<input>.npy and
<name>.out_<output>.npy (inputs and expected outputs), plus two malformed models
(if_bad_types.onnx, if_missing_outer.onnx) that vlrt must reject.
Run with `python3 tools/make_control_flow_models.py` (onnx, onnxruntime, numpy).
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto as TP
from onnx import helper as h
from onnx import numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "control_flow")
OPSET = [h.make_opsetid("", 16)]
F, I64, B = TP.FLOAT, TP.INT64, TP.BOOL


def vi(name, dtype, shape):
    return h.make_tensor_value_info(name, dtype, shape)


def const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def save(name, graph, inputs, check=True):
    model = h.make_model(graph, opset_imports=OPSET, producer_name="vlrt-tests")
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model, full_check=True)
    onnx.save(model, os.path.join(OUT, name + ".onnx"))
    if inputs is None:
        return
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    outs = sess.run(None, inputs)
    for k, v in inputs.items():
        np.save(os.path.join(OUT, f"{name}.in_{k}.npy"), v)
    for o, v in zip(sess.get_outputs(), outs):
        np.save(os.path.join(OUT, f"{name}.out_{o.name}.npy"), v)


def if_graphs(then_nodes, then_out, else_nodes, else_out, then_inits=(), else_inits=()):
    then_g = h.make_graph(then_nodes, "then_g", [], then_out, initializer=list(then_inits))
    else_g = h.make_graph(else_nodes, "else_g", [], else_out, initializer=list(else_inits))
    return then_g, else_g


def make_if_const():
    # The condition is an initializer: the If is replaced by its then-branch at load.
    then_g, else_g = if_graphs([h.make_node("Add", ["x", "one"], ["t"])], [vi("t", F, [2, 3])],
                               [h.make_node("Mul", ["x", "two"], ["e"])], [vi("e", F, [2, 3])],
                               [const("one", np.float32(1))], [const("two", np.float32(2))])
    node = h.make_node("If", ["c"], ["y"], name="if_const", then_branch=then_g, else_branch=else_g)
    g = h.make_graph([node], "if_const", [vi("x", F, [2, 3])], [vi("y", F, [2, 3])],
                     initializer=[const("c", np.array(True))])
    save("if_const", g, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def make_if_data(name, cond):
    # Condition from data (x's sum > 0); both branches read outer-scope values x and w.
    then_g, else_g = if_graphs([h.make_node("Add", ["x", "w"], ["t"])], [vi("t", F, [2, 3])],
                               [h.make_node("Sub", ["x", "w"], ["e0"]), h.make_node("Neg", ["e0"], ["e"])],
                               [vi("e", F, [2, 3])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], name="if_data", then_branch=then_g, else_branch=else_g)]
    g = h.make_graph(nodes, name, [vi("x", F, [2, 3]), vi("w", F, [2, 3])], [vi("y", F, [2, 3])],
                     initializer=[const("zero", np.float32(0))])
    x = np.arange(6, dtype=np.float32).reshape(2, 3) * (1 if cond else -1)
    save(name, g, {"x": x, "w": np.full((2, 3), 0.5, dtype=np.float32)})


def make_loop():
    # for i < M while cond: acc += x; scan out acc; cond = i + 1 < limit (early exit).
    body = h.make_graph(
        [h.make_node("Add", ["acc_in", "x"], ["acc_out"]),
         h.make_node("Add", ["i", "one"], ["i1"]),
         h.make_node("Less", ["i1", "limit"], ["cond_out"]),
         h.make_node("Identity", ["acc_out"], ["scan_out"])],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [2])],
        [vi("cond_out", B, []), vi("acc_out", F, [2]), vi("scan_out", F, [2])],
        initializer=[const("one", np.int64(1))])
    node = h.make_node("Loop", ["M", "cond", "acc0"], ["acc", "scans"], name="loop", body=body)
    g = h.make_graph([node], "loop", [vi("M", I64, []), vi("cond", B, []), vi("acc0", F, [2]), vi("x", F, [2]),
                                      vi("limit", I64, [])],
                     [vi("acc", F, [2]), vi("scans", F, [None, 2])])
    save("loop", g, {"M": np.array(5, dtype=np.int64), "cond": np.array(True), "acc0": np.array([1, 2], np.float32),
                     "x": np.array([0.5, -1], np.float32), "limit": np.array(3, dtype=np.int64)})


def make_loop_nested_if():
    # M iterations; even i: acc += x, odd i: acc *= x (an If inside the body, reading x and acc).
    then_g, else_g = if_graphs([h.make_node("Add", ["acc_in", "x"], ["t"])], [vi("t", F, [3])],
                               [h.make_node("Mul", ["acc_in", "x"], ["e"])], [vi("e", F, [3])])
    body = h.make_graph(
        [h.make_node("Mod", ["i", "two"], ["r"]),
         h.make_node("Equal", ["r", "zero"], ["even"]),
         h.make_node("If", ["even"], ["acc_out"], name="inner_if", then_branch=then_g, else_branch=else_g),
         h.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [3])],
        [vi("cond_out", B, []), vi("acc_out", F, [3])],
        initializer=[const("two", np.int64(2)), const("zero", np.int64(0))])
    node = h.make_node("Loop", ["M", "", "acc0"], ["acc"], name="loop_if", body=body)
    g = h.make_graph([node], "loop_nested_if", [vi("M", I64, []), vi("acc0", F, [3]), vi("x", F, [3])],
                     [vi("acc", F, [3])])
    save("loop_nested_if", g, {"M": np.array(4, dtype=np.int64), "acc0": np.array([1, 2, 3], np.float32),
                               "x": np.array([2, 0.5, -1], np.float32)})


def make_if_outer_weights():
    # The branches multiply by weights of the main graph (initializers W and b), one of them from an
    # If nested in the else-branch: bodies take the enclosing graph's weights as their constants.
    inner_then, inner_else = if_graphs([h.make_node("MatMul", ["x", "W"], ["p"]), h.make_node("Neg", ["p"], ["n"])],
                                       [vi("n", F, [4, 24])], [h.make_node("Identity", ["x24"], ["z"])],
                                       [vi("z", F, [4, 24])])
    then_g, else_g = if_graphs([h.make_node("MatMul", ["x", "W"], ["m"]), h.make_node("Add", ["m", "b"], ["t"])],
                               [vi("t", F, [4, 24])],
                               [h.make_node("Not", ["c"], ["nc"]),
                                h.make_node("If", ["nc"], ["e"], name="inner_if", then_branch=inner_then,
                                            else_branch=inner_else)],
                               [vi("e", F, [4, 24])])
    nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             h.make_node("Greater", ["s", "zero"], ["c"]),
             h.make_node("If", ["c"], ["y"], name="if_weights", then_branch=then_g, else_branch=else_g)]
    rng = np.random.default_rng(3)
    weights = [const("zero", np.float32(0)), const("W", rng.uniform(-1, 1, (16, 24)).astype(np.float32)),
               const("b", rng.uniform(-1, 1, 24).astype(np.float32)), const("x24", np.zeros((4, 24), np.float32))]
    g = h.make_graph(nodes, "if_outer_weights", [vi("x", F, [4, 16])], [vi("y", F, [4, 24])], initializer=weights)
    x = rng.uniform(0, 1, (4, 16)).astype(np.float32)
    save("if_outer_weights", g, {"x": x})
    g = h.make_graph(nodes, "if_outer_weights_else", [vi("x", F, [4, 16])], [vi("y", F, [4, 24])],
                     initializer=weights)
    save("if_outer_weights_else", g, {"x": -x})


def make_scan():
    # One state (sum), two scan inputs: a along axis 0 forward, b along axis 1 reversed;
    # out0 along axis 0 forward, out1 along axis 1 reversed.
    body = h.make_graph(
        [h.make_node("Add", ["s_in", "a_i"], ["t"]),
         h.make_node("Add", ["t", "b_i"], ["s_out"]),
         h.make_node("Mul", ["s_out", "k"], ["y0"]),
         h.make_node("Sub", ["s_out", "a_i"], ["y1"])],
        "body",
        [vi("s_in", F, [2]), vi("a_i", F, [2]), vi("b_i", F, [2])],
        [vi("s_out", F, [2]), vi("y0", F, [2]), vi("y1", F, [2])])
    node = h.make_node("Scan", ["s0", "a", "b"], ["s", "out0", "out1"], name="scan", body=body, num_scan_inputs=2,
                       scan_input_axes=[0, 1], scan_input_directions=[0, 1],
                       scan_output_axes=[0, 1], scan_output_directions=[0, 1])
    g = h.make_graph([node], "scan", [vi("s0", F, [2]), vi("a", F, [3, 2]), vi("b", F, [2, 3]), vi("k", F, [])],
                     [vi("s", F, [2]), vi("out0", F, [3, 2]), vi("out1", F, [2, 3])])
    save("scan", g, {"s0": np.array([0, 1], np.float32), "a": np.arange(6, dtype=np.float32).reshape(3, 2),
                     "b": np.arange(6, dtype=np.float32).reshape(2, 3) * 10, "k": np.array(2, np.float32)})


def make_errors():
    # Branches of different types: float in then, int64 in else.
    then_g, else_g = if_graphs([h.make_node("Identity", ["x"], ["t"])], [vi("t", F, [2])],
                               [h.make_node("Cast", ["x"], ["e"], to=I64)], [vi("e", I64, [2])])
    node = h.make_node("If", ["c"], ["y"], name="bad_if", then_branch=then_g, else_branch=else_g)
    g = h.make_graph([node], "if_bad_types", [vi("c", B, []), vi("x", F, [2])], [vi("y", F, [2])])
    save("if_bad_types", g, None, check=False)
    # A branch reading a value that no graph defines.
    then_g, else_g = if_graphs([h.make_node("Add", ["x", "nowhere"], ["t"])], [vi("t", F, [2])],
                               [h.make_node("Identity", ["x"], ["e"])], [vi("e", F, [2])])
    node = h.make_node("If", ["c"], ["y"], name="missing_if", then_branch=then_g, else_branch=else_g)
    g = h.make_graph([node], "if_missing_outer", [vi("c", B, []), vi("x", F, [2])], [vi("y", F, [2])])
    save("if_missing_outer", g, None, check=False)


if __name__ == "__main__":
    os.makedirs(OUT, exist_ok=True)
    make_if_const()
    make_if_data("if_data_then", True)
    make_if_data("if_data_else", False)
    make_loop()
    make_loop_nested_if()
    make_if_outer_weights()
    make_scan()
    make_errors()
