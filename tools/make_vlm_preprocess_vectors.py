#!/usr/bin/env python3
"""Writes tests/fixtures/vlm/preprocess: what the Qwen2-VL / Qwen2.5-VL reference computes
before its models run, for src/pipelines/vlm to match.

- PIL's bicubic resizes of a small image (bicubic_*.png), as Qwen2VLImageProcessor resizes;
- smart_resize on sizes and pixel budgets (rounding ties, both budgets, its errors);
- Qwen2VLImageProcessor's pixel_values and image_grid_thw for small images (grey, gradient,
  random; sides that are not multiples of 28, one shrunk by max_pixels, one grown by
  min_pixels), inputs as PNG, outputs as .npy;
- the vision tower's rot_pos_emb ids (its own code, fed an identity table), the cu_seqlens
  attention blocks and, with Qwen2.5-VL, get_window_index (window 112, patch 14, merge 2)
  and the cu_window_seqlens blocks, for a few grid lists (masks as bool .npy);
- get_rope_index on token rows with one and two images, a batch of two with left padding.

    python3 tools/make_vlm_preprocess_vectors.py
    # needs transformers 4.46.3 (Qwen2-VL) over torch, numpy and Pillow; with 4.49.0 the
    # Qwen2.5-VL parts are computed too and the Qwen2-VL files come out the same.
"""
import json
import os
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from transformers.models.qwen2_vl import image_processing_qwen2_vl as ip
from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VisionTransformerPretrainedModel, \
    Qwen2VLForConditionalGeneration

try:
    from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import Qwen2_5_VisionTransformerPretrainedModel, \
        Qwen2_5_VLForConditionalGeneration
except ImportError:
    Qwen2_5_VLForConditionalGeneration = None

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "vlm", "preprocess")
IMAGE, VIDEO, VSTART, VEND = 151655, 151656, 151652, 151653


def bicubic(rng):
    src = rng.integers(0, 256, (23, 31, 3), dtype=np.uint8)
    src[4:12, 6:15] = [255, 0, 0]  # hard edges: the cubic's overshoot must clip
    img = Image.fromarray(src)
    img.save(os.path.join(OUT, "bicubic_src.png"))
    sizes = [(15, 9), (80, 50), (31, 60), (60, 23), (7, 40)]
    for w, h in sizes:
        img.resize((w, h), Image.BICUBIC).save(os.path.join(OUT, f"bicubic_{w}x{h}.png"))
    return [list(s) for s in sizes]


def smart_resize_cases():
    cases = []
    for h, w, lo, hi in [(56, 56, 3136, 1003520), (42, 70, 3136, 1003520), (70, 42, 3136, 1003520),
                         (98, 126, 3136, 1003520), (45, 71, 3136, 1003520), (30, 29, 3136, 1003520),
                         (100, 60, 3136, 3136), (1080, 1920, 3136, 1003520), (4000, 3000, 3136, 12845056),
                         (28, 5600, 3136, 1003520), (28, 5601, 3136, 1003520), (27, 100, 3136, 1003520),
                         (500, 29, 50000, 1003520)]:
        try:
            cases.append({"height": h, "width": w, "min_pixels": lo, "max_pixels": hi,
                          "size": list(ip.smart_resize(h, w, 28, lo, hi))})
        except ValueError as e:
            cases.append({"height": h, "width": w, "min_pixels": lo, "max_pixels": hi, "error": str(e)})
    return cases


