#!/usr/bin/env python3
"""Checks `vlrt quantize` against onnxruntime: quantizes each model with vlrt
(--int8 dynamic, and --fp16 unless --no-half) and with onnxruntime's own
quantize_dynamic (its defaults: QInt8 weights, per tensor), runs the float32
model and every quantized copy in onnxruntime on the same inputs, and prints a
Markdown table: file size against float32, and per output the largest error
over the float32 output's peak (and, for a last axis of 2 or more, how often
the arg-max agrees).

Inputs are NAME.npy files beside the model, one per graph input.

    python3 tools/check_quantize.py MODEL.onnx... [--vlrt build/vlrt] [--threads 2] [--work DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def inputs_for(model_path):
    import onnx
    m = onnx.load(model_path, load_external_data=False)
    inits = {i.name for i in m.graph.initializer}
    folder = os.path.dirname(os.path.abspath(model_path))
    feeds = {}
    for i in m.graph.input:
        if i.name in inits:
            continue
        path = os.path.join(folder, i.name + ".npy")
        if not os.path.exists(path):
            sys.exit(f"{model_path}: input '{i.name}' needs {path}")
        feeds[i.name] = np.load(path)
    return feeds


def run_ort(model_path, feeds, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    s = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    t0 = time.perf_counter()
    outs = s.run(None, feeds)
    return dict(zip(names, outs)), time.perf_counter() - t0


def compare(got, want):
    """'err 1.2e-02' (largest |got - want| over the peak |want|) and, for scores, the arg-max agreement."""
    got = got.astype(np.float64)
    want = want.astype(np.float64)
    # Masked scores (-inf on both sides) agree; infinities elsewhere count as errors.
    diff = np.where(got == want, 0.0, np.abs(got - want))
    peak = float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)) or 1.0
    text = f"err {float(np.max(diff)) / peak:.1e}"
    if want.ndim >= 1 and want.shape[-1] >= 2 and np.issubdtype(want.dtype, np.floating):
        agree = float(np.mean(np.argmax(got, -1) == np.argmax(want, -1)))
        text += f", argmax {agree:.0%}"
    return text


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+")
    ap.add_argument("--vlrt", default="build/vlrt")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--work", default=None, help="folder for the quantized copies (default: a temporary one)")
    ap.add_argument("--no-half", action="store_true", help="skip --fp16")
    args = ap.parse_args()
    from onnxruntime.quantization import quantize_dynamic

    work = args.work or tempfile.mkdtemp(prefix="check_quantize_")
    os.makedirs(work, exist_ok=True)
    rows = ["| model | variant | size | of fp32 | quantize s | ORT run s | outputs vs fp32 (ORT) |",
            "|---|---|---|---|---|---|---|"]
    for model in args.models:
        name = os.path.basename(os.path.dirname(os.path.abspath(model))) or "model"
        fp32_size = os.path.getsize(model)
        feeds = inputs_for(model)
        want, fp32_s = run_ort(model, feeds, args.threads)
        rows.append(f"| {name} | fp32 | {fp32_size / 2**20:.1f} MiB | 100% | | {fp32_s:.2f} | |")
        variants = [("vlrt --int8 dynamic", ["--int8", "dynamic"])]
        if not args.no_half:
            variants.append(("vlrt --fp16", ["--fp16"]))
        variants.append(("ORT quantize_dynamic", None))
        for label, flags in variants:
            out = os.path.join(work, f"{name}.{label.split()[0]}.{'_'.join(flags or ['ort']).strip('-')}.onnx")
            t0 = time.perf_counter()
            if flags is None:
                quantize_dynamic(model, out)
            else:
                r = subprocess.run([args.vlrt, "quantize", model, "--out", out] + flags, capture_output=True, text=True)
                if r.returncode != 0:
                    sys.exit(f"{label} failed on {model}:\n{r.stdout}{r.stderr}")
            quantize_s = time.perf_counter() - t0
            got, run_s = run_ort(out, feeds, args.threads)
            size = os.path.getsize(out)
            errors = "; ".join(f"{o}: {compare(got[o], want[o])}" for o in want)
            rows.append(f"| {name} | {label} | {size / 2**20:.1f} MiB | {size / fp32_size:.0%} | {quantize_s:.1f} "
                        f"| {run_s:.2f} | {errors} |")
            print(rows[-1], flush=True)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
