#!/usr/bin/env python3
"""Times vlrt, ONNX Runtime (CPU) and OpenVINO (CPU) on the same models, inputs and
thread count, alternating between them, and prints median / p90 latency, the ratios
and each runtime's peak RSS.

    python3 tools/bench_vs_ort.py MODEL_OR_DIR... [--threads 2] [--runs 20] [--rounds 5]

The runtime vlrt-bf16 is vlrt with --precision bf16 (products in bfloat16 on a CPU with
AVX512-BF16); its ratio to onnxruntime's float32 gets a column of its own.

A MODEL_OR_DIR is an .onnx file or a folder holding model.onnx (an export_zoo.py or
export_groundingdino.py folder); NAME.npy files beside the model are used as the
values of the inputs of that name, other inputs get random values (floats in [-1, 1),
integers 0 or 1) and dynamic dims are given with --shape INPUT=1x3x224x224 (or
--shape MODEL:INPUT=... for one model, MODEL being its name as printed). A model that a
runtime refuses, or whose inputs cannot be made, is reported and the others still run.

Each runtime runs in its own process that loads the model once, warms up, does one
untimed round and then answers rounds: in every round each runtime does runs/rounds runs, the order of the
runtimes rotating between rounds, so a change in machine load touches all of them.
Peak RSS is each process's VmHWM (for ONNX Runtime and OpenVINO it includes the
Python interpreter that hosts them, about 30 MB). Measure on a quiet machine.
Needs `onnxruntime`, and `openvino` for its column (`pip install onnxruntime openvino`).
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


# ---- worker side: one runtime, one model, rounds read from stdin ----------------------

def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def make_runner(runtime, model, threads, feeds):
    if runtime == "onnxruntime":
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        return lambda: sess.run(None, feeds)
    if runtime == "openvino":
        import openvino as ov
        core = ov.Core()
        core.set_property("CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                  "INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY"})
        compiled = core.compile_model(model, "CPU")
        request = compiled.create_infer_request()
        return lambda: request.infer(feeds)
    raise SystemExit(f"unknown runtime {runtime}")


def worker(runtime, model, threads, inputs_dir, warmup):
    feeds = {os.path.splitext(f)[0]: np.load(os.path.join(inputs_dir, f))
             for f in sorted(os.listdir(inputs_dir)) if f.endswith(".npy")}
    try:
        run = make_runner(runtime, model, threads, feeds)
        for _ in range(warmup):
            run()
    except Exception as e:  # the parent prints why this runtime has no column
        print(json.dumps({"error": str(e).strip().splitlines()[0][:200] if str(e).strip() else repr(e)}),
              flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        ms = []
        for _ in range(int(line)):
            t0 = time.perf_counter()
            run()
            ms.append((time.perf_counter() - t0) * 1000)
        print(json.dumps({"ms": ms}), flush=True)
    print(json.dumps({"peak_rss_bytes": peak_rss_bytes()}), flush=True)


# ---- driver side -------------------------------------------------------------------

def model_inputs(model):
    import onnx
    m = onnx.load(model, load_external_data=False)
    init = {i.name for i in m.graph.initializer}
    out = []
    for vi in m.graph.input:
        if vi.name in init:
            continue
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else -1 for d in t.shape.dim]
        out.append((vi.name, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type), dims))
    return out


def prepare_inputs(model, shapes, out_dir):
    """Writes one NAME.npy per model input into out_dir: the file beside the model, else random."""
    rng = np.random.default_rng(1234)
    beside = os.path.dirname(model)
    for name, dtype, dims in model_inputs(model):
        path = os.path.join(beside, name + ".npy")
        if os.path.exists(path):
            value = np.load(path)
        else:
            if name in shapes:
                dims = shapes[name]
            if any(d < 0 for d in dims):
                raise ValueError(f"input '{name}' has dynamic dims {dims}; give --shape {name}=1x...")
            if np.issubdtype(dtype, np.floating):
                value = rng.uniform(-1, 1, dims).astype(dtype)
            elif dtype == np.bool_:
                value = np.ones(dims, dtype)
            else:
                value = rng.integers(0, 2, dims).astype(dtype)
        np.save(os.path.join(out_dir, name + ".npy"), value)


class Runner:
    """One runtime's process: loaded, warmed up, answering rounds."""

    def __init__(self, runtime, model, threads, inputs_dir, vlrt, warmup):
        self.runtime, self.ms, self.error, self.peak = runtime, [], None, None
        if runtime in ("vlrt", "vlrt-bf16"):
            cmd = [vlrt, "bench", model, "-t", str(threads), "--warmup", str(warmup), "--rounds-stdin",
                   "--no-verify-hash", "--precision", "bf16" if runtime == "vlrt-bf16" else "fp32"]
            for f in sorted(os.listdir(inputs_dir)):
                cmd += ["--values", f"{os.path.splitext(f)[0]}={os.path.join(inputs_dir, f)}"]
        else:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", runtime, model, "--threads", str(threads),
                   "--inputs-dir", inputs_dir, "--warmup", str(warmup)]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        if not runtime.startswith("vlrt"):  # vlrt answers only rounds; an error shows as its exit
            first = self._read()
            if first is None or "error" in first:
                self.error = first["error"] if first else self._stderr_tail()
                self.proc.kill()

    def _read(self):
        line = self.proc.stdout.readline()
        return json.loads(line) if line.strip() else None

    def _stderr_tail(self):
        self.proc.wait()
        lines = [l for l in self.proc.stderr.read().splitlines() if l.strip()]
        return lines[-1][:200] if lines else f"exited with status {self.proc.returncode}"

    def round(self, runs):
        if self.error:
            return
        try:
            self.proc.stdin.write(f"{runs}\n")
            self.proc.stdin.flush()
        except OSError:  # the process has ended (a model it refused): its message says why
            self.error = self._stderr_tail()
            return
        answer = self._read()
        if answer is None:
            self.error = self._stderr_tail()
        else:
            self.ms += answer["ms"]

    def finish(self):
        if self.error:
            return
        self.proc.stdin.close()
        answer = self._read()
        self.peak = answer["peak_rss_bytes"] if answer else None
        self.proc.wait()


