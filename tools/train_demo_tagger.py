#!/usr/bin/python3
"""Trains the demo tagger (models/demo-tagger): which of the 64 "colour shape" labels of
tools/scenes.py are in an image, with the RAM contract vlrt's `tag` pipeline runs: image float32
[B,3,256,256] (RAM's transform: PIL bilinear resize to a square, ImageNet mean and std) -> logits
[B,64], tags.json beside it.

The model is a small CNN whose last layer scores every label at every cell of a stride-16 map;
an image's logit for a label is a smooth maximum over the cells, so colour and shape have to be found
at the same place. Besides the image's labels, the cell holding each object's centre is trained
to score the object's label (focal loss). Training scenes are seed 1234 of tools/scenes.py; the tag threshold is chosen
on seed 555 (best micro F1), so any other seed is held out.

    nice /usr/bin/python3 tools/train_demo_tagger.py --threads 2        # ~50 min on 2 cores
    nice /usr/bin/python3 tools/train_demo_tagger.py --steps 20 --out /tmp/t   # smoke test
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import demo_data  # noqa: E402
import scenes  # noqa: E402
from export_ram_plus import append_metadata  # noqa: E402

MEAN = torch.tensor([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
TRAIN_SEED, VALIDATION_SEED = 1234, 555


def conv_bn(cin, cout, stride=1, kernel=3):
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, kernel // 2, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU(inplace=True))


class DemoTagger(nn.Module):
    def __init__(self, labels=len(scenes.LABELS)):
        super().__init__()
        self.features = nn.Sequential(conv_bn(3, 24, 2), conv_bn(24, 32, 2), conv_bn(32, 48), conv_bn(48, 64, 2),
                                      conv_bn(64, 64), conv_bn(64, 128, 2), conv_bn(128, 128), conv_bn(128, 128))
        self.scores = nn.Conv2d(128, labels, 1)
        nn.init.constant_(self.scores.bias, -4.6)  # a probability of 0.01 at every cell

    def cell_scores(self, image):
        return self.scores(self.features(image))  # [B,labels,16,16]

    @staticmethod
    def pool(cells):
        """[B,labels,h,w] -> [B,labels]: a smooth maximum over the cells (log-mean-exp, sharpness
        4): near the maximum, but every cell gets some gradient."""
        s = cells.flatten(2)
        m = torch.amax(s, dim=2, keepdim=True)
        return (m + torch.log(torch.mean(torch.exp(4.0 * (s - m)), dim=2, keepdim=True)) / 4.0)[..., 0]

    def forward(self, image):
        return self.pool(self.cell_scores(image))


def centre_targets(data, cells=demo_data.TAG_SIZE // 16):
    """[n,64,16,16]: 1 at the cell holding each object's box centre for the object's label, in
    the tagger's square frame (the boxes are given in the SAM frame: longest side 256, aspect
    kept)."""
    t = np.zeros((len(data["tag_images"]), len(scenes.LABELS), cells, cells), np.float32)
    sizes = data["sam_sizes"]
    for (scene, _, x1, y1, x2, y2), label in zip(data["sam_boxes"], data["box_labels"]):
        scene = int(scene)
        rh, rw = sizes[scene]
        cx = (x1 + x2) / 2 * demo_data.TAG_SIZE / rw
        cy = (y1 + y2) / 2 * demo_data.TAG_SIZE / rh
        t[scene, int(label), min(cells - 1, int(cy // 16)), min(cells - 1, int(cx // 16))] = 1
    return t


def focal_loss(logits, target, alpha=0.25, gamma=2.0):
    p = torch.sigmoid(logits)
    ce = nn.functional.binary_cross_entropy_with_logits(logits, target, reduction="none")
    pt = p * target + (1 - p) * (1 - target)
    w = alpha * target + (1 - alpha) * (1 - target)
    return (w * (1 - pt) ** gamma * ce).sum() / max(1.0, float(target.sum()))


def normalize(u8):
    """uint8 [n,H,W,3] -> RAM's input [n,3,H,W]."""
    x = torch.from_numpy(u8).permute(0, 3, 1, 2).float() / 255.0
    return (x - MEAN) / STD


