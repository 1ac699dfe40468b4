#!/usr/bin/env python3
"""Detections of GroundingDINO-contract models (a float32 export and its quantized or
half-precision copies) on the export's synthetic scenes, with `vlrt detect`: per scene and in
all, how many each found, how many agree with the first model's (same label, IoU >= --iou,
matched one to one, best IoU first), and each copy's F1 against the first model.

The scenes are export_groundingdino.py's (scene 0 is its test.png; scene N moves every shape and
redraws the noise). The prompt is the export's text.json caption unless --prompt is given.

    python3 tools/compare_detections.py REFERENCE.onnx COPY.onnx... [--scenes 0-9] [--threads 2]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)


def scene_list(text):
    """'0-9' or '0,3,5' or '0-3,7' as a list of ints."""
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def iou(a, b):
    """Boxes as [x0, y0, x1, y1]."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(w, 0.0) * max(h, 0.0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def matched_pairs(want, got, threshold):
    """One-to-one matches of equal labels with IoU >= threshold, the best IoU taken first."""
    candidates = sorted(((iou(w["box"], g["box"]), i, j)
                         for i, w in enumerate(want) for j, g in enumerate(got)
                         if w["label"] == g["label"]), reverse=True)
    used_w, used_g, pairs = set(), set(), 0
    for v, i, j in candidates:
        if v < threshold:
            break
        if i not in used_w and j not in used_g:
            used_w.add(i)
            used_g.add(j)
            pairs += 1
    return pairs


def detect(vlrt, model, image, prompt, threads, precision="fp32"):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        out = f.name
    try:
        t = time.time()
        r = subprocess.run([vlrt, "detect", "-m", model, image, "--prompt", prompt,
                            "--json", out, "-t", str(threads), "--precision", precision],
                           capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"vlrt detect -m {model} {image} failed (exit {r.returncode}):\n{r.stderr}")
        with open(out) as f:
            doc = json.load(f)
        return doc["detections"], time.time() - t
    finally:
        os.unlink(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reference", help="the float32 model (its folder has text.json)")
    ap.add_argument("copies", nargs="+", help="quantized or half-precision copies")
    ap.add_argument("--scenes", default="0-9", help="export_groundingdino.py scenes (default 0-9)")
    ap.add_argument("--prompt", help="default: the caption in text.json beside the reference")
    ap.add_argument("--iou", type=float, default=0.5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="vlrt detect's --precision for the copies (the reference runs fp32): a copy may be "
                         "the reference model itself, to compare its bfloat16 products with float32")
    ap.add_argument("--vlrt", default=os.path.join(os.path.dirname(HERE), "build", "vlrt"))
    ap.add_argument("--json", help="also write the per-scene table and totals here")
    a = ap.parse_args()

    prompt = a.prompt
    if prompt is None:
        text = os.path.join(os.path.dirname(os.path.abspath(a.reference)), "text.json")
        if not os.path.exists(text):
            sys.exit(f"no --prompt and no {text} (export_groundingdino.py writes it)")
        with open(text) as f:
            prompt = json.load(f)["caption"]
    from export_groundingdino import write_test_image

    copies = [{"model": c, "scenes": [], "detections": 0, "matched": 0} for c in a.copies]
    reference_count = 0
    print(f"prompt {prompt!r}, IoU >= {a.iou}")
    for i, c in enumerate(copies):
        print(f"copy {i + 1}: {c['model']}")
    print("| scene | reference (s) | " + " | ".join(
        f"copy {i + 1}: found / matched / F1 (s)" for i in range(len(copies))) + " |")
    print("|---" * (len(copies) + 2) + "|")
    with tempfile.TemporaryDirectory() as work:
        for scene in scene_list(a.scenes):
            image = os.path.join(work, f"scene{scene}.png")
            write_test_image(image, scene)
            want, seconds = detect(a.vlrt, a.reference, image, prompt, a.threads)
            reference_count += len(want)
            cells = [f"{len(want)} ({seconds:.1f})"]
            for c in copies:
                got, seconds = detect(a.vlrt, c["model"], image, prompt, a.threads, a.precision)
                m = matched_pairs(want, got, a.iou)
                f1 = 2 * m / (len(want) + len(got)) if want or got else 1.0
                c["scenes"].append({"scene": scene, "reference": len(want), "found": len(got),
                                    "matched": m, "f1": f1})
                c["detections"] += len(got)
                c["matched"] += m
                cells.append(f"{len(got)} / {m} / {f1:.3f} ({seconds:.1f})")
            print(f"| {scene} | " + " | ".join(cells) + " |", flush=True)
    print(f"all scenes: reference {reference_count} detections")
    for i, c in enumerate(copies):
        n = reference_count + c["detections"]
        c["f1"] = 2 * c["matched"] / n if n else 1.0
        print(f"copy {i + 1}: {c['detections']} detections, {c['matched']} matched, "
              f"F1 {c['f1']:.3f}  ({c['model']})")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"prompt": prompt, "iou": a.iou, "reference": a.reference,
                       "reference_detections": reference_count, "copies": copies}, f, indent=1)


if __name__ == "__main__":
    main()
