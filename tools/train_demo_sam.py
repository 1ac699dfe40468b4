#!/usr/bin/python3
"""Trains the demo mask decoder (models/demo-sam): a small model with Segment Anything's contract,
so `vlrt detect --masks`, `vlrt label --masks` and `vlrt segment` run it as they run SAM.

  encoder.onnx  pixels float32 [1,3,256,256] (longest side resized to 256, zero padding, SAM's
                pixel mean and std) -> image_embeddings [1,256,16,16]: a small CNN's stride-4
                features (16 channels at 64x64), each 4x4 block of cells stacked into the 256
                channels of one stride-16 cell, so the embedding has SAM's shape
  decoder.onnx  SamOnnxModel's inputs and outputs: image_embeddings, point_coords [B,N,2],
                point_labels [B,N], mask_input [1,1,64,64], has_mask_input [1], orig_im_size [2]
                -> masks [B,1,H,W] logits on the original image, iou_predictions [B,1],
                low_res_masks [B,1,64,64]
  sam.json      image_size 256 and the pixel mean and std

The decoder is made for box prompts (the corner points, labels 2 and 3): it unstacks the
stride-4 features, samples them on a 32x32 grid over the box grown by a quarter (every object at
one scale), adds the grid's coordinates and the features averaged inside the box (the object's
colour), and a few convolutions give the mask there, sampled back onto the image. A prompt
without a box is taken as the whole image. mask_input, when has_mask_input is 1, is added to the
logits (resized to the 256 frame); low_res_masks are the 256-frame logits averaged to 64x64.

Trained on seed 1234 of tools/scenes.py (each object's visible pixels are known), the prompts the
ground-truth boxes jittered by up to 10% of their sides, as a detector's boxes are.

    nice /usr/bin/python3 tools/train_demo_sam.py                      # ~18 min at 1 thread
    nice /usr/bin/python3 tools/train_demo_sam.py --steps 20 --out /tmp/s   # smoke test
"""
import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import demo_data  # noqa: E402

SIZE = demo_data.SAM_SIZE
STRIDE = 4                     # of the features the embedding stacks
GRID = SIZE // STRIDE          # 64: the low-resolution mask, 4E as in SAM
EMBED = SIZE // 16             # 16: SAM's embedding size, image_size / 16
FEATURES = 16                  # channels per stride-4 cell; 16 * 4 * 4 = 256 embedding channels
REGION = 32                    # the grid a box's mask is made on
EXPAND = 1.25                  # that grid covers the box grown by this much
PIXEL_MEAN = [123.675, 116.28, 103.53]
PIXEL_STD = [58.395, 57.12, 57.375]
TRAIN_SEED = 1234


def conv_bn(cin, cout, stride=1, dilation=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, dilation, dilation=dilation, bias=False),
                         nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


