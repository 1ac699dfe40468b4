#!/usr/bin/env python3
"""Checks `vlrt serve` with the unchanged Triton HTTP client (`pip install "tritonclient[http]"`):
starts the server on a temporary model repository holding one exported model (linked as
REPO/NAME/1/model.onnx) beside the pipeline's model (the demo detector unless --model is passed
through), then with tritonclient: health, server and model metadata, model config, the repository
index, inference with JSON and with binary data (compared with the expected outputs stored beside
the model, else with ONNX Runtime), detection with BYTES image and prompt, statistics, and a
Prometheus scrape showing nv_inference_* moving. Exits 1 on the first failed check.

    python3 tools/check_tritonclient.py --model-dir models/zoo/resnet50 [--vlrt build/vlrt] [-- SERVE ARGS]
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import tritonclient.http as httpclient

from make_triton_requests import demo_detect_inputs  # noqa: E402
from serve_check import check, serving  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def scrape(url):
    page = urllib.request.urlopen(f"http://{url}/metrics").read().decode()
    series = {}
    for line in page.splitlines():
        m = re.match(r'(nv_inference_\w+)\{model="([^"]+)",version="1"\} (\S+)', line)
        if m:
            series[(m.group(1), m.group(2))] = float(m.group(3))
    return series


def expected_outputs(model_dir, feeds):
    stored = {f[len("expected_"):-4]: np.load(os.path.join(model_dir, f))
              for f in os.listdir(model_dir) if f.startswith("expected_") and f.endswith(".npy")}
    import onnxruntime as ort
    session = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds))), stored


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", required=True, help="a folder with model.onnx and its inputs as NAME.npy")
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("serve_args", nargs="*")
    args = ap.parse_args()

    name = os.path.basename(os.path.normpath(args.model_dir))
    repo = tempfile.mkdtemp(prefix="vlrt_repo_")
    os.makedirs(os.path.join(repo, name, "1"))
    os.symlink(os.path.abspath(os.path.join(args.model_dir, "model.onnx")), os.path.join(repo, name, "1", "model.onnx"))
    with open(os.path.join(repo, name, "config.pbtxt"), "w") as f:
        f.write(f'name: "{name}"\nplatform: "onnxruntime_onnx"\n')

    server = None
    try:
        with serving(args.vlrt, "--model-repository", repo, *args.serve_args, output=subprocess.PIPE) as server:
            url = server.url[len("http://"):]
            client = httpclient.InferenceServerClient(url=url, network_timeout=600, connection_timeout=600)
            check(client.is_server_live() and client.is_server_ready(), "server live and ready")
            meta = client.get_server_metadata()
            print("      server:", json.dumps(meta))
            check("binary_tensor_data" in meta["extensions"] and "model_repository" in meta["extensions"],
                  "server metadata lists binary_tensor_data, statistics, model_repository")
            index = client.get_model_repository_index()
            print("      repository index:", json.dumps(index))
            check(any(m["name"] == name and m["state"] == "READY" for m in index), f"repository index: {name} READY")
            check(client.is_model_ready(name), f"model {name} ready")
            model_meta = client.get_model_metadata(name)
            print("      model metadata:", json.dumps(model_meta))
            config = client.get_model_config(name)
            print("      model config:", json.dumps(config))
            check(config["name"] == name and len(config["input"]) == len(model_meta["inputs"]), "model config")

            feeds = {i["name"]: np.load(os.path.join(args.model_dir, i["name"] + ".npy"))
                     if os.path.exists(os.path.join(args.model_dir, i["name"] + ".npy"))
                     else np.load(os.path.join(args.model_dir, "image.npy"))
                     for i in model_meta["inputs"]}
            expected, stored = expected_outputs(args.model_dir, feeds)
            before = scrape(url)
            for binary in (False, True):
                inputs = []
                for n, a in feeds.items():
                    t = httpclient.InferInput(n, list(a.shape), {"float32": "FP32", "int64": "INT64"}[str(a.dtype)])
                    t.set_data_from_numpy(a, binary_data=binary)
                    inputs.append(t)
                outputs = [httpclient.InferRequestedOutput(o["name"], binary_data=binary) for o in model_meta["outputs"]]
                t0 = time.perf_counter()
                result = client.infer(name, inputs, outputs=outputs, request_id=f"r{int(binary)}")
                ms = (time.perf_counter() - t0) * 1000
                for o in model_meta["outputs"]:
                    got = result.as_numpy(o["name"])
                    ref = expected[o["name"]]
                    err = float(np.max(np.abs(got - ref)) / max(1e-12, float(np.max(np.abs(ref)))))
                    line = f"{name} infer ({'binary' if binary else 'JSON'} data): {o['name']} {list(got.shape)}, " \
                           f"max abs error / max |ONNX Runtime| = {err:.2e}, {ms:.0f} ms"
                    if o["name"] in stored or len(stored) == 1:
                        ref2 = stored.get(o["name"], next(iter(stored.values())))
                        line += f", argmax {int(np.argmax(got))} (stored expected: {int(np.argmax(ref2))})"
                    check(got.shape == ref.shape and err < 1e-3, line)

            others = [m for (metric, m) in scrape(url) if metric == "nv_inference_count" and m != name]
            check(len(others) == 1, f"the pipeline's model ({others}) is served beside the repository's")
            detector = others[0]
            result = client.infer(detector, demo_detect_inputs())
            boxes, scores, labels = result.as_numpy("boxes"), result.as_numpy("scores"), result.as_numpy("labels")
            for b, s, l in list(zip(boxes, scores, labels))[:3]:
                print(f"      {l.decode()}: {s:.3f} [{', '.join(f'{v:.1f}' for v in b)}]")
            check(len(labels) > 0 and boxes.shape == (len(labels), 4),
                  f"{detector} infer with BYTES image and prompt: {len(labels)} detections")

            stats = client.get_inference_statistics(name)["model_stats"][0]
            print("      stats:", json.dumps(stats))
            check(stats["inference_stats"]["success"]["count"] >= 2 and stats["execution_count"] >= 2, f"{name} statistics")
            after = scrape(url)
            for metric in ("nv_inference_request_success", "nv_inference_count", "nv_inference_exec_count",
                           "nv_inference_request_duration_us", "nv_inference_compute_infer_duration_us"):
                a, b = before.get((metric, name), 0), after.get((metric, name), 0)
                check(b > a, f'{metric}{{model="{name}"}}: {a:g} -> {b:g}')
            client.unload_model(name)
            check(not client.is_model_ready(name), f"unload {name}: not ready")
            client.load_model(name)
            check(client.is_model_ready(name), f"load {name}: ready")
    finally:
        if server is not None and server.log:
            print("      server log:", " | ".join(server.log.strip().splitlines()[-3:]))
        shutil.rmtree(repo)


if __name__ == "__main__":
    main()
