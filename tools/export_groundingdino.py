#!/usr/bin/python3
"""Exports GroundingDINO (the official Swin-T OGC architecture, from groundingdino-py) to ONNX
with the model contract vlrt expects, plus PyTorch reference outputs for a fixed image and prompt.

The model's inputs are the tokenized text, not a caption: img float32 [B,3,H,W], input_ids int64
[B,L], attention_mask bool [B,L], position_ids int64 [B,L], token_type_ids int64 [B,L],
text_token_mask bool [B,L,L] (the block-diagonal phrase self-attention mask); outputs logits
[B,900,256] (before sigmoid, -inf past the caption's tokens) and boxes [B,900,4] (normalized
cx,cy,w,h). Opset 16 (GridSample), dynamic B, H, W and L.

groundingdino's shape-dependent Python (Swin's window padding and shifted-window masks, the
feature-map sizes of the deformable encoder) is replaced by traced tensor arithmetic computing the
same values, so that the exported B, H and W really are dynamic (a plain export freezes them at
the export size); a second reference at another size and batch checks it.

No hub access: BERT is built from a BertConfig with bert-base-uncased's values and the tokenizer
from a local vocab.txt; with --checkpoint (groundingdino_swint_ogc.pth) the weights come from it and
--vocab must be the real bert-base-uncased vocab.txt. Without a checkpoint the weights are random
(fixed seed) and the vocab is synthetic: tools/make_grounding_vocab.py's tokens padded with
[unusedN] to bert-base-uncased's 30522 ids, its special tokens at bert-base-uncased's ids.

Written to OUT (default models/gdino/; generated, never committed, about 700 MB):
  model.onnx, vocab.txt, test.png (a synthetic 1500x900 image, 1333x800 after the resize;
  --scene N draws another one),
  text.json (vlrt tokenize --json of the prompt), the model's inputs as <name>.npy, PyTorch's
  outputs as expected_logits.npy / expected_boxes.npy, expected_detections.json (the detections
  after the box and text thresholds, labelled by vlrt's rule), expected_topk_scores.npy (the
  encoder's 901 best proposal scores, in the order the decoder's queries take them),
  reference.json (how it was made); and for checking that B, H and W are really dynamic, a
  second reference at another size with a batch of two (dyn_<name>.npy inputs,
  expected_dyn_*.npy outputs).

Run with the Python that sees Debian's torch and torchvision, after `cmake --build build --target
vlrt` (the text tensors come from `vlrt tokenize`, cross-checked against the reference's own
tokenizer and mask code):

    /usr/bin/python3 tools/export_groundingdino.py [--out models/gdino] [--checkpoint PTH --vocab V]
    python3 tools/compare_groundingdino.py          # vlrt against the reference

Needs groundingdino-py installed over Debian's packages (see tools/requirements.txt):
    /usr/bin/python3 -m pip install --break-system-packages --no-deps --no-build-isolation \\
        groundingdino-py addict yapf platformdirs timm==0.9.16
"""
import argparse
import json
import os
import subprocess
import sys
import time
import types

import numpy as np
import torch
import torch.nn.functional as F

from grounding_reference import detections, reference_phrases

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

OPSET = 16
VOCAB_SIZE = 30522
DEFAULT_PROMPT = "red ball . striped boxes . teddy bear ."
BOX_THRESHOLD = 0.35
TEXT_THRESHOLD = 0.25
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]
INPUTS = ["img", "input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"]
OUTPUTS = ["logits", "boxes"]


# --------------------------------------------------------------------------------------------
# groundingdino-py without hub access and without its visualization dependencies


def import_groundingdino(vocab_path):
    """Imports groundingdino with its "bert-base-uncased" loaders patched to local objects:
    BertTokenizer on `vocab_path`, BertModel from a default BertConfig (bert-base-uncased's
    values). groundingdino.util.visualizer (cv2, matplotlib, pycocotools; never used by the
    model) is replaced by a stub module."""
    from transformers import BertConfig, BertModel, BertTokenizer

    if "groundingdino.util.visualizer" not in sys.modules:
        stub = types.ModuleType("groundingdino.util.visualizer")
        stub.COCOVisualizer = None
        sys.modules["groundingdino.util.visualizer"] = stub
    from groundingdino.util import get_tokenlizer

    def get_tokenizer(text_encoder_type):
        assert text_encoder_type == "bert-base-uncased", text_encoder_type
        return BertTokenizer(vocab_file=vocab_path, do_lower_case=True)

    def get_language_model(text_encoder_type):
        assert text_encoder_type == "bert-base-uncased", text_encoder_type
        config = BertConfig()  # defaults are bert-base-uncased's
        assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (VOCAB_SIZE, 768, 12)
        return BertModel(config)

    get_tokenlizer.get_tokenlizer = get_tokenizer
    get_tokenlizer.get_pretrained_language_model = get_language_model
    import groundingdino.models  # noqa: F401  (registers the builder)
    return get_tokenizer


