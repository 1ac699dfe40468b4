#!/usr/bin/env python3
"""Runs every model exported by export_zoo.py with `vlrt run` and `vlrt bench`,
compares the outputs with PyTorch's (max abs error relative to the output's
scale, max |expected|) and times ONNX Runtime on the same model and threads.
Prints a Markdown table.

    python3 tools/check_zoo.py [--zoo models/zoo] [--vlrt build/vlrt] [--threads 2] [--runs 10]
"""
import argparse
import gc
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def ort_median_ms(model, feeds, threads, runs):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    s = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    for _ in range(2):
        s.run(None, feeds)
    t = []
    for _ in range(runs):
        t0 = time.perf_counter()
        s.run(None, feeds)
        t.append((time.perf_counter() - t0) * 1000)
    # Its threads spin between runs: end the session before the next vlrt bench starts.
    del s
    gc.collect()
    return float(np.median(t))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", default=os.path.join(os.path.dirname(__file__), "..", "models", "zoo"))
    ap.add_argument("--vlrt", default=os.path.join(os.path.dirname(__file__), "..", "build", "vlrt"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--tolerance", type=float, default=1e-4, help="max abs error / output scale")
    ap.add_argument("--no-ort", action="store_true", help="skip the ONNX Runtime timing")
    ap.add_argument("--devices", default="", help="run on these devices, e.g. opencl:0,cpu")
    ap.add_argument("--split", action="store_true",
                    help="cap the first device at half of what the model needs there, forcing a pipeline split")
    ap.add_argument("--no-bench", action="store_true", help="check outputs only")
    a = ap.parse_args()
    rows, ok = [], True
    for d in sorted(glob.glob(os.path.join(a.zoo, "*", "model.onnx"))):
        d = os.path.dirname(d)
        name = os.path.basename(d)
        inputs = {os.path.basename(p)[:-4]: p for p in glob.glob(os.path.join(d, "*.npy"))
                  if not os.path.basename(p).startswith("expected_")}
        model = os.path.join(d, "model.onnx")
        shapes = []
        for k, p in inputs.items():
            shapes += ["--input", f"{k}=" + "x".join(str(s) for s in np.load(p).shape)]
        device_args = ["--devices", a.devices] if a.devices else []
        if a.split:
            first = (a.devices or "cpu").split(",")[0]
            plan = json.loads(subprocess.run([a.vlrt, "plan", model, "--json", "--batch-limit", "1"] + shapes + device_args,
                                             capture_output=True, text=True, check=True).stdout)
            need = plan["devices"][first]
            device_args += ["--memory", f"{first}={(need['weight_bytes'] + need['peak_activation_bytes']) // 2}"]
        with tempfile.TemporaryDirectory() as out:
            cmd = [a.vlrt, "run", model, "--threads", str(a.threads), "--output-dir", out] + device_args
            for k, p in inputs.items():
                cmd += ["--input", f"{k}={p}"]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{name}: vlrt run failed:\n{r.stderr}", file=sys.stderr)
                rows.append((name, "FAILED", "", "", ""))
                ok = False
                continue
            line = next((l for l in r.stdout.splitlines() if l.startswith("ran on")), "")
            print(f"{name}: {line}", file=sys.stderr)
            planned = executed = None
            if "transfers:" in line:
                parts = line.split("transfers:")[1].split()
                planned, executed = int(parts[0]), int(parts[2])
            if planned != executed:
                ok = False
            worst = 0.0
            for e in glob.glob(os.path.join(d, "expected_*.npy")):
                oname = os.path.basename(e)[len("expected_"):-4]
                exp = np.load(e)
                got = np.load(os.path.join(out, oname + ".npy"))
                err = float(np.max(np.abs(got.astype(np.float64) - exp))) / max(float(np.max(np.abs(exp))), 1e-12)
                worst = max(worst, err)
        if a.no_bench:
            ok = ok and worst <= a.tolerance
            rows.append((name, f"{worst:.2e}", "", "", "", ""))
            continue
        b = subprocess.run([a.vlrt, "bench", model, "--threads", str(a.threads), "--runs", str(a.runs), "--json"] + shapes
                           + device_args,
                           capture_output=True, text=True)
        bench = json.loads(b.stdout) if b.returncode == 0 else {"median_ms": float("nan"), "peak_rss_bytes": 0}
        ort_ms = float("nan") if a.no_ort else ort_median_ms(model, {k: np.load(p) for k, p in inputs.items()},
                                                                a.threads, a.runs)
        params = open(os.path.join(d, "params.txt")).read().strip() if os.path.exists(os.path.join(d, "params.txt")) else "?"
        ok = ok and worst <= a.tolerance
        rows.append((name, f"{worst:.2e}", f"{bench['median_ms']:.1f}", f"{ort_ms:.1f}", params,
                     f"{bench['peak_rss_bytes'] / 2**20:.0f}"))
    print(f"| model | max abs err / scale | vlrt median ms ({a.threads} thr) | onnxruntime median ms | params | vlrt peak RSS MiB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print("| " + " | ".join(r) + " |")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