def stack_cells(x):
    """[N,C,64,64] -> [N,C*16,16,16]: each 4x4 block of cells into one cell's channels."""
    n, c, h, w = x.shape
    k = 16 // STRIDE
    return x.reshape(n, c, h // k, k, w // k, k).permute(0, 1, 3, 5, 2, 4).reshape(n, c * k * k, h // k, w // k)


def unstack_cells(x):
    """The inverse of stack_cells."""
    n, ck, h, w = x.shape
    k = 16 // STRIDE
    c = ck // (k * k)
    return x.reshape(n, c, k, k, h, w).permute(0, 1, 4, 2, 5, 3).reshape(n, c, h * k, w * k)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(conv_bn(3, 16, 2), conv_bn(16, 32, 2), conv_bn(32, 32), conv_bn(32, 32, dilation=2),
                                 nn.Conv2d(32, FEATURES, 1))

    def forward(self, pixels):
        return stack_cells(self.net(pixels))


def box_frame(box):
    """Centre and half sizes [P,1,1,1] of the region a box's mask is made in: the box grown by
    EXPAND, so that a box a little too small still holds its object."""
    x1, y1, x2, y2 = [box[:, i].reshape(-1, 1, 1, 1) for i in range(4)]
    half_w = torch.clamp((x2 - x1) * 0.5, min=2.0) * EXPAND
    half_h = torch.clamp((y2 - y1) * 0.5, min=2.0) * EXPAND
    return (x1 + x2) * 0.5, (y1 + y2) * 0.5, half_w, half_h


class Decoder(nn.Module):
    """Per prompt: features [P,16,64,64] and box [P,4] (x1 y1 x2 y2 in the 256 frame) -> mask
    logits [P,1,256,256] and predicted IoU [P,1]. The features are sampled on a REGION x REGION
    grid over the (grown) box, so every object is seen at one scale; the mask made there is
    sampled back onto the image frame (-20 outside the region)."""

    def __init__(self, hidden=32):
        super().__init__()
        self.body = nn.Sequential(conv_bn(2 * FEATURES + 2, hidden), conv_bn(hidden, hidden, dilation=2),
                                  conv_bn(hidden, hidden, dilation=4), conv_bn(hidden, hidden))
        self.mask = nn.Conv2d(hidden, 1, 1)
        self.iou = nn.Sequential(nn.Linear(hidden, 32), nn.ReLU(), nn.Linear(32, 1))
        self.register_buffer("steps", (torch.arange(REGION, dtype=torch.float32) + 0.5) / REGION * 2 - 1)
        self.register_buffer("pixels", torch.arange(SIZE, dtype=torch.float32) + 0.5)

    def region_grid(self, box):
        """grid_sample's grid [P,R,R,2] over each box's region, in the 256 frame."""
        cx, cy, hw, hh = box_frame(box)
        t = self.steps
        gx = (cx + hw * t.reshape(1, 1, REGION, 1)) / SIZE * 2 - 1    # [P,1,R,1]: along x
        gy = (cy + hh * t.reshape(1, 1, 1, REGION)) / SIZE * 2 - 1    # [P,1,1,R]: along y
        return torch.cat([(gx + 0 * gy).permute(0, 3, 2, 1), (gy + 0 * gx).permute(0, 3, 2, 1)], dim=3)

    def decode(self, features, box):
        """Mask logits over each box's region [P,1,R,R] and the predicted IoU [P,1]."""
        t = self.steps
        sampled = F.grid_sample(features, self.region_grid(box), mode="bilinear", padding_mode="zeros",
                                align_corners=False)
        u = (t.reshape(1, 1, 1, REGION) * EXPAND).expand(sampled.shape[0], 1, REGION, REGION)
        v = (t.reshape(1, 1, REGION, 1) * EXPAND).expand(sampled.shape[0], 1, REGION, REGION)
        inside = ((torch.abs(u) <= 1) & (torch.abs(v) <= 1)).float()
        pooled = (sampled * inside).sum(dim=(2, 3), keepdim=True) / (inside.sum(dim=(2, 3), keepdim=True) + 1e-3)
        h = self.body(torch.cat([sampled, pooled.expand_as(sampled), u, v], dim=1))
        logits = self.mask(h)
        weight = torch.sigmoid(logits)
        iou = torch.sigmoid(self.iou((h * weight).sum(dim=(2, 3)) / (weight.sum(dim=(2, 3)) + 1e-3)))
        return logits, iou

    def paste(self, logits, box):
        """Region logits back onto the 256 frame [P,1,S,S]; -20 outside the region."""
        cx, cy, hw, hh = box_frame(box)
        px = (self.pixels.reshape(1, 1, SIZE) - cx[:, :, 0]) / hw[:, :, 0]   # [P,1,S]
        py = (self.pixels.reshape(1, SIZE, 1) - cy[:, :, 0]) / hh[:, :, 0]   # [P,S,1]
        back = torch.stack([px + 0 * py, py + 0 * px], dim=3)                # [P,S,S,2]
        full = F.grid_sample(logits, back, mode="bilinear", padding_mode="zeros", align_corners=False)
        region = ((torch.abs(back[..., 0]) <= 1) & (torch.abs(back[..., 1]) <= 1)).unsqueeze(1)
        return torch.where(region, full, torch.full_like(full, -20.0))

    def forward(self, features, box):
        logits, iou = self.decode(features, box)
        return self.paste(logits, box), iou


class OnnxDecoder(nn.Module):
    """The decoder with SamOnnxModel's inputs and outputs (the export's module)."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, image_embeddings, point_coords, point_labels, mask_input, has_mask_input, orig_im_size):
        features = unstack_cells(image_embeddings)
        prompts = point_coords.shape[0]
        corner = []
        for label, fallback in ((2.0, 0.0), (3.0, float(SIZE))):
            is_corner = (point_labels == label).float().unsqueeze(-1)             # [B,N,1]
            count = is_corner.sum(dim=1)                                           # [B,1]
            mean = (point_coords * is_corner).sum(dim=1) / torch.clamp(count, min=1.0)
            corner.append(torch.where(count > 0, mean, torch.full_like(mean, fallback)))
        box = torch.cat(corner, dim=1)                                              # [B,4]
        full, iou = self.decoder(features.expand(prompts, -1, -1, -1), box)
        prior = F.interpolate(mask_input, size=(SIZE, SIZE), mode="bilinear", align_corners=False)
        masks = full + has_mask_input.reshape(1, 1, 1, 1) * prior
        low_res = F.avg_pool2d(masks, 4)
        # SamOnnxModel.mask_postprocessing from the 256 frame: crop to the resized image, then
        # to the original size.
        scale = SIZE / torch.max(orig_im_size)
        resized = torch.floor(scale * orig_im_size + 0.5).to(torch.int64)
        masks = masks[..., : resized[0], : resized[1]]
        size = orig_im_size.to(torch.int64)
        masks = F.interpolate(masks, size=(size[0], size[1]), mode="bilinear", align_corners=False)
        return masks, iou, low_res


def jitter(boxes, rng):
    """Each corner moved by up to 10% of the box's side (and at least a pixel)."""
    w = (boxes[:, 2] - boxes[:, 0])[:, None]
    h = (boxes[:, 3] - boxes[:, 1])[:, None]
    d = rng.uniform(-0.1, 0.1, boxes.shape) * np.concatenate([w, h, w, h], 1) + rng.uniform(-1, 1, boxes.shape)
    out = boxes + d
    return np.clip(out, 0, SIZE).astype(np.float32)


def pixels_of(images_u8, sizes):
    x = torch.from_numpy(images_u8).permute(0, 3, 1, 2).float()
    x = (x - torch.tensor(PIXEL_MEAN).reshape(1, 3, 1, 1)) / torch.tensor(PIXEL_STD).reshape(1, 3, 1, 1)
    for i, (h, w) in enumerate(sizes):  # SAM pads after normalizing: zeros
        x[i, :, h:, :] = 0
        x[i, :, :, w:] = 0
    return x


def batch_loss(encoder, decoder, data, scenes_idx, rng, prompts_per_scene=4):
    pixels = pixels_of(data["sam_images"][scenes_idx], data["sam_sizes"][scenes_idx])
    features = unstack_cells(encoder(pixels))
    owners, boxes, targets = [], [], []
    for j, s in enumerate(scenes_idx):
        rows = data["sam_boxes"][data["box_rows"][s]]
        for r in rows[rng.permutation(len(rows))[:prompts_per_scene]]:
            owners.append(j)
            boxes.append(r[2:6])
            targets.append(data["sam_labels"][s] == int(r[1]))
    boxes = jitter(np.array(boxes), rng)
    box = torch.from_numpy(boxes)
    logits, iou = decoder.decode(features[torch.tensor(owners)], box)
    # The target on the same grid: each region pixel's share of the object.
    full_target = torch.from_numpy(np.stack(targets)[:, None].astype(np.float32))
    target = F.grid_sample(full_target, decoder.region_grid(box), mode="bilinear", padding_mode="zeros",
                           align_corners=False)
    bce = F.binary_cross_entropy_with_logits(logits, target)
    p = torch.sigmoid(logits)
    dice = 1 - ((2 * (p * target).sum(dim=(1, 2, 3)) + 1) / (p.sum(dim=(1, 2, 3)) + target.sum(dim=(1, 2, 3)) + 1))
    with torch.no_grad():
        hard = (logits > 0).float()
        target = (target > 0.5).float()
        inter = (hard * target).sum(dim=(1, 2, 3))
        union = ((hard + target) > 0).float().sum(dim=(1, 2, 3))
        true_iou = inter / union.clamp(min=1)
    iou_loss = F.mse_loss(iou[:, 0], true_iou)
    return bce + dice.mean() + iou_loss, true_iou


def export(encoder, decoder, out_dir):
    encoder.eval()
    decoder.eval()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        torch.onnx.export(encoder, torch.zeros(1, 3, SIZE, SIZE), os.path.join(out_dir, "encoder.onnx"),
                          input_names=["pixels"], output_names=["image_embeddings"], opset_version=17,
                          do_constant_folding=True)
        dummy = (torch.randn(1, 256, EMBED, EMBED), torch.tensor([[[10.0, 20.0], [100.0, 120.0]]]).repeat(2, 1, 1),
                 torch.tensor([[2.0, 3.0]]).repeat(2, 1), torch.zeros(1, 1, GRID, GRID), torch.zeros(1),
                 torch.tensor([300.0, 450.0]))
        torch.onnx.export(OnnxDecoder(decoder), dummy, os.path.join(out_dir, "decoder.onnx"),
                          input_names=["image_embeddings", "point_coords", "point_labels", "mask_input",
                                       "has_mask_input", "orig_im_size"],
                          output_names=["masks", "iou_predictions", "low_res_masks"], opset_version=17,
                          do_constant_folding=True,
                          dynamic_axes={"point_coords": {0: "num_prompts", 1: "num_points"},
                                        "point_labels": {0: "num_prompts", 1: "num_points"}})
    with open(os.path.join(out_dir, "sam.json"), "w") as f:
        json.dump({"pipeline": "segment", "encoder": "encoder.onnx", "decoder": "decoder.onnx", "image_size": SIZE,
                   "pixel_mean": PIXEL_MEAN, "pixel_std": PIXEL_STD, "mask_threshold": 0.0}, f, indent=1)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "demo-sam"))
    ap.add_argument("--cache", default=os.path.join(ROOT, "out", "demo-data"), help="generated scenes")
    ap.add_argument("--scenes", type=int, default=1200)
    ap.add_argument("--steps", type=int, default=260)
    ap.add_argument("--batch", type=int, default=5, help="scenes per step (up to 4 prompts each)")
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    os.makedirs(a.out, exist_ok=True)
    data = demo_data.scene_data(TRAIN_SEED, a.scenes, a.cache)
    owner = data["sam_boxes"][:, 0].astype(np.int64)
    data["box_rows"] = [np.nonzero(owner == s)[0] for s in range(len(data["sam_images"]))]
    usable = np.array([s for s in range(len(data["box_rows"])) if len(data["box_rows"][s])])
    n_hold = min(100, len(usable) // 4)  # the last scenes: a check on scenes not trained on
    hold, usable = usable[len(usable) - n_hold:], usable[:len(usable) - n_hold]
    encoder, decoder = Encoder(), Decoder()
    params = list(encoder.parameters()) + list(decoder.parameters())
    print(f"{sum(p.numel() for p in params)} parameters, {len(usable)} scenes", flush=True)
    opt = torch.optim.AdamW(params, lr=2e-3, weight_decay=1e-4)
    checkpoint = os.path.join(a.cache, "sam_checkpoint.pt")
    step = 0
    if os.path.exists(checkpoint):
        state = torch.load(checkpoint)
        encoder.load_state_dict(state["encoder"])
        decoder.load_state_dict(state["decoder"])
        opt.load_state_dict(state["opt"])
        step = state["step"]
        print(f"resumed at step {step}")
    rng = np.random.default_rng(step)
    t0, avg = time.time(), None
    while step < a.steps:
        lr = 2e-3 * min(1.0, (step + 1) / 30) * 0.5 * (1 + math.cos(math.pi * step / a.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        loss, iou = batch_loss(encoder, decoder, data, rng.choice(usable, a.batch, replace=False), rng)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        cur = np.array([loss.item(), iou.mean().item(), (iou > 0.5).float().mean().item()])
        avg = cur if avg is None else 0.95 * avg + 0.05 * cur
        if step % 20 == 0 or step == a.steps:
            print(f"step {step}/{a.steps} loss {avg[0]:.3f} mIoU {avg[1]:.3f} IoU>0.5 {avg[2]:.3f} lr {lr:.5f} "
                  f"{time.time() - t0:.0f}s", flush=True)
        if step % 100 == 0 or step == a.steps:
            torch.save({"encoder": encoder.state_dict(), "decoder": decoder.state_dict(), "opt": opt.state_dict(),
                        "step": step}, checkpoint)
    encoder.eval()
    decoder.eval()
    with torch.no_grad():
        ious = torch.cat([batch_loss(encoder, decoder, data, hold[i:i + 20], np.random.default_rng(i), 6)[1]
                          for i in range(0, len(hold), 20)])
    print(f"held-back scenes: {len(ious)} prompts, mIoU {ious.mean():.3f}, IoU>0.5 {(ious > 0.5).float().mean():.3f}")
    export(encoder, decoder, a.out)
    print("wrote", a.out)


if __name__ == "__main__":
    main()
