#!/usr/bin/env python3
"""Exact-answer accuracy of the demo VLM (models/demo-vlm) through `vlrt chat` on held-out
generated scenes: scene i of --seed is asked --per-scene questions (tools/demo_vlm_questions.py,
kinds taken in turn), each answered greedily by `vlrt chat MODEL --image SCENE.png -p QUESTION
--json`; an answer is right when its text equals the canonical one. Prints the accuracy per
question kind and overall. Training used seed 1234, so any other seed is held out.

    python3 tools/eval_demo_vlm.py --seed 777 --count 200
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import demo_vlm_questions as dq  # noqa: E402
import scenes  # noqa: E402

ROOT = os.path.join(HERE, "..")


def ask(vlrt, model, image, prompt, json_out):
    cmd = [vlrt, "chat", model, "--image", image, "-p", prompt, "--greedy", "--threads", "1", "--json", json_out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"`{' '.join(cmd)}` failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    with open(json_out) as f:
        return json.load(f)["text"].strip()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=777, help="scene seed (not 1234, the training seed)")
    ap.add_argument("--count", type=int, default=200, help="scenes")
    ap.add_argument("--per-scene", type=int, default=1, help="questions per scene (kinds in turn)")
    ap.add_argument("--model", default=os.path.join(ROOT, "models", "demo-vlm"))
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build", "vlrt"))
    ap.add_argument("--jobs", type=int, default=2, help="`vlrt chat` runs at once")
    ap.add_argument("--show-wrong", type=int, default=10, help="wrong answers to print")
    a = ap.parse_args()
    if not os.path.exists(a.vlrt):
        sys.exit(f"{a.vlrt} not found: build vlrt first (cmake --build build) or pass --vlrt")

    with tempfile.TemporaryDirectory() as tmp:
        jobs = []
        for i in range(a.count):
            img, objects = dq.make_scene(a.seed, i)
            path = os.path.join(tmp, f"scene{i}.png")
            scenes.write_png(path, img)
            rng = np.random.default_rng([a.seed, i, 2])
            for q in range(a.per_scene):
                kind = dq.KINDS[(i * a.per_scene + q) % len(dq.KINDS)]
                prompt, answer = dq.question(rng, objects, kind)
                jobs.append((i, kind, path, prompt, answer, os.path.join(tmp, f"answer{i}_{q}.json")))
        with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
            got = list(pool.map(lambda j: ask(a.vlrt, a.model, j[2], j[3], j[5]), jobs))

    right = {k: [0, 0] for k in dq.KINDS}
    wrong = []
    for (i, kind, _, prompt, answer, _), text in zip(jobs, got):
        right[kind][0] += text == answer
        right[kind][1] += 1
        if text != answer:
            wrong.append(f"  scene {i}: {prompt!r} -> {text!r}, want {answer!r}")
    for line in wrong[:a.show_wrong]:
        print(line)
    for kind, (r, n) in right.items():
        print(f"{kind:18s} {r:4d}/{n:<4d} {r / max(1, n):.3f}")
    total, n = sum(r for r, _ in right.values()), len(jobs)
    print(f"overall exact answers: {total}/{n} = {total / n:.3f} ({a.count} scenes of seed {a.seed})")


if __name__ == "__main__":
    main()
