#!/usr/bin/env python3
"""Exports the RAM++ image tagger (Recognize Anything Plus, arXiv 2310.15200) with seeded random
weights, written from the published architecture (the `ram` package is not on PyPI), plus its tag
list and PyTorch reference probabilities for tools/compare_ram.py.

Architecture as published (ram/models/ram_plus.py, configs swin/config_swinL_384.json and
q2l_config.json):
  image [B,3,384,384] -> Swin-L 384 (timm: patch 4, window 12, embed 192, depths 2,2,18,2)
  -> [B, 1+144, 1536] (the mean-pooled token first, as RAM's SwinTransformer returns it)
  -> image_proj 1536->512 = image_embeds
  label_embed [4585*51, 512] (fixed CLIP text embeddings of 51 descriptions per tag; random here)
  reweighted per image: softmax over the 51 descriptions of exp(reweight_scale) * cls . label_embed
  -> wordvec_proj 512->768, relu = one query per tag
  -> tagging head: 2 BERT layers (hidden 768, 4 heads) with cross-attention only (no embeddings,
     no self-attention): the tag queries attend to image_embeds -> fc 768->1 = one logit per tag.
The graph outputs `logits` [B,4585]; the sigmoid is applied outside, as the reference does, and
the model metadata says so (vlrt.tag_output = logits).

Two exports:
  default      the batch stays dynamic: window_reverse keeps -1 for the batch (timm's form) and
               the description reweighting is one batched MatMul.
  --unpatched  exactly as the reference code traces: Swin's window_reverse computes
               B = int(windows.shape[0] / ...) and generate_tag loops `for i in range(bs)`,
               so the export-time batch (1) is baked into Reshape constants.

Runs under Debian's /usr/bin/python3 (torch 1.13, timm 0.9.16, transformers 4.38.2):
    /usr/bin/python3 tools/export_ram_plus.py --out RAM_DIR
    /usr/bin/python3 tools/export_ram_plus.py --unpatched --out RAM_UNPATCHED_DIR
Writes model.onnx (~1.3 GB), tags.json and, for the default export, scene<i>.png, pixels_b1.npy,
pixels_b3.npy, probs_b1.npy, probs_b3.npy (PyTorch's sigmoid(logits)).
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import timm
import timm.models.swin_transformer as timm_swin
from transformers import BertConfig
from transformers.models.bert.modeling_bert import BertAttention, BertIntermediate, BertOutput

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402

NUM_TAGS = 4585
DESCRIPTIONS_PER_TAG = 51
EMBED = 512
IMAGE_SIZE = 384
# The unpatched export traces one image, as RAM's inference script runs; the patched one traces
# two, so that a size left baked by mistake would not be 1.
EXPORT_BATCH = {True: 1, False: 2}
DEFAULT_THRESHOLD = 0.68
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
METADATA = {"vlrt.tag_output": "logits", "vlrt.tags": "tags.json"}


def reference_window_reverse(windows, window_size, H, W):
    """RAM's window_reverse (ram/models/swin_transformer.py): int() bakes the traced batch."""
    B = int(windows.shape[0] / (H * W / window_size[0] / window_size[1]))
    x = windows.view(B, H // window_size[0], W // window_size[1], window_size[0], window_size[1], -1)
    return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(B, H, W, -1)


class CrossAttentionLayer(nn.Module):
    """RAM's BertLayer in mode='tagging': cross-attention then the feed-forward block."""

    def __init__(self, config, encoder_width):
        super().__init__()
        self.crossattention = BertAttention(config)
        attn = self.crossattention.self
        attn.key = nn.Linear(encoder_width, config.hidden_size)
        attn.value = nn.Linear(encoder_width, config.hidden_size)
        self.intermediate = BertIntermediate(config)
        self.output = BertOutput(config)

    def forward(self, queries, image_embeds):
        attended = self.crossattention(queries, encoder_hidden_states=image_embeds)[0]
        return self.output(self.intermediate(attended), attended)


class RamPlus(nn.Module):
    def __init__(self, reference_trace):
        super().__init__()
        self.reference_trace = reference_trace
        self.visual_encoder = timm.create_model(
            "swin_large_patch4_window12_384", pretrained=False, num_classes=0, img_size=IMAGE_SIZE)
        vision_width = self.visual_encoder.num_features
        q2l = BertConfig(hidden_size=768, num_attention_heads=4, intermediate_size=3072,
                         num_hidden_layers=2, hidden_act="gelu", layer_norm_eps=1e-12,
                         attention_probs_dropout_prob=0.1, hidden_dropout_prob=0.1)
        self.image_proj = nn.Linear(vision_width, EMBED)
        # Unit-variance entries: with unit-norm rows the 51-way softmax is flat and every tag's
        # query nearly the same (scores within 0.02 of each other); these give tags distinct scores.
        self.label_embed = nn.Parameter(torch.randn(NUM_TAGS * DESCRIPTIONS_PER_TAG, EMBED))
        self.reweight_scale = nn.Parameter(torch.ones([]) * np.log(1 / 0.07))
        self.wordvec_proj = nn.Linear(EMBED, q2l.hidden_size)
        self.tagging_layers = nn.ModuleList(
            CrossAttentionLayer(q2l, EMBED) for _ in range(q2l.num_hidden_layers))
        self.fc = nn.Linear(q2l.hidden_size, 1)

    def image_features(self, image):
        x = self.visual_encoder.forward_features(image)  # [B, 12, 12, C]
        x = x.flatten(1, 2)
        return torch.cat([x.mean(dim=1, keepdim=True), x], dim=1)

    def reweighted_label_embed(self, image_cls):
        bs = image_cls.shape[0]
        image_cls = image_cls / image_cls.norm(dim=-1, keepdim=True)
        logits_per_image = self.reweight_scale.exp() * image_cls @ self.label_embed.t()
        weights = F.softmax(logits_per_image.view(bs, -1, DESCRIPTIONS_PER_TAG), dim=2)
        per_tag = self.label_embed.view(-1, DESCRIPTIONS_PER_TAG, EMBED)
        if self.reference_trace:
            out = torch.empty(bs, NUM_TAGS, EMBED, dtype=image_cls.dtype)
            for i in range(bs):
                out[i] = (weights[i].unsqueeze(-1) * per_tag).sum(dim=1)
            return out
        # [tags, B, 51] @ [tags, 51, 512] -> [tags, B, 512]: the same sum, batch left dynamic.
        return torch.matmul(weights.transpose(0, 1), per_tag).transpose(0, 1)

    def forward(self, image):
        image_embeds = self.image_proj(self.image_features(image))
        queries = F.relu(self.wordvec_proj(self.reweighted_label_embed(image_embeds[:, 0, :])))
        for layer in self.tagging_layers:
            queries = layer(queries, image_embeds)
        return self.fc(queries).squeeze(-1)


def tag_list():
    """Placeholder names (the published list is not on PyPI), a second language, thresholds:
    RAM's default 0.68 with every 7th tag at 0.65 as its adjusted-threshold file does for some."""
    return {"tags": [{"name": f"tag{i + 1:04d}",
                      "threshold": 0.65 if i % 7 == 3 else DEFAULT_THRESHOLD,
                      "names": {"zh": f"标签{i + 1:04d}"}} for i in range(NUM_TAGS)]}


def preprocess(png_path, size=IMAGE_SIZE):
    """RAM's transform: RGB, torchvision Resize((size, size)) (PIL bilinear), ToTensor, Normalize."""
    from PIL import Image
    from torchvision import transforms
    t = transforms.Compose([transforms.Resize((size, size)), transforms.ToTensor(),
                            transforms.Normalize(MEAN, STD)])
    return t(Image.open(png_path).convert("RGB"))


def export(model, path):
    dummy = torch.zeros(EXPORT_BATCH[model.reference_trace], 3, IMAGE_SIZE, IMAGE_SIZE)
    torch.onnx.export(model, dummy, path, input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=17, do_constant_folding=True)
    append_metadata(path, METADATA)


def append_metadata(path, items):
    """ModelProto.metadata_props (field 14) appended as raw protobuf: repeated fields may be
    concatenated, and Debian's python has no onnx package to load a 1.3 GB model with."""
    with open(path, "ab") as f:
        for key, value in items.items():
            f.write(_length_delimited(14, _length_delimited(1, key.encode()) +
                                      _length_delimited(2, value.encode())))


def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _length_delimited(field, payload):
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--unpatched", action="store_true",
                    help="trace as the reference code does (batch baked by window_reverse's int())")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scene-seed", type=int, default=11)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    torch.manual_seed(a.seed)
    torch.set_grad_enabled(False)
    if a.unpatched:
        timm_swin.window_reverse = reference_window_reverse
    model = RamPlus(reference_trace=a.unpatched).eval()
    print(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M")
    with open(os.path.join(a.out, "tags.json"), "w", encoding="utf-8") as f:
        json.dump(tag_list(), f, ensure_ascii=False, indent=0)
    if not a.unpatched:
        pngs = []
        for i in range(3):
            img, _ = scenes.make_scene(a.scene_seed, i)
            pngs.append(os.path.join(a.out, f"scene{i}.png"))
            scenes.write_png(pngs[-1], img)
        pixels = torch.stack([preprocess(p) for p in pngs])
        for b in (1, 3):
            probs = torch.sigmoid(model(pixels[:b])).numpy()
            np.save(os.path.join(a.out, f"pixels_b{b}.npy"), pixels[:b].numpy())
            np.save(os.path.join(a.out, f"probs_b{b}.npy"), probs)
            thresholds = np.array([t["threshold"] for t in tag_list()["tags"]])
            print(f"batch {b}: tags per image {(probs > thresholds).sum(axis=1).tolist()}, "
                  f"prob range [{probs.min():.3f}, {probs.max():.3f}]")
    export(model, os.path.join(a.out, "model.onnx"))
    print(f"wrote {a.out}/model.onnx ({os.path.getsize(os.path.join(a.out, 'model.onnx')) / 1e9:.2f} GB)")


if __name__ == "__main__":
    main()
