#!/usr/bin/env python3
"""Models transformed by onnxruntime's own tools, in onnxruntime and in `vlrt run`.

From the exports of tools/export_zoo.py (ZOO/resnet50 with image.npy, ZOO/bert_base with
input_ids/attention_mask/token_type_ids .npy) it builds, into OUT (default ZOO/ort_transformed,
each made once and reused):
  resnet50_qdq      quantize_static, QuantFormat.QDQ, per-channel int8 weights, uint8
                    activations, calibrated on rendered scenes (tools/scenes.py) resized to
                    224x224 and normalized with the ImageNet mean and std as the export expects
  bert_optimized    onnxruntime.transformers.optimizer.optimize_model(model_type='bert',
                    num_heads=12, hidden_size=768, opt_level=0: the
                    Python fusions alone, no onnxruntime pre-pass): fused Attention, SkipLayerNormalization,
                    (Bias/Fast)Gelu, EmbedLayerNormalization (its op histogram is printed)
  bert_dynamic_int8 quantize_dynamic (int8 weights: DynamicQuantizeMatMul / MatMulInteger)
then runs each in onnxruntime (CPU, same file; default graph optimizations) and `vlrt run` and
prints one line per model and output: max abs error / output scale, beside the same measure for
onnxruntime without graph optimizations against onnxruntime with them, and for resnet50 the top-1
class of each. vlrt is run with VLRT_FUSE_QDQ=1: it then fuses QDQ groups into integer ops as
onnxruntime does, so resnet50_qdq is held to the same line as the float models. A model passes when every output is within --tol (1e-3) of
its scale (the verdict counts the values that differ at all), or, where
onnxruntime disagrees with itself by more than that (a quantized output's step is larger), within
that disagreement with the same top-1 class. Exit status 1 otherwise.

    python3 tools/check_ort_transformed.py ZOO [--out DIR] [--vlrt build/vlrt] [--only bert]
"""
import argparse
import collections
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from scenes import make_scene  # noqa: E402
from vlrt_compare import VlrtError, compare_outputs, run_vlrt  # noqa: E402

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32).reshape(3, 1, 1)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32).reshape(3, 1, 1)
BERT_INPUTS = ["input_ids", "attention_mask", "token_type_ids"]


def resize_bilinear(img, side):
    """uint8 HxWx3 -> float32 SxSx3 in 0..1, bilinear with half-pixel centres."""
    h, w = img.shape[:2]
    a = img.astype(np.float32) / 255.0

    def taps(n):
        pos = np.clip((np.arange(side) + 0.5) * n / side - 0.5, 0, n - 1)
        lo = np.floor(pos).astype(int)
        return lo, np.minimum(lo + 1, n - 1), (pos - lo).astype(np.float32)

    y0, y1, fy = taps(h)
    x0, x1, fx = taps(w)
    rows = a[y0] * (1 - fy)[:, None, None] + a[y1] * fy[:, None, None]
    return rows[:, x0] * (1 - fx)[None, :, None] + rows[:, x1] * fx[None, :, None]


def imagenet_tensor(img, side=224):
    """uint8 HxWx3 -> 1x3xSxS float32, resized and normalized with ImageNet's mean and std."""
    a = resize_bilinear(img, side)
    return ((a.transpose(2, 0, 1) - IMAGENET_MEAN) / IMAGENET_STD)[None].astype(np.float32)


class SceneReader:
    """Calibration data for quantize_static: COUNT rendered scenes."""

    def __init__(self, input_name, count):
        self.items = iter([{input_name: imagenet_tensor(make_scene(11, i)[0])} for i in range(count)])

    def get_next(self):
        return next(self.items, None)


def build_resnet50_qdq(src, dst, calibration):
    import onnxruntime as ort
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    pre = dst + ".pre.onnx"
    quant_pre_process(src, pre)
    name = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).get_inputs()[0].name
    quantize_static(pre, dst, SceneReader(name, calibration), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    os.remove(pre)


def build_bert_optimized(src, dst):
    from onnxruntime.transformers.optimizer import optimize_model
    optimize_model(src, model_type="bert", num_heads=12, hidden_size=768, opt_level=0).save_model_to_file(dst)


def build_bert_dynamic(src, dst):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    quantize_dynamic(src, dst, weight_type=QuantType.QInt8)


def op_histogram(path):
    import onnx
    m = onnx.load(path, load_external_data=False)
    return collections.Counter((f"{n.domain}." if n.domain not in ("", "ai.onnx") else "") + n.op_type
                               for n in m.graph.node)


def ort_run(path, feeds, threads, optimize=True):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.log_severity_level = 3
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, feeds)))


