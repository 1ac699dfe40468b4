"""Labelling on a Ray cluster: vlrt's detector as a class-based UDF for
ray.data.Dataset.map_batches (one detector per actor, loaded once), and the COCO file that
`vlrt label --format coco` writes, made from its rows.

    import ray, vlrt.ray
    ds = ray.data.from_items([{"path": p} for p in paths])  # or read_images(d, include_paths=True)
    rows = ds.map_batches(vlrt.ray.LabelImages, fn_constructor_kwargs={"prompt": "person . car ."},
                          concurrency=2, batch_size=8).take_all()
    coco = vlrt.ray.coco_json(rows, root=d)                 # what `vlrt label d` writes

A batch holds a "path" column (image files) or an "image" column (HxWx3 uint8 RGB arrays, as
ray.data.read_images makes them). Each output row keeps the input's columns but "image" and
adds "record" (the JSON text `vlrt label` keeps per image under OUT/.vlrt-label/records:
width, height and detections with label, class, score and box), "categories" (a JSON list of
the class names that "class" indexes) and "error" (why the image could not be labelled; ""
when it was). This module needs no Ray itself: Ray only calls it.
"""

import json
import os
from typing import Dict, Iterable, List, Optional

import numpy as np

from . import Detector, Error

__all__ = ["LabelImages", "record_json", "coco_json"]


def record_json(detections, categories: List[str]) -> str:
    """One image's record as `vlrt label` writes it: compact JSON, keys sorted. A detection's
    "class" indexes `categories`; -1 when no phrase passed the text threshold."""
    dets = []
    for box, score, cls, name in zip(detections.xyxy, detections.confidence, detections.class_id,
                                     detections.class_name):
        dets.append({"box": [float(v) for v in box], "class": int(cls), "label": name, "score": float(score)})
    record = {"detections": dets, "height": int(detections.height), "width": int(detections.width)}
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class LabelImages:
    """The UDF: built once per actor with the detector's settings, then called per batch.
    Give `prompt` ("phrase . phrase .") or `classes` (["name", ...]) as for Detector.predict;
    `threads` per actor (0: all cores; give cores / concurrency when actors share a machine)."""

    def __init__(self, model: Optional[str] = None, vocab: Optional[str] = None, *, prompt: Optional[str] = None,
                 classes: Optional[List[str]] = None, box_threshold: Optional[float] = None,
                 text_threshold: Optional[float] = None, devices=("cpu",), threads: int = 0):
        if (prompt is None) == (classes is None):
            raise ValueError("LabelImages: give either prompt='person . car .' or classes=['person', 'car']")
        self.detector = Detector(model, vocab, devices=devices, threads=threads)
        self.query = {"prompt": prompt, "classes": list(classes) if classes is not None else None,
                      "box_threshold": box_threshold, "text_threshold": text_threshold}
        self.categories = None  # the prompt's phrases as the model reads them, known after the first image

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        if "image" in batch:
            images = batch["image"]
        elif "path" in batch:
            images = [str(p) for p in batch["path"]]
        else:
            raise ValueError(f"LabelImages: a batch needs a 'path' or an 'image' column, got {sorted(batch)}")
        records, errors = [], []
        for image in images:
            try:
                d = self.detector.predict(image, **self.query)
            except Error as e:  # one unreadable image must not end the job, as with `vlrt label`
                records.append("")
                errors.append(str(e))
                continue
            if self.categories is None:
                self.categories = self.query["classes"] or d.phrases
            records.append(record_json(d, self.categories))
            errors.append("")
        out = {k: v for k, v in batch.items() if k != "image"}
        n = len(records)
        out["record"] = np.array(records, dtype=object)
        out["categories"] = np.array([json.dumps(self.categories, ensure_ascii=False)] * n, dtype=object)
        out["error"] = np.array(errors, dtype=object)
        return out


def coco_json(rows: Iterable[dict], root: str = "") -> dict:
    """The COCO file `vlrt label ROOT --format coco` writes, from LabelImages rows (each with a
    "path"): images sorted by their path relative to `root` and numbered from 1 in that order
    (an image with an error keeps its number, as in `vlrt label`), annotations numbered in
    image order, category ids the class index + 1, detections without a class left out.
    json.dump(coco, f, indent=1, sort_keys=True, ensure_ascii=False) writes the same JSON (a
    float exactly between two shortest decimal forms may end in the other digit: same value)."""
    rows = list(rows)
    if not rows:
        raise ValueError("coco_json: no rows")
    if any("path" not in r for r in rows):
        raise ValueError("coco_json: every row needs a 'path' (the image's file name in the COCO file)")
    names = {r["categories"] for r in rows if not r["error"]}
    if len(names) > 1:
        raise ValueError(f"coco_json: the rows were labelled with different classes: {sorted(names)}")
    categories = json.loads(names.pop()) if names else []
    coco = {"images": [], "annotations": [],
            "categories": [{"id": c + 1, "name": n} for c, n in enumerate(categories)]}

    def file_name(row):
        path = str(row["path"])
        return os.path.relpath(path, root).replace(os.sep, "/") if root else path

    annotation_id = 1
    for image_id, (name, row) in enumerate(sorted(((file_name(r), r) for r in rows), key=lambda t: t[0]), 1):
        if row["error"]:
            continue
        record = json.loads(row["record"])
        coco["images"].append({"file_name": name, "height": record["height"], "id": image_id,
                               "width": record["width"]})
        for d in record["detections"]:
            if d["class"] < 0:
                continue
            x1, y1, x2, y2 = d["box"]
            coco["annotations"].append({"area": (x2 - x1) * (y2 - y1), "bbox": [x1, y1, x2 - x1, y2 - y1],
                                        "category_id": d["class"] + 1, "id": annotation_id, "image_id": image_id,
                                        "iscrowd": 0, "score": d["score"]})
            annotation_id += 1
    return coco
