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

    python3 tools/check_quantized_groundingdino.py [--dir models/gdino] [--out models/gdino_q]
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
