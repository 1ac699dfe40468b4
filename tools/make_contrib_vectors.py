#!/usr/bin/env python3
"""Test vectors for the com.microsoft contrib ops (tests/ops/test_contrib.cpp).

Each case is a one-node model <case>.onnx in tests/fixtures/contrib/ with its
inputs and ONNX Runtime's outputs as <case>.<value>.npy. Ops that ONNX Runtime
runs only on GPU (BiasAdd) get their outputs from the formula of
docs/ContribOperators.md instead.

    python3 tools/make_contrib_vectors.py   # numpy, onnx, onnxruntime (1.32)
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "contrib")
MS = "com.microsoft"
rng = np.random.default_rng(1234)


def randn(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def elem_type(a):
    return helper.np_dtype_to_tensor_dtype(a.dtype)


def case(name, op, inputs, outputs, domain=MS, initializers=None, reference=None, opset=17, **attrs):
    """inputs: list of (name, array) with "" for an omitted optional input; initializers:
    names among them stored in the model instead of as graph inputs; outputs: names, "" for
    an unused optional output."""
    initializers = initializers or []
    node = helper.make_node(op, [n for n, _ in inputs], outputs, domain=domain, **attrs)
    graph_inputs = [helper.make_tensor_value_info(n, elem_type(a), a.shape)
                    for n, a in inputs if n and n not in initializers]
    inits = [numpy_helper.from_array(a, n) for n, a in inputs if n in initializers]
    graph_outputs = [helper.make_empty_tensor_value_info(o) for o in outputs if o]
    graph = helper.make_graph([node], name, graph_inputs, graph_outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    model.ir_version = 8
    feeds = {n: a for n, a in inputs if n and n not in initializers}
    if reference is None:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        results = sess.run([o for o in outputs if o], feeds)
    else:
        results = reference(*[a for _, a in inputs])
    onnx.save(model, os.path.join(OUT, name + ".onnx"))
    for n, a in feeds.items():
        np.save(os.path.join(OUT, f"{name}.{n}.npy"), a)
    for o, r in zip([o for o in outputs if o], results):
        np.save(os.path.join(OUT, f"{name}.{o}.npy"), np.asarray(r))
    CASES.append(name)


CASES = []


def gelu_family():
    x = randn(2, 3, 8, scale=2)
    b = randn(8)
    case("gelu", "Gelu", [("X", x)], ["Y"])
    case("fast_gelu", "FastGelu", [("X", x)], ["Y"])
    case("fast_gelu_bias", "FastGelu", [("X", x), ("bias", b)], ["Y"])
    case("bias_gelu", "BiasGelu", [("A", x), ("B", b)], ["C"])
    case("quick_gelu", "QuickGelu", [("X", x)], ["Y"])
    case("quick_gelu_alpha", "QuickGelu", [("X", x)], ["Y"], alpha=1.3)
    xa, skip, bias = randn(2, 3, 32), randn(2, 3, 32), randn(32)
    case("bias_add", "BiasAdd", [("X", xa), ("bias", bias), ("skip", skip)], ["Y"],
         reference=lambda x_, b_, s_: [x_ + b_ + s_])


def layer_norms():
    x, skip = randn(2, 3, 16, scale=2), randn(2, 3, 16)
    gamma, beta, bias = randn(16), randn(16), randn(16)
    case("skip_layer_norm", "SkipLayerNormalization",
         [("input", x), ("skip", skip), ("gamma", gamma), ("beta", beta), ("bias", bias)],
         ["output", "mean", "inv_std_var", "input_skip_bias_sum"], epsilon=1e-6)
    case("skip_layer_norm_plain", "SkipLayerNormalization", [("input", x), ("skip", skip), ("gamma", gamma)],
         ["output"])
    case("skip_layer_norm_skip_bcast", "SkipLayerNormalization",
         [("input", x), ("skip", randn(3, 16)), ("gamma", gamma), ("beta", beta)],
         ["output", "", "", "input_skip_bias_sum"])
    case("skip_layer_norm_2d", "SkipLayerNormalization",
         [("input", randn(5, 16)), ("skip", randn(5, 16)), ("gamma", gamma), ("beta", beta), ("bias", bias)],
         ["output"])
    case("skip_simplified_layer_norm", "SkipSimplifiedLayerNormalization",
         [("input", x), ("skip", skip), ("gamma", gamma), ("bias", bias)],
         ["output", "", "inv_std_var", "input_skip_bias_sum"], epsilon=1e-6)
    case("skip_simplified_layer_norm_plain", "SkipSimplifiedLayerNormalization",
         [("input", x), ("skip", skip), ("gamma", gamma)], ["output"])
    # ONNX Runtime registers SimplifiedLayerNormalization in the default domain.
    case("simplified_layer_norm", "SimplifiedLayerNormalization", [("X", x), ("scale", gamma)],
         ["Y", "inv_std_var"], domain="", epsilon=1e-6)
    case("simplified_layer_norm_axis", "SimplifiedLayerNormalization", [("X", x), ("scale", randn(3, 16))],
         ["Y"], domain="", axis=1)

    ids = np.array([[1, 4, 0, 9], [3, 3, 7, 2]], np.int32)
    seg = np.array([[0, 0, 1, 1], [0, 1, 1, 1]], np.int32)
    mask = np.array([[1, 1, 1, 0], [1, 1, 0, 0]], np.int32)
    word, pos, segemb = randn(10, 8), randn(6, 8), randn(2, 8)
    g8, b8 = randn(8), randn(8)
    case("embed_layer_norm", "EmbedLayerNormalization",
         [("input_ids", ids), ("segment_ids", seg), ("word_embedding", word), ("position_embedding", pos),
          ("segment_embedding", segemb), ("gamma", g8), ("beta", b8), ("mask", mask)],
         ["output", "mask_index", "embedding_sum"], initializers=["word_embedding", "position_embedding",
                                                                  "segment_embedding", "gamma", "beta"],
         epsilon=1e-5)
    case("embed_layer_norm_no_segment", "EmbedLayerNormalization",
         [("input_ids", ids), ("", np.zeros(0, np.int32)), ("word_embedding", word), ("position_embedding", pos),
          ("", np.zeros(0, np.float32)), ("gamma", g8), ("beta", b8), ("", np.zeros(0, np.int32)),
          ("position_ids", np.array([[5, 0, 2, 1], [1, 1, 3, 4]], np.int32))],
         ["output", "mask_index"], initializers=["word_embedding", "position_embedding", "gamma", "beta"])


def matmuls():
    a, b = randn(2, 3, 4), randn(2, 4, 5)
    case("fused_matmul", "FusedMatMul", [("A", a), ("B", b)], ["Y"], alpha=0.5)
    case("fused_matmul_trans", "FusedMatMul", [("A", randn(2, 4, 3)), ("B", randn(5, 4))], ["Y"],
         alpha=2.0, transA=1, transB=1)
    case("fused_matmul_trans_batch", "FusedMatMul", [("A", randn(3, 2, 4)), ("B", randn(4, 2, 5))], ["Y"],
         transBatchA=1, transBatchB=1)
    case("fused_matmul_trans_batch_a", "FusedMatMul", [("A", randn(4, 3, 2, 5)), ("B", randn(3, 2, 4, 6))],
         ["Y"], transBatchA=1, transA=1, alpha=0.25)
    case("fused_matmul_trans_batch_b", "FusedMatMul", [("A", randn(2, 3, 2, 4)), ("B", randn(5, 2, 3, 4))],
         ["Y"], transBatchB=1, transB=1)

    x, w, bias = randn(1, 3, 6, 6), randn(4, 3, 3, 3), randn(4)
    case("fused_conv_relu", "FusedConv", [("X", x), ("W", w), ("B", bias)], ["Y"], activation="Relu",
         pads=[1, 1, 1, 1])
    case("fused_conv_leaky", "FusedConv", [("X", x), ("W", w)], ["Y"], activation="LeakyRelu",
         activation_params=[0.2], strides=[2, 2])
    case("fused_conv_clip_sum", "FusedConv", [("X", x), ("W", w), ("B", bias), ("Z", randn(1, 4, 4, 4))], ["Y"],
         activation="Clip", activation_params=[-0.5, 0.75])
    case("fused_conv_sigmoid", "FusedConv", [("X", x), ("W", w), ("B", bias)], ["Y"], activation="Sigmoid")
    case("fused_conv_hard_sigmoid", "FusedConv", [("X", x), ("W", w)], ["Y"], activation="HardSigmoid",
         activation_params=[0.3, 0.4])
    case("fused_conv_tanh", "FusedConv", [("X", x), ("W", w), ("B", bias)], ["Y"], activation="Tanh",
         group=1, dilations=[2, 2])
    case("fused_conv_none", "FusedConv", [("X", x), ("W", w), ("B", bias)], ["Y"])


def attention():
    b, s, d, heads = 2, 4, 8, 2
    x, w, bias = randn(b, s, d), randn(d, 3 * d, scale=0.5), randn(3 * d)
    common = dict(initializers=["weights", "bias"], num_heads=heads)
    case("attention", "Attention", [("input", x), ("weights", w), ("bias", bias)], ["output"], **common)
    case("attention_key_lengths", "Attention",
         [("input", x), ("weights", w), ("bias", bias), ("mask_index", np.array([3, 1], np.int32))],
         ["output"], **common)
    case("attention_mask_2d", "Attention",
         [("input", x), ("weights", w), ("bias", bias),
          ("mask_index", np.array([[1, 1, 0, 1], [0, 1, 1, 1]], np.int32))], ["output"], **common)
    case("attention_mask_3d", "Attention",
         [("input", x), ("weights", w), ("bias", bias), ("mask_index", (rng.random((b, s, s)) > 0.3).astype(np.int32))],
         ["output"], **common)
    case("attention_unidirectional", "Attention",
         [("input", x), ("weights", w), ("bias", bias), ("mask_index", np.array([4, 3], np.int32))],
         ["output"], unidirectional=1, **common)
    case("attention_scale_qkv_sizes", "Attention", [("input", x), ("weights", randn(d, 8 + 8 + 4)),
                                                    ("bias", randn(20))],
         ["output"], qkv_hidden_sizes=[8, 8, 4], scale=0.3, **common)
    past = randn(2, b, heads, 3, d // heads)
    case("attention_past", "Attention",
         [("input", x), ("weights", w), ("bias", bias), ("mask_index", np.ones((b, 7), np.int32)), ("past", past)],
         ["output", "present"], unidirectional=1, **common)
    case("attention_bias_input", "Attention",
         [("input", x), ("weights", w), ("bias", bias), ("", np.zeros(0, np.int32)), ("", np.zeros(0, np.float32)),
          ("attention_bias", randn(1, heads, s, s))], ["output"], **common)

    q, k, v = randn(b, s, d), randn(b, 5, d), randn(b, 5, d)
    case("mha", "MultiHeadAttention", [("query", q), ("key", k), ("value", v)], ["output"], num_heads=heads)
    case("mha_bias_padding", "MultiHeadAttention",
         [("query", q), ("key", k), ("value", v), ("bias", randn(3 * d)),
          ("key_padding_mask", np.array([[1, 1, 1, 0, 0], [1, 0, 1, 1, 1]], np.int32))],
         ["output"], num_heads=heads, scale=0.5)
    case("mha_key_lengths", "MultiHeadAttention",
         [("query", q), ("key", k), ("value", v), ("", np.zeros(0, np.float32)),
          ("key_padding_mask", np.array([2, 5], np.int32))], ["output"], num_heads=heads)
    pk, pv = randn(b, heads, 3, d // heads), randn(b, heads, 3, d // heads)
    case("mha_past", "MultiHeadAttention",
         [("query", q), ("key", randn(b, s, d)), ("value", randn(b, s, d)), ("bias", randn(3 * d)),
          ("", np.zeros(0, np.int32)), ("attention_bias", randn(b, 1, s, 3 + s)), ("past_key", pk), ("past_value", pv)],
         ["output", "present_key", "present_value"], num_heads=heads, unidirectional=1)


def matmul_nbits():
    def weights(k, n, block):
        blocks = (k + block - 1) // block
        return (rng.integers(0, 256, (n, blocks, block // 2), dtype=np.uint8),
                rng.random(n * blocks).astype(np.float32), blocks)

    b, sc, blocks = weights(32, 3, 16)
    case("matmul_nbits", "MatMulNBits", [("A", randn(2, 32)), ("B", b), ("scales", sc)], ["Y"],
         initializers=["B", "scales"], K=32, N=3, bits=4, block_size=16)
    # K=40 is not a multiple of the block: the last block is padded.
    b, sc, blocks = weights(40, 5, 16)
    case("matmul_nbits_padded_k", "MatMulNBits", [("A", randn(2, 3, 40)), ("B", b), ("scales", sc.reshape(5, blocks))],
         ["Y"], initializers=["B", "scales"], K=40, N=5, bits=4, block_size=16)
    b, sc, blocks = weights(96, 4, 32)
    zp = rng.integers(0, 256, 4 * ((blocks + 1) // 2), dtype=np.uint8)
    case("matmul_nbits_zero_points", "MatMulNBits", [("A", randn(3, 96)), ("B", b), ("scales", sc), ("zero_points", zp)],
         ["Y"], initializers=["B", "scales", "zero_points"], K=96, N=4, bits=4, block_size=32)
    b, sc, blocks = weights(48, 4, 16)
    case("matmul_nbits_float_zp_bias", "MatMulNBits",
         [("A", randn(2, 48)), ("B", b), ("scales", sc), ("zero_points", (rng.random(4 * blocks) * 15).astype(np.float32)),
          ("", np.zeros(0, np.int32)), ("bias", randn(4))],
         ["Y"], initializers=["B", "scales", "zero_points", "bias"], K=48, N=4, bits=4, block_size=16)


def rotary():
    b, s, n, h = 2, 3, 2, 8
    cos_sin = rng.random((10, h // 2)).astype(np.float32), rng.random((10, h // 2)).astype(np.float32)
    caches = [("cos_cache", cos_sin[0]), ("sin_cache", cos_sin[1])]
    init = dict(initializers=["cos_cache", "sin_cache"])
    pos = np.array([[0, 1, 2], [4, 5, 9]], np.int64)
    case("rotary", "RotaryEmbedding", [("input", randn(b, s, n * h)), ("position_ids", pos)] + caches, ["output"],
         num_heads=n, **init)
    case("rotary_interleaved_4d", "RotaryEmbedding", [("input", randn(b, n, s, h)), ("position_ids", pos)] + caches,
         ["output"], interleaved=1, **init)
    case("rotary_offset", "RotaryEmbedding",
         [("input", randn(b, s, n * h)), ("position_ids", np.array([3], np.int64))] + caches, ["output"], **init)


def group_query_attention():
    def gqa(name, b, s, past, seqlens, total, heads, kv_heads, head, packed=False, rotary_half=0, extra=(), **attrs):
        """past: the past KV length (None: no past inputs); seqlens: each sequence's total - 1."""
        qkv = [("query", randn(b, s, (heads + 2 * kv_heads) * head))] if packed else [
            ("query", randn(b, s, heads * head)), ("key", randn(b, s, kv_heads * head)),
            ("value", randn(b, s, kv_heads * head))]
        if packed:
            qkv += [("", np.zeros(0, np.float32))] * 2
        caches = [("", np.zeros(0, np.float32))] * 2 if past is None else [
            ("past_key", randn(b, kv_heads, past, head)), ("past_value", randn(b, kv_heads, past, head))]
        inputs = qkv + caches + [("seqlens_k", np.array(seqlens, np.int32)),
                                 ("total_sequence_length", np.array([total], np.int32))]
        if rotary_half:
            angles = np.arange(32)[:, None] / 10000 ** (np.arange(rotary_half) / rotary_half)
            inputs += [("cos_cache", np.cos(angles).astype(np.float32)), ("sin_cache", np.sin(angles).astype(np.float32))]
        elif extra:
            inputs += [("", np.zeros(0, np.float32))] * 2
        inputs += list(extra)
        case(name, "GroupQueryAttention", inputs, ["output", "present_key", "present_value"],
             initializers=["cos_cache", "sin_cache"], num_heads=heads, kv_num_heads=kv_heads,
             do_rotary=int(rotary_half > 0), **attrs)

    # Prompt: no past inputs, or a past of length 0.
    gqa("gqa_prompt", 2, 4, None, [3, 3], 4, 4, 2, 8)
    gqa("gqa_prompt_empty_past_rotary", 2, 4, 0, [3, 3], 4, 4, 2, 16, rotary_half=8)
    gqa("gqa_prompt_mqa_interleaved", 1, 5, 0, [4], 5, 2, 1, 16, rotary_half=8, rotary_interleaved=1)
    # Decode: one new token after a right-padded past (the second sequence is shorter).
    gqa("gqa_decode", 2, 1, 5, [5, 3], 6, 4, 2, 8)
    gqa("gqa_decode_rotary_mqa", 2, 1, 5, [5, 2], 6, 4, 1, 16, rotary_half=8)
    gqa("gqa_decode_interleaved", 2, 1, 3, [3, 3], 4, 2, 2, 16, rotary_half=8, rotary_interleaved=1)
    gqa("gqa_decode_window_softcap", 2, 1, 6, [6, 4], 7, 4, 2, 8, local_window_size=2, softcap=1.5, scale=0.4)
    gqa("gqa_prompt_window", 1, 6, None, [5], 6, 2, 1, 8, local_window_size=3)
    # Several new tokens after a past (batch 1), and packed QKV with a partial rotary.
    gqa("gqa_continue_prompt", 1, 3, 4, [6], 7, 4, 2, 16, rotary_half=8)
    gqa("gqa_packed_partial_rotary", 1, 3, 2, [4], 5, 4, 2, 32, packed=True, rotary_half=8)
    gqa("gqa_smooth_softmax", 1, 4, None, [3], 4, 2, 2, 8, smooth_softmax=1)
    gqa("gqa_position_ids_bias", 2, 1, 3, [3, 3], 4, 2, 1, 16, rotary_half=8,
        extra=[("position_ids", np.array([[7], [2]], np.int64)), ("attention_bias", randn(2, 1, 1, 4))])