def swint_ogc_args():
    """The official GroundingDINO_SwinT_OGC.py config, as groundingdino's SLConfig reads it."""
    from groundingdino.util.slconfig import SLConfig
    import groundingdino.config as cfg_pkg

    path = os.path.join(os.path.dirname(cfg_pkg.__file__), "GroundingDINO_SwinT_OGC.py")
    args = SLConfig.fromfile(path)
    args.device = "cpu"
    # Gradient checkpointing changes nothing in inference; off so that tracing sees plain modules
    # instead of torch.utils.checkpoint's autograd Function.
    args.use_checkpoint = False
    args.use_transformer_ckpt = False
    return args, path


def build_model(checkpoint, seed):
    from groundingdino.models import build_model as gd_build
    from groundingdino.util.utils import clean_state_dict

    args, cfg_path = swint_ogc_args()
    torch.manual_seed(seed)
    model = gd_build(args)
    info = {"config": cfg_path, "seed": seed}
    if checkpoint:
        state = torch.load(checkpoint, map_location="cpu")
        state = state.get("model", state)
        result = model.load_state_dict(clean_state_dict(state), strict=False)
        info["checkpoint"] = os.path.abspath(checkpoint)
        info["missing_keys"] = list(result.missing_keys)
        info["unexpected_keys"] = list(result.unexpected_keys)
        print(f"loaded {checkpoint}: {len(result.missing_keys)} missing, {len(result.unexpected_keys)} unexpected keys")
    else:
        randomize(model, seed)
    return model.eval(), args, info


def randomize(model, seed):
    """The builder zero-initializes some weights (the box head's last layer: boxes would be
    exactly the encoder's proposals; LayerNorm and linear biases): small random values instead.

    The 900 learned content queries (transformer.tgt_embed) share one random row. The decoder
    pairs content query i with the i-th best encoder proposal; with 20000+ proposals, some of
    the top 900 scores are a few float32 ulps apart, and any runtime that rounds differently
    from PyTorch (onnxruntime included) orders them the other way. With distinct content
    queries that changes those queries' outputs (and, through self-attention, every query's a
    little); with a shared one the decoder is permutation-equivariant and a near-tie only
    exchanges two queries' places, which tools/compare_groundingdino.py can tell from a real
    difference (expected_topk_scores.npy has the reference's scores)."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().max() == 0:
                p.copy_(torch.randn(p.shape, generator=g) * 0.02)
        last = model.bbox_embed[0].layers[-1]
        last.weight.copy_(torch.randn(last.weight.shape, generator=g) * 0.01)
        last.bias.copy_(torch.randn(last.bias.shape, generator=g) * 0.1)
        tgt = model.transformer.tgt_embed.weight
        tgt.copy_(tgt[:1].expand_as(tgt).clone())


class Capture:
    """Forward hooks that keep the last inputs of the decoder's output norm and of the
    contrastive heads (decoder and encoder proposals)."""

    def __init__(self, model):
        self.seen = {}
        t = model.transformer
        self.hooks = [
            t.decoder.norm.register_forward_hook(lambda m, i, o: self.seen.__setitem__("dec_norm_in", i[0])),
            model.class_embed[-1].register_forward_hook(lambda m, i, o: self.seen.__setitem__("text", i[1])),
            t.enc_out_class_embed.register_forward_hook(lambda m, i, o: self.seen.__setitem__("enc_logits", o)),
        ]

    def remove(self):
        for h in self.hooks:
            h.remove()


def calibrate_logits(model, capture, target, spread=1.5):
    """Random weights give logits that are dot products of 256-d vectors with unit-variance
    entries: |logit| up to ~20, sigmoid saturated at 0 or 1 (ties at 1.0 make labels
    arbitrary), nearly every query above the box threshold and one token best for almost all
    of them. The decoder's output LayerNorm (it feeds only the prediction heads) is rescaled so
    that the logits have standard deviation `spread`, and its bias set so that every token's
    logits have the same mean -c over the queries, with c chosen so that about `target` queries
    pass the box threshold. Logits are linear in the LayerNorm's weight and bias, so this is
    computed from one forward pass's captured activations."""
    norm = model.transformer.decoder.norm
    x = capture.seen["dec_norm_in"].transpose(0, 1)[0]  # the last layer's queries: [Q, d]
    y = capture.seen["text"]["encoded_text"][0].double()
    valid = capture.seen["text"]["text_token_mask"][0]
    y = y[valid]  # [T, d]
    n = F.layer_norm(x, x.shape[-1:], eps=norm.eps).double()
    a = (n * norm.weight.double()) @ y.T  # [Q, T]
    s = spread / a.std().item()
    mu = a.mean(0)
    a = s * (a - mu)
    # The least-norm bias with bias . y_j = -s * mu_j - c for every token j.
    pinv = torch.linalg.pinv(y)
    bias = lambda c: pinv @ (-s * mu - c)  # noqa: E731
    thr = float(np.log(BOX_THRESHOLD / (1 - BOX_THRESHOLD)))
    m = a.max(-1).values.numpy()

    def stats(c):
        return int((m - c > thr).sum()), float(np.abs(m - c - thr).min())

    # Of the offsets that keep between target/2 and 2*target queries, the one that leaves the
    # widest margin between every query's best score and the threshold (a query just at it
    # would make any comparison a coin toss).
    best = None
    for c in np.linspace(0, m.max() - thr, 4001):
        k, margin = stats(float(c))
        if target // 2 <= k <= 2 * target and (best is None or margin > best[1]):
            best = (float(c), margin, k)
    c = best[0]
    with torch.no_grad():
        norm.weight.mul_(s)
        norm.bias.copy_(bias(c).float())
    return {"decoder_norm_scale": s, "logit_offset": c, "predicted_detections": best[2],
            "predicted_margin": best[1], "bias_norm": float(bias(c).norm())}