def percentile(ms, p):
    s = sorted(ms)
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


def bench_model(model, shapes, args, runtimes):
    with tempfile.TemporaryDirectory() as inputs_dir:
        prepare_inputs(model, shapes, inputs_dir)
        runners = [Runner(rt, model, args.threads, inputs_dir, args.vlrt, args.warmup) for rt in runtimes]
        per_round = max(1, args.runs // args.rounds)
        # One untimed round each first: a process's first tenth of a second of runs can take up to
        # twice its later time (seen for vlrt at 2 threads, whatever its warm-up count).
        for x in runners:
            x.round(per_round)
            x.ms = []
            time.sleep(args.settle)
        for r in range(args.rounds):
            for i in range(len(runners)):
                runners[(r + i) % len(runners)].round(per_round)
                time.sleep(args.settle)  # let a spinning pool go quiet before the next runtime
        for x in runners:
            x.finish()
    row = {}
    for x in runners:
        if x.error or not x.ms:
            row[x.runtime] = {"error": x.error or "no runs"}
        else:
            row[x.runtime] = {"median_ms": percentile(x.ms, 0.5), "p90_ms": percentile(x.ms, 0.9),
                              "min_ms": min(x.ms), "runs": len(x.ms), "peak_rss_bytes": x.peak}
    return row


def geomean(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="*", help=".onnx files or folders with model.onnx")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20, help="timed runs per runtime and model")
    ap.add_argument("--rounds", type=int, default=5, help="the runs are split into this many alternating rounds")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--settle", type=float, default=0.2, help="seconds of pause between runtimes")
    ap.add_argument("--runtimes", default="vlrt,onnxruntime,openvino")
    ap.add_argument("--vlrt", default=os.path.join(HERE, "..", "build", "vlrt"))
    ap.add_argument("--shape", action="append", default=[],
                    help="[MODEL:]INPUT=1x3x224x224 for dynamic dims; with MODEL (its name as printed) for that model only")
    ap.add_argument("--json", help="also write the results to this file")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--inputs-dir", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        return worker(args.worker, args.models[0], args.threads, args.inputs_dir, args.warmup)
    if not args.models:
        ap.error("give at least one model")
    args.shape = {k: [int(d) for d in v.split("x")] for k, v in (s.split("=", 1) for s in args.shape)}
    runtimes = args.runtimes.split(",")
    results = {}
    for m in args.models:
        model = os.path.join(m, "model.onnx") if os.path.isdir(m) else m
        name = os.path.basename(os.path.normpath(m)) if os.path.isdir(m) else os.path.splitext(os.path.basename(m))[0]
        print(f"{name}: timing {', '.join(runtimes)} ...", file=sys.stderr, flush=True)
        shapes = {k: v for k, v in args.shape.items() if ":" not in k}
        shapes.update({k.split(":", 1)[1]: v for k, v in args.shape.items() if k.startswith(name + ":")})
        try:
            results[name] = bench_model(model, shapes, args, runtimes)
        except ValueError as e:  # inputs that cannot be made: the other models still run
            results[name] = {r: {"error": str(e)} for r in runtimes}

    def cell(r):
        return f"{r['median_ms']:.2f} / {r['p90_ms']:.2f}" if "median_ms" in r else "—"

    def mib(r):
        return f"{r['peak_rss_bytes'] / 2**20:.0f}" if r.get("peak_rss_bytes") else "—"

    print(f"\n{args.threads} threads, {args.runs} runs each in {args.rounds} alternating rounds; median / p90 ms, "
          "peak RSS MiB\n")
    bf16 = "vlrt-bf16" in runtimes
    head = "| model | " + " | ".join(runtimes) + " | vlrt/ort | vlrt/best | " + \
        ("vlrt-bf16/ort | " if bf16 else "") + \
        " | ".join(f"RSS {r}" for r in runtimes) + " |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    vs_ort, vs_best, bf16_vs_ort, notes = [], [], [], []
    for name, row in results.items():
        v = row.get("vlrt", {}).get("median_ms")
        o = row.get("onnxruntime", {}).get("median_ms")
        peers = [row[r]["median_ms"] for r in runtimes if not r.startswith("vlrt") and "median_ms" in row.get(r, {})]
        b = row.get("vlrt-bf16", {}).get("median_ms")
        r3 = b / o if b and o else None
        if r3:
            bf16_vs_ort.append(r3)
        r1 = v / o if v and o else None
        r2 = v / min(peers) if v and peers else None
        if r1:
            vs_ort.append(r1)
        if r2:
            vs_best.append(r2)
        ratio = lambda x: f"{x:.2f}" if x else "—"
        cells = [cell(row[r]) for r in runtimes] + [ratio(r1), ratio(r2)] + ([ratio(r3)] if bf16 else []) + \
            [mib(row[r]) for r in runtimes]
        print(f"| {name} | " + " | ".join(cells) + " |")
        notes += [f"{name}: {r} failed: {row[r]['error']}" for r in runtimes if "error" in row[r]]
    print(f"\ngeometric mean vlrt/onnxruntime: {geomean(vs_ort):.3f} over {len(vs_ort)} models")
    print(f"geometric mean vlrt/fastest peer: {geomean(vs_best):.3f} over {len(vs_best)} models")
    if bf16_vs_ort:
        print(f"geometric mean vlrt-bf16/onnxruntime: {geomean(bf16_vs_ort):.3f} over {len(bf16_vs_ort)} models")
    for n in notes:
        print(n)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
