#!/usr/bin/env python3
"""Trains the demo VLM (models/demo-vlm): a small Qwen2-VL (transformers'
Qwen2VLForConditionalGeneration, from a config) taught to answer questions about generated
scenes (tools/demo_vlm_questions.py), then exported with tools/export_qwen_vl.py's wrappers to
vlrt's VLM folder layout. The vision tower's patch embedding is the demo tagger's CNN
(models/demo-tagger; see TaggerPatchEmbed) with a learnt projection; everything else is learnt
from scratch. The CNN starts frozen; --tune-cnn trains it too, at a fraction of the learning rate.

Training: a pool of scenes from seed 1234 (any other seed is held out), each step a batch of one
image size with one random question per scene (only the one-word answers for the first --short-first
steps), teacher forcing with the loss on the answer tokens and <|im_end|> only (averaged
over the batch's tokens, or with --loss question per question first), plus two auxiliary losses.
One teaches the vision tower: three linear heads on each image token (a 28 x 28 pixel cell)
predict the colour, the shape and the place from the left of the object whose box holds the
cell's centre (or none); the heads are not exported. The other teaches the decoder where to
look: the first head of decoder layer GUIDE_LAYER is pulled towards the cells of the object a
question is about (the object asked after, the shape counted, every object) at the position that
predicts the answer, and towards the cells of each object a description names at the positions
that predict its colour and shape words; a question with nothing to find (answer "No." or "0.")
is pulled towards <|vision_start|>. Without this guidance the decoder answered "Is there a red
star?" at chance after 1500 steps (and after 400 steps fed perfect cell labels instead of the
tower). AdamW, warm-up then cosine. One CPU thread unless --threads. A checkpoint is written to
--work every --save-every steps and a run resumes from it; progress lines give the loss and,
every --eval-every steps, the share of exact answers (every teacher-forced argmax right, which
is what greedy decoding gives) on 96 questions about seed 99's scenes.

    python tools/train_demo_vlm.py --work /tmp/demo-vlm-train     # needs transformers 4.46.3
    python tools/train_demo_vlm.py --work /tmp/demo-vlm-train --export-only
    python tools/train_demo_vlm.py --work /tmp/demo-vlm-tune --init-from models/demo-vlm --tune-cnn 0.25

--init-from starts a new run from the weights of an exported folder (fresh auxiliary heads,
trained alone for --heads-first steps, and a fresh optimizer).
"""
import argparse
import math
import multiprocessing
import os
import sys
import time

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo_vlm_questions as dq  # noqa: E402
import export_qwen_vl as xq  # noqa: E402
import scenes  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "models", "demo-vlm")
TRAIN_SEED, QUICK_SEED = 1234, 99
VARIANT = "qwen2-vl"
VISION = dict(depth=2, embed_dim=64, hidden_size=128, num_heads=4, mlp_ratio=2, patch_size=14,
              temporal_patch_size=2, spatial_merge_size=2)
TEXT = dict(hidden_size=128, intermediate_size=384, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, mrope_section=[4, 6, 6])
TAGGER = os.path.join(HERE, "..", "models", "demo-tagger", "model.onnx")
TAGGER_CONVS = [(3, 24, 2), (24, 32, 2), (32, 48, 1), (48, 64, 2), (64, 64, 1), (64, 128, 2), (128, 128, 1), (128, 128, 1)]
IMAGENET_MEAN, IMAGENET_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]  # the demo tagger's input
CELL = 28  # pixels of one image token (patch 14, merge 2)
AUX_WEIGHT = 0.5
GUIDE_LAYER, GUIDE_WEIGHT = 1, 1.0  # the decoder layer whose first head is taught where to look
FOLDER_FILES = ["vision.onnx", "embedding.onnx", "decoder.onnx", "tokenizer.json", "config.json",
                "generation_config.json", "preprocessor_config.json"]


def make_config():
    t = TEXT
    return transformers.Qwen2VLConfig(
        vocab_size=762, hidden_size=t["hidden_size"], intermediate_size=t["intermediate_size"],
        num_hidden_layers=t["num_hidden_layers"], num_attention_heads=t["num_attention_heads"],
        num_key_value_heads=t["num_key_value_heads"], max_position_embeddings=2048,
        rope_scaling={"type": "mrope", "mrope_section": t["mrope_section"]}, vision_config=VISION,
        image_token_id=xq.IMAGE_PAD, video_token_id=xq.VIDEO_PAD, vision_start_token_id=xq.VISION_START,
        vision_end_token_id=xq.VISION_END, bos_token_id=xq.ENDOFTEXT, eos_token_id=xq.IM_END,
        pad_token_id=xq.ENDOFTEXT, tie_word_embeddings=False, attn_implementation="eager", torch_dtype="float32",
        initializer_range=0.05)


