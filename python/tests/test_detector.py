import json
import subprocess

import numpy as np
import pytest

import vlrt

PROMPT = "yellow heart . black ring ."


@pytest.fixture(scope="module")
def detector():
    return vlrt.Detector(threads=1)


@pytest.fixture(scope="module")
def demo(repo):
    return str(repo / "assets" / "demo.png")


@pytest.fixture(scope="module")
def demo_rgb(demo):
    Image = pytest.importorskip("PIL.Image")
    return np.asarray(Image.open(demo).convert("RGB"))


def same(a, b):
    return (np.array_equal(a.xyxy, b.xyxy) and np.array_equal(a.confidence, b.confidence)
            and np.array_equal(a.class_id, b.class_id) and a.class_name == b.class_name)


def test_finds_the_prompted_objects_as_the_cli_does(detector, demo, vlrt_cli, tmp_path):
    d = detector.predict(demo, prompt=PROMPT)
    subprocess.run([vlrt_cli, "detect", demo, "--prompt", PROMPT, "-t", "1", "--json", str(tmp_path / "d.json")],
                   check=True, capture_output=True)
    cli = json.loads((tmp_path / "d.json").read_text())["detections"]
    assert {"yellow heart", "black ring"} <= set(d.class_name)
    assert d.class_name == [c["label"] for c in cli]
    assert np.array_equal(d.confidence, np.array([c["score"] for c in cli], np.float32))
    assert np.array_equal(d.xyxy, np.array([c["box"] for c in cli], np.float32).reshape(-1, 4))
    assert d.xyxy.dtype == np.float32 and d.xyxy.shape == (len(d), 4) and d.class_id.dtype == np.int64
    phrases = ["yellow heart", "black ring"]
    assert [phrases[i] for i in d.class_id] == d.class_name


def test_an_array_gives_what_the_file_gives(detector, demo, demo_rgb):
    assert same(detector.predict(demo_rgb, prompt=PROMPT), detector.predict(demo, prompt=PROMPT))


def test_bgr_flag_reads_opencv_order(detector, demo_rgb):
    bgr = np.ascontiguousarray(demo_rgb[:, :, ::-1])
    assert same(detector.predict(bgr, prompt=PROMPT, bgr=True), detector.predict(demo_rgb, prompt=PROMPT))
    assert not same(detector.predict(bgr, prompt=PROMPT), detector.predict(demo_rgb, prompt=PROMPT))


def test_encoded_bytes_give_what_the_file_gives(detector, demo):
    with open(demo, "rb") as f:
        assert same(detector.predict(f.read(), prompt=PROMPT), detector.predict(demo, prompt=PROMPT))


def test_a_pil_image_gives_what_the_file_gives(detector, demo):
    Image = pytest.importorskip("PIL.Image")
    assert same(detector.predict(Image.open(demo), prompt=PROMPT), detector.predict(demo, prompt=PROMPT))


def test_classes_build_the_prompt_and_index_the_list(detector, demo):
    by_prompt = detector.predict(demo, prompt=PROMPT)
    by_classes = detector.predict(demo, classes=["yellow heart", "black ring"])
    assert same(by_classes, by_prompt)
    reordered = detector.predict(demo, classes=["black ring", "yellow heart"])
    assert set(reordered.class_name) == set(by_prompt.class_name)
    for i, name in zip(reordered.class_id, reordered.class_name):
        assert ["black ring", "yellow heart"][i] == name


def test_box_threshold_keeps_only_stronger_boxes(detector, demo):
    all_boxes = detector.predict(demo, prompt=PROMPT, box_threshold=0.05)
    strong = detector.predict(demo, prompt=PROMPT, box_threshold=0.6)
    assert len(strong) < len(all_boxes)
    assert (strong.confidence > 0.6).all()
    assert same(detector.predict(demo, prompt=PROMPT), detector.predict(demo, prompt=PROMPT))


@pytest.mark.parametrize(
    "image, kwargs, error, message",
    [
        (np.zeros((64, 64, 3), np.float32), {}, vlrt.Error, "uint8"),
        (np.zeros((64, 64), np.uint8), {}, vlrt.Error, "HxWx3"),
        (np.zeros((64, 64, 4), np.uint8), {}, vlrt.Error, "HxWx3"),
        ("no_such_image.png", {}, vlrt.Error, "no_such_image.png"),
        (3, {}, TypeError, "a NumPy array or a PIL image"),
        (np.zeros((64, 64, 3), np.uint8), {"classes": ["a"]}, ValueError, "either prompt"),
        (np.zeros((64, 64, 3), np.uint8), {"box_threshold": 1.5}, vlrt.Error, "box_threshold must be within"),
    ],
    ids=["float-image", "rank-2", "four-channels", "missing-file", "not-an-image", "prompt-and-classes",
         "threshold"],
)
def test_bad_requests_raise(detector, image, kwargs, error, message):
    with pytest.raises(error, match=message):
        detector.predict(image, **{"prompt": PROMPT, **kwargs})


def test_a_closed_detector_refuses(demo):
    d = vlrt.Detector(threads=1)
    d.close()
    with pytest.raises(vlrt.Error, match="closed"):
        d.predict(demo, prompt=PROMPT)


def test_to_supervision(detector, demo):
    d = detector.predict(demo, prompt=PROMPT)
    try:
        import supervision  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install supervision"):
            d.to_supervision()
        return
    sv = d.to_supervision()
    assert np.array_equal(sv.xyxy, d.xyxy) and np.array_equal(sv.class_id, d.class_id)
    assert list(sv.data["class_name"]) == d.class_name
