#!/usr/bin/env python3
"""Accuracy of the demo mask decoder (models/demo-sam) on generated scenes (tools/scenes.py,
which knows every object's visible pixels): COCO mask AP50 and AP50:95 (pycocotools' COCOeval,
iouType "segm", a category per "colour shape" label) in two ways:

  boxes   each object's ground-truth box the prompt, through `vlrt segment --box ... --json`;
          the score of a mask is its predicted IoU. Also the mean mask IoU and the share >= 0.5.
  detect  the scene's caption the prompt of `vlrt detect --masks --json` (the demo detector's
          boxes, then their masks); the score is the detection's.

Training scenes use seed 1234; any other seed is held out. The last line printed is exactly
`mask_AP50(boxes)=0.xxx mask_AP50(detect)=0.xxx`.

    python3 tools/eval_demo_sam.py --seed 777 --count 300
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

ROOT = os.path.join(HERE, "..")
CATEGORY = {label: i + 1 for i, label in enumerate(scenes.LABELS)}


def encode(mask):
    rle = mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))
    rle["counts"] = rle["counts"].decode("ascii")
    return rle


def compressed(seg):
    """vlrt's uncompressed RLE {size: [h, w], counts: [...]} -> pycocotools' compressed RLE."""
    h, w = seg["size"]
    return mask_utils.frPyObjects(seg, h, w)


def coco_ap(images, truths, results):
    """(AP50:95, AP50) of `results` against `truths` (pycocotools, iouType segm)."""
    gt = {"images": images, "categories": [{"id": i, "name": l} for l, i in CATEGORY.items()],
          "annotations": [dict(t, id=k + 1, iscrowd=0) for k, t in enumerate(truths)]}
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
        if not results:
            return 0.0, 0.0
        dt = coco.loadRes(results)
        e = COCOeval(coco, dt, iouType="segm")
        e.evaluate()
        e.accumulate()
        e.summarize()
    return float(e.stats[0]), float(e.stats[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--sam", default=os.path.join(ROOT, "models", "demo-sam"))
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    a = ap.parse_args()
    images, truths, by_box, by_detect, ious = [], [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.count):
            img, ann, masks = scenes.make_scene(a.seed, i, masks=True)
            path = os.path.join(tmp, f"scene_{i:05d}.png")
            scenes.write_png(path, img)
            h, w = img.shape[:2]
            images.append({"id": i, "width": w, "height": h})
            objects = [(o, m) for o, m in zip(ann["objects"], masks) if m.any()]
            for o, m in objects:
                truths.append({"image_id": i, "category_id": CATEGORY[o["label"]], "segmentation": encode(m),
                               "area": int(m.sum()), "bbox": [o["box"][0], o["box"][1], o["box"][2] - o["box"][0],
                                                              o["box"][3] - o["box"][1]]})
            out = os.path.join(tmp, "out.json")
            boxes = [arg for o, _ in objects for arg in ("--box", ",".join(str(v) for v in o["box"]))]
            subprocess.run([a.vlrt, "segment", path, "--model", a.sam, "--json", out, *boxes], check=True,
                           stdout=subprocess.DEVNULL)
            with open(out) as f:
                segs = json.load(f)["masks"]
            for (o, m), s in zip(objects, segs):
                rle = compressed(s["segmentation"])
                by_box.append({"image_id": i, "category_id": CATEGORY[o["label"]], "segmentation": rle,
                               "score": float(s["iou_prediction"])})
                ious.append(float(mask_utils.iou([rle], [encode(m)], [0])[0][0]))
            subprocess.run([a.vlrt, "detect", path, "--prompt", ann["caption"], "--masks", a.sam, "--json", out],
                           check=True, stdout=subprocess.DEVNULL)
            with open(out) as f:
                for d in json.load(f)["detections"]:
                    if d["label"] in CATEGORY:
                        by_detect.append({"image_id": i, "category_id": CATEGORY[d["label"]],
                                          "segmentation": compressed(d["segmentation"]), "score": float(d["score"])})
            if (i + 1) % 50 == 0:
                print(f"{i + 1}/{a.count} scenes", flush=True)
    ious = np.array(ious)
    box_ap, box_ap50 = coco_ap(images, truths, by_box)
    det_ap, det_ap50 = coco_ap(images, truths, by_detect)
    print(f"{a.count} scenes of seed {a.seed}, {len(truths)} objects")
    print(f"ground-truth boxes: mean mask IoU {ious.mean():.3f}, IoU >= 0.5 for {np.mean(ious >= 0.5):.3f}, "
          f"IoU >= 0.75 for {np.mean(ious >= 0.75):.3f}; mask AP50:95 {box_ap:.3f}")
    print(f"detector's boxes ({len(by_detect)} detections): mask AP50:95 {det_ap:.3f}")
    print(f"mask_AP50(boxes)={box_ap50:.3f} mask_AP50(detect)={det_ap50:.3f}")


if __name__ == "__main__":
    main()