def tagger_weights(path=TAGGER):
    """The demo tagger's Conv weights and biases in graph order ([(weight, bias)], float32)."""
    init = initializers(path)
    return [(init[n.input[1]], init[n.input[2]]) for n in read_onnx(path).graph.node if n.op_type == "Conv"]


def read_onnx(path):
    """An ONNX file's ModelProto, read with onnx's generated protobuf module alone (importing onnx
    needs a newer NumPy than the PyTorch this trainer runs on)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "onnx_ml_pb2", os.path.join(importlib.util.find_spec("onnx").submodule_search_locations[0], "onnx_ml_pb2.py"))
    pb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(pb)
    model = pb.ModelProto()
    with open(path, "rb") as f:
        model.ParseFromString(f.read())
    return model


def initializers(path):
    """{name: float32 tensor} of an ONNX file's initializers, in file order."""
    return {t.name: torch.from_numpy(np.frombuffer(t.raw_data, np.float32).reshape(tuple(t.dims)).copy())
            for t in read_onnx(path).graph.initializer if t.data_type == 1 and t.raw_data}


def weights_from_folder(model, folder):
    """Loads the weights of an exported folder (this trainer's export_folder) back into `model`.
    vision.onnx and embedding.onnx keep the parameters' names; decoder.onnx keeps the biases and
    norms, while the exporter's constant folding turned each linear weight into its transpose
    named onnx::MatMul_<n>, numbered in the order the layers run: per layer q, k, v, o, gate, up,
    down, then lm_head. Every parameter of `model` must be found, with its shape."""
    found = initializers(os.path.join(folder, "vision.onnx"))
    found["model.embed_tokens.weight"] = initializers(os.path.join(folder, "embedding.onnx"))["embed_tokens.weight"]
    decoder = initializers(os.path.join(folder, "decoder.onnx"))
    matmuls = sorted((n for n in decoder if n.startswith("onnx::MatMul_")), key=lambda n: int(n.rsplit("_", 1)[1]))
    linear = [f"model.layers.{i}.{part}.weight" for i in range(model.config.num_hidden_layers)
              for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")] + ["lm_head.weight"]
    if len(matmuls) != len(linear):
        sys.exit(f"{folder}/decoder.onnx has {len(matmuls)} folded weights, the model {len(linear)} linear layers")
    found.update({name: decoder[m].t() for name, m in zip(linear, matmuls)})
    found.update({n: v for n, v in decoder.items() if not n.startswith("onnx::")})
    params = dict(model.named_parameters())
    missing = [n for n in params if n not in found]
    wrong = [f"{n} {tuple(found[n].shape)} for {tuple(p.shape)}" for n, p in params.items()
             if n in found and found[n].shape != p.shape]
    if missing or wrong:
        sys.exit(f"{folder} does not hold this model's weights: missing {missing}, wrong shapes {wrong}")
    with torch.no_grad():
        for n, p in params.items():
            p.copy_(found[n])


def patches_per_row(rotary_pos_ids):
    """The image's width in patches: how many patches sit in row 0 (one image per vision run)."""
    return torch.nonzero(rotary_pos_ids[:, 0] == 0).shape[0]


class TaggerPatchEmbed(torch.nn.Module):
    """The tower's patch embedding: the patches put back together into the image (first frame),
    renormalized from CLIP's mean and std to ImageNet's and resized by 8/7, so that the demo
    tagger's CNN (models/demo-tagger, trained on the same scenes; stride 16, BatchNorm folded)
    gives one 128-feature cell and 64 label scores per 14 x 14 patch; those are projected to the
    tower's width and listed in the tower's patch order. The CNN's weights stay frozen unless
    --tune-cnn.

    A linear patch embedding with two attention layers did not learn the shapes (a per-cell shape
    head at 0.29, against 0.83 for colour), nor did a per-patch CNN with convolutions over the
    patch grid (0.24 after 700 steps), and a CNN over the image learnt from scratch was still at
    0.18 after 800 steps."""

    def __init__(self, out_dim, mean, std):
        super().__init__()
        convs = [torch.nn.Conv2d(ci, co, 3, stride, 1) for ci, co, stride in TAGGER_CONVS]
        self.features = torch.nn.Sequential(*(m for c in convs for m in (c, torch.nn.ReLU())))
        self.scores = torch.nn.Conv2d(TAGGER_CONVS[-1][1], len(scenes.LABELS), 1)
        self.project = torch.nn.Conv2d(TAGGER_CONVS[-1][1] + len(scenes.LABELS), out_dim, 1)
        imagenet_mean, imagenet_std = torch.tensor(IMAGENET_MEAN), torch.tensor(IMAGENET_STD)
        self.register_buffer("scale", (torch.tensor(std) / imagenet_std).reshape(1, 3, 1, 1))
        self.register_buffer("shift", ((torch.tensor(mean) - imagenet_mean) / imagenet_std).reshape(1, 3, 1, 1))

    def load_tagger(self):
        convs = [m for m in self.features if isinstance(m, torch.nn.Conv2d)] + [self.scores]
        weights = tagger_weights()
        assert len(weights) == len(convs), f"the demo tagger has {len(weights)} convolutions, not {len(convs)}"
        with torch.no_grad():
            for conv, (w, b) in zip(convs, weights):
                conv.weight.copy_(w)
                conv.bias.copy_(b)
        for p in list(self.features.parameters()) + list(self.scores.parameters()):
            p.requires_grad_(False)

    def forward(self, pixel_values, width, images=1):
        """pixel_values [images * patches, 3 * 2 * 14 * 14] of images `width` patches wide."""
        x = pixel_values.reshape(images, -1, width // 2, 2, 2, 3, 2, 14, 14)[:, :, :, :, :, :, 0]
        x = x.permute(0, 5, 1, 3, 6, 2, 4, 7).reshape(images, 3, -1, width * 14) * self.scale + self.shift
        x = torch.nn.functional.interpolate(x, scale_factor=8 / 7, mode="bilinear", align_corners=False)
        cells = self.features(x)
        x = self.project(torch.cat([cells, self.scores(cells)], dim=1))  # [images, C, rows, width]
        x = x.reshape(images, x.shape[1], -1, 2, width // 2, 2).permute(0, 2, 4, 3, 5, 1)
        return x.reshape(-1, x.shape[-1])


def batched_vision(visual, pixel_values, grid_thw):
    """The vision tower over a batch of images of one grid: the same arithmetic as
    tools/export_qwen_vl.py's Vision (attention within each image), as batched matrix products
    instead of one [N, N] attention over every patch of the batch."""
    t, h, w = (int(v) for v in grid_thw[0])
    n, b = t * h * w, grid_thw.shape[0]
    x = visual.patch_embed(pixel_values, w, b).reshape(b, n, -1)
    freqs = visual.rot_pos_emb(grid_thw[:1])
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    for blk in visual.blocks:
        attn = blk.attn
        q, k, v = attn.qkv(blk.norm1(x)).reshape(b, n, 3, attn.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
        q = q * cos + xq.rotate_half(q) * sin
        k = k * cos + xq.rotate_half(k) * sin
        weights = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1]), dim=-1)
        x = x + attn.proj((weights @ v).transpose(1, 2).reshape(b, n, -1))
        x = x + blk.mlp(blk.norm2(x))
    return visual.merger(x.reshape(b * n, -1))


# ---------------------------------------------------------------------------------- data


def cell_targets(objects, grid):
    """Per image token (row-major over the merged grid): 1 + the colour index, 1 + the shape
    index and 1 + the object index (left to right) of the smallest object whose box holds the
    cell's centre; 0 where none does."""
    rows, cols = grid[1] // 2, grid[2] // 2
    colour, shape, which = (np.zeros((rows, cols), np.int64) for _ in range(3))
    colours = list(scenes.COLOURS)
    ys, xs = (np.arange(rows) + 0.5) * CELL, (np.arange(cols) + 0.5) * CELL
    for i, (c, s, box) in sorted(enumerate(objects), key=lambda o: -(o[1][2][2] - o[1][2][0]) * (o[1][2][3] - o[1][2][1])):
        inside = ((ys >= box[1]) & (ys < box[3]))[:, None] & ((xs >= box[0]) & (xs < box[2]))[None, :]
        colour[inside], shape[inside], which[inside] = colours.index(c) + 1, scenes.SHAPES.index(s) + 1, i + 1
    return tuple(torch.from_numpy(t.reshape(-1)) for t in (colour, shape, which))


def _scene(args):
    seed, index = args
    return dq.make_scene(seed, index)


def scene_pool(seed, count, processor, cache):
    """count scenes of `seed` with their pixel values, grouped by image size; cached in `cache`."""
    if cache and os.path.exists(cache):
        with open(cache, "rb") as f:
            scenes_ = torch.load(f)
    else:
        with multiprocessing.Pool(2) as pool:
            scenes_ = pool.map(_scene, [(seed, i) for i in range(count)], chunksize=16)
        if cache:
            torch.save(scenes_, cache)
    buckets = {}
    for img, objects in scenes_:
        px = processor.image_processor(images=[img], return_tensors="pt")
        grid = tuple(px["image_grid_thw"][0].tolist())
        buckets.setdefault(grid, []).append((px["pixel_values"], objects, cell_targets(objects, grid)))
    return buckets


class Prompts:
    """Token ids of the chat prompt for a question and image grid (image pads expanded), cached."""

    def __init__(self, processor):
        self.processor, self.cache = processor, {}
        self.tokenizer = processor.tokenizer

    def ids(self, prompt, grid):
        key = (prompt, grid)
        if key not in self.cache:
            messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
            text = self.processor.apply_chat_template(messages, add_generation_prompt=True)
            pads = grid[0] * grid[1] * grid[2] // 4
            text = text.replace("<|image_pad|>", "<|image_pad|>" * pads)
            self.cache[key] = self.tokenizer(text)["input_ids"]
        return self.cache[key]

    def answer(self, text):
        return self.tokenizer(text)["input_ids"] + [xq.IM_END]


def ask(rng, px, objects, targets, kind):
    """One training item: (pixel values, kind, prompt, answer, cell targets)."""
    return (px, kind, *dq.question(rng, objects, kind), targets)


def guided_cells(prompts, prompt_len, kind, prompt, answer, targets):
    """The attention guidance for one question: (query position, cells) pairs, each saying that
    the query at that position should look at those image tokens, or with cells None at the
    <|vision_start|> token (nothing in the image matches). The answer's first token is predicted
    from the question's matching cells (the object asked about, the shape counted, every object)
    or from <|vision_start|> where there are none, and each word of a description from the cells
    of the object it names."""
    colour, shape, which = targets
    colours = list(scenes.COLOURS)
    last = prompt_len - 1
    if kind == "is_there":
        c, s = prompt[len("Is there a "):-1].split(" ")
        cells = (colour == colours.index(c) + 1) & (shape == scenes.SHAPES.index(s) + 1)
        return [(last, cells if answer == "Yes." else None)] if answer == "No." or cells.any() else []
    if kind == "how_many_objects":
        return [(last, which > 0)]
    if kind == "how_many_shape":
        s = next(s for s in scenes.SHAPES if prompt == f"How many {dq.plural(s)}?")
        cells = shape == scenes.SHAPES.index(s) + 1
        return [(last, cells if answer != "0." else None)] if answer == "0." or cells.any() else []
    pairs, start = [], 0
    for k in range(int(which.max())):
        cells = which == k + 1
        if not cells.any():  # covered by smaller objects
            continue
        c, s = colours[int(colour[cells][0]) - 1], scenes.SHAPES[int(shape[cells][0]) - 1]
        at = answer.index(f" {c} {s}", start)
        for end in (at, at + 1 + len(c)):  # the colour word, then the shape word
            pairs.append((last + len(prompts.tokenizer(answer[:end])["input_ids"]), cells))
        start = at + 1
    return pairs


def make_batch(model, items, grid, prompts):
    """items: ask()'s (pixel values, kind, prompt, answer, cell targets) of one grid -> model inputs with
    answer-only labels and Qwen2-VL's multimodal rotary positions (image tokens at their row and
    column, as generation and vlrt place them; without them the model would train on 1-D
    positions), the cell targets, and per item its attention guidance as (query position, image
    token positions)."""
    seqs, labels, guides = [], [], []
    for _, kind, prompt, answer, targets in items:
        p, a = prompts.ids(prompt, grid), prompts.answer(answer)
        seqs.append(p + a)
        labels.append([-100] * len(p) + a)
        image = torch.tensor([i for i, t in enumerate(p) if t == xq.IMAGE_PAD])
        sink = torch.tensor([p.index(xq.VISION_START)])
        guides.append([(q, sink if cells is None else image[cells])
                       for q, cells in guided_cells(prompts, len(p), kind, prompt, answer, targets)])
    length = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), length), xq.ENDOFTEXT, dtype=torch.int64)
    lab = torch.full((len(seqs), length), -100, dtype=torch.int64)
    mask = torch.zeros((len(seqs), length), dtype=torch.int64)
    for i, (s, l) in enumerate(zip(seqs, labels)):
        ids[i, :len(s)], lab[i, :len(s)], mask[i, :len(s)] = torch.tensor(s), torch.tensor(l), 1
    grid_thw = torch.tensor([list(grid)] * len(items))
    positions, _ = model.get_rope_index(ids, grid_thw, None, mask)
    return dict(input_ids=ids, attention_mask=mask, labels=lab, position_ids=positions,
                pixel_values=torch.cat([item[0] for item in items]), image_grid_thw=grid_thw), \
        [torch.cat([item[4][i] for item in items]) for i in range(3)], guides