def predict(model, images, batch=64):
    model.eval()
    out = []
    with torch.no_grad():
        for i in range(0, len(images), batch):
            out.append(torch.sigmoid(model(normalize(images[i:i + batch]))))
    model.train()
    return torch.cat(out).numpy()


def micro_f1(probs, labels, threshold):
    pred = probs > threshold
    tp = np.count_nonzero(pred & (labels > 0))
    fp = np.count_nonzero(pred & (labels == 0))
    fn = np.count_nonzero(~pred & (labels > 0))
    p = tp / max(1, tp + fp)
    r = tp / max(1, tp + fn)
    return 2 * p * r / max(1e-9, p + r), p, r


def export(model, out_dir, threshold):
    model.eval()
    path = os.path.join(out_dir, "model.onnx")
    torch.onnx.export(model, torch.zeros(1, 3, demo_data.TAG_SIZE, demo_data.TAG_SIZE), path,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}}, opset_version=17,
                      do_constant_folding=True)
    append_metadata(path, {"vlrt.tag_output": "logits", "vlrt.threshold": f"{threshold:.2f}"})
    tags = {"tags": [{"name": l, "threshold": round(float(threshold), 2)} for l in scenes.LABELS]}
    with open(os.path.join(out_dir, "tags.json"), "w") as f:
        json.dump(tags, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "demo-tagger"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "out", "demo-data"), help="generated scenes")
    ap.add_argument("--scenes", type=int, default=6000)
    ap.add_argument("--steps", type=int, default=5000)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    os.makedirs(a.out, exist_ok=True)
    train = demo_data.scene_data(TRAIN_SEED, a.scenes, a.cache)
    val = demo_data.scene_data(VALIDATION_SEED, 200, a.cache)
    images, labels = train["tag_images"], torch.from_numpy(train["tag_labels"]).float()
    centres = torch.from_numpy(centre_targets(train))
    print(f"{int(centres.sum())} of {len(train['sam_boxes'])} objects with a centre target", flush=True)
    model = DemoTagger()
    print(f"{sum(p.numel() for p in model.parameters())} parameters, {len(images)} scenes", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=2e-3, weight_decay=1e-4)
    checkpoint = os.path.join(a.cache, "tagger_checkpoint.pt")
    step = 0
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        print(f"resumed at step {step}")
    rng = np.random.default_rng(step)
    t0 = time.time()
    loss_avg = None
    while step < a.steps:
        lr = 2e-3 * (min(1.0, (step + 1) / 50) * 0.5 * (1 + math.cos(math.pi * step / a.steps)))
        for g in opt.param_groups:
            g["lr"] = lr
        pick = rng.integers(0, len(images), a.batch)
        x = normalize(images[pick])
        flip = torch.from_numpy(rng.random(a.batch) < 0.5)
        x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        target = centres[pick]
        target = torch.where(flip[:, None, None, None], target.flip(-1), target)
        cells = model.cell_scores(x)
        loss = nn.functional.binary_cross_entropy_with_logits(model.pool(cells), labels[pick]) + focal_loss(cells, target)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        loss_avg = loss.item() if loss_avg is None else 0.95 * loss_avg + 0.05 * loss.item()
        if step % 25 == 0 or step == a.steps:
            el = time.time() - t0
            print(f"step {step}/{a.steps} loss {loss_avg:.4f} lr {lr:.5f} {el:.0f}s", flush=True)
        if step % 100 == 0 or step == a.steps:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, checkpoint)
            probs = predict(model, val["tag_images"])
            f1, p, r = micro_f1(probs, val["tag_labels"], 0.5)
            print(f"validation (seed {VALIDATION_SEED}) at 0.5: F1 {f1:.3f} P {p:.3f} R {r:.3f}", flush=True)
    probs = predict(model, val["tag_images"])
    best = max((micro_f1(probs, val["tag_labels"], t)[0], t) for t in np.arange(0.05, 0.91, 0.05))
    f1, p, r = micro_f1(probs, val["tag_labels"], best[1])
    print(f"threshold {best[1]:.2f} (best micro F1 on seed {VALIDATION_SEED}): F1 {f1:.3f} P {p:.3f} R {r:.3f}")
    export(model, a.out, best[1])
    print("wrote", a.out)


if __name__ == "__main__":
    main()
