#!/usr/bin/env python3
"""Compares vlrt with PyTorch on the SAM export of tools/export_sam.py (models/sam/ by default):

  1. `vlrt run encoder.onnx` on PyTorch's preprocessed pixels.npy: image_embeddings against
     expected_image_embeddings.npy;
  2. `vlrt run decoder.onnx` on PyTorch's embeddings and each saved prompt: masks (logits),
     iou_predictions and low_res_masks against expected_<prompt>_*.npy; and the box prompt at
     another orig_im_size (the decoder's crop and upscaling follow the image size);
  3. `vlrt segment test.png` with the same prompts in image pixels (vlrt's own preprocessing,
     encoder, prompt conversion and decoder): the chosen mask's logits (--logits) against
     PyTorch's mask of the same index, every IoU prediction, the chosen mask's area (a pixel may
     differ only where PyTorch's logit is within the logit error of 0); and the
     encoder's and decoder's times as vlrt segment reports them.

Tolerances: mask logits 1e-3, IoU predictions 1e-4 (absolute). Prints a report, writes it as
JSON to DIR/comparison.json; exit status 1 when a check fails. Needs numpy only.

    python3 tools/compare_sam.py [--dir models/sam] [--threads N]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOGIT_TOL = 1e-3
IOU_TOL = 1e-4


def run(cmd):
    t0 = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({out.returncode}):\n{out.stdout}{out.stderr}")
    return out.stdout, time.time() - t0


def max_err(a, b):
    assert a.shape == b.shape, f"shapes {a.shape} vs {b.shape}"
    return float(np.abs(a.astype(np.float64) - b.astype(np.float64)).max())


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dir", default=os.path.join(ROOT, "models", "sam"))
    p.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    p.add_argument("--threads", type=int, default=0)
    a = p.parse_args()
    d = lambda *names: os.path.join(a.dir, *names)  # noqa: E731
    ref = json.load(open(d("reference.json")))
    threads = ["-t", str(a.threads)] if a.threads else []
    report, ok = {"tolerances": {"mask_logits": LOGIT_TOL, "iou_predictions": IOU_TOL}}, True
    tmp = tempfile.mkdtemp(prefix="vlrt_sam_")

    _, t = run([a.vlrt, "run", d("encoder.onnx"), "-i", "pixels=" + d("pixels.npy"), "-o", tmp] + threads)
    e = max_err(np.load(os.path.join(tmp, "image_embeddings.npy")), np.load(d("expected_image_embeddings.npy")))
    report["encoder"] = {"image_embeddings_max_err": e, "vlrt_run_s": t}
    print(f"encoder (vlrt run, {t:.1f} s with loading): image_embeddings max abs error {e:.2e}")

    report["decoder"], report["segment"] = {}, {}
    for name, pr in ref["prompts"].items():
        inputs = {"image_embeddings": d("expected_image_embeddings.npy"),
                  "point_coords": d(f"{name}_point_coords.npy"), "point_labels": d(f"{name}_point_labels.npy"),
                  **{k: d(k + ".npy") for k in ["mask_input", "has_mask_input", "orig_im_size"]}}
        args = sum((["-i", f"{k}={v}"] for k, v in inputs.items()), [])
        run([a.vlrt, "run", d("decoder.onnx"), "-o", tmp] + args + threads)
        errs = {k: max_err(np.load(os.path.join(tmp, k + ".npy")), np.load(d(f"expected_{name}_{k}.npy")))
                for k in ["masks", "iou_predictions", "low_res_masks"]}
        good = errs["masks"] <= LOGIT_TOL and errs["low_res_masks"] <= LOGIT_TOL and errs["iou_predictions"] <= IOU_TOL
        ok &= good
        report["decoder"][name] = {**errs, "ok": good}
        print(f"decoder {name} (vlrt run on PyTorch's embeddings): masks {errs['masks']:.2e}, iou_predictions "
              f"{errs['iou_predictions']:.2e}, low_res_masks {errs['low_res_masks']:.2e} -> {'ok' if good else 'FAIL'}")

        prompt = ["--box", ",".join(f"{v:g}" for v in pr["box"])] if "box" in pr else sum(
            (["--point", f"{x:g},{y:g},{l}"] for x, y, l in pr["points"]), [])
        out_dir = os.path.join(tmp, name)
        os.makedirs(out_dir, exist_ok=True)
        stdout, _ = run([a.vlrt, "segment", d(ref["image"]), "--model", a.dir, "--logits", out_dir, "--json",
                         os.path.join(out_dir, "masks.json")] + prompt + threads)
        m = re.search(r"encoder (\d+) ms, decoder (\d+) ms", stdout)
        got = json.load(open(os.path.join(out_dir, "masks.json")))["masks"][0]
        idx = got["mask_index"]
        want_masks = np.load(d(f"expected_{name}_masks.npy"))[0]
        want_iou = np.load(d(f"expected_{name}_iou_predictions.npy"))[0]
        logit_err = max_err(np.load(os.path.join(out_dir, "mask_logits_1.npy")), want_masks[idx])
        iou_err = max_err(np.array(got["iou_predictions"]), want_iou)
        want_area = int((want_masks[idx] > 0).sum())
        # A pixel may fall on the other side of 0 only where PyTorch's logit is within the error.
        got_logits = np.load(os.path.join(out_dir, "mask_logits_1.npy"))
        flipped = (got_logits > 0) != (want_masks[idx] > 0)
        unexplained = int((flipped & (np.abs(want_masks[idx]) > logit_err)).sum())
        good = logit_err <= LOGIT_TOL and iou_err <= IOU_TOL and unexplained == 0
        ok &= good
        report["segment"][name] = {"mask_index": idx, "mask_logits_max_err": logit_err, "iou_max_err": iou_err,
                                   "area": got["area"], "pytorch_area": want_area,
                                   "pixels_flipped": int(flipped.sum()),
                                   "encoder_ms": int(m.group(1)), "decoder_ms": int(m.group(2)), "ok": good}
        print(f"vlrt segment {name} ({' '.join(prompt)}): mask {idx}, logits max abs error {logit_err:.2e}, "
              f"iou {got['iou_prediction']:.4f} (max error {iou_err:.2e}), area {got['area']} (PyTorch "
              f"{want_area}, {int(flipped.sum())} pixels on the other side of 0); encoder {m.group(1)} ms, decoder {m.group(2)} ms -> {'ok' if good else 'FAIL'}")

    if os.path.exists(d("other_orig_im_size.npy")):
        inputs = {"image_embeddings": d("expected_image_embeddings.npy"), "point_coords": d("box_point_coords.npy"),
                  "point_labels": d("box_point_labels.npy"), "mask_input": d("mask_input.npy"),
                  "has_mask_input": d("has_mask_input.npy"), "orig_im_size": d("other_orig_im_size.npy")}
        run([a.vlrt, "run", d("decoder.onnx"), "-o", tmp] + sum((["-i", f"{k}={v}"] for k, v in inputs.items()), [])
            + threads)
        errs = {k: max_err(np.load(os.path.join(tmp, k + ".npy")), np.load(d(f"expected_box_other_size_{k}.npy")))
                for k in ["masks", "iou_predictions"]}
        good = errs["masks"] <= LOGIT_TOL and errs["iou_predictions"] <= IOU_TOL
        ok &= good
        report["decoder"]["box_other_size"] = {**errs, "ok": good}
        print(f"decoder box at orig_im_size {np.load(d('other_orig_im_size.npy')).astype(int).tolist()} (vlrt run): "
              f"masks {errs['masks']:.2e}, iou_predictions {errs['iou_predictions']:.2e} -> {'ok' if good else 'FAIL'}")

    report["pytorch_encoder_s"] = ref.get("pytorch_encoder_s")
    report["ok"] = bool(ok)
    with open(d("comparison.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(f"PyTorch encoder {ref.get('pytorch_encoder_s', 0):.1f} s; {'all checks pass' if ok else 'FAILED'}; "
          f"wrote {d('comparison.json')}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
