#!/usr/bin/env python3
"""Accuracy of the demo detector on generated scenes (tools/scenes.py): COCO-style AP50 and
AP50:95 over the prompted present objects (a class is a phrase; 101-point interpolation;
detections of a phrase in images where it was prompted but absent count as false positives), and
absent_ok, the fraction of images whose caption names absent objects where no detection above
the model's default box threshold carries an absent phrase. As in COCO practice, AP is computed
from all detections scoring above --ap-threshold (0.05); the AP of only the detections above the
default threshold is printed too. The last line printed is exactly
`AP50=0.xxx AP50:95=0.xxx absent_ok=0.xxx`.

    python3 tools/eval_demo.py --seed 777 --count 300                       # vlrt label per prompt
    python3 tools/eval_demo.py --seed 777 --count 300 --backend detect      # vlrt detect per image
    python3 tools/eval_demo.py --seed 777 --count 300 --backend onnxruntime # Python transcription

Backends: `label` runs `vlrt label DIR --format coco --out OUT --prompt P` once per distinct
prompt (each scene has its own caption, so once per image); `detect` runs `vlrt detect IMAGE
--model M --vocab V --prompt P --json OUT` for each image; `onnxruntime` runs the model with
onnxruntime and a Python transcription of the pipeline (aspect-keeping bilinear resize to
the model's vlrt.short_side / vlrt.max_side, ImageNet normalization, GroundingDINO's
thresholds, per-label NMS), reading the defaults from the model's metadata. Training scenes use
seed 1234; any other seed is held out.
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
sys.path.insert(0, HERE)
import demo_text  # noqa: E402
import scenes  # noqa: E402

ROOT = os.path.join(HERE, "..")
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


# ---------------------------------------------------------------- onnxruntime pipeline

def resize_bilinear(img, height, width):
    """float HxWxC, half-pixel centres, no antialiasing (torch's bilinear, align_corners=False)."""
    h, w = img.shape[:2]

    def axis(n_out, n_in):
        x = (np.arange(n_out) + 0.5) * n_in / n_out - 0.5
        x = np.clip(x, 0, None)
        i0 = np.minimum(np.floor(x).astype(int), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        return i0, i1, (x - i0).astype(np.float32)

    y0, y1, fy = axis(height, h)
    x0, x1, fx = axis(width, w)
    top = img[y0][:, x0] * (1 - fx)[None, :, None] + img[y0][:, x1] * fx[None, :, None]
    bot = img[y1][:, x0] * (1 - fx)[None, :, None] + img[y1][:, x1] * fx[None, :, None]
    return top * (1 - fy)[:, None, None] + bot * fy[:, None, None]


def box_iou(a, b):
    """IoU matrix of xyxy boxes a [N,4], b [M,4]."""
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.clip(rb - lt, 0, None).prod(-1)
    area_a = (a[:, 2:] - a[:, :2]).prod(-1)
    area_b = (b[:, 2:] - b[:, :2]).prod(-1)
    return inter / np.maximum(area_a[:, None] + area_b[None] - inter, 1e-9)


def model_metadata(model):
    import onnx

    return {p.key: p.value for p in onnx.load(model, load_external_data=False).metadata_props}


class OrtDetector:
    def __init__(self, model, vocab, threads=2):
        import onnxruntime as ort

        meta = model_metadata(model)
        self.short = int(meta.get("vlrt.short_side", 800))
        self.long = int(meta.get("vlrt.max_side", 1333))
        self.box_threshold = float(meta.get("vlrt.box_threshold", 0.35))
        self.text_threshold = float(meta.get("vlrt.text_threshold", 0.25))
        self.nms = float(meta.get("vlrt.nms", 0))
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        self.vocab = demo_text.load_vocab(vocab)

    def preprocess(self, img):
        h, w = img.shape[:2]
        scale = min(self.short / min(h, w), self.long / max(h, w))
        nh, nw = int(round(h * scale)), int(round(w * scale))
        x = resize_bilinear(img.astype(np.float32) / 255.0, nh, nw)
        x = (x - MEAN) / STD
        return np.ascontiguousarray(x.transpose(2, 0, 1)[None], dtype=np.float32)

    def feeds(self, img, caption):
        """The encoded caption and the model's inputs for one image."""
        enc = demo_text.encode(caption, self.vocab)
        feeds = demo_text.batch([enc], self.vocab)
        feeds["img"] = self.preprocess(img)
        return enc, feeds

    def raw(self, img, caption):
        enc, feeds = self.feeds(img, caption)
        logits, boxes = self.session.run(["logits", "boxes"], feeds)
        return enc, logits[0], boxes[0]

    def detect(self, img, caption):
        enc, logits, boxes = self.raw(img, caption)
        return postprocess(logits, boxes, enc["phrases"], img.shape[1], img.shape[0],
                           self.box_threshold, self.text_threshold, self.nms)


def postprocess(logits, boxes, phrases, width, height, box_threshold, text_threshold, nms):
    """GroundingDINO's: sigmoid; a query is kept when its best token scores above box_threshold;
    its label is the phrase whose tokens score above text_threshold (the best such phrase when
    several do; none: dropped); boxes cx,cy,w,h -> pixel xyxy clipped to the image; then
    per-label NMS."""
    probs = 1.0 / (1.0 + np.exp(-np.clip(logits.astype(np.float64), -60, 60)))
    best = probs.max(-1)
    dets = []
    for q in np.flatnonzero(best > box_threshold):
        label, label_score = None, -1.0
        for text, b, e in phrases:
            s = probs[q, b:e]
            if (s > text_threshold).any() and s.max() > label_score:
                label, label_score = text, float(s.max())
        if label is None:
            continue
        cx, cy, w, h = boxes[q]
        box = np.clip([(cx - w / 2) * width, (cy - h / 2) * height, (cx + w / 2) * width, (cy + h / 2) * height],
                      0, [width, height, width, height])
        dets.append({"label": label, "score": float(best[q]), "box": [float(v) for v in box]})
    dets.sort(key=lambda d: -d["score"])
    if nms > 0:
        kept = []
        for d in dets:
            same = [k for k in kept if k["label"] == d["label"]]
            if not same or box_iou(np.array([d["box"]]), np.array([k["box"] for k in same])).max() <= nms:
                kept.append(d)
        dets = kept
    return dets


# ---------------------------------------------------------------- vlrt backends

def run_vlrt_detect(vlrt, model, vocab, path, caption, out_json, threshold, precision):
    subprocess.run([vlrt, "detect", path, "--model", model, "--vocab", vocab, "--prompt", caption,
                    "--box-threshold", str(threshold), "--text-threshold", str(threshold),
                    "--precision", precision, "--json", out_json], check=True, stdout=subprocess.DEVNULL)
    with open(out_json) as f:
        return json.load(f)["detections"]


def run_vlrt_label(vlrt, model, vocab, image_dir, caption, out_dir, threshold, precision):
    subprocess.run([vlrt, "label", image_dir, "--model", model, "--vocab", vocab, "--prompt", caption,
                    "--box-threshold", str(threshold), "--text-threshold", str(threshold),
                    "--precision", precision, "--format", "coco", "--out", out_dir], check=True,
                   stdout=subprocess.DEVNULL)
    found = [os.path.join(d, f) for d, _, fs in os.walk(out_dir) for f in fs if f.endswith(".json")]
    result = {}
    for path in found:
        with open(path) as f:
            coco = json.load(f)
        if "images" not in coco or "annotations" not in coco:
            continue
        names = {c["id"]: c["name"] for c in coco.get("categories", [])}
        files = {i["id"]: os.path.basename(i["file_name"]) for i in coco["images"]}
        for fname in files.values():
            result.setdefault(fname, [])
        for a in coco["annotations"]:
            x, y, w, h = a["bbox"]
            label = a.get("label") or names.get(a.get("category_id"), "")
            result[files[a["image_id"]]].append(
                {"label": label, "score": float(a.get("score", 1.0)), "box": [x, y, x + w, y + h]})
    return result


# ---------------------------------------------------------------- metrics

def average_precision(dets, gts, iou_threshold):
    """dets: [(image, score, box)], gts: {image: [box]} for one class; 101-point AP."""
    n_gt = sum(len(v) for v in gts.values())
    if n_gt == 0:
        return None
    dets = sorted(dets, key=lambda d: -d[1])
    used = {k: np.zeros(len(v), dtype=bool) for k, v in gts.items()}
    tp = np.zeros(len(dets))
    for i, (image, _, box) in enumerate(dets):
        g = gts.get(image, [])
        if not len(g):
            continue
        ious = box_iou(np.array([box]), np.array(g))[0]
        ious[used[image]] = -1
        j = int(np.argmax(ious))
        if ious[j] >= iou_threshold:
            used[image][j] = True
            tp[i] = 1
    ctp, cfp = np.cumsum(tp), np.cumsum(1 - tp)
    recall = ctp / n_gt
    precision = ctp / np.maximum(ctp + cfp, 1e-9)
    for i in range(len(precision) - 2, -1, -1):
        precision[i] = max(precision[i], precision[i + 1])
    ap = 0.0
    for r in np.linspace(0, 1, 101):
        k = np.searchsorted(recall, r, side="left")
        ap += precision[k] if k < len(precision) else 0.0
    return ap / 101


def evaluate(anns, detections, absent_threshold):
    """anns: {image: annotation}; detections: {image: [det]} -> (AP50, AP50:95, absent_ok);
    absent_ok counts only detections scoring above absent_threshold."""
    classes = sorted({o["label"] for a in anns.values() for o in a["objects"]})
    aps = {t: [] for t in np.arange(0.5, 0.96, 0.05).round(2)}
    for c in classes:
        prompted = [k for k, a in anns.items() if c in a["present"] or c in a["absent"]]
        gts = {k: [o["box"] for o in anns[k]["objects"] if o["label"] == c] for k in prompted}
        dets = [(k, d["score"], d["box"]) for k in prompted for d in detections.get(k, []) if d["label"] == c]
        for t in aps:
            ap = average_precision(dets, gts, t)
            if ap is not None:
                aps[t].append(ap)
    ap50 = float(np.mean(aps[0.5]))
    ap5095 = float(np.mean([np.mean(v) for v in aps.values()]))
    with_absent = [k for k, a in anns.items() if a["absent"]]
    ok = [not any(d["label"] in anns[k]["absent"] and d["score"] > absent_threshold for d in detections.get(k, []))
          for k in with_absent]
    return ap50, ap5095, float(np.mean(ok)) if ok else 1.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--backend", choices=["label", "detect", "onnxruntime"], default="label")
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo", "model.onnx"))
    ap.add_argument("--vocab", default=None, help="default: vocab.txt beside the model")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32",
                    help="vlrt's --precision (bf16: products in bfloat16 where the CPU has AVX512-BF16)")
    ap.add_argument("--threads", type=int, default=2, help="onnxruntime threads")
    ap.add_argument("--box-threshold", type=float,
                    help="the threshold absent_ok is judged at (default: the model's, vlrt.box_threshold)")
    ap.add_argument("--ap-threshold", type=float, default=0.05,
                    help="box and text threshold of the detections AP is computed from (COCO practice: "
                         "all but the weakest detections; default 0.05)")
    ap.add_argument("--keep", help="also keep the scenes and detections in this folder")
    args = ap.parse_args()
    vocab = args.vocab or os.path.join(os.path.dirname(args.model), "vocab.txt")
    if args.seed == 1234:
        print("warning: seed 1234 is the training seed; use another one for held-out scenes")

    work = args.keep or tempfile.mkdtemp(prefix="vlrt_eval_")
    os.makedirs(work, exist_ok=True)
    anns, detections = {}, {}
    default_threshold = args.box_threshold or float(model_metadata(args.model).get("vlrt.box_threshold", 0.35))
    if args.ap_threshold > default_threshold:
        sys.exit(f"--ap-threshold {args.ap_threshold} is above the box threshold {default_threshold}")
    detector = OrtDetector(args.model, vocab, args.threads) if args.backend == "onnxruntime" else None
    if detector is not None:
        detector.box_threshold = detector.text_threshold = args.ap_threshold
    start = time.time()
    for i in range(args.count):
        name = f"scene_{args.seed}_{i:05d}"
        img, ann = scenes.make_scene(args.seed, i)
        anns[name + ".png"] = ann
        if detector is not None:
            detections[name + ".png"] = detector.detect(img, ann["caption"])
        else:
            sub = os.path.join(work, name)
            scenes.save_scene(sub, name, img, ann)
            path = os.path.join(sub, name + ".png")
            if args.backend == "detect":
                detections[name + ".png"] = run_vlrt_detect(args.vlrt, args.model, vocab, path, ann["caption"],
                                                            os.path.join(sub, "detections.json"), args.ap_threshold,
                                                            args.precision)
            else:
                os.remove(os.path.join(sub, name + ".json"))
                got = run_vlrt_label(args.vlrt, args.model, vocab, sub, ann["caption"], os.path.join(sub, "out"),
                                     args.ap_threshold, args.precision)
                detections[name + ".png"] = got.get(name + ".png", [])
        if (i + 1) % 50 == 0 or i + 1 == args.count:
            el = time.time() - start
            print(f"{i + 1}/{args.count} images, {el:.0f} s, eta {el / (i + 1) * (args.count - i - 1):.0f} s",
                  file=sys.stderr, flush=True)
    if args.keep:
        with open(os.path.join(work, "detections.json"), "w") as f:
            json.dump({"annotations": anns, "detections": detections}, f)
    else:
        shutil.rmtree(work, ignore_errors=True)
    ap50, ap5095, absent_ok = evaluate(anns, detections, default_threshold)
    confident = {k: [d for d in v if d["score"] > default_threshold] for k, v in detections.items()}
    ap50_d, ap5095_d, _ = evaluate(anns, confident, default_threshold)
    n_obj = sum(len(a["objects"]) for a in anns.values())
    print(f"{args.count} scenes (seed {args.seed}), {n_obj} objects, backend {args.backend}")
    print(f"from the detections above the box threshold {default_threshold} only: "
          f"AP50={ap50_d:.3f} AP50:95={ap5095_d:.3f}")
    print(f"AP50={ap50:.3f} AP50:95={ap5095:.3f} absent_ok={absent_ok:.3f}")


if __name__ == "__main__":
    main()
