#!/usr/bin/env python3
"""Exports a tiny random-weight Qwen2-VL or Qwen2.5-VL to vlrt's VLM folder layout (see
docs/ARCHITECTURE.md, "Vision-language chat"): vision.onnx, embedding.onnx, decoder.onnx,
tokenizer.json, config.json, generation_config.json, preprocessor_config.json, chat_template.json,
two generated test images (PNG) and reference.json with transformers' processor outputs
(input_ids, image_grid_thw, M-RoPE position ids and rope delta; pixel_values as .npy per image)
and `generate()`'s greedy tokens for 2 images x 3 prompts and one prompt over both images.

Sizes: text hidden 64, 2 layers, 4 heads, 2 KV heads (head 16), intermediate 128, vocab 762
(the tokenizer of tests/fixtures/vlm/tokenizer); vision depth 2, width 32, 2 heads, patch 14,
temporal patch 2, merge 2; Qwen2.5-VL adds windows of 112 pixels (2 x 2 windows of merged
patches at the 224 x 224 pixel budget) with block 1 attending over the whole frame. Weights are
seeded and drawn wider than transformers' default (initializer range 0.3) so that greedy tokens
are far from ties; the smallest top-1 minus top-2 logit margin over all steps is printed.

Before exporting, the vision wrapper (rotary embedding from the ids, attention with the given
biases instead of cu_seqlens) is checked against the reference tower. Opset 17, no custom ops.

    python tools/export_qwen_vl.py --variant qwen2-vl --out OUT     # needs transformers 4.46.3
    python tools/export_qwen_vl.py --variant qwen2.5-vl --out OUT   # needs transformers 4.49.0
    python3 tools/check_vlm_onnx.py OUT                             # onnxruntime and vlrt run

The committed test folders are made with --fixture (half the width, 84 x 120 images, only the
files vlrt reads and reference.json):

    python tools/export_qwen_vl.py --variant qwen2-vl --out tests/fixtures/vlm/qwen2-vl --fixture
    python tools/export_qwen_vl.py --variant qwen2.5-vl --out tests/fixtures/vlm/qwen2.5-vl --fixture

Both run over PyTorch 1.13 (the ONNX exporter of that release).
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch
import transformers
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_vlm_onnx  # noqa: E402  (the numpy vision indices, shared with the checker)
import scenes  # noqa: E402
from make_vlm_tokenizer import QWEN2_VL_CHAT_TEMPLATE  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "tests", "fixtures", "vlm", "tokenizer")
OPSET = 17
SEED = 0
IMAGE_PAD, VIDEO_PAD, VISION_START, VISION_END = 760, 761, 757, 758
ENDOFTEXT, IM_END = 748, 750
PROMPTS = ["What is in the image?", "Is there a red star?", "How many circles?"]
BOTH_PROMPT = "What is different between the two images?"
MAX_NEW_TOKENS = 20
LM_HEAD_SCALE = 64.0  # logits spread wide, so greedy steps are far from ties
MIN_PIXELS, MAX_PIXELS = 56 * 56, 224 * 224

VARIANTS = {
    "qwen2-vl": dict(transformers="4.46.3", model="Qwen2VLForConditionalGeneration", config="Qwen2VLConfig",
                     processor="Qwen2VLProcessor",
                     vision=dict(depth=2, embed_dim=32, hidden_size=64, num_heads=2, mlp_ratio=2,
                                 patch_size=14, temporal_patch_size=2, spatial_merge_size=2)),
    "qwen2.5-vl": dict(transformers="4.49.0", model="Qwen2_5_VLForConditionalGeneration",
                       config="Qwen2_5_VLConfig", processor="Qwen2_5_VLProcessor",
                       vision=dict(depth=2, hidden_size=32, out_hidden_size=64, intermediate_size=64, num_heads=2,
                                   patch_size=14, temporal_patch_size=2, spatial_merge_size=2, window_size=112,
                                   fullatt_block_indexes=[1])),
}


# --fixture: the same architecture at half the width and smaller images, small enough (< 1 MB
# with its images) to be committed as the C++ tests' VLM folder.
FIXTURE = dict(text=dict(hidden_size=32, intermediate_size=64, mrope_section=[1, 1, 2]),
               vision={"qwen2-vl": dict(embed_dim=16, hidden_size=32),
                       "qwen2.5-vl": dict(hidden_size=16, out_hidden_size=32, intermediate_size=32, window_size=56)},
               max_pixels=112 * 112, image_size=(84, 120))


FIXTURE_FILES = {"vision.onnx", "embedding.onnx", "decoder.onnx", "tokenizer.json", "config.json",
                 "generation_config.json", "preprocessor_config.json", "reference.json", "image1.png", "image2.png"}


def use_fixture_sizes(variant):
    global MAX_PIXELS
    VARIANTS[variant]["vision"].update(FIXTURE["vision"][variant])
    MAX_PIXELS = FIXTURE["max_pixels"]


def tiny_config(variant, fixture=False):
    cls = getattr(transformers, VARIANTS[variant]["config"])
    text = FIXTURE["text"] if fixture else dict(hidden_size=64, intermediate_size=128, mrope_section=[2, 3, 3])
    return cls(vocab_size=762, hidden_size=text["hidden_size"], intermediate_size=text["intermediate_size"],
               num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
               initializer_range=0.3, rope_scaling={"type": "mrope", "mrope_section": text["mrope_section"]},
               vision_config=VARIANTS[variant]["vision"],
               image_token_id=IMAGE_PAD, video_token_id=VIDEO_PAD, vision_start_token_id=VISION_START,
               vision_end_token_id=VISION_END, bos_token_id=ENDOFTEXT, eos_token_id=IM_END, pad_token_id=ENDOFTEXT,
               tie_word_embeddings=False, attn_implementation="eager", torch_dtype="float32")


def build_model(variant, fixture=False):
    torch.manual_seed(SEED)
    config = tiny_config(variant, fixture)
    model = getattr(transformers, VARIANTS[variant]["model"])._from_config(config, attn_implementation="eager")
    with torch.no_grad():
        model.lm_head.weight.mul_(LM_HEAD_SCALE)
    return model.eval()


def build_processor(variant):
    image_processor = transformers.Qwen2VLImageProcessor(min_pixels=MIN_PIXELS, max_pixels=MAX_PIXELS,
                                                         patch_size=14, temporal_patch_size=2, merge_size=2)
    tokenizer = transformers.AutoTokenizer.from_pretrained(TOKENIZER)
    return getattr(transformers, VARIANTS[variant]["processor"])(image_processor=image_processor,
                                                                 tokenizer=tokenizer, chat_template=QWEN2_VL_CHAT_TEMPLATE)


# ------------------------------------------------------------------------------------- vision


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def biased_attention(attn, x, cos, sin, bias):
    """The reference's eager vision attention with an additive [N, N] bias for cu_seqlens."""
    n = x.shape[0]
    q, k, v = attn.qkv(x).reshape(n, 3, attn.num_heads, -1).permute(1, 0, 2, 3).unbind(0)
    cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
    weights = torch.matmul(q, k.transpose(1, 2)) / math.sqrt(q.shape[-1]) + bias
    out = torch.matmul(torch.softmax(weights, dim=-1), v)
    return attn.proj(out.transpose(0, 1).reshape(n, -1))