def guidance_loss(attentions, guides):
    """Mean over the batch's guided queries of -log(the attention mass that GUIDE_LAYER's first
    head puts on the guided cells)."""
    weights = attentions[GUIDE_LAYER][:, 0]
    terms = [-torch.log(weights[i, q, cells].sum() + 1e-6) for i, pairs in enumerate(guides) for q, cells in pairs]
    return torch.stack(terms).mean() if terms else weights.sum() * 0


def sample_batches(rng, buckets, batch_size, kinds):
    grids = sorted(buckets)
    weights = np.array([len(buckets[g]) for g in grids], dtype=np.float64)
    grid = grids[rng.choice(len(grids), p=weights / weights.sum())]
    items = []
    for j in rng.integers(len(buckets[grid]), size=batch_size):
        items.append(ask(rng, *buckets[grid][j], kinds[rng.integers(len(kinds))]))
    return grid, items


def answer_loss(logits, labels, per_question):
    """Cross-entropy over the answer tokens, averaged over all of the batch's answer tokens, or
    per question first (per_question): then a one-token "Yes." weighs as much as a listed
    description, whose many tokens would otherwise drown the short answers."""
    logits, labels = logits[:, :-1], labels[:, 1:]
    per_token = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1),
                                                  ignore_index=-100, reduction="none").view(labels.shape)
    counted = (labels != -100).sum(dim=1)
    if not per_question:
        return per_token.sum() / counted.sum()
    return (per_token.sum(dim=1) / counted.clamp(min=1)).mean()


