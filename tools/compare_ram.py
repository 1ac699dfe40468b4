#!/usr/bin/env python3
"""Compares vlrt with PyTorch on the RAM++ export of tools/export_ram_plus.py, at batch 1 and 3:

  1. `vlrt run model.onnx` on PyTorch's preprocessed pixels: max |sigmoid(logits) - PyTorch's
     probabilities| over every tag (target <= 1e-4) and the tag sets above the per-tag thresholds.
  2. `vlrt tag` on the scene PNGs (vlrt's own preprocessing) with --json: the tag sets and the
     scores of the tags found, against PyTorch's.
Optionally (--ort) onnxruntime on the same pixels, and on another export (--ort-model, e.g. the
unpatched one) to show what a baked batch does there.

    python3 tools/compare_ram.py --model RAM_DIR --vlrt build/vlrt
    python3 tools/compare_ram.py --model RAM_DIR --vlrt build/vlrt --ort \
        --ort-model RAM_UNPATCHED_DIR/model.onnx
Needs numpy (onnxruntime for --ort).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vlrt_compare import run_vlrt  # noqa: E402


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x.astype(np.float64)))


def tag_sets(probs, thresholds):
    return [set(np.nonzero(row > thresholds)[0].tolist()) for row in probs]


def report(name, probs, want, thresholds):
    diff = float(np.abs(probs - want).max())
    same = tag_sets(probs, thresholds) == tag_sets(want, thresholds)
    counts = [len(s) for s in tag_sets(want, thresholds)]
    print(f"{name}: max |prob diff| {diff:.2e} ({'within' if diff <= 1e-4 else 'OVER'} 1e-4), "
          f"tag sets {'equal' if same else 'DIFFERENT'} (PyTorch: {counts} tags)")
    return diff <= 1e-4 and same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="the folder export_ram_plus.py wrote")
    ap.add_argument("--vlrt", default="build/vlrt")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ort", action="store_true", help="also run onnxruntime on the same pixels")
    ap.add_argument("--ort-model", help="another export for onnxruntime (the unpatched one)")
    a = ap.parse_args()
    d = lambda f: os.path.join(a.model, f)  # noqa: E731
    tags = json.load(open(d("tags.json"), encoding="utf-8"))["tags"]
    thresholds = np.array([t["threshold"] for t in tags])
    ok = True
    for b in (1, 3):
        pixels, want = np.load(d(f"pixels_b{b}.npy")), np.load(d(f"probs_b{b}.npy"))
        t0 = time.time()
        logits = run_vlrt(a.vlrt, d("model.onnx"), {"image": pixels}, threads=a.threads, names=["logits"],
                          timeout=3600)["logits"]
        print(f"batch {b}: vlrt run {time.time() - t0:.1f} s with loading")
        ok &= report(f"batch {b} vlrt run", sigmoid(logits), want, thresholds)

        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "tags.json")
            pngs = [d(f"scene{i}.png") for i in range(b)]
            r = subprocess.run([a.vlrt, "tag", *pngs, "--model", a.model, "--json", out, "-t", str(a.threads)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"vlrt tag failed: {r.stderr or r.stdout}")
            got = json.load(open(out))
        sets = [{t["index"] for t in img["tags"]} for img in got["images"]]
        worst = max((abs(t["score"] - want[i][t["index"]]) for i, img in enumerate(got["images"])
                     for t in img["tags"]), default=0.0)
        same = sets == tag_sets(want, thresholds)
        print(f"batch {b} vlrt tag: {got['ms_per_image']:.0f} ms per image, tag sets "
              f"{'equal' if same else 'DIFFERENT'}, max |score diff| of its tags {worst:.2e}")
        ok &= same

        if a.ort:
            import onnxruntime as ort
            for path in [d("model.onnx")] + ([a.ort_model] if a.ort_model else []):
                s = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                try:
                    out = s.run(None, {"image": pixels})[0]
                except Exception as e:  # noqa: BLE001 - onnxruntime's failure is the finding
                    print(f"batch {b} onnxruntime {path}: fails: {str(e).splitlines()[0][:200]}")
                    continue
                if out.shape[0] != b:
                    print(f"batch {b} onnxruntime {path}: output {list(out.shape)} for {b} images, no error")
                else:
                    report(f"batch {b} onnxruntime {path}", sigmoid(out), want, thresholds)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
