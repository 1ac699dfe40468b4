#!/usr/bin/env python3
"""A tiny Qwen2-style decoder as onnxruntime-genai's model builder writes it, run by
onnxruntime and `vlrt run` on a prompt step and a decode step with past KV.

How the model is built: onnxruntime-genai's builder (0.18) imports a transformers release
with the newest model classes, which needs a newer torch than the one available here, so
it cannot run offline. This script therefore writes the graph with onnx.helper following
the builder's int4 CPU pattern for Qwen2 with tied embeddings:
  input_ids, attention_mask, past_key_values.{i}.key/value [batch, kv_heads, past, head]
  -> GatherBlockQuantized (4-bit embeddings shared with lm_head)
  -> per layer: SimplifiedLayerNormalization (first layer) / SkipSimplifiedLayerNormalization,
     MatMulNBits (int4, block 32) Q/K/V projections + bias, GroupQueryAttention with
     do_rotary, cos/sin caches and seqlens_k / total_sequence_length from the attention mask
     (ReduceSum - 1, Shape[1], Cast to int32), MatMulNBits o_proj, SkipSimplifiedLayerNormalization,
     MLP gate/up/down MatMulNBits with SiLU (Sigmoid * x)
  -> SkipSimplifiedLayerNormalization, MatMulNBits lm_head -> logits, present.{i}.key/value.
Sizes: hidden 64, 2 layers, 4 heads, 2 KV heads (head 16), intermediate 128, vocab 256;
random weights. Two departures from the builder: default-domain opset 18 (the builder writes
21, newer than vlrt reads), and MatMulNBits accuracy_level 0 by default: at the builder's 4,
onnxruntime quantizes the activations to int8 inside MatMulNBits, which moves its outputs
about 1e-2 of their scale away from the exact product (--accuracy-level 4 shows it). The
model is written to a temporary folder (or --keep DIR), never committed.

For each step and output it prints the max abs error relative to the output's scale (its
largest magnitude, at least 1); the target is <= 1e-3.

    python3 tools/check_tiny_qwen2.py [--vlrt build/vlrt] [--keep DIR] [--accuracy-level 0|4]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parent.parent
MS = "com.microsoft"
HIDDEN, LAYERS, HEADS, KV_HEADS, INTER, VOCAB, MAX_LEN = 64, 2, 4, 2, 128, 256, 64
HEAD = HIDDEN // HEADS
BLOCK = 32
ACCURACY_LEVEL = 0
rng = np.random.default_rng(7)


def quantize_int4(w):
    """w [N, K] -> MatMulNBits' B [N, K/32, 16], scales [N * K/32], packed zero points."""
    n, k = w.shape
    blocks = w.reshape(n, k // BLOCK, BLOCK)
    lo, hi = np.minimum(blocks.min(-1), 0), np.maximum(blocks.max(-1), 0)
    scale = np.maximum(hi - lo, 1e-8) / 15
    zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    q = np.clip(np.round(blocks / scale[..., None]) + zp[..., None], 0, 15).astype(np.uint8)
    packed = (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)
    zp_even = np.pad(zp, ((0, 0), (0, (k // BLOCK) % 2)))
    zp_packed = (zp_even[:, 0::2] | (zp_even[:, 1::2] << 4)).astype(np.uint8)
    return packed, scale.astype(np.float32), zp_packed


class Graph:
    def __init__(self):
        self.nodes, self.inits = [], []

    def init(self, name, a):
        self.inits.append(numpy_helper.from_array(np.asarray(a), name))
        return name

    def node(self, op, inputs, name, outputs=1, domain="", **attrs):
        outs = [f"{name}/output_{i}" for i in range(outputs)] if isinstance(outputs, int) else outputs
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain, **attrs))
        return outs[0] if len(outs) == 1 else outs

    def matmul_nbits(self, x, name, n, k, bias=False):
        w = rng.standard_normal((n, k)).astype(np.float32) * 0.08
        b, s, z = quantize_int4(w)
        inputs = [x, self.init(f"{name}.qweight", b), self.init(f"{name}.scales", s.reshape(-1)),
                  self.init(f"{name}.qzeros", z.reshape(-1))]
        y = self.node("MatMulNBits", inputs, f"{name}/MatMulNBits", domain=MS, K=k, N=n, bits=4, block_size=BLOCK,
                      accuracy_level=ACCURACY_LEVEL)
        if bias:
            y = self.node("Add", [y, self.init(f"{name}.bias", rng.standard_normal(n).astype(np.float32) * 0.1)],
                          f"{name}/Add")
        return y

    def norm_weight(self, name):
        return self.init(name, (1 + 0.1 * rng.standard_normal(HIDDEN)).astype(np.float32))


def build(path):
    g = Graph()
    # Tied embeddings: the embedding table quantized once, read by GatherBlockQuantized and lm_head.
    emb = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32) * 0.5
    eb, es, ez = quantize_int4(emb)
    g.init("model.embed_tokens.qweight", eb)
    x = g.node("GatherBlockQuantized", [g.init("model.embed_tokens.qweight_2d", eb.reshape(VOCAB, HIDDEN // 2)),
                                        "input_ids", g.init("model.embed_tokens.scales", es),
                                        g.init("model.embed_tokens.qzeros", ez)],
               "/model/embed_tokens/GatherBlockQuantized", domain=MS, bits=4, block_size=BLOCK, gather_axis=0,
               quantize_axis=1)
    # seqlens_k and total_sequence_length from the attention mask.
    one = g.init("/model/constants/INT64/[1]", np.array([1], np.int64))
    s = g.node("ReduceSum", ["attention_mask", one], "/model/attn_mask_reformat/ReduceSum", keepdims=0)
    s = g.node("Sub", [s, g.init("/model/constants/INT64/1d", np.array(1, np.int64))], "/model/attn_mask_reformat/Sub")
    seqlens = g.node("Cast", [s], "/model/attn_mask_reformat/Sub/Cast", to=TensorProto.INT32)
    shape = g.node("Shape", ["attention_mask"], "/model/attn_mask_reformat/Shape")
    total = g.node("Gather", [shape, g.init("/model/constants/INT64/1", np.array(1, np.int64))],
                   "/model/attn_mask_reformat/Gather", axis=0)
    total = g.node("Cast", [total], "/model/attn_mask_reformat/Gather/Cast", to=TensorProto.INT32)
    inv = 1.0 / (10000 ** (np.arange(0, HEAD, 2) / HEAD))
    angles = np.arange(MAX_LEN)[:, None] * inv[None, :]
    cos = g.init("cos_cache", np.cos(angles).astype(np.float32))
    sin = g.init("sin_cache", np.sin(angles).astype(np.float32))

    residual = None
    for i in range(LAYERS):
        p = f"/model/layers.{i}"
        w = g.norm_weight(f"model.layers.{i}.input_layernorm.weight")
        if residual is None:
            h = g.node("SimplifiedLayerNormalization", [x, w], f"{p}/input_layernorm/LayerNorm", epsilon=1e-6)
            residual = x
        else:
            h, _, _, residual = g.node("SkipSimplifiedLayerNormalization", [x, residual, w],
                                       f"{p}/input_layernorm/SkipLayerNorm", outputs=[
                                           f"{p}/input_layernorm/output_0", "", "",
                                           f"{p}/input_layernorm/output_3"], domain=MS, epsilon=1e-6)
        q = g.matmul_nbits(h, f"{p}/attn/q_proj", HEADS * HEAD, HIDDEN, bias=True)
        k = g.matmul_nbits(h, f"{p}/attn/k_proj", KV_HEADS * HEAD, HIDDEN, bias=True)
        v = g.matmul_nbits(h, f"{p}/attn/v_proj", KV_HEADS * HEAD, HIDDEN, bias=True)
        a = g.node("GroupQueryAttention",
                   [q, k, v, f"past_key_values.{i}.key", f"past_key_values.{i}.value", seqlens, total, cos, sin],
                   f"{p}/attn/GroupQueryAttention",
                   outputs=[f"{p}/attn/GroupQueryAttention/output_0", f"present.{i}.key", f"present.{i}.value"],
                   domain=MS, num_heads=HEADS, kv_num_heads=KV_HEADS, do_rotary=1, rotary_interleaved=0,
                   local_window_size=-1, scale=float(1 / np.sqrt(HEAD)))[0]
        x = g.matmul_nbits(a, f"{p}/attn/o_proj", HIDDEN, HEADS * HEAD)
        h, _, _, residual = g.node("SkipSimplifiedLayerNormalization",
                                   [x, residual, g.norm_weight(f"model.layers.{i}.post_attention_layernorm.weight")],
                                   f"{p}/post_attention_layernorm/SkipLayerNorm", outputs=[
                                       f"{p}/post_attention_layernorm/output_0", "", "",
                                       f"{p}/post_attention_layernorm/output_3"], domain=MS, epsilon=1e-6)
        gate = g.matmul_nbits(h, f"{p}/mlp/gate_proj", INTER, HIDDEN)
        up = g.matmul_nbits(h, f"{p}/mlp/up_proj", INTER, HIDDEN)
        silu = g.node("Mul", [gate, g.node("Sigmoid", [gate], f"{p}/mlp/act_fn/Sigmoid")], f"{p}/mlp/act_fn/Mul")
        x = g.matmul_nbits(g.node("Mul", [silu, up], f"{p}/mlp/Mul"), f"{p}/mlp/down_proj", HIDDEN, INTER)
    h, _, _, _ = g.node("SkipSimplifiedLayerNormalization", [x, residual, g.norm_weight("model.norm.weight")],
                        "/model/layers.2/final_norm_layernorm/SkipLayerNorm",
                        outputs=["/model/norm/output_0", "", "", ""], domain=MS, epsilon=1e-6)
    g.node("MatMulNBits", [h, "model.embed_tokens.qweight", "model.embed_tokens.scales.flat",
                           "model.embed_tokens.qzeros.flat"], "/lm_head/MatMulNBits", outputs=["logits"], domain=MS,
           K=HIDDEN, N=VOCAB, bits=4, block_size=BLOCK, accuracy_level=ACCURACY_LEVEL)
    g.init("model.embed_tokens.scales.flat", es.reshape(-1))
    g.init("model.embed_tokens.qzeros.flat", ez.reshape(-1))

    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
              helper.make_tensor_value_info("attention_mask", i64, ["batch_size", "total_sequence_length"])]
    outputs = [helper.make_tensor_value_info("logits", f32, ["batch_size", "sequence_length", VOCAB])]
    for i in range(LAYERS):
        for kv in ("key", "value"):
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{i}.{kv}", f32,
                                                        ["batch_size", KV_HEADS, "past_sequence_length", HEAD]))
            outputs.append(helper.make_tensor_value_info(f"present.{i}.{kv}", f32,
                                                         ["batch_size", KV_HEADS, "total_sequence_length", HEAD]))
    graph = helper.make_graph(g.nodes, "tiny_qwen2", inputs, outputs, g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    onnx.save(model, path)


def run_vlrt(vlrt, model, feeds, names, tmp):
    args = [str(vlrt), "run", str(model), "--no-verify-hash", "-o", os.path.join(tmp, "out")]
    for k, v in feeds.items():
        f = os.path.join(tmp, f"{k}.npy")
        np.save(f, v)
        args += ["-i", f"{k}={f}"]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"vlrt run failed:\n{r.stderr or r.stdout}")
    out = Path(tmp) / "out"
    got = {}
    for n in names:
        f = out / f"{n}.npy"
        if not f.exists():
            f = next(p for p in out.glob("*.npy") if p.stem.replace("_", ".") == n.replace("_", ".").replace("/", "."))
        got[n] = np.load(f)
    return got


def compare(step, ref, got):
    worst = 0.0
    for name, want in ref.items():
        have = got[name]
        if have.shape != want.shape:
            print(f"{step} {name}: shape {list(have.shape)} vs onnxruntime {list(want.shape)}")
            worst = float("inf")
            continue
        scale = max(1.0, float(np.abs(want).max()))
        err = float(np.abs(have.astype(np.float64) - want).max()) / scale
        worst = max(worst, err)
        print(f"{step} {name} {list(want.shape)}: max abs error / scale = {err:.2e} (scale {scale:.3g})")
    return worst


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--vlrt", default=str(REPO / "build" / "vlrt"))
    ap.add_argument("--keep", help="write the model into this folder and keep it")
    ap.add_argument("--accuracy-level", type=int, default=0, help="MatMulNBits' accuracy_level (the builder: 4)")
    a = ap.parse_args()
    global ACCURACY_LEVEL
    ACCURACY_LEVEL = a.accuracy_level
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(a.keep) if a.keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        model = folder / "model.onnx"
        build(model)
        sess = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        batch, prompt = 2, 5
        empty = np.zeros((batch, KV_HEADS, 0, HEAD), np.float32)
        feeds = {"input_ids": rng.integers(0, VOCAB, (batch, prompt)).astype(np.int64),
                 "attention_mask": np.ones((batch, prompt), np.int64)}
        for i in range(LAYERS):
            feeds[f"past_key_values.{i}.key"] = feeds[f"past_key_values.{i}.value"] = empty
        worst = 0.0
        ref = dict(zip(names, sess.run(None, feeds)))
        worst = max(worst, compare("prompt", ref, run_vlrt(a.vlrt, model, feeds, names, tmp)))
        # Decode: the next token, with onnxruntime's present as the past.
        feeds = {"input_ids": ref["logits"][:, -1].argmax(-1)[:, None].astype(np.int64),
                 "attention_mask": np.ones((batch, prompt + 1), np.int64)}
        for i in range(LAYERS):
            feeds[f"past_key_values.{i}.key"] = ref[f"present.{i}.key"]
            feeds[f"past_key_values.{i}.value"] = ref[f"present.{i}.value"]
        ref = dict(zip(names, sess.run(None, feeds)))
        worst = max(worst, compare("decode", ref, run_vlrt(a.vlrt, model, feeds, names, tmp)))
        print(f"worst: {worst:.2e} ({'within' if worst <= 1e-3 else 'above'} the 1e-3 target)")
        return 0 if worst <= 1e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
