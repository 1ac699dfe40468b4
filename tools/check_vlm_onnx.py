#!/usr/bin/env python3
"""Runs a VLM folder written by tools/export_qwen_vl.py (vision.onnx, embedding.onnx, decoder.onnx,
reference.json) in onnxruntime as a prefill + greedy decode loop on every reference prompt and
checks that the generated tokens equal transformers' `generate()`; then runs the three models in
`vlrt run` on the first prompt's inputs (prefill, and one decode step with past) and prints each
output's max abs error against onnxruntime. Needs numpy and onnxruntime only; the vision inputs
(rotary ids, frame and window biases, window order) are rebuilt here from image_grid_thw, the
way the runtime builds them.

    python3 tools/check_vlm_onnx.py DIR [--vlrt build/vlrt]

Exit status: 0 when all tokens match (and vlrt ran), 1 on a mismatch, 2 when vlrt fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

NEG = np.finfo(np.float32).min


def patch_positions(grid_thw, merge):
    """Each patch's (row, column) in the vision tower's order: merge x merge blocks row-major,
    frames repeated ([Np, 2] int64), as transformers' rot_pos_emb lists them."""
    ids = []
    for t, h, w in grid_thw:
        rows = np.broadcast_to(np.arange(h)[:, None], (h, w))
        cols = np.broadcast_to(np.arange(w)[None, :], (h, w))
        blocked = [a.reshape(h // merge, merge, w // merge, merge).transpose(0, 2, 1, 3).reshape(-1)
                   for a in (rows, cols)]
        ids.append(np.tile(np.stack(blocked, -1), (t, 1)))
    return np.concatenate(ids).astype(np.int64)


def block_bias(lengths):
    """[N, N] float32: 0 inside each consecutive block of the given lengths, float32 min across."""
    n = int(sum(lengths))
    bias = np.full((n, n), NEG, np.float32)
    start = 0
    for length in lengths:
        bias[start:start + length, start:start + length] = 0
        start += length
    return bias


def window_order(grid_thw, merge, patch, window_size):
    """(window_index [Np/merge^2], window lengths in patches): merged units listed window by
    window (windows of window_size pixels, row-major, each unit row-major inside), as
    transformers' get_window_index orders them; empty windows dropped."""
    cells = window_size // merge // patch
    index, lengths, offset = [], [], 0
    for t, h, w in grid_thw:
        gh, gw = h // merge, w // merge
        nh, nw = -(-gh // cells), -(-gw // cells)
        units = np.arange(t * gh * gw).reshape(t, gh, gw)
        for f in range(t):
            for wy in range(nh):
                for wx in range(nw):
                    win = units[f, wy * cells:(wy + 1) * cells, wx * cells:(wx + 1) * cells].reshape(-1)
                    index.append(win + offset)
                    lengths.append(win.size * merge * merge)
        offset += t * gh * gw
    return np.concatenate(index).astype(np.int64), lengths


def vision_feeds(config, grid_thw):
    """The contract's vision.onnx inputs (without pixel_values) for these images."""
    vc = config["vision_config"]
    merge = vc["spatial_merge_size"]
    grid_thw = [tuple(int(v) for v in g) for g in grid_thw]
    feeds = {"rotary_pos_ids": patch_positions(grid_thw, merge),
             "attention_bias": block_bias([h * w for t, h, w in grid_thw for _ in range(t)])}
    if config["model_type"] == "qwen2_5_vl":
        index, lengths = window_order(grid_thw, merge, vc["patch_size"], vc["window_size"])
        feeds["window_index"] = index
        feeds["reverse_window_index"] = np.argsort(index).astype(np.int64)
        feeds["window_attention_bias"] = block_bias(lengths)
    return feeds


class Folder:
    def __init__(self, path, threads=0):
        """threads: onnxruntime's intra_op_num_threads (0: its default)."""
        import onnxruntime as ort

        self.path = path
        with open(os.path.join(path, "config.json")) as f:
            self.config = json.load(f)
        with open(os.path.join(path, "reference.json")) as f:
            self.reference = json.load(f)
        opts = ort.SessionOptions()
        opts.log_severity_level = 3
        opts.intra_op_num_threads = threads
        self.sessions = {name: ort.InferenceSession(os.path.join(path, f"{name}.onnx"), opts,
                                                    providers=["CPUExecutionProvider"])
                         for name in ("vision", "embedding", "decoder")}
        self.layers = self.config["num_hidden_layers"]
        self.kv_heads = self.config["num_key_value_heads"]
        self.head_dim = self.config["hidden_size"] // self.config["num_attention_heads"]

    def pixel_values(self, sample):
        return np.concatenate([np.load(os.path.join(self.path, self.reference["images"][i]["pixel_values"]))
                               for i in sample["images"]])

    def vision_inputs(self, sample):
        feeds = vision_feeds(self.config, sample["image_grid_thw"])
        feeds["pixel_values"] = self.pixel_values(sample)
        return feeds

    def empty_past(self, batch):
        shape = (batch, self.kv_heads, 0, self.head_dim)
        return {f"past_key_values.{i}.{kv}": np.zeros(shape, np.float32)
                for i in range(self.layers) for kv in ("key", "value")}

    def decoder_outputs(self):
        return [o.name for o in self.sessions["decoder"].get_outputs()]

    def generate(self, sample, max_new_tokens, stop, pixel_values=None, marks=None):
        """Greedy tokens from onnxruntime, and the logits' smallest top-1 minus top-2 margin.
        pixel_values: the sample's, when already loaded; marks: a dict that receives
        time.perf_counter() at "vision" (before the vision indices are built and the vision model
        runs), "prefill" (before the prompt's embedding), "decode" (after the prefill's decoder
        run), "first_token" (its argmax taken) and "end" (the last token taken)."""
        mark = (lambda name: marks.__setitem__(name, time.perf_counter())) if marks is not None else (lambda name: None)
        pixel_values = self.pixel_values(sample) if pixel_values is None else pixel_values
        mark("vision")
        vision = {**vision_feeds(self.config, sample["image_grid_thw"]), "pixel_values": pixel_values}
        embeds = self.sessions["vision"].run(["image_embeds"], vision)[0]
        mark("prefill")
        ids = np.array([sample["input_ids"]], np.int64)
        inputs_embeds = self.sessions["embedding"].run(None, {"input_ids": ids, "image_embeds": embeds})[0]
        position_ids = np.array(sample["position_ids"], np.int64)
        past = self.empty_past(1)
        names = self.decoder_outputs()
        tokens, margin, length = [], np.inf, ids.shape[1]
        for _ in range(max_new_tokens):
            feeds = {"inputs_embeds": inputs_embeds, "attention_mask": np.ones((1, length), np.int64),
                     "position_ids": position_ids, **past}
            out = dict(zip(names, self.sessions["decoder"].run(names, feeds)))
            if not tokens:
                mark("decode")
            last = out["logits"][0, -1]
            token = int(np.argmax(last))
            if not tokens:
                mark("first_token")
            top2 = np.sort(last)[-2:]
            margin = min(margin, float(top2[1] - top2[0]))
            tokens.append(token)
            if token in stop or len(tokens) == max_new_tokens:
                break
            past = {n.replace("present.", "past_key_values."): v for n, v in out.items() if n.startswith("present.")}
            inputs_embeds = self.sessions["embedding"].run(
                None, {"input_ids": np.array([[token]], np.int64), "image_embeds": embeds})[0]
            position_ids = np.full((3, 1, 1), length + sample["rope_delta"], np.int64)
            length += 1
        mark("end")
        return tokens, margin


def check_batch(folder):
    """The first sample's prefill as a batch of two, left-padded by 3 masked tokens, gives the same
    last logits as alone: dynamic batch and the attention mask are honoured."""
    sample = folder.reference["samples"][0]
    embeds = folder.sessions["vision"].run(["image_embeds"], folder.vision_inputs(sample))[0]
    ids = np.array([sample["input_ids"]], np.int64)
    single = folder.sessions["embedding"].run(None, {"input_ids": ids, "image_embeds": embeds})[0]
    pos = np.array(sample["position_ids"], np.int64)
    names = folder.decoder_outputs()
    alone = folder.sessions["decoder"].run(["logits"], {
        "inputs_embeds": single, "attention_mask": np.ones(ids.shape, np.int64), "position_ids": pos,
        **folder.empty_past(1)})[0]
    pad = 3
    padded = np.concatenate([np.zeros((1, pad, single.shape[2]), np.float32), single], 1)
    mask = np.ones((2, ids.shape[1] + pad), np.int64)
    mask[:, :pad] = 0
    both_pos = np.concatenate([np.pad(pos, ((0, 0), (0, 0), (pad, 0)), constant_values=1)] * 2, 1)
    batch = folder.sessions["decoder"].run(["logits"], {
        "inputs_embeds": np.concatenate([padded, padded]), "attention_mask": mask, "position_ids": both_pos,
        **folder.empty_past(2)})[0]
    err = float(np.abs(batch[:, -1] - alone[:, -1]).max())
    print(f"onnxruntime batch of 2 with left padding vs alone: last logits max abs error {err:.2e}")
    return err < 1e-3 * max(1.0, float(np.abs(alone).max()))


def run_vlrt(vlrt, model, feeds, tmp):
    out = os.path.join(tmp, "out")
    args = [vlrt, "run", model, "--no-verify-hash", "-o", out]
    for k, v in feeds.items():
        f = os.path.join(tmp, f"in_{k}.npy")
        np.save(f, v)
        args += ["-i", f"{k}={f}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr or r.stdout).strip()
    got = {}
    for f in os.listdir(out):
        if f.endswith(".npy"):
            got[f[:-4]] = np.load(os.path.join(out, f))
    return got, None


def compare_vlrt(folder, vlrt):
    """Each model once in vlrt run and onnxruntime on the first sample's inputs; returns False when
    vlrt refuses a model."""
    sample = folder.reference["samples"][0]
    vision = folder.vision_inputs(sample)
    embeds = folder.sessions["vision"].run(["image_embeds"], vision)[0]
    ids = np.array([sample["input_ids"]], np.int64)
    embedding = {"input_ids": ids, "image_embeds": embeds}
    inputs_embeds = folder.sessions["embedding"].run(None, embedding)[0]
    prefill = {"inputs_embeds": inputs_embeds, "attention_mask": np.ones(ids.shape, np.int64),
               "position_ids": np.array(sample["position_ids"], np.int64), **folder.empty_past(1)}
    names = folder.decoder_outputs()
    out = dict(zip(names, folder.sessions["decoder"].run(names, prefill)))
    step = {"inputs_embeds": inputs_embeds[:, -1:], "attention_mask": np.ones((1, ids.shape[1] + 1), np.int64),
            "position_ids": np.full((3, 1, 1), ids.shape[1] + sample["rope_delta"], np.int64),
            **{n.replace("present.", "past_key_values."): v for n, v in out.items() if n.startswith("present.")}}
    ok = True
    for label, model, feeds in (("vision", "vision", vision), ("embedding", "embedding", embedding),
                                ("decoder prefill", "decoder", prefill), ("decoder step", "decoder", step)):
        sess = folder.sessions[model]
        want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
        with tempfile.TemporaryDirectory() as tmp:
            got, err = run_vlrt(vlrt, os.path.join(folder.path, f"{model}.onnx"), feeds, tmp)
        if got is None:
            print(f"vlrt {label}: refused: {err}")
            ok = False
            continue
        errs = []
        for name, w in want.items():
            g = got.get(name, got.get(name.replace(".", "_")))
            if g is None:
                errs.append(f"{name}: missing")
            elif g.shape != w.shape:
                errs.append(f"{name}: shape {g.shape} != {w.shape}")
            else:
                errs.append(f"{name}: {float(np.abs(g - w).max()):.2e}")
        print(f"vlrt {label} vs onnxruntime max abs error: " + ", ".join(errs))
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder")
    ap.add_argument("--vlrt", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "vlrt"))
    a = ap.parse_args()
    folder = Folder(a.folder)
    with open(os.path.join(a.folder, "generation_config.json")) as f:
        stop = set(json.load(f)["eos_token_id"])
    mismatches, margin = 0, np.inf
    for sample in folder.reference["samples"]:
        tokens, m = folder.generate(sample, folder.reference["max_new_tokens"], stop)
        margin = min(margin, m)
        same = tokens == sample["generated"]
        mismatches += not same
        print(f"{'same' if same else 'DIFFERENT'}: {len(tokens)} tokens, images {sample['images']}, "
              f"prompt {sample['prompt']!r}" + ("" if same else f"\n  onnxruntime  {tokens}\n  transformers "
                                                             f"{sample['generated']}"))
    print(f"onnxruntime vs transformers: {len(folder.reference['samples']) - mismatches}/"
          f"{len(folder.reference['samples'])} token sequences equal; smallest top-1 minus top-2 logit "
          f"margin {margin:.3f}")
    status = 1 if mismatches or not check_batch(folder) else 0
    if os.path.exists(a.vlrt):
        if not compare_vlrt(folder, a.vlrt):
            status = status or 2
    else:
        print(f"{a.vlrt} not built: vlrt comparison skipped")
    sys.exit(status)


if __name__ == "__main__":
    main()