def exact_answers(model, batch):
    """Per sample: whether every answer token is the argmax (= greedy decoding's answer)."""
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k != "labels"}).logits
    pred, lab = logits[:, :-1].argmax(-1), batch["labels"][:, 1:]
    return ((pred == lab) | (lab == -100)).all(dim=1)


# -------------------------------------------------------------------------------- export


def export_folder(model, processor, out):
    os.makedirs(out, exist_ok=True)
    img, _ = dq.make_scene(QUICK_SEED, 0)
    px = processor.image_processor(images=[img], return_tensors="pt")
    grid = px["image_grid_thw"]
    feeds = xq.vision_feeds(model.config, grid, px["pixel_values"])
    embed = lambda pixel_values, ids, bias: model.visual.patch_embed(pixel_values, patches_per_row(ids))  # noqa: E731
    with torch.no_grad():
        want = batched_vision(model.visual, px["pixel_values"], grid)
        got = xq.Vision(model.visual, False, embed)(*(torch.from_numpy(feeds[n]) for n in
                                                      ("pixel_values", "rotary_pos_ids", "attention_bias")))
    err = float((got - want).abs().max())
    print(f"vision wrapper vs the trained tower: max abs error {err:.2e}")
    if err > 1e-3:
        sys.exit("the vision wrapper does not match the trained tower")
    xq.register_symbolics()
    xq.export_all(model, VARIANT, out, feeds, embed)
    xq.write_config(model.config, VISION, out)
    transformers.GenerationConfig(bos_token_id=xq.ENDOFTEXT, pad_token_id=xq.ENDOFTEXT,
                                  eos_token_id=[xq.IM_END, xq.ENDOFTEXT], do_sample=False,
                                  max_new_tokens=24).save_pretrained(out)
    processor.save_pretrained(out)
    for name in os.listdir(out):
        if name not in FOLDER_FILES and not name.endswith(".manifest.json") and name != "TRAINING.md":
            os.remove(os.path.join(out, name))
    total = 0
    for name in sorted(os.listdir(out)):
        size = os.path.getsize(os.path.join(out, name))
        total += size
        print(f"  {name:40s} {size:>10d}")
    print(f"  {'total':40s} {total:>10d}")


