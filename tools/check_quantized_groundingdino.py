#!/usr/bin/env python3
"""GroundingDINO quantized as X-AnyLabeling ships it, in vlrt and in onnxruntime.

Takes an export of tools/export_groundingdino.py (DIR with model.onnx, the saved inputs and
expected_detections.json), quantizes it the way X-AnyLabeling does
(onnxruntime.quantization.quantize_dynamic with QuantType.QUInt8 weights: every MatMul becomes
DynamicQuantizeLinear + MatMulInteger, every Conv ConvInteger) into OUT unless OUT/model.onnx
exists, then:
  1. runs onnxruntime on the quantized model with the saved inputs, with its default graph
     optimizations and without any, and turns each run's logits and boxes into detections with
     the reference postprocess (grounding_reference.py);
  2. runs `vlrt detect` on the export's test image with the quantized model;
  3. matches sets one to one (same label, box within --px pixels) and prints both file sizes,
     the detection counts and the largest box and score differences.
A quantized model can be chaotic (on a random-weight export it is): onnxruntime's fusions round
differently from its unfused kernels, and then its two runs disagree. The decisions that
onnxruntime takes both ways are the stable ones; vlrt must take every one of them. Detections
that only one onnxruntime run has are counted, not required. Exit status 1 when a stable
detection is missing from vlrt's.

A trained model's decisions survive quantization where a random-weight export's do not. With
--demo-scenes N the same check runs on the shipped demo detector (a trained model of the
GroundingDINO contract, models/demo) quantized the same way: on N held-out scenes
(tools/scenes.py, seed 777) `vlrt detect` and onnxruntime (default optimizations, the Python
transcription of the pipeline in eval_demo.py) must give the same detections, image by image.

    python3 tools/check_quantized_groundingdino.py [--dir models/gdino] [--out models/gdino_q]
    python3 tools/check_quantized_groundingdino.py --demo-scenes 50 [--out DIR]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from compare_groundingdino import match_detections  # noqa: E402
from grounding_reference import detections  # noqa: E402

INPUTS = ["img", "input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"]


def quantize(src, out):
    from onnxruntime.quantization import QuantType, quantize_dynamic
    os.makedirs(os.path.dirname(out), exist_ok=True)
    t = time.time()
    quantize_dynamic(src, out, weight_type=QuantType.QUInt8)
    print(f"quantized {src} -> {out} in {time.time() - t:.0f} s")


def ort_detections(model, feeds, ref, threads, optimize):
    """onnxruntime's detections on the quantized model, with its default graph optimizations or none."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    t = time.time()
    logits, boxes = sess.run(["logits", "boxes"], feeds)
    ms = (time.time() - t) * 1000
    dets, margins = detections(logits[0], boxes[0], ref["phrases"], ref["width"], ref["height"],
                               ref["box_threshold"], ref["text_threshold"])
    return dets, margins, ms


def matched_subset(a, b, px):
    """The detections of `a` that have a partner in `b`: one to one, same label, box within px."""
    used, kept = set(), []
    for x in a:
        best = None
        for i, y in enumerate(b):
            if i in used or y["label"] != x["label"]:
                continue
            d = max(abs(u - v) for u, v in zip(x["box"], y["box"]))
            if d <= px and (best is None or d < best[1]):
                best = (i, d)
        if best is not None:
            used.add(best[0])
            kept.append(x)
    return kept