class Vision(nn.Module):
    """vision.onnx: the tower with rotary ids and attention biases as inputs. embed(pixel_values,
    rotary_pos_ids, attention_bias) -> patch tokens replaces the tower's own patch embedding
    where given (the demo VLM's, which puts the patches back into the image)."""

    def __init__(self, visual, windowed, embed=None):
        super().__init__()
        self.visual, self.windowed, self.embed = visual, windowed, embed
        self.unit = visual.spatial_merge_size ** 2
        self.full = set(getattr(visual, "fullatt_block_indexes", []))

    def forward(self, pixel_values, rotary_pos_ids, attention_bias, window_index=None, reverse_window_index=None,
                window_attention_bias=None):
        v = self.visual
        x = v.patch_embed(pixel_values) if self.embed is None else self.embed(pixel_values, rotary_pos_ids, attention_bias)
        freqs = (rotary_pos_ids.to(torch.float32).unsqueeze(-1) * v.rotary_pos_emb.inv_freq).flatten(1)
        if self.windowed:
            n = x.shape[0]
            x = x.reshape(n // self.unit, self.unit, -1)[window_index].reshape(n, -1)
            freqs = freqs.reshape(n // self.unit, self.unit, -1)[window_index].reshape(n, -1)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        for i, blk in enumerate(v.blocks):
            bias = attention_bias if not self.windowed or i in self.full else window_attention_bias
            x = x + biased_attention(blk.attn, blk.norm1(x), cos, sin, bias)
            x = x + blk.mlp(blk.norm2(x))
        x = v.merger(x)
        return x[reverse_window_index] if self.windowed else x


def vision_feeds(config, grid_thw, pixel_values):
    feeds = check_vlm_onnx.vision_feeds(config.to_dict(), grid_thw.tolist())
    feeds["pixel_values"] = pixel_values.numpy()
    return feeds


def check_vision_indices(model, grid_thw, feeds, windowed):
    """The numpy indices equal the reference's rot_pos_emb order and get_window_index."""
    visual = model.visual
    ids = torch.from_numpy(feeds["rotary_pos_ids"]).float()
    freqs = (ids.unsqueeze(-1) * visual.rotary_pos_emb.inv_freq).flatten(1)
    assert torch.allclose(freqs, visual.rot_pos_emb(grid_thw)), "rotary_pos_ids differ from rot_pos_emb's order"
    if windowed:
        index, cu = visual.get_window_index(grid_thw)
        assert np.array_equal(index.numpy(), feeds["window_index"]), "window_index differs from get_window_index"
        lengths = np.diff(np.unique(np.array(cu)))
        assert np.array_equal(check_vlm_onnx.block_bias(lengths), feeds["window_attention_bias"])


# ------------------------------------------------------------------------------ text models


class Embedding(nn.Module):
    """embedding.onnx: token embeddings with the image rows scattered, in order, over <|image_pad|>."""

    def __init__(self, embed_tokens):
        super().__init__()
        self.embed_tokens = embed_tokens

    def forward(self, input_ids, image_embeds):
        text = self.embed_tokens(input_ids)
        is_image = input_ids == IMAGE_PAD
        flat = is_image.reshape(-1)
        order = torch.cumsum(flat.to(torch.int64), 0) - 1
        rows = torch.cat([image_embeds, torch.zeros_like(image_embeds[:1].expand(1, -1))], 0)
        order = torch.where(flat, order, torch.full_like(order, 0) + image_embeds.shape[0])
        scattered = rows[order].reshape(text.shape)
        return torch.where(is_image.unsqueeze(-1), scattered, text)


class Decoder(nn.Module):
    """decoder.onnx: the text model and lm_head over inputs_embeds, with past and present KV."""

    def __init__(self, model):
        super().__init__()
        self.model, self.lm_head = model.model, model.lm_head
        self.layers = model.config.num_hidden_layers

    def forward(self, inputs_embeds, attention_mask, position_ids, *past):
        from transformers.cache_utils import DynamicCache

        cache = DynamicCache.from_legacy_cache(tuple((past[2 * i], past[2 * i + 1]) for i in range(self.layers)))
        out = self.model(input_ids=None, inputs_embeds=inputs_embeds, attention_mask=attention_mask,
                         position_ids=position_ids, past_key_values=cache, use_cache=True, return_dict=True)
        logits = self.lm_head(out.last_hidden_state)
        present = out.past_key_values.to_legacy_cache()
        return (logits,) + tuple(t for kv in present for t in kv)


def register_symbolics():
    from torch.onnx import register_custom_op_symbolic

    register_custom_op_symbolic("aten::bitwise_or", lambda g, a, b: g.op("Or", a, b), OPSET)


def export(module, args, path, inputs, outputs, dynamic):
    torch.onnx.export(module, args, path, input_names=inputs, output_names=outputs, dynamic_axes=dynamic,
                      opset_version=OPSET, do_constant_folding=True)


def export_all(model, variant, out, vision_example, vision_embed=None):
    windowed = variant == "qwen2.5-vl"
    cfg = model.config
    kvh, hd, layers = cfg.num_key_value_heads, cfg.hidden_size // cfg.num_attention_heads, cfg.num_hidden_layers
    with torch.no_grad():
        names = ["pixel_values", "rotary_pos_ids", "attention_bias"]
        if windowed:
            names += ["window_index", "reverse_window_index", "window_attention_bias"]
        args = tuple(torch.from_numpy(vision_example[n]) for n in names)
        dyn = {"pixel_values": {0: "patches"}, "rotary_pos_ids": {0: "patches"},
               "attention_bias": {0: "patches", 1: "patches"}, "image_embeds": {0: "tokens"}}
        if windowed:
            dyn.update({"window_index": {0: "tokens"}, "reverse_window_index": {0: "tokens"},
                        "window_attention_bias": {0: "patches", 1: "patches"}})
        export(Vision(model.visual, windowed, vision_embed), args, os.path.join(out, "vision.onnx"), names, ["image_embeds"], dyn)

        embed = model.model.embed_tokens
        ids = torch.tensor([[5, IMAGE_PAD, IMAGE_PAD, 7], [IMAGE_PAD, 9, 10, IMAGE_PAD]])
        export(Embedding(embed), (ids, torch.randn(4, cfg.hidden_size)), os.path.join(out, "embedding.onnx"),
               ["input_ids", "image_embeds"], ["inputs_embeds"],
               {"input_ids": {0: "batch", 1: "sequence"}, "image_embeds": {0: "tokens"},
                "inputs_embeds": {0: "batch", 1: "sequence"}})

        b, s, p = 2, 3, 5
        past_names = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
        present_names = [n.replace("past_key_values.", "present.") for n in past_names]
        args = (torch.randn(b, s, cfg.hidden_size), torch.ones(b, p + s, dtype=torch.int64),
                torch.arange(p, p + s).expand(3, b, s).contiguous()) + tuple(torch.randn(b, kvh, p, hd)
                                                                              for _ in past_names)
        dyn = {"inputs_embeds": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
               "position_ids": {1: "batch", 2: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
        dyn.update({n: {0: "batch", 2: "past"} for n in past_names})
        dyn.update({n: {0: "batch", 2: "total"} for n in present_names})
        export(Decoder(model), args, os.path.join(out, "decoder.onnx"),
               ["inputs_embeds", "attention_mask", "position_ids"] + past_names, ["logits"] + present_names, dyn)


# -------------------------------------------------------------------------------- reference


def reference(model, processor, out, images, write_pixels=True):
    from PIL import Image

    import transformers.generation.utils as gen_utils

    gen_utils.is_fsdp_managed_module = lambda m: False  # torch 1.13 has no FSDP module check
    pil = [Image.fromarray(img) for img in images]
    samples, image_entries, margin = [], [], np.inf
    for i, img in enumerate(pil):
        px = processor.image_processor(images=[img], return_tensors="pt")
        entry = {"file": f"image{i + 1}.png", "image_grid_thw": px["image_grid_thw"][0].tolist()}
        if write_pixels:
            entry["pixel_values"] = f"image{i + 1}.pixel_values.npy"
            np.save(os.path.join(out, entry["pixel_values"]), px["pixel_values"].numpy())
        image_entries.append(entry)
    jobs = [([i], p) for i in range(len(pil)) for p in PROMPTS] + [(list(range(len(pil))), BOTH_PROMPT)]
    for image_ids, prompt in jobs:
        content = [{"type": "image"} for _ in image_ids] + [{"type": "text", "text": prompt}]
        messages = [{"role": "user", "content": content}]
        text = processor.apply_chat_template(messages, add_generation_prompt=True)
        inputs = processor(text=[text], images=[pil[i] for i in image_ids], return_tensors="pt")
        position_ids, delta = model.get_rope_index(input_ids=inputs["input_ids"],
                                                   image_grid_thw=inputs["image_grid_thw"],
                                                   attention_mask=inputs["attention_mask"])
        with torch.no_grad():
            gen = model.generate(**inputs, max_new_tokens=MAX_NEW_TOKENS, do_sample=False, num_beams=1,
                                 output_scores=True, return_dict_in_generate=True)
        tokens = gen.sequences[0, inputs["input_ids"].shape[1]:].tolist()
        for score in gen.scores:
            top2 = torch.topk(score[0], 2).values
            margin = min(margin, float(top2[0] - top2[1]))
        samples.append({"images": image_ids, "prompt": prompt, "text": text,
                        "input_ids": inputs["input_ids"][0].tolist(),
                        "image_grid_thw": inputs["image_grid_thw"].tolist(),
                        "position_ids": position_ids.tolist(), "rope_delta": int(delta.reshape(-1)[0]),
                        "generated": tokens, "generated_text": processor.tokenizer.decode(tokens)})
        print(f"images {image_ids} {prompt!r}: {len(inputs['input_ids'][0])} prompt tokens, "
              f"{len(tokens)} generated: {processor.tokenizer.decode(tokens)!r}")
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump({"max_new_tokens": MAX_NEW_TOKENS, "images": image_entries, "samples": samples,
                   "smallest_logit_margin": margin}, f)
    return margin


def write_config(config, sizes, out):
    """config.json in full (every vision size the runtime reads), rope_scaling as the released
    checkpoints write it (transformers turns "mrope" into "default" when it loads)."""
    d = config.to_diff_dict()
    d.update({k: getattr(config, k) for k in ("hidden_act", "max_position_embeddings", "rms_norm_eps", "rope_theta",
                                              "tie_word_embeddings", "use_sliding_window")})
    d["rope_scaling"] = {"type": "mrope", "mrope_section": list(config.rope_scaling["mrope_section"])}
    vision = config.vision_config
    d["vision_config"] = {k: getattr(vision, k) for k in sorted(set(vision.to_diff_dict()) | set(sizes) | {
        "hidden_act", "in_channels", "model_type"}) if getattr(vision, k, None) is not None}
    d["architectures"] = [type(config).__name__.replace("Config", "ForConditionalGeneration")]
    d.pop("_attn_implementation_autoset", None)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(d, f, indent=2, sort_keys=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    ap.add_argument("--out", required=True, help="folder to write (outside the repository, unless --fixture)")
    ap.add_argument("--fixture", action="store_true",
                    help="half-width model, small images, no pixel_values .npy: the committed test folder")
    a = ap.parse_args()
    if not hasattr(transformers, VARIANTS[a.variant]["model"]):
        sys.exit(f"{a.variant} needs transformers {VARIANTS[a.variant]['transformers']} "
                 f"(this is {transformers.__version__})")
    os.makedirs(a.out, exist_ok=True)
    if a.fixture:
        use_fixture_sizes(a.variant)
    model = build_model(a.variant, a.fixture)
    processor = build_processor(a.variant)

    images = [scenes.make_scene(SEED, i, size=FIXTURE["image_size"] if a.fixture else None)[0] for i in range(2)]
    for i, img in enumerate(images):
        scenes.write_png(os.path.join(a.out, f"image{i + 1}.png"), img)

    # the wrapper against the reference tower on both images together
    px = processor.image_processor(images=images, return_tensors="pt")
    grid = px["image_grid_thw"]
    feeds = vision_feeds(model.config, grid, px["pixel_values"])
    windowed = a.variant == "qwen2.5-vl"
    check_vision_indices(model, grid, feeds, windowed)
    with torch.no_grad():
        want = model.visual(px["pixel_values"], grid_thw=grid)
        names = ["pixel_values", "rotary_pos_ids", "attention_bias"] + (
            ["window_index", "reverse_window_index", "window_attention_bias"] if windowed else [])
        got = Vision(model.visual, windowed)(*(torch.from_numpy(feeds[n]) for n in names))
    err = float((got - want).abs().max())
    print(f"vision wrapper vs reference tower: grid {grid.tolist()}, max abs error {err:.2e} "
          f"(output scale {float(want.abs().max()):.2f})")
    if err > 1e-4:
        sys.exit("the vision wrapper does not match the reference tower")

    register_symbolics()
    export_all(model, a.variant, a.out, feeds)

    write_config(model.config, VARIANTS[a.variant]["vision"], a.out)
    generation = transformers.GenerationConfig(bos_token_id=ENDOFTEXT, pad_token_id=ENDOFTEXT,
                                               eos_token_id=[IM_END, ENDOFTEXT], do_sample=False,
                                               max_new_tokens=MAX_NEW_TOKENS)
    generation.save_pretrained(a.out)
    model.generation_config = generation
    processor.save_pretrained(a.out)
    margin = reference(model, processor, a.out, images, write_pixels=not a.fixture)
    if a.fixture:  # only what vlrt reads, and the references
        for name in os.listdir(a.out):
            if name not in FIXTURE_FILES:
                os.remove(os.path.join(a.out, name))
    print(f"smallest top-1 minus top-2 logit margin over all reference steps: {margin:.3f}")
    for name in sorted(os.listdir(a.out)):
        print(f"  {name:40s} {os.path.getsize(os.path.join(a.out, name)):>10d}")


if __name__ == "__main__":
    main()
