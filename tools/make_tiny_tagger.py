#!/usr/bin/env python3
"""Tiny models of the tagging contract for vlrt's tests (tests/fixtures/tagging/), with
PyTorch's answers to compare with:

  tagger.onnx     image float32 [B,3,32,32] -> logits [B,5] (mean colour and a 4x4 average pool
                  through one Linear), metadata vlrt.tag_output = logits; tags.json beside it
                  (5 tags, per-tag thresholds, "zh" names)
  no_image.onnx   features float32 [B,8] -> logits [B,5]: not an image input
  tiny.png        a 50x40 image; pixels.npy: RAM's transform of it at 32x32 (torchvision
                  Resize((32, 32)) on PIL, ToTensor, ImageNet Normalize); probs.npy: sigmoid of
                  the tagger's logits on those pixels

Runs under Debian's /usr/bin/python3 (torch 1.13, torchvision):
    /usr/bin/python3 tools/make_tiny_tagger.py --out tests/fixtures/tagging
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402
from export_ram_plus import append_metadata, preprocess  # noqa: E402

SIZE = 32
TAGS = 5


class TinyTagger(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.fc = nn.Linear(3 * 16, TAGS)

    def forward(self, image):
        return self.fc(self.pool(image).flatten(1)) * 4.0


class NoImage(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, TAGS)

    def forward(self, features):
        return self.fc(features)


def export(model, dummy, path, input_name):
    torch.onnx.export(model, dummy, path, input_names=[input_name], output_names=["logits"],
                      dynamic_axes={input_name: {0: "batch"}, "logits": {0: "batch"}}, opset_version=17)
    append_metadata(path, {"vlrt.tag_output": "logits"})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(3)
    torch.set_grad_enabled(False)
    tagger = TinyTagger().eval()
    export(tagger, torch.zeros(2, 3, SIZE, SIZE), os.path.join(a.out, "tagger.onnx"), "image")
    export(NoImage().eval(), torch.zeros(2, 8), os.path.join(a.out, "no_image.onnx"), "features")
    tags = {"tags": [{"name": f"tag{i + 1}", "threshold": 0.5 if i % 2 else 0.6,
                      "names": {"zh": f"标签{i + 1}"}} for i in range(TAGS)]}
    with open(os.path.join(a.out, "tags.json"), "w", encoding="utf-8") as f:
        json.dump(tags, f, ensure_ascii=False, indent=1)
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (40, 50, 3), dtype=np.uint8)
    scenes.write_png(os.path.join(a.out, "tiny.png"), img)
    pixels = preprocess(os.path.join(a.out, "tiny.png"), SIZE)[None]
    np.save(os.path.join(a.out, "pixels.npy"), pixels.numpy())
    np.save(os.path.join(a.out, "probs.npy"), torch.sigmoid(tagger(pixels)).numpy())
    print("probs", torch.sigmoid(tagger(pixels)).numpy().round(4).tolist())


if __name__ == "__main__":
    main()