def gather_block_quantized():
    def gbq(name, data, indices, scales, zero_points=None, **attrs):
        inputs = [("data", data), ("indices", indices), ("scales", scales)]
        if zero_points is not None:
            inputs.append(("zero_points", zero_points))
        case(name, "GatherBlockQuantized", inputs, ["output"], initializers=["data", "scales", "zero_points"], **attrs)

    def q(*shape):
        return rng.integers(0, 256, shape, dtype=np.uint8)

    def sc(*shape):
        return rng.random(shape).astype(np.float32) + 0.1

    gbq("gbq_4bit", q(10, 16), np.array([[0, 9, 3], [3, 1, 2]], np.int64), sc(10, 2), block_size=16)
    # 48 values per row in blocks of 32: the last block is padded.
    gbq("gbq_4bit_zero_points", q(10, 24), np.array([4, -1, 0], np.int32), sc(10, 2), q(10, 1), block_size=32)
    gbq("gbq_8bit_rank3", q(6, 2, 40), np.array([[5, -6]], np.int32), sc(6, 2, 3), q(6, 2, 3), bits=8,
        block_size=16, quantize_axis=2)
    gbq("gbq_8bit_default_zero", q(5, 32), np.array([1, 4], np.int64), sc(5, 2), bits=8, block_size=16)
    gbq("gbq_2bit_zero_points", q(4, 8), np.array([2, 3], np.int64), sc(4, 2), q(4, 1), bits=2, block_size=16)


def contrib_layer_norm():
    # ONNX Runtime's own LayerNormalization, which it registers for opsets before 17 (1.32
    # does not accept it in the com.microsoft domain).
    x = randn(2, 3, 16, scale=2)
    case("layer_norm_contrib", "LayerNormalization", [("X", x), ("Scale", randn(16)), ("B", randn(16))],
         ["Y", "Mean", "InvStdDev"], domain="", opset=13, epsilon=1e-6)
    case("layer_norm_contrib_axis", "LayerNormalization", [("X", x), ("Scale", randn(3, 16))],
         ["Y", "", "InvStdDev"], domain="", opset=13, axis=1, stash_type=1)


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith((".onnx", ".npy")):
            os.remove(os.path.join(OUT, f))
    gelu_family()
    layer_norms()
    matmuls()
    attention()
    matmul_nbits()
    rotary()
    group_query_attention()
    gather_block_quantized()
    contrib_layer_norm()
    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write("\n".join(CASES) + "\n")


if __name__ == "__main__":
    main()
