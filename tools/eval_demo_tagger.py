#!/usr/bin/env python3
"""Accuracy of the demo tagger (models/demo-tagger) on generated scenes (tools/scenes.py),
every image through `vlrt tag --json` with the tag list's thresholds: micro precision, recall
and F1 over the 64 "colour shape" tags (a scene's truth: the labels of the objects drawn in it),
and the share of scenes whose tags are exactly right. Training scenes use seed 1234 and the
threshold was chosen on seed 555; any other seed is held out. The last line printed is exactly
`tag_F1=0.xxx precision=0.xxx recall=0.xxx exact=0.xxx`.

    python3 tools/eval_demo_tagger.py --seed 777 --count 300
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import scenes  # noqa: E402

ROOT = os.path.join(HERE, "..")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=777)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo-tagger"))
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--batch", type=int, default=50, help="images per `vlrt tag` run")
    a = ap.parse_args()
    tp = fp = fn = exact = 0
    missed, extra = Counter(), Counter()
    with tempfile.TemporaryDirectory() as tmp:
        truth = {}
        for i in range(a.count):
            img, ann = scenes.make_scene(a.seed, i)
            path = os.path.join(tmp, f"scene_{i:05d}.png")
            scenes.write_png(path, img)
            truth[path] = set(ann["present"])
        paths = sorted(truth)
        for begin in range(0, len(paths), a.batch):
            out = os.path.join(tmp, "tags.json")
            chunk = paths[begin:begin + a.batch]
            subprocess.run([a.vlrt, "tag", "--model", a.model, "--json", out, *chunk], check=True,
                           stdout=subprocess.DEVNULL)
            with open(out) as f:
                for image in json.load(f)["images"]:
                    found = {t["name"] for t in image["tags"]}
                    want = truth[image["image"]]
                    tp += len(found & want)
                    fp += len(found - want)
                    fn += len(want - found)
                    exact += found == want
                    missed.update(want - found)
                    extra.update(found - want)
    precision = tp / max(1, tp + fp)
    recall = tp / max(1, tp + fn)
    f1 = 2 * precision * recall / max(1e-9, precision + recall)
    print(f"{a.count} scenes of seed {a.seed}: {tp + fn} tags present, {tp} found, {fp} extra, {fn} missed")
    print("most missed:", ", ".join(f"{k} {v}" for k, v in missed.most_common(5)) or "none")
    print("most extra: ", ", ".join(f"{k} {v}" for k, v in extra.most_common(5)) or "none")
    print(f"tag_F1={f1:.3f} precision={precision:.3f} recall={recall:.3f} exact={exact / a.count:.3f}")


if __name__ == "__main__":
    main()
