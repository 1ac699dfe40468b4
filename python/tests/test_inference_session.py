import concurrent.futures
import json
import subprocess

import numpy as np
import pytest

import vlrt


@pytest.fixture(scope="module")
def model(repo):
    return str(repo / "models" / "tiny" / "tiny_cnn.onnx")


@pytest.fixture(scope="module")
def image(repo):
    return np.load(repo / "models" / "tiny" / "image.npy")


@pytest.fixture
def session(model):
    return vlrt.InferenceSession(model, threads=1)


def test_run_matches_the_cli_bit_for_bit(session, model, image, repo, vlrt_cli, tmp_path):
    (probs,) = session.run(None, {"image": image})
    subprocess.run([vlrt_cli, "run", model, "-t", "1", "-i", f"image={repo / 'models/tiny/image.npy'}",
                    "-o", str(tmp_path)], check=True, capture_output=True)
    cli = np.load(tmp_path / "probs.npy")
    assert probs.dtype == np.float32 and probs.shape == (1, 10)
    assert np.array_equal(probs, cli)
    np.testing.assert_allclose(probs, np.load(repo / "models" / "tiny" / "expected_probs.npy"), atol=1e-5)


def test_run_matches_onnxruntime(session, model, image):
    ort = pytest.importorskip("onnxruntime")
    expected = ort.InferenceSession(model, providers=["CPUExecutionProvider"]).run(None, {"image": image})[0]
    (probs,) = session.run(None, {"image": image})
    assert np.abs(probs - expected).max() < 1e-4


def test_inputs_and_outputs_are_described_as_onnxruntime_does(session):
    (inp,) = session.get_inputs()
    (out,) = session.get_outputs()
    assert (inp.name, inp.shape, inp.type) == ("image", ["batch", 3, 32, 32], "tensor(float)")
    assert (out.name, out.shape, out.type) == ("probs", ["batch", 10], "tensor(float)")


def test_outputs_by_name_and_a_batch_of_two(session, image):
    (single,) = session.run(["probs"], {"image": image})
    batch = np.concatenate([image, image[:, :, ::-1, :]])
    (probs,) = session.run(["probs"], {"image": batch})
    assert probs.shape == (2, 10)
    assert np.allclose(probs[0], single[0], atol=1e-6)
    assert not np.allclose(probs[1], single[0], atol=1e-3)


def test_a_non_contiguous_array_is_copied_and_gives_the_same_answer(session, image):
    (expected,) = session.run(None, {"image": image})
    wide = np.zeros((1, 3, 32, 64), np.float32)
    wide[..., ::2] = image
    strided = wide[..., ::2]
    assert not strided.flags.c_contiguous
    (probs,) = session.run(None, {"image": strided})
    assert np.array_equal(probs, expected)
    frozen = image.copy()
    frozen.setflags(write=False)
    assert np.array_equal(session.run(None, {"image": frozen})[0], expected)


def test_the_input_array_is_left_unchanged(session, image):
    before = image.copy()
    session.run(None, {"image": image})
    assert np.array_equal(image, before)


@pytest.mark.parametrize(
    "feed, message",
    [
        ({"image": np.zeros((1, 3, 32, 32), np.float64)}, "float64"),
        ({"image": np.zeros((1, 3, 32, 32), np.complex64)}, "has no vlrt type"),
        ({"image": np.zeros((3, 32, 32), np.float32)}, "image"),
        ({"image": np.zeros((1, 3, 16, 32), np.float32)}, "32"),
        ({"image": [[1.0]]}, "give a NumPy array"),
        ({"picture": np.zeros((1, 3, 32, 32), np.float32)}, "picture"),
        ({}, "image"),
    ],
    ids=["dtype", "no-vlrt-dtype", "rank", "fixed-dim", "not-an-array", "unknown-input", "missing-input"],
)
def test_bad_inputs_raise_vlrt_errors(session, feed, message):
    with pytest.raises(vlrt.Error, match=message):
        session.run(None, feed)


def test_an_unknown_output_name_lists_the_outputs(session, image):
    with pytest.raises(vlrt.Error, match="no output 'logits'; its outputs: probs"):
        session.run(["logits"], {"image": image})


def test_errors_are_runtime_errors_with_vlrts_message(repo):
    assert issubclass(vlrt.Error, RuntimeError)
    with pytest.raises(vlrt.Error, match="missing.onnx"):
        vlrt.InferenceSession(str(repo / "missing.onnx"))
    with pytest.raises(vlrt.Error, match="devices is empty"):
        vlrt.InferenceSession(str(repo / "models/tiny/tiny_cnn.onnx"), devices=[])
    with pytest.raises(vlrt.Error, match="nosuchdevice"):
        vlrt.InferenceSession(str(repo / "models/tiny/tiny_cnn.onnx"), devices=["nosuchdevice"])


def test_a_closed_session_refuses_every_call(model, image):
    with vlrt.InferenceSession(model) as s:
        s.run(None, {"image": image})
    assert s.closed
    for call in (lambda: s.run(None, {"image": image}), s.get_inputs, s.get_outputs, s.plan):
        with pytest.raises(vlrt.Error, match="is closed"):
            call()


def test_threads_share_one_session(session, image):
    inputs = [image * (1 + k / 8) for k in range(8)]
    expected = [session.run(None, {"image": x})[0] for x in inputs]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda k: session.run(None, {"image": inputs[k % 8]})[0], range(64)))
    for k, r in enumerate(results):
        assert np.array_equal(r, expected[k % 8])


def test_bf16_products_are_the_cli_ones(model, image, repo, vlrt_cli, tmp_path):
    s = vlrt.InferenceSession(model, threads=1, precision="bf16")
    (probs,) = s.run(None, {"image": image})
    cli = subprocess.run([vlrt_cli, "run", model, "-t", "1", "--precision", "bf16", "-i",
                          f"image={repo / 'models/tiny/image.npy'}", "-o", str(tmp_path)], check=True,
                         capture_output=True, text=True)
    assert np.array_equal(probs, np.load(tmp_path / "probs.npy"))
    np.testing.assert_allclose(probs, np.load(repo / "models" / "tiny" / "expected_probs.npy"), atol=2e-2)
    kernels = s.plan({"image": [1, 3, 32, 32]})["devices"]["cpu"]["prepared_kernels"]
    warned = "warning: --precision bf16" in cli.stderr  # a CPU without AVX512-BF16: float32
    assert warned != ("oneDNN bf16 conv" in kernels), (kernels, cli.stderr)
    with pytest.raises(vlrt.Error, match="precision: expected 'fp32' or 'bf16'"):
        vlrt.InferenceSession(model, precision="fp16")


def test_plan_is_the_cli_plan(model, vlrt_cli):
    s = vlrt.InferenceSession(model, memory={"cpu": "1GiB"})
    plan = s.plan({"image": [2, 3, 32, 32]})
    cli = json.loads(subprocess.run([vlrt_cli, "plan", model, "--json", "-i", "image=2x3x32x32", "--memory",
                                     "cpu=1GiB", "--batch-limit", "256"], check=True, capture_output=True,
                                    text=True).stdout)
    assert plan == cli
    assert plan["inputs"] == {"image": "float32[2,3,32,32]"}
    # 9 nodes, two Conv+Relu pairs fused
    assert plan["devices"]["cpu"]["nodes"] == 7 and plan["devices"]["cpu"]["cap_bytes"] == 1 << 30
    assert plan["batch_symbol"] == "batch" and plan["max_batch"] == 256
    with pytest.raises(vlrt.Error, match="image"):
        s.plan()