def top1(outputs):
    a = outputs["logits"]
    return a.reshape(a.shape[0], -1).argmax(1).tolist()


def check(label, path, feeds, args):
    """vlrt against onnxruntime's default (optimized) run; onnxruntime without graph optimizations
    against the same gives the size of the disagreement that onnxruntime itself has on this file."""
    ref = ort_run(path, feeds, args.threads)
    noopt = ort_run(path, feeds, args.threads, optimize=False)
    try:
        got = run_vlrt(args.vlrt, path, feeds, args.threads, list(ref))
    except VlrtError as e:
        print(f"{label:<18} vlrt error: {e}")
        return False
    cols, worst = compare_outputs(ref, got)
    own_cols, own = compare_outputs(ref, noopt)
    for c, o in zip(cols, own_cols):
        print(f"{label:<18} vlrt vs onnxruntime {c}   (onnxruntime without optimizations: {o.split(': ', 1)[1]})")
    same_top1 = True
    if "logits" in ref:
        same_top1 = top1(ref) == top1(got)
        print(f"{label:<18} top-1 onnxruntime {top1(ref)}, vlrt {top1(got)}, onnxruntime without optimizations "
              f"{top1(noopt)}: {'agree' if same_top1 else 'DIFFER'}")
    differing = sum(int(np.count_nonzero(ref[k] != got[k])) for k in ref if k in got and ref[k].shape == got[k].shape)
    total = sum(ref[k].size for k in ref)
    if worst <= args.tol and same_top1:
        verdict, ok = f"PASS: within {args.tol:g} of onnxruntime's optimized run ({differing} of {total} values differ)", True
    elif worst <= own and same_top1:
        verdict, ok = "PASS within onnxruntime's own optimized-vs-unoptimized disagreement", True
    else:
        verdict, ok = "FAIL", False
    print(f"{label:<18} {verdict} (vlrt {worst:.2e} of scale, onnxruntime with itself {own:.2e}, "
          f"tolerance {args.tol:g})")
    return ok


def main():
    os.environ["VLRT_FUSE_QDQ"] = "1"  # QDQ groups as integer ops, as onnxruntime's default run has them
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("zoo", help="folder of tools/export_zoo.py's exports")
    ap.add_argument("--out", help="where the transformed models go (default ZOO/ort_transformed)")
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--calibration", type=int, default=8, help="rendered scenes for quantize_static")
    ap.add_argument("--tol", type=float, default=1e-3, help="max abs error allowed, relative to output scale")
    ap.add_argument("--only", default="", help="run only models whose name contains this")
    args = ap.parse_args()
    out = args.out or os.path.join(args.zoo, "ort_transformed")
    os.makedirs(out, exist_ok=True)

    resnet, bert = os.path.join(args.zoo, "resnet50"), os.path.join(args.zoo, "bert_base")
    image = {"image": np.load(os.path.join(resnet, "image.npy"))}
    bert_feeds = {n: np.load(os.path.join(bert, n + ".npy")) for n in BERT_INPUTS}
    models = [
        ("resnet50_qdq", lambda d: build_resnet50_qdq(os.path.join(resnet, "model.onnx"), d, args.calibration), image),
        ("bert_optimized", lambda d: build_bert_optimized(os.path.join(bert, "model.onnx"), d), bert_feeds),
        ("bert_dynamic_int8", lambda d: build_bert_dynamic(os.path.join(bert, "model.onnx"), d), bert_feeds),
    ]
    ok = True
    for label, build, feeds in models:
        if args.only and args.only not in label:
            continue
        path = os.path.join(out, label + ".onnx")
        if not os.path.exists(path):
            build(path)
        hist = op_histogram(path)
        print(f"{label:<18} ops: " + ", ".join(f"{k} {v}" for k, v in sorted(hist.items(), key=lambda kv: -kv[1])))
        ok &= check(label, path, feeds, args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
