#!/usr/bin/env python3
"""Training data of the demo tagger and the demo mask decoder: generated scenes (tools/scenes.py)
in the frames the two models see, made in parallel and cached in one .npz per (seed, count):

  tag_images  uint8 [n, TAG_SIZE, TAG_SIZE, 3]  the scene resized to a square (RAM's transform)
  tag_labels  uint8 [n, 64]                     which of scenes.LABELS are in the scene
  sam_images  uint8 [n, SAM_SIZE, SAM_SIZE, 3]  longest side resized to SAM_SIZE, zero padding
  sam_sizes   int32 [n, 2]                      the resized (height, width)
  sam_labels  uint8 [n, SAM_SIZE, SAM_SIZE]     object k+1's visible pixels (0: background)
  sam_boxes   float32 [m, 6]                    scene, object k+1, box x1 y1 x2 y2 in that frame
  box_labels  int32 [m]                         the index in scenes.LABELS of each sam_boxes row's object

Both resizes are PIL's bilinear filter, as vlrt's image pipelines resize.
"""
import os
import sys
from multiprocessing import Pool

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402

TAG_SIZE = 256
SAM_SIZE = 256
LABEL_INDEX = {l: i for i, l in enumerate(scenes.LABELS)}


def sam_resized_size(width, height, size=SAM_SIZE):
    """segment-anything's ResizeLongestSide.get_preprocess_shape; returns (width, height)."""
    scale = size / max(width, height)
    return int(width * scale + 0.5), int(height * scale + 0.5)


def _one(args):
    seed, index = args
    img, ann, masks = scenes.make_scene(seed, index, masks=True)
    h, w = img.shape[:2]
    pil = Image.fromarray(img)
    tag = np.asarray(pil.resize((TAG_SIZE, TAG_SIZE), Image.BILINEAR))
    labels = np.zeros(len(scenes.LABELS), np.uint8)
    for o in ann["objects"]:
        labels[LABEL_INDEX[o["label"]]] = 1
    rw, rh = sam_resized_size(w, h)
    sam = np.zeros((SAM_SIZE, SAM_SIZE, 3), np.uint8)
    sam[:rh, :rw] = np.asarray(pil.resize((rw, rh), Image.BILINEAR))
    # Each object's coverage in the resized frame; a pixel goes to the object covering most of it.
    soft = [np.zeros((rh, rw), np.float32)]
    for m in masks:
        soft.append(np.asarray(Image.fromarray(m.astype(np.uint8) * 255).resize((rw, rh), Image.BILINEAR),
                               np.float32) / 255.0)
    soft[0][:] = 0.5
    label_map = np.zeros((SAM_SIZE, SAM_SIZE), np.uint8)
    label_map[:rh, :rw] = np.argmax(np.stack(soft), axis=0)
    sx, sy = rw / w, rh / h
    boxes = [[0, k + 1, o["box"][0] * sx, o["box"][1] * sy, o["box"][2] * sx, o["box"][3] * sy,
              LABEL_INDEX[o["label"]]] for k, o in enumerate(ann["objects"]) if masks[k].any()]
    return tag, labels, sam, (rh, rw), label_map, boxes


def scene_data(seed, count, cache_dir, processes=2):
    """The arrays above for scenes 0..count-1 of `seed`, from cache_dir when made before."""
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, f"demo_data_v2_{seed}_{count}_{TAG_SIZE}_{SAM_SIZE}.npz")
    if os.path.exists(path):
        return dict(np.load(path))
    items = []
    with Pool(processes) as pool:
        for i, item in enumerate(pool.imap(_one, [(seed, i) for i in range(count)], chunksize=8)):
            items.append(item)
            if (i + 1) % 200 == 0:
                print(f"scenes {i + 1}/{count}", flush=True)
    boxes = []
    for n, item in enumerate(items):
        for b in item[5]:
            boxes.append([n] + b[1:6] + [b[6]])
    data = {"tag_images": np.stack([t[0] for t in items]), "tag_labels": np.stack([t[1] for t in items]),
            "sam_images": np.stack([t[2] for t in items]),
            "sam_sizes": np.array([t[3] for t in items], np.int32),
            "sam_labels": np.stack([t[4] for t in items]),
            "sam_boxes": np.array([b[:6] for b in boxes], np.float32).reshape(-1, 6),
            "box_labels": np.array([b[6] for b in boxes], np.int32)}
    np.savez(path + ".part.npz", **data)
    os.replace(path + ".part.npz", path)
    return data


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="make the cached training data")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--cache", required=True)
    a = ap.parse_args()
    d = scene_data(a.seed, a.count, a.cache)
    print({k: v.shape for k, v in d.items()})
