#!/usr/bin/env python3
"""Times one VLM turn in `vlrt chat` and in an onnxruntime loop over the same three ONNX files
of a folder written by tools/export_qwen_vl.py (vision -> embedding -> prefill -> greedy decode
steps with past/present; the loop is check_vlm_onnx.py's), rounds alternating in one run, and
prints the median of the rounds and whether the tokens are equal.

The turn: the first reference sample with one image whose greedy answer does not stop before
--max-new-tokens (found by a first, untimed onnxruntime run; stop tokens are honoured on both
sides, so both generate exactly that many tokens). Both sides run with the same thread count
(vlrt --threads, onnxruntime intra_op_num_threads).

What is timed (the same spans on both sides):
- vision -> first token: from the vision indices and vision model (the processor's pixel values
  in hand) through the prompt's embedding and the prefill to the first token's argmax. vlrt:
  --json vision_ms + prefill_ms. onnxruntime: inside Python, sessions created beforehand.
  vlrt's own first_token_ms (also its image resize/patching, template and tokenizing, which the
  onnxruntime side takes precomputed from the folder) is printed beside it.
- prefill tokens/s: prompt tokens / (prompt embedding + decoder prefill).
- decode tokens/s: generated tokens / (time from the end of the prefill to the last token),
  the way `vlrt chat` reports it.
vlrt runs each round in a fresh process (its timings exclude loading); onnxruntime's sessions
are created once and warmed by the untimed first run.

    python3 tools/bench_vlm_ort.py DIR --vlrt build/vlrt [--rounds 5 --threads 2 --max-new-tokens 32]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_vlm_onnx  # noqa: E402  (the onnxruntime prefill + decode loop)


def pick_sample(folder, max_new_tokens, stop):
    """The first one-image sample whose greedy answer runs to max_new_tokens, with its tokens."""
    for sample in folder.reference["samples"]:
        if len(sample["images"]) != 1:
            continue
        tokens, _ = folder.generate(sample, max_new_tokens, stop)
        if len(tokens) == max_new_tokens:
            return sample, tokens
    sys.exit(f"no one-image sample of {folder.path} generates {max_new_tokens} tokens without a stop token; "
             f"lower --max-new-tokens")


def run_vlrt(vlrt, folder, sample, a, tmp):
    out = os.path.join(tmp, "chat.json")
    image = os.path.join(folder.path, folder.reference["images"][sample["images"][0]]["file"])
    r = subprocess.run([vlrt, "chat", folder.path, "--image", image, "-p", sample["prompt"], "--greedy",
                        "--max-new-tokens", str(a.max_new_tokens), "--threads", str(a.threads), "--json", out],
                       capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"vlrt chat failed ({r.returncode}): {r.stderr.strip()}")
    with open(out) as f:
        j = json.load(f)
    n = len(j["tokens"])
    return {"ttft_ms": j["vision_ms"] + j["prefill_ms"], "own_first_token_ms": j["first_token_ms"],
            "prefill_tps": j["prompt_tokens"] * 1000.0 / j["prefill_ms"],
            "decode_tps": n * 1000.0 / j["decode_ms"], "tokens": j["tokens"]}


def run_ort(folder, sample, pixel_values, a, stop):
    marks = {}
    tokens, _ = folder.generate(sample, a.max_new_tokens, stop, pixel_values=pixel_values, marks=marks)
    ms = {k: v * 1000.0 for k, v in marks.items()}
    return {"ttft_ms": ms["first_token"] - ms["vision"], "own_first_token_ms": None,
            "prefill_tps": len(sample["input_ids"]) * 1000.0 / (ms["decode"] - ms["prefill"]),
            "decode_tps": len(tokens) * 1000.0 / (ms["end"] - ms["decode"]), "tokens": tokens}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", metavar="DIR")
    ap.add_argument("--vlrt", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "vlrt"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-new-tokens", type=int, default=32)
    a = ap.parse_args()
    folder = check_vlm_onnx.Folder(a.folder, threads=a.threads)
    with open(os.path.join(a.folder, "generation_config.json")) as f:
        stop = set(json.load(f)["eos_token_id"])
    sample, _ = pick_sample(folder, a.max_new_tokens, stop)
    pixel_values = folder.pixel_values(sample)
    print(f"{a.folder}: image {sample['images'][0]}, prompt {sample['prompt']!r} ({len(sample['input_ids'])} tokens), "
          f"{a.max_new_tokens} new tokens (greedy, no stop token before), {a.threads} threads, {a.rounds} rounds")
    rounds = {"vlrt": [], "onnxruntime": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.rounds):
            # Alternate which side goes first, so that neither always follows the other.
            order = ("vlrt", "onnxruntime") if i % 2 == 0 else ("onnxruntime", "vlrt")
            for side in order:
                rounds[side].append(run_vlrt(a.vlrt, folder, sample, a, tmp) if side == "vlrt"
                                    else run_ort(folder, sample, pixel_values, a, stop))
    rows = [("vision -> first token ms", "ttft_ms", "{:.1f}"), ("vlrt first_token_ms (with preprocessing)",
            "own_first_token_ms", "{:.1f}"), ("prefill tokens/s", "prefill_tps", "{:.0f}"),
            ("decode tokens/s", "decode_tps", "{:.1f}")]
    print(f"\n{'median of ' + str(a.rounds) + ' rounds':<42} {'vlrt':>10} {'onnxruntime':>12}")
    for label, key, fmt in rows:
        cells = []
        for side in ("vlrt", "onnxruntime"):
            values = [r[key] for r in rounds[side] if r[key] is not None]
            cells.append(fmt.format(statistics.median(values)) if values else "-")
        print(f"{label:<42} {cells[0]:>10} {cells[1]:>12}")
    same = all(r["tokens"] == rounds["vlrt"][0]["tokens"] for side in rounds.values() for r in side)
    print(f"{'tokens equal (every round, both sides)':<42} {'yes' if same else 'NO':>10}")
    if not same:
        print(f"  vlrt        {rounds['vlrt'][0]['tokens']}\n  onnxruntime {rounds['onnxruntime'][0]['tokens']}")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
