#!/usr/bin/env python3
"""Quantized copies of the zoo models for timing the integer kernels (tools/bench_vs_ort.py).

From the exports of tools/export_zoo.py (ZOO/bert_base, ZOO/resnet50) it writes into OUT, one
folder per model holding model.onnx and the export's input .npy files (made once, then reused):
  bert_base_dynamic_int8  onnxruntime's quantize_dynamic (int8 weights, MatMulInteger)
  resnet50_vlrt_int8      `vlrt quantize --int8 dynamic` (ConvInteger, MatMulInteger)
  resnet50_qdq            onnxruntime's quantize_static, QDQ, per-channel (as tools/check_ort_transformed.py)
and, with --gdino-q MODEL --gdino-inputs DIR, groundingdino_q: links to a quantized GroundingDINO
and the input .npy files of its export (tools/export_groundingdino.py).

    python3 tools/make_quantized_zoo.py ZOO OUT [--vlrt build/vlrt] [--gdino-q M --gdino-inputs DIR]
    python3 tools/bench_vs_ort.py OUT/bert_base_dynamic_int8 OUT/resnet50_vlrt_int8 ...
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_ort_transformed import build_bert_dynamic, build_resnet50_qdq  # noqa: E402

GROUNDINGDINO_INPUTS = ["img", "input_ids", "attention_mask", "position_ids", "token_type_ids", "text_token_mask"]


def make(folder, inputs_from, build):
    os.makedirs(folder, exist_ok=True)
    model = os.path.join(folder, "model.onnx")
    if not os.path.exists(model):
        build(model)
    for npy in inputs_from:
        shutil.copy(npy, folder)
    print("ready:", folder)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("zoo", help="folder of tools/export_zoo.py's exports")
    ap.add_argument("out")
    ap.add_argument("--vlrt", default=os.path.join(os.path.dirname(HERE), "build", "vlrt"))
    ap.add_argument("--calibration", type=int, default=8, help="rendered scenes for quantize_static")
    ap.add_argument("--gdino-q", help="a quantized GroundingDINO model.onnx")
    ap.add_argument("--gdino-inputs", help="folder with its inputs (img.npy, input_ids.npy, ...)")
    a = ap.parse_args()
    bert, resnet = os.path.join(a.zoo, "bert_base"), os.path.join(a.zoo, "resnet50")
    bert_inputs = [os.path.join(bert, n + ".npy") for n in ("input_ids", "attention_mask", "token_type_ids")]
    image = [os.path.join(resnet, "image.npy")]
    make(os.path.join(a.out, "bert_base_dynamic_int8"), bert_inputs,
         lambda dst: build_bert_dynamic(os.path.join(bert, "model.onnx"), dst))
    make(os.path.join(a.out, "resnet50_vlrt_int8"), image,
         lambda dst: subprocess.run([a.vlrt, "quantize", os.path.join(resnet, "model.onnx"), "--out", dst,
                                     "--int8", "dynamic"], check=True))
    make(os.path.join(a.out, "resnet50_qdq"), image,
         lambda dst: build_resnet50_qdq(os.path.join(resnet, "model.onnx"), dst, a.calibration))
    if a.gdino_q:
        folder = os.path.join(a.out, "groundingdino_q")
        os.makedirs(folder, exist_ok=True)
        link = os.path.join(folder, "model.onnx")
        if not os.path.exists(link):
            os.symlink(os.path.abspath(a.gdino_q), link)
        for data in glob.glob(os.path.join(os.path.dirname(os.path.abspath(a.gdino_q)), "*.data")):
            if not os.path.exists(os.path.join(folder, os.path.basename(data))):
                os.symlink(data, os.path.join(folder, os.path.basename(data)))
        for n in GROUNDINGDINO_INPUTS:
            shutil.copy(os.path.join(a.gdino_inputs, n + ".npy"), folder)
        print("ready:", folder)


if __name__ == "__main__":
    main()
