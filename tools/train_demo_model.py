#!/usr/bin/env python3
"""Trains vlrt's demo open-vocabulary detector on generated scenes (tools/scenes.py) and exports
it to ONNX with exactly GroundingDINO's contract:

  inputs   img float32 [B,3,H,W], input_ids int64 [B,L], attention_mask bool [B,L],
           position_ids int64 [B,L], token_type_ids int64 [B,L], text_token_mask bool [B,L,L]
  outputs  logits [B,900,256] (before sigmoid; token slots >= L and padded tokens at -1e4),
           boxes [B,900,4] (normalized cx, cy, w, h in [0, 1])

The model: a small CNN (BatchNorm, folded into the convolutions at export) with a top-down merge
of its stride-32 map into the stride-8 and stride-16 ones; 900 queries, a 30x30 grid of anchors
whose features are read with GridSample (any H, W) plus a learned position embedding; a small
BERT-style text encoder (token, position and type embeddings, 2 layers attending within a phrase
through text_token_mask); one cross-attention layer from queries to tokens; logits are scaled
dot products of queries and tokens, then combined within each phrase so that a phrase's tokens
all carry the product of their probabilities (a query matches "purple circle" only when it
matches both words); boxes are offsets from the anchor, sizes in pixels divided by the image
size.

Training: fresh scenes every step (short side 320, as the metadata tells the pipeline), captions
mixing present and absent objects; the anchor cell holding a box centre is positive for its
phrase's tokens, cells close to the centre are ignored for those tokens (and learn the box),
everything else is negative; sigmoid focal loss over tokens, L1 + GIoU on boxes. Fixed seed.

    nice /usr/bin/python3 tools/train_demo_model.py            # ~40 min at 2 threads
    nice /usr/bin/python3 tools/train_demo_model.py --steps 50 --out /tmp/m   # smoke test

Needs Debian's python3-torch (1.13) and python3-numpy; transformers (optional) for the
tokenizer cross-check. Writes OUT/model.onnx, OUT/vocab.txt and the reference (inputs and
PyTorch outputs for tools/check_demo_model.py) to $TMPDIR/vlrt_demo_reference.npz.
"""
import argparse
import math
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import demo_text  # noqa: E402
import scenes  # noqa: E402

GRID = 30
NUM_QUERIES = GRID * GRID
MAX_TEXT_LEN = 256
NEG = -1e4
MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)

SHORT_SIDE, MAX_SIDE = 320, 640
# The box threshold trades recall for silence on absent phrases; 0.55 is where held-out seed 555
# (tools/eval_demo.py) keeps 97% of images free of absent-phrase boxes.
BOX_THRESHOLD, TEXT_THRESHOLD, NMS_IOU = 0.55, 0.25, 0.5
LONG_BUCKETS = [320, 384, 448, 512, 576, 640]
REFERENCE = os.path.join(tempfile.gettempdir(), "vlrt_demo_reference.npz")


# ---------------------------------------------------------------- model

def conv_bn(cin, cout, stride=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True))


