#!/usr/bin/python3
"""Exports the reference model zoo to ONNX with PyTorch reference outputs.

Models: torchvision resnet50, swin_t, vit_b_16, convnext_tiny, mobilenet_v3_large
(random weights, eval mode) and a BERT-base encoder (transformers BertModel from a
config, random weights). Each goes to OUT/<name>/ as model.onnx, the fixed inputs
as <input>.npy and PyTorch's outputs as expected_<output>.npy. Generated, never
committed (hundreds of MB).

Run with the Python that sees torch and torchvision (Debian's python3-torch and
python3-torchvision are seen by /usr/bin/python3):

    /usr/bin/python3 tools/export_zoo.py [--out models/zoo] [--only resnet50,bert_base]
"""
import argparse
import os

import numpy as np
import torch

OPSET = 17


def vision_models():
    import torchvision.models as tvm
    return {
        "resnet50": tvm.resnet50,
        "swin_t": tvm.swin_t,
        "vit_b_16": tvm.vit_b_16,
        "convnext_tiny": tvm.convnext_tiny,
        "mobilenet_v3_large": tvm.mobilenet_v3_large,
    }


def export(model, args, input_names, output_names, dynamic_axes, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, "model.onnx")
    with torch.no_grad():
        expected = model(*args)
    if isinstance(expected, torch.Tensor):
        expected = (expected,)
    # Exported with autograd on: under no_grad, nn.MultiheadAttention takes a fused
    # fast path that has no ONNX form.
    torch.onnx.export(model, tuple(args), path, opset_version=OPSET, input_names=input_names,
                      output_names=output_names, dynamic_axes=dynamic_axes, do_constant_folding=True)
    for name, a in zip(input_names, args):
        np.save(os.path.join(out_dir, name + ".npy"), a.numpy())
    for name, e in zip(output_names, expected):
        np.save(os.path.join(out_dir, "expected_" + name + ".npy"), e.numpy())
    params = sum(p.numel() for p in model.parameters())
    with open(os.path.join(out_dir, "params.txt"), "w") as f:
        f.write(str(params) + "\n")
    print(f"{out_dir}: {params} parameters, {os.path.getsize(path) / 1e6:.1f} MB")


def randomize(model):
    """Random weights that give outputs of a useful scale: torchvision initializes some
    layers to zero (ViT's head) and BatchNorm to identity statistics."""
    with torch.no_grad():
        for p in model.parameters():
            if p.abs().max() == 0:
                p.normal_(0, 0.02)
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.normal_(0, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.1)
    return model


def export_vision(name, ctor, out):
    torch.manual_seed(0)
    model = randomize(ctor(weights=None)).eval()
    image = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(1))
    export(model, [image], ["image"], ["logits"], {"image": {0: "batch"}, "logits": {0: "batch"}},
           os.path.join(out, name))


def export_bert(out):
    from transformers import BertConfig, BertModel
    torch.manual_seed(0)
    model = BertModel(BertConfig()).eval()  # bert-base: 12 layers, hidden 768, vocab 30522
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 30522, (1, 32), generator=g)
    mask = torch.ones(1, 32, dtype=torch.int64)
    mask[0, 28:] = 0  # padding at the end
    types = torch.zeros(1, 32, dtype=torch.int64)
    types[0, 16:] = 1

    class Encoder(torch.nn.Module):
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            o = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return o.last_hidden_state, o.pooler_output

    dyn = {n: {0: "batch", 1: "sequence"} for n in ["input_ids", "attention_mask", "token_type_ids", "last_hidden_state"]}
    dyn["pooler_output"] = {0: "batch"}
    export(Encoder(model).eval(), [ids, mask, types], ["input_ids", "attention_mask", "token_type_ids"],
           ["last_hidden_state", "pooler_output"], dyn, os.path.join(out, "bert_base"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "models", "zoo"))
    ap.add_argument("--only", default="", help="comma-separated subset of model names")
    a = ap.parse_args()
    only = set(filter(None, a.only.split(",")))
    for name, ctor in vision_models().items():
        if not only or name in only:
            export_vision(name, ctor, a.out)
    if not only or "bert_base" in only:
        export_bert(a.out)


if __name__ == "__main__":
    main()