# ------------------------------------------------------------------------------ training


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--work", required=True, help="folder for the scene cache and checkpoints")
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--scenes", type=int, default=6000)
    ap.add_argument("--steps", type=int, default=4200)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--short-first", type=int, default=0,
                    help="steps at the start that ask only the questions with one-word answers")
    ap.add_argument("--loss", choices=["token", "question"], default="token",
                    help="average the answer loss over all answer tokens of the batch, or per question first")
    ap.add_argument("--kinds", default=",".join(dq.KINDS),
                    help="question kinds asked in training, comma-separated; a kind listed twice is asked twice as often")
    ap.add_argument("--threads", type=int, default=1, help="PyTorch's CPU threads")
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--eval-every", type=int, default=300)
    ap.add_argument("--export-only", action="store_true", help="export the last checkpoint")
    ap.add_argument("--init-from", metavar="FOLDER",
                    help="start a new run (no checkpoint in --work yet) from the weights of an exported folder, "
                         "such as models/demo-vlm; the auxiliary heads and the optimizer start afresh")
    ap.add_argument("--heads-first", type=int, default=0,
                    help="steps at the start that train the auxiliary heads alone (after --init-from)")
    ap.add_argument("--tune-cnn", type=float, default=0.0, metavar="SCALE",
                    help="also train the patch embedding's CNN, at SCALE times the learning rate (0: frozen)")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    os.makedirs(a.work, exist_ok=True)
    torch.manual_seed(0)
    model = transformers.Qwen2VLForConditionalGeneration._from_config(make_config(), attn_implementation="eager")
    processor = xq.build_processor(VARIANT)
    image_processor = processor.image_processor
    model.visual.patch_embed = TaggerPatchEmbed(VISION["embed_dim"], image_processor.image_mean, image_processor.image_std)
    model.visual.patch_embed.load_tagger()
    image_embeds = []  # the tower's last output, for the auxiliary heads

    def vision_forward(pixel_values, grid_thw):
        image_embeds[:] = [batched_vision(model.visual, pixel_values, grid_thw)]
        return image_embeds[0]

    model.visual.forward = vision_forward
    heads = torch.nn.ModuleList([torch.nn.Linear(TEXT["hidden_size"], len(scenes.COLOURS) + 1),
                                 torch.nn.Linear(TEXT["hidden_size"], len(scenes.SHAPES) + 1),
                                 torch.nn.Linear(TEXT["hidden_size"], dq.MAX_OBJECTS + 1)])
    print(f"{sum(p.numel() for p in model.parameters()) / 1e6:.2f} M parameters")

    cnn = list(model.visual.patch_embed.features.parameters()) + list(model.visual.patch_embed.scores.parameters())
    for p in cnn:
        p.requires_grad_(a.tune_cnn > 0)
    rest = [p for p in model.parameters() if all(p is not c for c in cnn)]
    groups = [{"params": rest, "scale": 1.0}, {"params": list(heads.parameters()), "scale": 1.0, "heads": True}]
    if a.tune_cnn > 0:
        groups.append({"params": cnn, "scale": a.tune_cnn})
    opt = torch.optim.AdamW(groups, lr=a.lr, weight_decay=0.01, betas=(0.9, 0.98))
    ckpt_path = os.path.join(a.work, "checkpoint.pt")
    step, rng = 0, np.random.default_rng(TRAIN_SEED)
    if os.path.exists(ckpt_path):
        ckpt = torch.load(ckpt_path)
        model.load_state_dict(ckpt["model"])
        heads.load_state_dict(ckpt["heads"])
        if not a.export_only:
            try:
                opt.load_state_dict(ckpt["opt"])
            except ValueError as e:
                sys.exit(f"{ckpt_path}: its optimizer state does not fit this run ({e}); "
                         "was it trained with another --tune-cnn?")
        step, rng.bit_generator.state = ckpt["step"], ckpt["rng"]
        print(f"resumed at step {step}")
    elif a.init_from:
        weights_from_folder(model, a.init_from)
        print(f"weights from {a.init_from}")
    if a.export_only:
        export_folder(model.eval(), processor, a.out)
        return

    t0 = time.time()
    buckets = scene_pool(TRAIN_SEED, a.scenes, processor, os.path.join(a.work, "scenes.pt"))
    quick = scene_pool(QUICK_SEED, 96, processor, os.path.join(a.work, "quick.pt"))
    prompts = Prompts(processor)
    qrng = np.random.default_rng(QUICK_SEED)
    quick_batches = []
    for grid, pool in quick.items():
        items = [ask(qrng, *scene, dq.KINDS[i % len(dq.KINDS)]) for i, scene in enumerate(pool)]
        quick_batches.append((grid, items))
    print(f"scenes ready in {time.time() - t0:.0f} s: " + ", ".join(f"{g}: {len(p)}" for g, p in buckets.items()))

    def lr_at(s):
        """Warm-up over 60 steps after --heads-first, then cosine decay to --steps."""
        start, warm = a.heads_first, 60
        if s < start + warm:
            return a.lr * max(0, s - start) / warm
        return a.lr * 0.5 * (1 + math.cos(math.pi * (s - start - warm) / max(1, a.steps - start - warm)))

    def quick_accuracy():
        model.eval()
        right = {k: [0, 0] for k in dq.KINDS}
        for grid, items in quick_batches:
            ok = exact_answers(model, make_batch(model, items, grid, prompts)[0])
            for (_, kind, _, _, _), good in zip(items, ok.tolist()):
                right[kind][0] += good
                right[kind][1] += 1
        model.train()
        total = sum(r[0] for r in right.values()) / sum(r[1] for r in right.values())
        return total, " ".join(f"{k}={r[0] / max(1, r[1]):.2f}" for k, r in right.items())

    if a.init_from and step == 0:
        total, per_kind = quick_accuracy()
        print(f"step 0: quick exact answers {total:.3f} ({per_kind})", flush=True)
    model.train()
    t0, losses = time.time(), []
    while step < a.steps:
        for group in opt.param_groups:
            heads_alone = group.get("heads") and step < a.heads_first
            group["lr"] = a.lr if heads_alone else lr_at(step) * group["scale"]
        kinds = [k for k in a.kinds.split(",") if k != "what" or step >= a.short_first]
        grid, items = sample_batches(rng, buckets, a.batch, kinds)
        batch, targets, guides = make_batch(model, items, grid, prompts)
        labels = batch.pop("labels")
        out = model(**batch, output_attentions=True)
        answers_loss = answer_loss(out.logits, labels, a.loss == "question")
        aux_loss = sum(torch.nn.functional.cross_entropy(head(image_embeds[0]), t) for head, t in zip(heads, targets))
        guide_loss = guidance_loss(out.attentions, guides)
        loss = answers_loss + AUX_WEIGHT * aux_loss + GUIDE_WEIGHT * guide_loss
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        losses.append((float(answers_loss), float(aux_loss), float(guide_loss)))
        if step % 10 == 0:
            answer_mean, aux_mean, guide_mean = np.mean(losses[-10:], axis=0)
            print(f"step {step}/{a.steps} answer loss {answer_mean:.4f} cell loss {aux_mean:.4f} "
                  f"guidance loss {guide_mean:.4f} lr {lr_at(step):.2e} "
                  f"{(time.time() - t0) / 60:.1f} min", flush=True)
        if step % a.eval_every == 0 or step == a.steps:
            total, per_kind = quick_accuracy()
            print(f"step {step}: quick exact answers {total:.3f} ({per_kind})", flush=True)
        if step % a.save_every == 0 or step == a.steps:
            torch.save({"model": model.state_dict(), "heads": heads.state_dict(), "opt": opt.state_dict(), "step": step,
                        "rng": rng.bit_generator.state}, ckpt_path + ".tmp")
            os.replace(ckpt_path + ".tmp", ckpt_path)
    print(f"trained {step} steps in {(time.time() - t0) / 60:.1f} min")
    export_folder(model.eval(), processor, a.out)


if __name__ == "__main__":
    main()
