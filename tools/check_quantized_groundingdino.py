#!/usr/bin/env python3
"""GroundingDINO quantized as X-AnyLabeling ships it, in vlrt and in onnxruntime.

Takes an export of tools/export_groundingdino.py (DIR with model.onnx, the saved inputs and
expected_detections.json), quantizes it the way X-AnyLabeling does
(onnxruntime.quantization.quantize_dynamic with QuantType.QUInt8 weights: every MatMul becomes
DynamicQuantizeLinear + MatMulInteger, every Conv ConvInteger) into OUT unless OUT/model.onnx
exists, then:
  1. runs onnxruntime on the quantized model with the saved inputs and turns its logits and
     boxes into detections with the reference postprocess (grounding_reference.py);
  2. runs `vlrt detect` on the export's test image with the quantized model;
  3. matches the two sets one to one (same label, box within --px pixels) and prints both
     file sizes, the detection counts and the largest box and score differences.
Exit status 1 when the detections differ.

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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(ROOT, "models", "gdino"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "gdino_q"))
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--px", type=float, default=0.5, help="box tolerance in pixels")
    args = ap.parse_args()

    src, model = os.path.join(args.dir, "model.onnx"), os.path.join(args.out, "model.onnx")
    if not os.path.exists(model):
        quantize(src, model)
    shutil.copy(os.path.join(args.dir, "vocab.txt"), os.path.join(args.out, "vocab.txt"))
    with open(os.path.join(args.dir, "expected_detections.json")) as f:
        ref = json.load(f)

    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    feeds = {n: np.load(os.path.join(args.dir, n + ".npy")) for n in INPUTS}
    t = time.time()
    logits, boxes = sess.run(["logits", "boxes"], feeds)
    ort_ms = (time.time() - t) * 1000
    want, margins = detections(logits[0], boxes[0], ref["phrases"], ref["width"], ref["height"],
                               ref["box_threshold"], ref["text_threshold"])

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
    print(f"fp32 model {os.path.getsize(src)} bytes, quantized {os.path.getsize(model)} bytes "
          f"({os.path.getsize(model) / os.path.getsize(src):.0%})")
    print(f"onnxruntime {ort.__version__}: {len(want)} detections (run {ort_ms:.0f} ms); decision margins "
          f"{margins}")
    print(f"vlrt detect: {len(got)} detections (whole process {vlrt_s:.1f} s, model loading included)")
    print(f"matched {m['matched']} of {m['expected']}, missing {len(m['missing'])}, extra {len(m['extra'])}, "
          f"max box difference {m['max_box_diff_px']:.4g} px, max score difference {m['max_score_diff']:.3g}")
    print("PASS" if m["ok"] else "FAIL")
    return 0 if m["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
