#!/usr/bin/python3
"""Writes tests/fixtures/grounding/tiny/{model.onnx,vocab.txt}: a random-weight model (fixed
seed) that follows the GroundingDINO ONNX contract — inputs img float32[B,3,H,W], input_ids,
attention_mask bool, position_ids, token_type_ids int64 [B,L], text_token_mask bool [B,L,L];
outputs logits [B,900,256] (-inf past the caption's tokens) and boxes [B,900,4] — in under
200 KB, so the server and pipeline tests run a real detector in milliseconds. Scores depend on
the image and on the prompt; the metadata resizes images to a short side of 64 (max 96).

    /usr/bin/python3 tools/make_tiny_grounding_model.py   (Debian python3-torch, python3-onnx)
"""
import os

import onnx
import torch
from torch import nn

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "grounding", "tiny")
QUERIES, SLOTS, DIM = 900, 256, 16

SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PUNCT = list(".,?!-'")
WORDS = """person bicycle car motorcycle bus train truck boat traffic light stop sign bench bird cat dog
horse sheep cow bear zebra umbrella bottle cup fork knife bowl banana apple pizza cake chair couch
plant bed table tv laptop mouse phone book clock vase a the red green blue small large man woman
tree sky road""".split()
PIECES = ["##s", "##es", "##ing", "##er"]


class TinyGrounding(nn.Module):
    def __init__(self, vocab_size):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 4, stride=4)
        self.conv2 = nn.Conv2d(8, DIM, 4, stride=4)
        self.tok = nn.Embedding(vocab_size, DIM)
        self.pos = nn.Embedding(SLOTS, DIM)
        self.typ = nn.Embedding(2, DIM)
        self.query = nn.Parameter(torch.randn(QUERIES, DIM))
        self.box = nn.Parameter(torch.randn(QUERIES, 4))
        self.img_box = nn.Linear(DIM, 4)

    def forward(self, img, input_ids, attention_mask, position_ids, token_type_ids, text_token_mask):
        g = self.conv2(torch.relu(self.conv1(img))).mean(dim=(2, 3))  # [B,D]
        t = self.tok(input_ids) + self.pos(position_ids) + self.typ(token_type_ids)  # [B,L,D]
        a = torch.matmul(t, t.transpose(1, 2)) * 0.25
        a = torch.where(text_token_mask, a, torch.full_like(a, -1e4))
        t = torch.matmul(torch.softmax(a, dim=-1), t)
        q = self.query.unsqueeze(0) + 4.0 * g.unsqueeze(1)  # [B,Q,D]
        logits = torch.matmul(q, t.transpose(1, 2)) * 0.15 - 3.5  # [B,Q,L]; a few dozen pass 0.35
        logits = torch.where(attention_mask.unsqueeze(1), logits, torch.full_like(logits, float("-inf")))
        pad = torch.full((logits.shape[0], QUERIES, SLOTS - logits.shape[2]), float("-inf"))
        logits = torch.cat([logits, pad], dim=2)
        boxes = torch.sigmoid(self.box.unsqueeze(0) + self.img_box(g).unsqueeze(1))
        return logits, boxes


def main():
    torch.manual_seed(11)
    vocab = SPECIAL + PUNCT + WORDS + PIECES
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write("\n".join(vocab) + "\n")
    model = TinyGrounding(len(vocab)).eval()
    b, l, h, w = 1, 6, 64, 80
    ids = torch.tensor([[2, 10, 5, 11, 5, 3]])
    args = (torch.randn(b, 3, h, w), ids, torch.ones(b, l, dtype=torch.bool), torch.tensor([[0, 0, 1, 0, 1, 0]]),
            torch.zeros(b, l, dtype=torch.int64), torch.eye(l, dtype=torch.bool).unsqueeze(0))
    path = os.path.join(OUT, "model.onnx")
    names = ["img", "input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"]
    axes = {"img": {0: "batch", 2: "height", 3: "width"}, "text_token_mask": {0: "batch", 1: "len", 2: "len"},
            "logits": {0: "batch"}, "boxes": {0: "batch"}}
    for n in names[1:5]:
        axes[n] = {0: "batch", 1: "len"}
    torch.onnx.export(model, args, path, input_names=names, output_names=["logits", "boxes"],
                      dynamic_axes=axes, opset_version=16, do_constant_folding=True)
    m = onnx.load(path)
    for k, v in {"vlrt.short_side": "64", "vlrt.max_side": "96"}.items():
        m.metadata_props.add(key=k, value=v)
    onnx.checker.check_model(m)
    onnx.save(m, path)
    print("wrote", path, os.path.getsize(path), "bytes; vocab", len(vocab), "tokens")


if __name__ == "__main__":
    main()
