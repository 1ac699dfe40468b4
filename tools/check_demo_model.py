#!/usr/bin/env python3
"""Checks an exported demo model: its ops are all ones vlrt's CPU backend has, its metadata
holds the pipeline's defaults, and onnxruntime (and `vlrt run`, when the binary is there) give
PyTorch's outputs on the inputs saved by tools/train_demo_model.py ($TMPDIR/vlrt_demo_reference.npz).

    python3 tools/check_demo_model.py [--model models/demo/model.onnx] [--reference R.npz]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")

VLRT_OPS = set("""Add Sub Mul Div Pow Sqrt Exp Log Erf Tanh Sigmoid Relu LeakyRelu Gelu HardSigmoid
HardSwish Clip Neg Abs Reciprocal Floor Ceil Round Sin Cos Not And Or Equal Less LessOrEqual Greater
GreaterOrEqual Where Max Min Mean MatMul Gemm Conv ConvTranspose BatchNormalization
LayerNormalization InstanceNormalization GroupNormalization Softmax LogSoftmax ReduceMean ReduceSum
ReduceMax ReduceMin ReduceProd ReduceL2 ArgMax ArgMin TopK CumSum MaxPool AveragePool
GlobalAveragePool Resize GridSample Pad Reshape Transpose Flatten Squeeze Unsqueeze Concat Split
Slice Gather GatherElements GatherND ScatterND Expand Tile Shape Size ConstantOfShape Constant Range
Cast Identity Dropout NonZero Einsum Trilu""".split())
META_KEYS = ["vlrt.short_side", "vlrt.max_side", "vlrt.box_threshold", "vlrt.text_threshold", "vlrt.nms",
             "vlrt.vocab"]
INPUTS = ["img", "input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"]


def report(name, got, ref):
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    print(f"  {name}: max abs diff {diff.max():.2e}")
    return diff.max()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo", "model.onnx"))
    ap.add_argument("--reference", default=os.path.join(tempfile.gettempdir(), "vlrt_demo_reference.npz"),
                    help="written by train_demo_model.py (default: $TMPDIR/vlrt_demo_reference.npz)")
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--tolerance", type=float, default=1e-3)
    args = ap.parse_args()
    ref_path = args.reference

    m = onnx.load(args.model)
    ops = {n.op_type for n in m.graph.node}
    assert ops <= VLRT_OPS, f"ops vlrt does not have: {sorted(ops - VLRT_OPS)}"
    meta = {p.key: p.value for p in m.metadata_props}
    missing = [k for k in META_KEYS if k not in meta]
    assert not missing, f"metadata lacks {missing}"
    print(f"{args.model}: {os.path.getsize(args.model) / 1e6:.2f} MB, opset "
          f"{m.opset_import[0].version}, {len(m.graph.node)} nodes, ops all in vlrt's list")
    print("  metadata: " + ", ".join(f"{k}={v}" for k, v in meta.items()))
    print("  inputs: " + ", ".join(
        f"{i.name} {onnx.TensorProto.DataType.Name(i.type.tensor_type.elem_type).lower()} "
        f"[{','.join(d.dim_param or str(d.dim_value) for d in i.type.tensor_type.shape.dim)}]"
        for i in m.graph.input))
    print("  outputs: " + ", ".join(
        f"{o.name} [{','.join(d.dim_param or str(d.dim_value) for d in o.type.tensor_type.shape.dim)}]"
        for o in m.graph.output))

    if not os.path.exists(ref_path):
        print(f"no {ref_path}: skipped the output comparison")
        return
    ref = np.load(ref_path)
    feeds = {k: ref[k] for k in INPUTS}
    worst = 0.0
    try:
        import onnxruntime as ort

        sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
        logits, boxes = sess.run(["logits", "boxes"], feeds)
        print("onnxruntime vs PyTorch:")
        worst = max(worst, report("logits", logits, ref["logits"]), report("boxes", boxes, ref["boxes"]))
    except ImportError:
        print("onnxruntime not importable here: skipped")
    if os.path.exists(args.vlrt):
        with tempfile.TemporaryDirectory() as tmp:
            cmd = [args.vlrt, "run", args.model, "--output-dir", tmp, "--threads", "2", "--input"]
            for k in INPUTS:
                np.save(os.path.join(tmp, f"in_{k}.npy"), feeds[k])
                cmd.append(f"{k}={os.path.join(tmp, f'in_{k}.npy')}")
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"vlrt run failed ({r.returncode}):\n{r.stdout}{r.stderr}")
                sys.exit(1)
            print("vlrt run vs PyTorch:")
            worst = max(worst, report("logits", np.load(os.path.join(tmp, "logits.npy")), ref["logits"]),
                        report("boxes", np.load(os.path.join(tmp, "boxes.npy")), ref["boxes"]))
    if worst > args.tolerance:
        print(f"FAILED: max abs diff {worst:.2e} > {args.tolerance}")
        sys.exit(1)
    print("OK")


if __name__ == "__main__":
    main()