def topk_scores(enc_logits, k):
    """The encoder's k+1 best proposal scores per image [B, k+1] (the decoder's queries come in
    this order) and how close the first image's come to a tie."""
    v = enc_logits.max(-1).values
    top = torch.topk(v, k + 1, dim=1).values
    gaps = (top[0, :-1] - top[0, 1:]).double().abs()
    return top.numpy(), {"boundary": float(gaps[-1]), "min_inside": float(gaps[:-1].min()),
                         "at": int(gaps[:-1].argmin()), "under_1e-3": int((gaps[:-1] < 1e-3).sum()),
                         "top_range": [float(top[0, -1]), float(top[0, 0])]}


# --------------------------------------------------------------------------------------------
# The exported forward: token tensors in, logits and boxes out


class ExportWrapper(torch.nn.Module):
    """GroundingDINO.forward after its tokenizer and generate_masks_with_special_tokens_and_
    transfer_map calls, with those tensors as inputs; the image batch has no padding (its mask
    is all False, as nested_tensor_from_tensor_list makes it for same-sized images)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, img, input_ids, attention_mask, position_ids, token_type_ids, text_token_mask):
        from groundingdino.util.misc import NestedTensor, inverse_sigmoid

        m = self.model
        bert_output = m.bert(input_ids=input_ids, attention_mask=text_token_mask,
                             token_type_ids=token_type_ids, position_ids=position_ids)
        encoded_text = m.feat_map(bert_output["last_hidden_state"])
        text_dict = {
            "encoded_text": encoded_text,
            "text_token_mask": attention_mask,
            "position_ids": position_ids,
            "text_self_attention_masks": text_token_mask,
        }

        samples = NestedTensor(img, torch.zeros_like(img[:, 0], dtype=torch.bool))
        features, poss = m.backbone(samples)
        srcs, masks = [], []
        for lvl, feat in enumerate(features):
            src, mask = feat.decompose()
            srcs.append(m.input_proj[lvl](src))
            masks.append(mask)
        if m.num_feature_levels > len(srcs):
            n = len(srcs)
            for lvl in range(n, m.num_feature_levels):
                src = m.input_proj[lvl](features[-1].tensors if lvl == n else srcs[-1])
                mask = F.interpolate(samples.mask[None].float(), size=src.shape[-2:]).to(torch.bool)[0]
                pos = m.backbone[1](NestedTensor(src, mask)).to(src.dtype)
                srcs.append(src)
                masks.append(mask)
                poss.append(pos)

        hs, reference, _, _, _ = m.transformer(srcs, masks, None, poss, None, None, text_dict)
        # Only the last decoder layer's outputs are returned.
        boxes = (m.bbox_embed[-1](hs[-1]) + inverse_sigmoid(reference[-2])).sigmoid()
        logits = m.class_embed[-1](hs[-1], text_dict)
        return logits, boxes


# --------------------------------------------------------------------------------------------
# Shape-generic tracing
#
# torch.onnx.export traces one forward pass: Python ints computed from shapes (int(np.ceil(H /
# 7)), torch.as_tensor of a list of sizes) and Python branches on shapes are frozen at the
# export size. groundingdino's code has several, so a plain export declares dynamic B, H and W
# but fails or computes garbage at any other size or batch (a reshape of Swin's shifted-window
# mask fails first). These replacements compute the same values with traced tensor arithmetic;
# in eager mode they are the same computation (checked on the reference run before exporting).


def patch_for_dynamic_shapes():
    import groundingdino.models.GroundingDINO.backbone.swin_transformer as sw
    import groundingdino.models.GroundingDINO.transformer as tr

    def window_reverse(windows, window_size, H, W):
        # was: B = int(windows.shape[0] / (H * W / window_size / window_size))
        C = windows.shape[-1]
        x = windows.view(-1, H // window_size, W // window_size, window_size, window_size, C)
        return x.permute(0, 1, 3, 2, 4, 5).contiguous().view(-1, H, W, C)

    def patch_embed_forward(self, x):
        # was: pad only `if W % patch != 0` (a branch frozen at the export size)
        _, _, H, W = x.size()
        ph, pw = self.patch_size
        x = F.pad(x, (0, (pw - W % pw) % pw, 0, (ph - H % ph) % ph))
        x = self.proj(x)
        if self.norm is not None:
            Wh, Ww = x.size(2), x.size(3)
            x = self.norm(x.flatten(2).transpose(1, 2))
            x = x.transpose(1, 2).view(-1, self.embed_dim, Wh, Ww)
        return x

    def block_forward(self, x, mask_matrix):
        # was: crop the window padding only `if pad_r > 0 or pad_b > 0`
        B, L, C = x.shape
        H, W = self.H, self.W
        ws = self.window_size
        shortcut = x
        x = self.norm1(x).view(B, H, W, C)
        x = F.pad(x, (0, 0, 0, (ws - W % ws) % ws, 0, (ws - H % ws) % ws))
        _, Hp, Wp, _ = x.shape
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(-self.shift_size, -self.shift_size), dims=(1, 2))
            attn_mask = mask_matrix
        else:
            attn_mask = None
        windows = sw.window_partition(x, ws).view(-1, ws * ws, C)
        windows = self.attn(windows, mask=attn_mask).view(-1, ws, ws, C)
        x = window_reverse(windows, ws, Hp, Wp)
        if self.shift_size > 0:
            x = torch.roll(x, shifts=(self.shift_size, self.shift_size), dims=(1, 2))
        x = x[:, :H, :W, :].contiguous().view(B, H * W, C)
        x = shortcut + self.drop_path(x)
        return x + self.drop_path(self.mlp(self.norm2(x)))

    def patch_merging_forward(self, x, H, W):
        # was: pad only `if H % 2 == 1 or W % 2 == 1`
        B, L, C = x.shape
        x = F.pad(x.view(B, H, W, C), (0, 0, 0, W % 2, 0, H % 2))
        x = torch.cat([x[:, 0::2, 0::2, :], x[:, 1::2, 0::2, :], x[:, 0::2, 1::2, :], x[:, 1::2, 1::2, :]], -1)
        return self.reduction(self.norm(x.view(B, -1, 4 * C)))

    def basic_layer_forward(self, x, H, W):
        # was: Hp = int(np.ceil(H / window)) * window and slice assignments on a zeros mask.
        # The shifted-window mask's region labels: rows (columns) below Hp - window are region
        # 0, below Hp - shift region 1, the rest 2; label = 3 * row region + column region.
        ws, ss = self.window_size, self.shift_size
        Hp = (H + ws - 1) // ws * ws
        Wp = (W + ws - 1) // ws * ws
        rows = torch.arange(Hp, device=x.device)
        cols = torch.arange(Wp, device=x.device)
        hr = (rows >= Hp - ws).long() + (rows >= Hp - ss).long()
        wr = (cols >= Wp - ws).long() + (cols >= Wp - ss).long()
        img_mask = (hr[:, None] * 3 + wr[None, :]).to(torch.float32)[None, :, :, None]
        mask_windows = sw.window_partition(img_mask, ws).view(-1, ws * ws)
        attn_mask = mask_windows.unsqueeze(1) - mask_windows.unsqueeze(2)
        attn_mask = attn_mask.masked_fill(attn_mask != 0, float(-100.0)).masked_fill(attn_mask == 0, float(0.0))
        for blk in self.blocks:
            blk.H, blk.W = H, W
            x = blk(x, attn_mask)
        if self.downsample is not None:
            return x, H, W, self.downsample(x, H, W), (H + 1) // 2, (W + 1) // 2
        return x, H, W, x, H, W

    class TorchAsTensorOfSizes:
        """transformer.py's `torch`, except that torch.as_tensor of the list of (h, w) feature
        sizes stacks the traced sizes instead of freezing them into a constant."""

        def __getattr__(self, name):
            return getattr(torch, name)

        @staticmethod
        def as_tensor(data, dtype=None, device=None):
            if torch.jit.is_tracing() and isinstance(data, list) and data and isinstance(data[0], tuple):
                rows = [torch.stack([v if torch.is_tensor(v) else torch.tensor(v) for v in pair]) for pair in data]
                return torch.stack(rows).to(dtype=dtype, device=device)
            return torch.as_tensor(data, dtype=dtype, device=device)

    sw.window_reverse = window_reverse
    sw.PatchEmbed.forward = patch_embed_forward
    sw.SwinTransformerBlock.forward = block_forward
    sw.PatchMerging.forward = patch_merging_forward
    sw.BasicLayer.forward = basic_layer_forward
    tr.torch = TorchAsTensorOfSizes()


# --------------------------------------------------------------------------------------------
# Vocab, image, text inputs


def write_vocab(path, prompt):
    from make_grounding_vocab import build_vocab

    vocab = build_vocab()
    words = set(vocab)
    n = 0
    while len(vocab) < VOCAB_SIZE:
        tok = f"[unused{99 + n}]"
        n += 1
        if tok not in words:
            vocab.append(tok)
    assert vocab[0] == "[PAD]" and vocab[100:104] == ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert len(vocab) == VOCAB_SIZE and len(set(vocab)) == VOCAB_SIZE
    for w in prompt.replace(".", " ").split():
        # Whole words or pieces of them: the prompt must not tokenize to [UNK].
        assert w in words or any(w.startswith(v) and "##" + w[len(v):] in words for v in words), w
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("".join(t + "\n" for t in vocab))


def write_test_image(path, scene=0, width=1500, height=900):
    """A deterministic synthetic scene: gradient background, noise texture, a few shapes. Its
    size differs from the model input (1333x800) so that the resize really resamples. Scene 0 is
    the default; scene N > 0 has other noise and moves every shape by up to 80 px."""
    from PIL import Image, ImageDraw

    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    rng = np.random.default_rng(1234 + scene)
    r = 90 + 100 * x / width + 20 * np.sin(y / 37.0)
    g = 120 + 60 * y / height + 20 * np.cos(x / 53.0)
    b = 160 - 80 * x / width + 40 * y / height
    rgb = np.stack([r, g, b], -1) + rng.normal(0, 6, (height, width, 3))
    img = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img)

    def moved(points):
        dx, dy = (int(v) for v in rng.integers(-80, 81, 2)) if scene else (0, 0)
        return [(px + dx, py + dy) for px, py in points]

    d.ellipse(moved([(180, 420), (520, 760)]), fill=(210, 30, 30), outline=(90, 10, 10), width=6)  # red ball
    stripes = moved([(700, 250)])[0]
    for i in range(8):  # striped boxes
        x0, y0 = stripes[0] + 18 * i, stripes[1]
        d.rectangle([x0, y0, x0 + 18, y0 + 270], fill=(240, 240, 240) if i % 2 else (30, 60, 160))
    (x0, y0), (x1, y1) = moved([(980, 520), (1240, 800)])
    d.rectangle([x0, y0, x1, y1], fill=(60, 140, 60), outline=(10, 40, 10), width=5)
    for i in range(0, 260, 26):
        d.line([x0 + i, y0, x0 + i, y1], fill=(230, 230, 90), width=8)
    bear = [[(1240, 140), (1420, 320)], [(1230, 120), (1290, 180)], [(1370, 120), (1430, 180)],
            [(1220, 300), (1440, 560)]]  # teddy bear: head, ears, body
    dx, dy = moved([(0, 0)])[0]
    for part, colour in zip(bear, [(150, 100, 50), (130, 85, 40), (130, 85, 40), (150, 100, 50)]):
        d.ellipse([(px + dx, py + dy) for px, py in part], fill=colour)
    d.polygon(moved([(100, 100), (400, 60), (330, 300)]), fill=(250, 200, 40))
    img.save(path)


def image_transform():
    """The reference's preprocessing (groundingdino.util.inference.load_image): short side 800,
    long side at most 1333, ImageNet normalization. Call after import_groundingdino."""
    import groundingdino.datasets.transforms as T

    return T.Compose([T.RandomResize([800], max_size=1333), T.ToTensor(), T.Normalize(MEAN, STD)])


def vlrt_tokenize(vlrt, vocab, prompt):
    out = subprocess.run([vlrt, "tokenize", "--vocab", vocab, "--json", prompt], check=True,
                         capture_output=True, text=True)
    if out.stderr.strip():
        print(out.stderr.strip())
    return json.loads(out.stdout)


def text_tensors(tok):
    L = len(tok["input_ids"])
    t = {
        "input_ids": np.array([tok["input_ids"]], dtype=np.int64),
        "attention_mask": np.array([tok["attention_mask"]], dtype=bool),
        "position_ids": np.array([tok["position_ids"]], dtype=np.int64),
        "token_type_ids": np.array([tok["token_type_ids"]], dtype=np.int64),
        "text_token_mask": np.array([tok["text_token_mask"]], dtype=bool),
    }
    assert t["text_token_mask"].shape == (1, L, L)
    return t


def check_text_against_reference(tokenizer, special_tokens, caption, tok, text):
    """vlrt's tokens and masks against the reference's tokenizer and mask code."""
    from groundingdino.models.GroundingDINO.bertwarper import (
        generate_masks_with_special_tokens_and_transfer_map)

    ref = tokenizer([caption], padding="longest", return_tensors="pt")
    masks, pos, _ = generate_masks_with_special_tokens_and_transfer_map(ref, special_tokens, tokenizer)
    problems = []
    if ref["input_ids"][0].tolist() != tok["input_ids"]:
        problems.append(f"input_ids: reference {ref['input_ids'][0].tolist()}, vlrt {tok['input_ids']}")
    else:
        for name, want in [("attention_mask", ref["attention_mask"].bool()), ("position_ids", pos),
                           ("token_type_ids", ref["token_type_ids"]), ("text_token_mask", masks)]:
            if not np.array_equal(want.numpy(), text[name]):
                problems.append(f"{name} differs")
    if problems:
        sys.exit("vlrt tokenize disagrees with the reference tokenizer:\n  " + "\n  ".join(problems))


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "gdino"))
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--checkpoint", help="groundingdino_swint_ogc.pth (else random weights)")
    ap.add_argument("--vocab", help="bert-base-uncased vocab.txt (required with --checkpoint)")
    ap.add_argument("--image", help="test image (default: a synthetic 1500x900 scene)")
    ap.add_argument("--scene", type=int, default=0,
                    help="which synthetic scene when no --image is given (0: the default one)")
    ap.add_argument("--prompt", default=DEFAULT_PROMPT)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target-detections", type=int, default=30,
                    help="random weights: about this many queries above the box threshold")
    ap.add_argument("--no-export", action="store_true", help="reference outputs only")
    ap.add_argument("--no-dynamic-check", action="store_true",
                    help="skip the second reference (batch of 2 at 1066x800) for checking dynamic shapes")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    a = ap.parse_args()
    if a.checkpoint and not a.vocab:
        ap.error("--checkpoint needs --vocab (the bert-base-uncased vocab.txt it was trained with)")
    if a.threads:
        torch.set_num_threads(a.threads)
    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()

    # Vocab and test image.
    vocab = os.path.join(a.out, "vocab.txt")
    if a.vocab:
        with open(a.vocab, encoding="utf-8") as f:
            data = f.read()
        with open(vocab, "w", encoding="utf-8", newline="\n") as f:
            f.write(data)
    else:
        write_vocab(vocab, a.prompt)
    image_path = os.path.join(a.out, "test.png")
    if a.image:
        from PIL import Image
        Image.open(a.image).convert("RGB").save(image_path)
    else:
        write_test_image(image_path, a.scene)

    get_tokenizer = import_groundingdino(vocab)
    from PIL import Image

    # Text: vlrt's tensors, checked against the reference's tokenizer and masks.
    tok = vlrt_tokenize(a.vlrt, vocab, a.prompt)
    text = text_tensors(tok)
    tokenizer = get_tokenizer("bert-base-uncased")
    special_tokens = tokenizer.convert_tokens_to_ids(["[CLS]", "[SEP]", ".", "?"])
    check_text_against_reference(tokenizer, special_tokens, tok["caption"], tok, text)
    phrases = reference_phrases(tok["tokens"], tok["caption"])
    vlrt_phrases = [{"text": p["text"], "begin": p["begin"], "end": p["end"]} for p in tok["phrases"]]
    if phrases != vlrt_phrases:
        sys.exit(f"phrase spans differ: reference {phrases}, vlrt {vlrt_phrases}")
    with open(os.path.join(a.out, "text.json"), "w") as f:
        json.dump(tok, f)
    print(f"caption {tok['caption']!r}: {len(tok['input_ids'])} tokens {tok['tokens']}")

    # Image, preprocessed as groundingdino.util.inference.load_image does.
    source = Image.open(image_path).convert("RGB")
    transform = image_transform()
    img, _ = transform(source, None)
    img = img[None].contiguous()
    print(f"image {source.size[0]}x{source.size[1]} -> model input {img.shape[3]}x{img.shape[2]}")

    model, args, info = build_model(a.checkpoint, a.seed)
    wrapper = ExportWrapper(model).eval()
    inputs = {"img": img, **{k: torch.from_numpy(v) for k, v in text.items()}}
    args_tuple = tuple(inputs[n] for n in INPUTS)

    capture = Capture(model)
    with torch.no_grad():
        if not a.checkpoint:
            t0 = time.time()
            wrapper(*args_tuple)
            info["calibration"] = calibrate_logits(model, capture, a.target_detections)
            print(f"calibration pass {time.time() - t0:.1f} s: {info['calibration']}")
        t0 = time.time()
        logits, boxes = wrapper(*args_tuple)
        t_ref = time.time() - t0
        top_scores, info["topk_gaps"] = topk_scores(capture.seen["enc_logits"], model.num_queries)
        # The unmodified forward (its own tokenizer and masks, nested tensors) must agree.
        full = model(img, captions=[tok["caption"]])
    d_logits = (full["pred_logits"] - logits).abs().nan_to_num(0).max().item()
    d_boxes = (full["pred_boxes"] - boxes).abs().max().item()
    print(f"PyTorch forward {t_ref:.1f} s; wrapper vs GroundingDINO.forward: logits {d_logits:.2e}, boxes {d_boxes:.2e}")
    assert d_logits < 1e-5 and d_boxes < 1e-5, "the export wrapper does not reproduce GroundingDINO.forward"

    logits_np, boxes_np = logits.numpy(), boxes.numpy()
    finite = np.isfinite(logits_np)
    dets, margins = detections(logits_np[0], boxes_np[0], phrases, source.size[0], source.size[1],
                               BOX_THRESHOLD, TEXT_THRESHOLD)
    prob = 1 / (1 + np.exp(-logits_np[0][finite[0]]))
    print(f"logits: {finite.sum()} finite of {finite.size}, range [{logits_np[finite].min():.2f}, "
          f"{logits_np[finite].max():.2f}]; sigmoid quantiles 1/50/99%: "
          f"{np.quantile(prob, [0.01, 0.5, 0.99]).round(3).tolist()}")
    print(f"{len(dets)} detections above {BOX_THRESHOLD}; labels "
          f"{sorted(set(d['label'] for d in dets))}; decision margins {margins}")
    print(f"encoder top-{model.num_queries} proposal score gaps: {info['topk_gaps']}")
    if not a.checkpoint and not (1 <= len(dets) <= 300):
        sys.exit(f"degenerate random outputs ({len(dets)} detections)")

    for name in INPUTS:
        np.save(os.path.join(a.out, name + ".npy"), inputs[name].numpy())
    np.save(os.path.join(a.out, "expected_logits.npy"), logits_np)
    np.save(os.path.join(a.out, "expected_boxes.npy"), boxes_np)
    np.save(os.path.join(a.out, "expected_topk_scores.npy"), top_scores)
    with open(os.path.join(a.out, "expected_detections.json"), "w") as f:
        json.dump({"image": image_path, "width": source.size[0], "height": source.size[1],
                   "prompt": tok["caption"], "box_threshold": BOX_THRESHOLD,
                   "text_threshold": TEXT_THRESHOLD, "phrases": phrases, "margins": margins,
                   "detections": dets}, f, indent=1)

    # The shape-generic replacements must not change the reference's numbers.
    patch_for_dynamic_shapes()
    with torch.no_grad():
        p_logits, p_boxes = wrapper(*args_tuple)
    d_patched = max((p_logits - logits).abs().nan_to_num(0).max().item(), (p_boxes - boxes).abs().max().item())
    print(f"shape-generic patches vs reference: max abs difference {d_patched:.2e}")
    assert d_patched < 1e-5, "the shape-generic patches change the reference's outputs"
    info["patched_vs_reference"] = d_patched

    if not a.no_dynamic_check:
        # Another size and a batch of two: the export must not be tied to the first image.
        crop = source.crop((0, 0, 1200, 900))
        pair = [crop, crop.transpose(Image.FLIP_LEFT_RIGHT)]
        dyn = {"img": torch.stack([transform(im, None)[0] for im in pair]),
               **{k: torch.from_numpy(np.repeat(v, 2, axis=0)) for k, v in text.items()}}
        t0 = time.time()
        with torch.no_grad():
            d_logits_t, d_boxes_t = wrapper(*(dyn[n] for n in INPUTS))
        d_top, _ = topk_scores(capture.seen["enc_logits"], model.num_queries)
        for name in INPUTS:
            np.save(os.path.join(a.out, "dyn_" + name + ".npy"), dyn[name].numpy())
        np.save(os.path.join(a.out, "expected_dyn_logits.npy"), d_logits_t.numpy())
        np.save(os.path.join(a.out, "expected_dyn_boxes.npy"), d_boxes_t.numpy())
        np.save(os.path.join(a.out, "expected_dyn_topk_scores.npy"), d_top)
        info["dynamic_check"] = {"img": list(dyn["img"].shape), "pytorch_forward_s": time.time() - t0}
        print(f"dynamic-shape reference: img {list(dyn['img'].shape)} in {time.time() - t0:.0f} s")
    capture.remove()

    if not a.no_export:
        path = os.path.join(a.out, "model.onnx")
        dynamic = {
            "img": {0: "B", 2: "H", 3: "W"},
            "input_ids": {0: "B", 1: "L"},
            "attention_mask": {0: "B", 1: "L"},
            "position_ids": {0: "B", 1: "L"},
            "token_type_ids": {0: "B", 1: "L"},
            "text_token_mask": {0: "B", 1: "L", 2: "L"},
            "logits": {0: "B"},
            "boxes": {0: "B"},
        }
        t0 = time.time()
        torch.onnx.export(wrapper, args_tuple, path, opset_version=OPSET, input_names=INPUTS,
                          output_names=OUTPUTS, dynamic_axes=dynamic, do_constant_folding=True)
        print(f"exported {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.time() - t0:.0f} s")
        info["onnx_bytes"] = os.path.getsize(path)

    info.update({"prompt": a.prompt, "caption": tok["caption"], "image": image_path,
                 "scene": None if a.image else a.scene,
                 "input_size": [int(img.shape[3]), int(img.shape[2])], "opset": OPSET,
                 "torch": torch.__version__, "pytorch_forward_s": t_ref,
                 "wrapper_vs_forward": {"logits": d_logits, "boxes": d_boxes},
                 "detections": len(dets), "total_s": time.time() - t_start})
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"wrote {a.out} in {time.time() - t_start:.0f} s")


if __name__ == "__main__":
    main()