def images(rng):
    yy, xx = np.mgrid[0:45, 0:71]
    gradient = np.stack([xx * 255 // 70, yy * 255 // 44, (xx + yy) * 255 // 114], -1).astype(np.uint8)
    return [("grey_42x70", np.full((42, 70, 3), 128, np.uint8), 3136, 1003520),  # 1.5 and 2.5 round to 2
            ("gradient_45x71", gradient, 3136, 1003520),
            ("random_100x60", rng.integers(0, 256, (100, 60, 3), dtype=np.uint8), 3136, 3136),
            ("random_30x29", rng.integers(0, 256, (30, 29, 3), dtype=np.uint8), 3136, 1003520)]


def processor_cases(rng):
    cases = []
    for name, pixels, lo, hi in images(rng):
        Image.fromarray(pixels).save(os.path.join(OUT, f"{name}.png"))
        proc = ip.Qwen2VLImageProcessor(min_pixels=lo, max_pixels=hi)
        out = proc(images=[Image.open(os.path.join(OUT, f"{name}.png"))], return_tensors="np")
        np.save(os.path.join(OUT, f"{name}.pixel_values.npy"), out["pixel_values"].astype(np.float32))
        cases.append({"name": name, "min_pixels": lo, "max_pixels": hi, "grid": out["image_grid_thw"][0].tolist()})
    return cases


def block_mask(cu, n):
    mask = np.zeros((n, n), bool)
    for i in range(1, len(cu)):
        mask[cu[i - 1]:cu[i], cu[i - 1]:cu[i]] = True
    return mask


def index_cases():
    cases = []
    for name, grids in [("one", [[1, 4, 6]]), ("windows", [[1, 12, 20]]),
                        ("two_padded_windows", [[1, 16, 8], [1, 4, 6]]), ("frames", [[2, 4, 4]])]:
        thw = torch.tensor(grids)
        n = int((thw[:, 0] * thw[:, 1] * thw[:, 2]).sum())
        # rot_pos_emb with a table whose row i is i gives the (row, column) ids it gathers.
        tower = SimpleNamespace(spatial_merge_size=2, rotary_pos_emb=lambda size: torch.arange(size)[:, None])
        ids = Qwen2VisionTransformerPretrainedModel.rot_pos_emb(tower, thw)
        np.save(os.path.join(OUT, f"{name}.rotary_pos_ids.npy"), ids.numpy().astype(np.int64))
        cu = F.pad(torch.repeat_interleave(thw[:, 1] * thw[:, 2], thw[:, 0]).cumsum(0), (1, 0), value=0)
        np.save(os.path.join(OUT, f"{name}.attention_mask.npy"), block_mask(cu.tolist(), n))
        if Qwen2_5_VLForConditionalGeneration is not None:
            tower25 = SimpleNamespace(window_size=112, spatial_merge_size=2, patch_size=14, spatial_merge_unit=4)
            index, cu_window = Qwen2_5_VisionTransformerPretrainedModel.get_window_index(tower25, thw)
            cu_window = torch.unique_consecutive(torch.tensor(cu_window, dtype=torch.int32)).tolist()
            np.save(os.path.join(OUT, f"{name}.window_index.npy"), index.numpy().astype(np.int64))
            np.save(os.path.join(OUT, f"{name}.reverse_window_index.npy"), torch.argsort(index).numpy().astype(np.int64))
            np.save(os.path.join(OUT, f"{name}.window_attention_mask.npy"), block_mask(cu_window, n))
        cases.append({"name": name, "grids": grids})
    return cases


def rope_cases():
    def image(h, w):
        return [VSTART] + [IMAGE] * (h * w // 4) + [VEND]

    one = [1, 2, 3] + image(4, 6) + [4, 5]
    two = [1] + image(4, 4) + [2, 3] + image(6, 4) + [4]
    text = [7, 8, 9, 10]
    pad = len(two) - len(one)
    cases = [("one_image", [one], None, [[1, 4, 6]]),
             ("two_images", [two], None, [[1, 4, 4], [1, 6, 4]]),
             ("batch_left_padding", [two, [0] * pad + one], [[1] * len(two), [0] * pad + [1] * len(one)],
              [[1, 4, 4], [1, 6, 4], [1, 4, 6]]),
             ("text_only_padded", [[0, 0] + text, [5, 6] + text], [[0, 0, 1, 1, 1, 1], [1] * 6], [])]
    config = SimpleNamespace(vision_config=SimpleNamespace(spatial_merge_size=2, tokens_per_second=2),
                             image_token_id=IMAGE, video_token_id=VIDEO, vision_start_token_id=VSTART)
    out = []
    for name, ids, mask, grids in cases:
        ids_t = torch.tensor(ids)
        mask_t = torch.tensor(mask) if mask is not None else None
        grid_t = torch.tensor(grids) if grids else None
        pos, delta = Qwen2VLForConditionalGeneration.get_rope_index(SimpleNamespace(config=config), ids_t, grid_t,
                                                                     None, mask_t)
        if Qwen2_5_VLForConditionalGeneration is not None:
            pos25, delta25 = Qwen2_5_VLForConditionalGeneration.get_rope_index(SimpleNamespace(config=config), ids_t,
                                                                               grid_t, None, None, mask_t)
            assert torch.equal(pos, pos25) and torch.equal(delta, delta25), name
        out.append({"name": name, "input_ids": ids, "attention_mask": mask, "grids": grids,
                    "position_ids": pos.tolist(), "deltas": delta.flatten().tolist()})
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(7)
    cases = {"bicubic_sizes": bicubic(rng), "smart_resize": smart_resize_cases(), "images": processor_cases(rng),
             "vision_indices": index_cases(), "rope_index": rope_cases()}
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(cases, f, separators=(",", ":"))
        f.write("\n")


if __name__ == "__main__":
    main()