def demo_check(args):
    """The demo detector quantized like X-AnyLabeling's GroundingDINO: vlrt against onnxruntime on
    held-out scenes, both fed the same preprocessed tensors and postprocessed the same way."""
    import eval_demo
    import scenes
    from vlrt_compare import run_vlrt
    src = os.path.join(ROOT, "models", "demo", "model.onnx")
    model = os.path.join(args.out, "model.onnx")
    if not os.path.exists(model):
        quantize(src, model)
    ort_detector = eval_demo.OrtDetector(model, os.path.join(os.path.dirname(src), "vocab.txt"), args.threads)
    total = {"images": 0, "equal": 0, "ort": 0, "vlrt": 0, "matched": 0}
    worst_px = 0.0
    for i in range(args.demo_scenes):
        img, ann = scenes.make_scene(777, i)
        enc, feeds = ort_detector.feeds(img, ann["caption"])
        logits, boxes = ort_detector.session.run(["logits", "boxes"], feeds)
        outs = run_vlrt(args.vlrt, model, feeds, args.threads, names=["logits", "boxes"])
        d = ort_detector

        def post(lg, bx):
            return eval_demo.postprocess(lg[0], bx[0], enc["phrases"], img.shape[1], img.shape[0],
                                         d.box_threshold, d.text_threshold, d.nms)
        want, got = post(logits, boxes), post(outs["logits"], outs["boxes"])
        both = matched_subset(want, got, args.px)
        worst_px = max(worst_px, match_detections(got, want, float("inf"))["max_box_diff_px"])
        total["images"] += 1
        total["ort"] += len(want)
        total["vlrt"] += len(got)
        total["matched"] += len(both)
        total["equal"] += int(len(both) == len(want) == len(got))
    print(f"demo detector: fp32 {os.path.getsize(src)} bytes, quantized {os.path.getsize(model)} bytes "
          f"({os.path.getsize(model) / os.path.getsize(src):.0%})")
    print(f"{total['images']} held-out scenes: onnxruntime {total['ort']} detections, vlrt {total['vlrt']}, "
          f"matched {total['matched']} (same label, box within {args.px} px; largest box difference "
          f"{worst_px:.3g} px); images with identical detections: {total['equal']} of {total['images']}")
    ok = total["equal"] == total["images"]
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "models", "gdino"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "gdino_q"))
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--px", type=float, default=2.0, help="box tolerance in pixels")
    ap.add_argument("--demo-scenes", type=int, default=0,
                    help="check the quantized demo detector on this many held-out scenes instead")
    args = ap.parse_args()
    if args.demo_scenes:
        return demo_check(args)

    src, model = os.path.join(args.dir, "model.onnx"), os.path.join(args.out, "model.onnx")
    if not os.path.exists(model):
        quantize(src, model)
    shutil.copy(os.path.join(args.dir, "vocab.txt"), os.path.join(args.out, "vocab.txt"))
    with open(os.path.join(args.dir, "expected_detections.json")) as f:
        ref = json.load(f)

    import onnxruntime as ort
    feeds = {n: np.load(os.path.join(args.dir, n + ".npy")) for n in INPUTS}
    want, margins, ort_ms = ort_detections(model, feeds, ref, args.threads, optimize=True)
    unopt, unopt_margins, _ = ort_detections(model, feeds, ref, args.threads, optimize=False)
    stable = matched_subset(want, unopt, args.px)

    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "det.json")
        cmd = [args.vlrt, "detect", ref["image"], "--model", model, "--vocab", os.path.join(args.out, "vocab.txt"),
               "--prompt", ref["prompt"], "--json", out_json, "--threads", str(args.threads),
               "--box-threshold", str(ref["box_threshold"]), "--text-threshold", str(ref["text_threshold"])]
        t = time.time()
        r = subprocess.run(cmd, capture_output=True, text=True)
        vlrt_s = time.time() - t
        if r.returncode != 0:
            print("vlrt detect failed:\n" + r.stdout + r.stderr)
            return 1
        with open(out_json) as f:
            got = json.load(f)["detections"]

    m = match_detections(got, want, args.px)
    found = matched_subset(stable, got, args.px)
    print(f"fp32 model {os.path.getsize(src)} bytes, quantized {os.path.getsize(model)} bytes "
          f"({os.path.getsize(model) / os.path.getsize(src):.0%})")
    print(f"onnxruntime {ort.__version__}: {len(want)} detections (run {ort_ms:.0f} ms); decision margins "
          f"{margins}")
    print(f"onnxruntime without graph optimizations: {len(unopt)} detections; decision margins {unopt_margins}")
    print(f"stable (both onnxruntime runs, same label, box within {args.px} px): {len(stable)}")
    print(f"vlrt detect: {len(got)} detections (whole process {vlrt_s:.1f} s, model loading included)")
    print(f"vlrt against onnxruntime: matched {m['matched']} of {m['expected']}, missing {len(m['missing'])}, "
          f"extra {len(m['extra'])}, max box difference {m['max_box_diff_px']:.4g} px, "
          f"max score difference {m['max_score_diff']:.3g}")
    print(f"vlrt against onnxruntime without optimizations: matched {len(matched_subset(unopt, got, args.px))} "
          f"of {len(unopt)}")
    print(f"stable detections vlrt has: {len(found)} of {len(stable)}")
    ok = len(found) == len(stable)
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