class Backbone(nn.Module):
    def __init__(self, widths=(16, 32, 64, 96, 128), dim=64):
        super().__init__()
        w1, w2, w3, w4, w5 = widths
        self.s4 = nn.Sequential(conv_bn(3, w1, 2), conv_bn(w1, w2, 2))
        self.s8 = nn.Sequential(conv_bn(w2, w3, 2), conv_bn(w3, w3))
        self.s16 = nn.Sequential(conv_bn(w3, w4, 2), conv_bn(w4, w4))
        self.s32 = nn.Sequential(conv_bn(w4, w5, 2), conv_bn(w5, w5), conv_bn(w5, w5))
        self.lat8 = nn.Conv2d(w3, dim, 1)
        self.lat16 = nn.Conv2d(w4, dim, 1)
        self.lat32 = nn.Conv2d(w5, dim, 1)
        self.out16 = conv_bn(dim, dim)
        self.out8 = conv_bn(dim, dim)

    def forward(self, x):
        c8 = self.s8(self.s4(x))
        c16 = self.s16(c8)
        c32 = self.s32(c16)
        p32 = self.lat32(c32)
        p16 = self.out16(self.lat16(c16) + F.interpolate(p32, size=c16.shape[-2:], mode="nearest"))
        p8 = self.out8(self.lat8(c8) + F.interpolate(p16, size=c8.shape[-2:], mode="nearest"))
        return p8, p16


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(dim, dim)
        self.kv = nn.Linear(dim, 2 * dim)
        self.o = nn.Linear(dim, dim)

    def forward(self, x, ctx, allowed):
        """allowed: bool, broadcastable to [B, Nq, Nk]."""
        b, n, d = x.shape
        h = self.heads
        q = self.q(x).reshape(b, n, h, d // h).transpose(1, 2)
        k, v = self.kv(ctx).reshape(b, -1, 2, h, d // h).permute(2, 0, 3, 1, 4)
        att = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d // h))
        att = att + (~allowed).unsqueeze(1).to(att.dtype) * NEG
        out = torch.matmul(att.softmax(-1), v).transpose(1, 2).reshape(b, n, d)
        return self.o(out)


class Block(nn.Module):
    def __init__(self, dim, heads, hidden):
        super().__init__()
        self.n1 = nn.LayerNorm(dim)
        self.att = Attention(dim, heads)
        self.n2 = nn.LayerNorm(dim)
        self.ffn = nn.Sequential(nn.Linear(dim, hidden), nn.GELU(), nn.Linear(hidden, dim))

    def forward(self, x, ctx, allowed):
        y = self.n1(x)
        x = x + self.att(y, y if ctx is None else ctx, allowed)
        return x + self.ffn(self.n2(x))


class DemoGroundingModel(nn.Module):
    def __init__(self, vocab, dim=64, heads=4):
        super().__init__()
        vocab_size = len(vocab)
        self.dim = dim
        self.backbone = Backbone(dim=dim)
        self.query_in = nn.Sequential(nn.Linear(2 * dim, dim), nn.ReLU(inplace=True), nn.Linear(dim, dim))
        self.query_pos = nn.Parameter(torch.randn(NUM_QUERIES, dim) * 0.02)
        self.box_head = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(inplace=True), nn.Linear(dim, 4))
        self.tok = nn.Embedding(vocab_size, dim)
        self.pos = nn.Embedding(MAX_TEXT_LEN, dim)
        self.typ = nn.Embedding(2, dim)
        self.text_norm = nn.LayerNorm(dim)
        self.text_layers = nn.ModuleList([Block(dim, heads, 2 * dim) for _ in range(2)])
        self.fusion = Block(dim, heads, 2 * dim)
        self.q_proj = nn.Linear(dim, dim)
        self.t_proj = nn.Linear(dim, dim)
        self.logit_bias = nn.Parameter(torch.tensor(-2.3))  # a two-word phrase starts near 0.01
        g = (torch.arange(GRID, dtype=torch.float32) + 0.5) / GRID
        gy, gx = torch.meshgrid(g, g, indexing="ij")
        self.register_buffer("anchors", torch.stack([gx, gy], -1).reshape(1, NUM_QUERIES, 2), persistent=False)
        # 1 for the tokens that name things, 0 for [CLS], [SEP], [PAD] and the phrase separators.
        content = torch.ones(vocab_size)
        for tok in ("[CLS]", "[SEP]", "[PAD]", ".", "?"):
            if tok in vocab:
                content[vocab[tok]] = 0.0
        self.register_buffer("content", content, persistent=False)
        with torch.no_grad():
            self.box_head[-1].weight.mul_(0.1)
            self.box_head[-1].bias.zero_()

    def forward(self, img, input_ids, attention_mask, position_ids, token_type_ids, text_token_mask):
        b = img.shape[0]
        size = torch._shape_as_tensor(img)[2:].to(img.dtype)  # H, W
        wh = torch.stack([size[1], size[0]]).reshape(1, 1, 2)
        p8, p16 = self.backbone(img)
        grid = (self.anchors * 2 - 1).reshape(1, GRID, GRID, 2).expand(b, GRID, GRID, 2)
        f8 = F.grid_sample(p8, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        f16 = F.grid_sample(p16, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        feats = torch.cat([f8, f16], 1).flatten(2).transpose(1, 2)  # [B, 900, 2*dim]
        q = self.query_in(feats) + self.query_pos

        d = self.box_head(q)
        centre = self.anchors + d[..., :2] * 16.0 / wh
        extent = torch.exp(d[..., 2:].clamp(max=4.0)) * 48.0 / wh
        boxes = torch.cat([centre, extent], -1).clamp(0.0, 1.0)

        t = self.tok(input_ids) + self.pos(position_ids) + self.typ(token_type_ids)
        t = self.text_norm(t)
        for layer in self.text_layers:
            t = layer(t, None, text_token_mask)
        q = self.fusion(q, t, attention_mask.unsqueeze(1))

        logits = torch.matmul(self.q_proj(q), self.t_proj(t).transpose(1, 2)) * (1.0 / math.sqrt(self.dim))
        logits = self.phrase_and(logits + self.logit_bias, input_ids, attention_mask, text_token_mask)
        logits = torch.where(attention_mask.unsqueeze(1), logits, torch.full_like(logits, NEG))
        logits = F.pad(logits, (0, MAX_TEXT_LEN - logits.shape[-1]), value=NEG)
        return logits, boxes


    def phrase_and(self, logits, input_ids, attention_mask, text_token_mask):
        """A phrase matches a query only when all its words do: each content token's probability
        becomes the product of the probabilities of its phrase's content tokens (so "purple
        circle" stays low on a purple star however well "purple" matches); special tokens keep
        their own. One matmul with the phrase mask, [B, 900, L] memory."""
        content = self.content[input_ids] * attention_mask.to(logits.dtype)  # [B, L]
        same_phrase = text_token_mask.to(logits.dtype) * content.unsqueeze(1)  # [B, t, t']
        x = logits.clamp(-30.0, 30.0)
        log_p = -torch.log(1.0 + torch.exp(-x))  # log sigmoid
        s = torch.matmul(log_p, same_phrase.transpose(1, 2)).clamp(max=-1e-4)  # log of the product
        joint = s - torch.log(1.0 - torch.exp(s))  # back to a logit
        return torch.where(content.unsqueeze(1) > 0, joint, logits)


# ---------------------------------------------------------------- data

def bucket_size(height, width):
    """The training size for a scene of height x width: short side SHORT_SIDE, long side the
    nearest bucket to what the pipeline's aspect-keeping resize gives."""
    short, long_ = min(height, width), max(height, width)
    target = min(MAX_SIDE, long_ * SHORT_SIDE / short)
    lb = min(LONG_BUCKETS, key=lambda v: abs(v - target))
    return (SHORT_SIDE, lb) if height <= width else (lb, SHORT_SIDE)


def to_input(img_u8, size):
    """uint8 HxWx3 -> normalized float [3, h, w] resized (bilinear) to size."""
    x = torch.from_numpy(img_u8).permute(2, 0, 1).float().unsqueeze(0) / 255.0
    if tuple(x.shape[-2:]) != tuple(size):
        x = F.interpolate(x, size=size, mode="bilinear", align_corners=False, antialias=True)  # as PIL
    mean = torch.tensor(MEAN).reshape(1, 3, 1, 1)
    std = torch.tensor(STD).reshape(1, 3, 1, 1)
    return ((x - mean) / std)[0]


def training_caption(rng, present):
    """Present labels (a few left out now and then: unprompted objects must stay silent) and
    0-5 absent ones, most of them sharing a word with a present one: half the colour of a
    present object with another shape (the hardest case for a small backbone: telling shapes
    apart), a quarter its shape in another colour, a quarter anything."""
    prompted = list(present)
    if len(prompted) > 1 and rng.random() < 0.15:
        keep = rng.permutation(len(prompted))[: int(rng.integers(1, len(prompted)))]
        prompted = [prompted[i] for i in sorted(keep)]
    absent = []
    for _ in range(int(rng.integers(0, 6))):
        colour, shape = present[int(rng.integers(len(present)))].split(" ")
        r = rng.random()
        if r < 0.5:
            pool = [f"{colour} {s}" for s in scenes.SHAPES]
        elif r < 0.75:
            pool = [f"{c} {shape}" for c in scenes.COLOURS]
        else:
            pool = scenes.LABELS
        pool = [l for l in pool if l not in present and l not in absent]
        if pool:
            absent.append(pool[int(rng.integers(len(pool)))])
    phrases = prompted + absent
    return " . ".join(phrases[i] for i in rng.permutation(len(phrases))) + " ."


class SceneStream(torch.utils.data.IterableDataset):
    """Endless batches, all of one training size per batch. Generating a scene costs more than a
    training step, so each batch has `fresh` new scenes and the rest drawn from the recent ones of
    its size (each seen again with another caption and flip)."""

    def __init__(self, seed, batch_size, vocab, fresh=4, pool=48):
        self.seed, self.batch_size, self.vocab = seed, batch_size, vocab
        self.fresh, self.pool = fresh, pool

    def _new_scene(self, rng, size, index):
        k = rng.uniform(1.0, MAX_SIDE / max(size))
        gen = (int(round(size[0] * k)), int(round(size[1] * k)))
        img, ann = scenes.make_scene(self.seed, index, size=gen)
        boxes = np.array([o["box"] for o in ann["objects"]], dtype=np.float32).reshape(-1, 4)
        boxes /= np.array([gen[1], gen[0], gen[1], gen[0]], dtype=np.float32)
        return to_input(img, size), boxes, [o["label"] for o in ann["objects"]], ann["present"]

    def __iter__(self):
        torch.set_num_threads(1)
        info = torch.utils.data.get_worker_info()
        worker = info.id if info else 0
        rng = np.random.default_rng([self.seed, 1_000_000 + worker])
        index = worker * 10_000_000
        pools = {}
        while True:
            long_ = int(rng.choice(LONG_BUCKETS))
            size = (SHORT_SIDE, long_) if rng.random() < 0.5 else (long_, SHORT_SIDE)
            pool = pools.setdefault(size, [])
            items = []
            for _ in range(self.batch_size):
                if len(items) < self.fresh or len(pool) < self.batch_size:
                    item = self._new_scene(rng, size, index)
                    index += 1
                    pool.append(item)
                    del pool[:-self.pool]
                else:
                    item = pool[int(rng.integers(len(pool)))]
                items.append(item)
            imgs, encs, targets = [], [], []
            for x, boxes, labels, present in items:
                if rng.random() < 0.5:
                    x = x.flip(-1)
                    boxes = np.stack([1 - boxes[:, 2], boxes[:, 1], 1 - boxes[:, 0], boxes[:, 3]], 1)
                enc = demo_text.encode(training_caption(rng, present), self.vocab)
                phrase_of = {p[0]: (p[1], p[2]) for p in enc["phrases"]}
                imgs.append(x)
                encs.append(enc)
                targets.append((boxes, [phrase_of.get(l, (0, 0)) for l in labels]))
            text = demo_text.batch(encs, self.vocab)
            yield torch.stack(imgs), {k: torch.from_numpy(v) for k, v in text.items()}, targets


# ---------------------------------------------------------------- loss

def cxcywh_to_xyxy(b):
    return torch.cat([b[..., :2] - b[..., 2:] / 2, b[..., :2] + b[..., 2:] / 2], -1)


def giou(a, b):
    """Generalized IoU of paired xyxy boxes."""
    lt = torch.max(a[:, :2], b[:, :2])
    rb = torch.min(a[:, 2:], b[:, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    area_a = (a[:, 2:] - a[:, :2]).clamp(min=0).prod(-1)
    area_b = (b[:, 2:] - b[:, :2]).clamp(min=0).prod(-1)
    union = area_a + area_b - inter
    iou = inter / union.clamp(min=1e-9)
    lt2 = torch.min(a[:, :2], b[:, :2])
    rb2 = torch.max(a[:, 2:], b[:, 2:])
    hull = (rb2 - lt2).clamp(min=0).prod(-1)
    return iou - (hull - union) / hull.clamp(min=1e-9)


def build_targets(targets, length):
    """Per image: token targets [900, L], token weights [900, L], and box supervision rows
    (query index, target box cxcywh, weight)."""
    b = len(targets)
    cls = torch.zeros(b, NUM_QUERIES, length)
    weight = torch.ones(b, NUM_QUERIES, length)
    box_q, box_t, box_w, n_pos = [], [], [], 0
    for i, (boxes, spans) in enumerate(targets):
        taken = set()
        order = np.argsort(-(boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])) if len(boxes) else []
        for j in order:
            x1, y1, x2, y2 = boxes[j]
            cx, cy, w, h = (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1
            ci, cj = min(GRID - 1, int(cy * GRID)), min(GRID - 1, int(cx * GRID))
            cells = []
            for di in range(-3, 4):
                for dj in range(-3, 4):
                    r, c = ci + di, cj + dj
                    if not (0 <= r < GRID and 0 <= c < GRID):
                        continue
                    ax, ay = (c + 0.5) / GRID, (r + 0.5) / GRID
                    near = abs(di) <= 1 and abs(dj) <= 1
                    central = abs(ax - cx) < w / 6 and abs(ay - cy) < h / 6
                    if near or central:
                        cells.append(((ax - cx) ** 2 + (ay - cy) ** 2, r * GRID + c))
            cells.sort()
            pos = next((q for _, q in cells if q not in taken), None)
            if pos is None:
                continue
            # Positive: the free cell nearest the centre and the cells whose anchor is within
            # 0.75 cell (or a quarter of the box) of it; the rest of `cells` is ignored.
            rx, ry = max(w / 4, 0.75 / GRID), max(h / 4, 0.75 / GRID)
            positives = [pos] + [q for _, q in cells if q != pos and q not in taken
                                 and abs((q % GRID + 0.5) / GRID - cx) < rx and abs((q // GRID + 0.5) / GRID - cy) < ry]
            taken.update(positives)
            b0, b1 = spans[j]
            target = torch.tensor([cx, cy, w, h])
            if b1 > b0:
                for _, q in cells:
                    if q not in positives:
                        weight[i, q, b0:b1] = 0.0
                for q in positives:
                    cls[i, q, b0:b1] = 1.0
                n_pos += len(positives)
            for _, q in cells:
                box_q.append((i, q))
                box_t.append(target)
                box_w.append(1.0 if q in positives else 0.5)
    for i, _ in enumerate(targets):  # positives are never ignored
        weight[i][cls[i] > 0] = 1.0
    return cls, weight, box_q, box_t, box_w, n_pos


def focal_loss(logits, target, weight, alpha=0.25, gamma=2.0):
    p = logits.sigmoid()
    ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    p_t = p * target + (1 - p) * (1 - target)
    loss = ce * (1 - p_t) ** gamma
    loss = loss * (alpha * target + (1 - alpha) * (1 - target))
    return (loss * weight).sum()


def compute_loss(model, img, text, targets):
    logits, boxes = model(img, **text)
    length = text["input_ids"].shape[1]
    logits = logits[..., :length]
    cls, weight, box_q, box_t, box_w, n_pos = build_targets(targets, length)
    weight = weight * text["attention_mask"].unsqueeze(1).float()
    norm = max(1.0, float(n_pos))
    l_cls = focal_loss(logits, cls, weight) / norm
    if box_q:
        idx = torch.tensor(box_q)
        pred = boxes[idx[:, 0], idx[:, 1]]
        tgt = torch.stack(box_t)
        w = torch.tensor(box_w)
        l_l1 = (F.l1_loss(pred, tgt, reduction="none").sum(-1) * w).sum() / w.sum()
        l_giou = ((1 - giou(cxcywh_to_xyxy(pred), cxcywh_to_xyxy(tgt))) * w).sum() / w.sum()
    else:
        l_l1 = l_giou = boxes.sum() * 0
    return 2.0 * l_cls + 5.0 * l_l1 + 2.0 * l_giou, (l_cls.item(), l_l1.item(), l_giou.item())


# ---------------------------------------------------------------- export

def export(model, vocab_path, out_dir, vocab, reference):
    import onnx

    model.eval()
    img, ann = scenes.make_scene(424242, 0, style="plain")
    size = bucket_size(ann["height"], ann["width"])
    x = to_input(img, size).unsqueeze(0)
    enc = demo_text.encode(ann["caption"], vocab)
    text = {k: torch.from_numpy(v) for k, v in demo_text.batch([enc], vocab).items()}
    names = ["img", "input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"]
    args = (x, text["input_ids"], text["attention_mask"], text["position_ids"], text["token_type_ids"],
            text["text_token_mask"])
    path = os.path.join(out_dir, "model.onnx")
    dyn = {"img": {0: "batch", 2: "height", 3: "width"}, "input_ids": {0: "batch", 1: "text_len"},
           "attention_mask": {0: "batch", 1: "text_len"}, "position_ids": {0: "batch", 1: "text_len"},
           "token_type_ids": {0: "batch", 1: "text_len"},
           "text_token_mask": {0: "batch", 1: "text_len", 2: "text_len"},
           "logits": {0: "batch"}, "boxes": {0: "batch"}}
    with torch.no_grad():
        torch.onnx.export(model, args, path, input_names=names, output_names=["logits", "boxes"],
                          dynamic_axes=dyn, opset_version=17, do_constant_folding=True)
        ref_logits, ref_boxes = model(*args)

    m = onnx.load(path)
    # The exporter names the output dims after its nodes; declare the contract instead.
    for o, dims in zip(m.graph.output, (["batch", NUM_QUERIES, MAX_TEXT_LEN], ["batch", NUM_QUERIES, 4])):
        for d, v in zip(o.type.tensor_type.shape.dim, dims):
            if isinstance(v, str):
                d.dim_param = v
            else:
                d.dim_value = v
    meta = {"vlrt.short_side": str(SHORT_SIDE), "vlrt.max_side": str(MAX_SIDE),
            "vlrt.box_threshold": str(BOX_THRESHOLD), "vlrt.text_threshold": str(TEXT_THRESHOLD),
            "vlrt.nms": str(NMS_IOU), "vlrt.vocab": "vocab.txt",
            "vlrt.model": "vlrt demo grounding detector (tools/train_demo_model.py)"}
    del m.metadata_props[:]
    for k, v in meta.items():
        p = m.metadata_props.add()
        p.key, p.value = k, v
    m.doc_string = "vlrt demo open-vocabulary detector with GroundingDINO's input/output contract"
    onnx.checker.check_model(m)
    onnx.save(m, path)
    ops = sorted({n.op_type for n in m.graph.node})
    np.savez(reference, **{n: a.numpy() for n, a in zip(names, args)},
             logits=ref_logits.numpy(), boxes=ref_boxes.numpy())
    if os.path.abspath(vocab_path) != os.path.abspath(os.path.join(out_dir, "vocab.txt")):
        with open(vocab_path) as src, open(os.path.join(out_dir, "vocab.txt"), "w") as dst:
            dst.write(src.read())
    return path, ops


# ---------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--steps", type=int, default=3600)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--workers", type=int, default=1, help="scene-generating processes")
    ap.add_argument("--vocab", default=demo_text.VOCAB)
    ap.add_argument("--out", default=os.path.join(HERE, "..", "models", "demo"))
    ap.add_argument("--checkpoint", help="also save the PyTorch weights here")
    ap.add_argument("--reference", default=REFERENCE, help="inputs and PyTorch outputs for check_demo_model.py")
    ap.add_argument("--resume", help="start from these PyTorch weights (then export)")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    if not os.path.exists(args.vocab):
        demo_text.write_vocab(args.vocab)
    demo_text.check(args.vocab, os.path.join(HERE, "..", "build", "vlrt"))
    vocab = demo_text.load_vocab(args.vocab)
    model = DemoGroundingModel(vocab)
    print(f"parameters: {sum(p.numel() for p in model.parameters()) / 1e6:.2f} M", flush=True)

    start = time.time()
    last = None
    if args.resume:
        model.load_state_dict(torch.load(args.resume))
    elif args.steps > 0:
        stream = SceneStream(args.seed, args.batch, vocab)
        loader = torch.utils.data.DataLoader(stream, batch_size=None, num_workers=args.workers,
                                             prefetch_factor=4 if args.workers else 2,
                                             persistent_workers=bool(args.workers))
        decay, no_decay = [], []
        for n, p in model.named_parameters():
            (no_decay if p.ndim < 2 or "embed" in n or n in ("query_pos",) else decay).append(p)
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 1e-4},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=args.lr)
        warm = min(100, args.steps // 10)

        def lr_at(s):
            if s < warm:
                return (s + 1) / warm
            return 0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, args.steps - warm)))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
        model.train()
        avg = None
        for step, (img, text, targets) in enumerate(loader):
            if step >= args.steps:
                break
            loss, parts = compute_loss(model, img, text, targets)
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            cur = np.array([loss.item(), *parts])
            avg = cur if avg is None else 0.95 * avg + 0.05 * cur
            if step % 25 == 0 or step == args.steps - 1:
                el = time.time() - start
                eta = el / (step + 1) * (args.steps - step - 1)
                print(f"step {step:5d}/{args.steps} loss {avg[0]:.3f} (cls {avg[1]:.3f} l1 {avg[2]:.3f} "
                      f"giou {avg[3]:.3f}) lr {sched.get_last_lr()[0]:.2e} elapsed {el / 60:.1f} min "
                      f"eta {eta / 60:.1f} min", flush=True)
        last = avg
    train_time = time.time() - start
    if args.checkpoint:
        torch.save(model.state_dict(), args.checkpoint)
    path, ops = export(model, args.vocab, args.out, vocab, args.reference)
    print(f"training time {train_time / 60:.1f} min; final loss (EMA) "
          f"{'n/a' if last is None else f'{last[0]:.4f}'}")
    print(f"wrote {path} ({os.path.getsize(path) / 1e6:.2f} MB); ops: {' '.join(ops)}")


if __name__ == "__main__":
    main()
