#!/usr/bin/env python3
"""Checks `vlrt chat` against transformers on VLM folders written by tools/export_qwen_vl.py:
every reference sample's greedy tokens must equal reference.json's `generated` under each
device placement, every run must execute exactly the transfers it planned, the KV cache must
be allocated as planned, and a context that cannot fit must be refused before anything runs.

Placements (each sample, each folder):
  cpu          everything on cpu
  vision-cpu1  --vision-devices cpu:1 (the decoder on cpu)
  vision-ocl   --vision-devices opencl:0 (skipped, with a note, where there is no OpenCL device)
  split        --vision-devices cpu:1 --text-devices cpu,cpu:1 --memory cpu=600KiB --context 256:
               the decoder must be placed on both cpu and cpu:1 (--split-memory sets the cap:
               600KiB splits export_qwen_vl.py's default size, 250KiB its --fixture size)
KV cache (first folder sample's image prompt, and a text-only prompt short enough for 64 tokens):
  --context 64 with "Describe a square." and no image, --context 512 with the first sample:
  cache_bytes == planned_cache_bytes and context as asked;
  --memory cpu=64KiB --text-devices cpu must exit non-zero naming the KV cache, with no answer
  printed and no --json written.

    python3 tools/check_vlm_chat.py DIR [DIR...] --vlrt build/vlrt [--threads 1] [--split-memory 600KiB]

Needs only the Python standard library. Exit status: 0 when every check passes, 1 otherwise.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

SHORT_PROMPT = "Describe a square."


def placements(has_opencl, split_memory):
    return [
        ("cpu", [], None),
        ("vision-cpu1", ["--vision-devices", "cpu:1"], None),
        ("vision-ocl", ["--vision-devices", "opencl:0"], None if has_opencl else "no OpenCL device (vlrt doctor)"),
        ("split", ["--vision-devices", "cpu:1", "--text-devices", "cpu,cpu:1", "--memory", f"cpu={split_memory}",
                   "--context", "256"], None),
    ]


def has_opencl_device(vlrt):
    r = subprocess.run([vlrt, "doctor"], capture_output=True, text=True)
    return "opencl:0" in r.stdout


class Runner:
    """Runs `vlrt chat` on one folder with --json and returns (exit code, json or None, stdout, stderr)."""

    def __init__(self, vlrt, folder, threads, tmp):
        self.vlrt, self.folder, self.threads = vlrt, folder, threads
        self.out = os.path.join(tmp, "chat.json")

    def chat(self, images, prompt, max_new_tokens, extra):
        out = self.out
        if os.path.exists(out):
            os.remove(out)
        args = [self.vlrt, "chat", self.folder, "-p", prompt, "--max-new-tokens", str(max_new_tokens), "--greedy",
                "--threads", str(self.threads), "--json", out, *extra]
        for image in images:
            args += ["--image", os.path.join(self.folder, image)]
        r = subprocess.run(args, capture_output=True, text=True)
        result = None
        if os.path.exists(out):
            with open(out) as f:
                result = json.load(f)
        return r.returncode, result, r.stdout, r.stderr


def last_line(text):
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def transfer_problem(result):
    if result["transfers_planned"] != result["transfers_executed"]:
        return f"transfers {result['transfers_planned']} planned but {result['transfers_executed']} executed"
    return None


def check_placement(runner, reference, name, extra):
    """(equal samples, problems) for one placement over every sample."""
    equal, problems = 0, []
    for i, sample in enumerate(reference["samples"]):
        images = [reference["images"][k]["file"] for k in sample["images"]]
        rc, result, _, err = runner.chat(images, sample["prompt"], reference["max_new_tokens"], extra)
        where = f"{name}, sample {i} ({sample['prompt']!r}, images {sample['images']})"
        if rc != 0 or result is None:
            problems.append(f"{where}: vlrt chat exited {rc}: {last_line(err)}")
            continue
        if result["tokens"] == sample["generated"]:
            equal += 1
        else:
            problems.append(f"{where}: tokens differ\n    vlrt         {result['tokens']}\n"
                            f"    transformers {sample['generated']}")
        for p in (transfer_problem(result), split_problem(result) if name == "split" else None):
            if p:
                problems.append(f"{where}: {p}")
    return equal, problems


def split_problem(result):
    devices = {device for device, _ in result["placement"].get("decoder", [])}
    if len(devices) < 2:
        return f"the decoder should be split across cpu and cpu:1 by the cap, but it is placed on {sorted(devices)}"
    return None


def check_kv_cache(runner, reference):
    """Lines saying what was checked, and problems."""
    lines, problems = [], []
    first = reference["samples"][0]
    first_images = [reference["images"][k]["file"] for k in first["images"]]
    max_new = reference["max_new_tokens"]
    for context, images, prompt in ((64, [], SHORT_PROMPT), (512, first_images, first["prompt"])):
        rc, result, _, err = runner.chat(images, prompt, max_new, ["--context", str(context)])
        what = f"--context {context} ({prompt!r}, {len(images)} image(s))"
        if rc != 0 or result is None:
            problems.append(f"{what}: vlrt chat exited {rc}: {err.strip()}")
            continue
        lines.append(f"{what}: prompt {result['prompt_tokens']} tokens, KV cache {result['cache_bytes']} bytes "
                     f"allocated, {result['planned_cache_bytes']} planned, context {result['context']}")
        if result["cache_bytes"] != result["planned_cache_bytes"] or result["context"] != context:
            problems.append(f"{what}: KV cache {result['cache_bytes']} bytes allocated for context "
                            f"{result['context']}, {result['planned_cache_bytes']} planned for {context}")
        p = transfer_problem(result)
        if p:
            problems.append(f"{what}: {p}")
    rc, result, out, err = runner.chat(first_images, first["prompt"], max_new,
                                       ["--memory", "cpu=64KiB", "--text-devices", "cpu"])
    what = "--memory cpu=64KiB --text-devices cpu"
    message = last_line(err)
    if rc == 0 or "KV cache" not in err or result is not None or out.strip():
        problems.append(f"{what}: expected a refusal naming the KV cache before any answer; got exit {rc}, "
                        f"stdout {out.strip()[:80]!r}, json {'written' if result else 'absent'}, stderr {message!r}")
    else:
        lines.append(f"{what}: refused (exit {rc}, no answer, no json): {message}")
    return lines, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folders", nargs="+", metavar="DIR")
    ap.add_argument("--vlrt", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "vlrt"))
    ap.add_argument("--threads", type=int, default=1,
                    help="vlrt chat --threads (default 1: the runs are short, and extra threads only wait on a busy machine)")
    ap.add_argument("--split-memory", default="600KiB",
                    help="cpu's cap in the split placement: small enough that the decoder does not fit on cpu alone")
    a = ap.parse_args()
    opencl = has_opencl_device(a.vlrt)
    table, problems = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in a.folders:
            with open(os.path.join(folder, "reference.json")) as f:
                reference = json.load(f)
            runner = Runner(a.vlrt, folder, a.threads, tmp)
            n = len(reference["samples"])
            for name, extra, skip in placements(opencl, a.split_memory):
                if skip:
                    table.append((folder, name, f"skipped: {skip}"))
                    continue
                equal, p = check_placement(runner, reference, name, extra)
                problems += [f"{folder}: {line}" for line in p]
                table.append((folder, name, f"{equal}/{n} equal" + ("" if not p else f", {len(p)} problem(s)")))
            lines, p = check_kv_cache(runner, reference)
            problems += [f"{folder}: {line}" for line in p]
            for line in lines:
                print(f"{folder}: {line}")
    width = max(len(f) for f, _, _ in table)
    print(f"\n{'folder':<{width}}  {'placement':<12} tokens vs transformers")
    for folder, name, verdict in table:
        print(f"{folder:<{width}}  {name:<12} {verdict}")
    for p in problems:
        print(f"FAIL {p}")
    print(f"{'all checks passed' if not problems else f'{len(problems)} problem(s)'}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
