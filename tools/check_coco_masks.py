#!/usr/bin/env python3
"""Checks `vlrt label --masks` output with the reference tools of each format.

COCO (annotations.json): loads in pycocotools, every annotation's segmentation decodes to a
mask of its image's size whose area is the annotation's "area", and COCOeval with
iouType='segm' runs on the annotations scored against themselves (AP 1.0 wherever a category
has annotations). LabelMe (*.json): polygon shapes with >= 3 points and a score. YOLO-seg
(labels/*.txt): a class id then an even count (>= 6) of floats in [0, 1].

  python3 tools/check_coco_masks.py --coco OUT/annotations.json
  python3 tools/check_coco_masks.py --labelme OUT_DIR --yolo OUT_DIR/labels
"""
import argparse
import contextlib
import io
import json
import pathlib
import sys


def check_coco(path):
    import numpy as np
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    with contextlib.redirect_stdout(io.StringIO()):
        gt = COCO(str(path))
    anns = gt.loadAnns(gt.getAnnIds())
    kinds = set()
    for a in anns:
        img = gt.imgs[a["image_id"]]
        m = gt.annToMask(a)
        assert m.shape == (img["height"], img["width"]), (a["id"], m.shape)
        seg = a["segmentation"]
        kinds.add("rle" if isinstance(seg, dict) else "polygon")
        if isinstance(seg, dict):
            assert int(m.sum()) == a["area"], (a["id"], int(m.sum()), a["area"])
    # Results are read as compressed RLE only: the annotations' masks re-encoded.
    results = [dict(image_id=a["image_id"], category_id=a["category_id"], segmentation=gt.annToRLE(a),
                    score=a["score"]) for a in anns]
    with contextlib.redirect_stdout(io.StringIO()):
        dt = gt.loadRes(results) if results else None
        if dt is not None:
            ev = COCOeval(gt, dt, iouType="segm")
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
    ap = float(ev.stats[0]) if dt is not None else float("nan")
    print(f"coco: {len(gt.imgs)} images, {len(anns)} annotations ({', '.join(sorted(kinds))}) load in "
          f"pycocotools; COCOeval segm against itself: AP {ap:.3f}")
    if anns and all(a["area"] > 0 for a in anns):  # an empty mask matches nothing, itself included
        assert np.isclose(ap, 1.0), ap


def check_labelme(folder):
    files = [p for p in pathlib.Path(folder).rglob("*.json") if ".vlrt-label" not in p.parts
             and p.name != "annotations.json"]
    shapes = 0
    for f in files:
        j = json.loads(f.read_text())
        for s in j["shapes"]:
            assert s["shape_type"] == "polygon", (f, s["shape_type"])
            assert len(s["points"]) >= 3 and all(len(p) == 2 for p in s["points"]), f
            assert 0 <= s["score"] <= 1, f
            for x, y in s["points"]:
                assert 0 <= x <= j["imageWidth"] and 0 <= y <= j["imageHeight"], (f, x, y)
            shapes += 1
    print(f"labelme: {len(files)} files, {shapes} polygon shapes with points and scores")


def check_yolo(folder):
    lines = 0
    files = list(pathlib.Path(folder).rglob("*.txt"))
    for f in files:
        for line in f.read_text().splitlines():
            fields = line.split()
            int(fields[0])
            xy = [float(v) for v in fields[1:]]
            assert len(xy) % 2 == 0 and len(xy) >= 6, (f, line)
            assert all(0 <= v <= 1 for v in xy), (f, line)
            lines += 1
    print(f"yolo-seg: {len(files)} files, {lines} lines of a class id and polygon x y pairs in [0,1]")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--coco", help="annotations.json of vlrt label --format coco --masks")
    ap.add_argument("--labelme", help="output folder of vlrt label --format labelme --masks")
    ap.add_argument("--yolo", help="labels folder of vlrt label --format yolo --masks")
    args = ap.parse_args()
    if not (args.coco or args.labelme or args.yolo):
        ap.error("give --coco, --labelme or --yolo")
    if args.coco:
        check_coco(args.coco)
    if args.labelme:
        check_labelme(args.labelme)
    if args.yolo:
        check_yolo(args.yolo)


if __name__ == "__main__":
    sys.exit(main())
