import json
import subprocess
import types

import numpy as np
import pytest

import vlrt

BOX = [2, 1, 15, 11]


@pytest.fixture(scope="module")
def sam_dir(repo):
    return str(repo / "tests" / "fixtures" / "sam" / "tiny")


@pytest.fixture(scope="module")
def image(repo):
    return str(repo / "tests" / "fixtures" / "sam" / "tiny.png")


@pytest.fixture(scope="module")
def segmenter(sam_dir, image):
    s = vlrt.Segmenter(sam_dir, threads=1)
    s.set_image(image)
    return s


def rle_mask(segmentation):
    """The bool [H, W] mask of COCO's uncompressed RLE (column-major, starting with 0s)."""
    height, width = segmentation["size"]
    flat = np.zeros(height * width, bool)
    at = 0
    for i, count in enumerate(segmentation["counts"]):
        flat[at:at + count] = i % 2 == 1
        at += count
    return flat.reshape(width, height).T


def cli_masks(vlrt_cli, sam_dir, image, args, tmp_path):
    out = tmp_path / "masks.json"
    subprocess.run([vlrt_cli, "segment", image, "--model", sam_dir, "-t", "1", "--json", str(out), *args],
                   check=True, capture_output=True)
    return json.loads(out.read_text())["masks"]


@pytest.mark.parametrize(
    "kwargs, args",
    [
        ({"boxes": [BOX, [0, 0, 23, 13]]}, ["--box", "2,1,15,11", "--box", "0,0,23,13"]),
        ({"points": [[6, 5], [20, 3]], "point_labels": [1, 0]}, ["--point", "6,5", "--point", "20,3,0"]),
        ({"boxes": BOX, "points": [[6, 5]]}, ["--box", "2,1,15,11", "--point", "6,5"]),
    ],
    ids=["two-boxes", "points", "box-and-point"],
)
def test_masks_are_those_of_vlrt_segment(segmenter, vlrt_cli, sam_dir, image, kwargs, args, tmp_path):
    got = segmenter.predict(**kwargs)
    want = cli_masks(vlrt_cli, sam_dir, image, args, tmp_path)
    assert len(got) == len(want)
    for i, w in enumerate(want):
        assert np.array_equal(got.mask[i], rle_mask(w["segmentation"]))
        assert got.mask[i].sum() == w["area"]
        assert got.iou[i] == np.float32(w["iou_prediction"])
        assert np.array_equal(got.iou_predictions[i], np.array(w["iou_predictions"], np.float32))
        assert got.mask_index[i] == w["mask_index"]
        x, y, width, height = w["bbox"]
        assert got.xyxy[i].tolist() == [x, y, x + width, y + height]


def test_shapes_dtypes_and_segment_anythings_masks(segmenter, repo):
    want = json.loads((repo / "tests" / "fixtures" / "sam" / "tiny" / "expected.json").read_text())["prompts"]
    got = segmenter.predict(boxes=[want["box"]["box"], BOX])
    assert got.mask.dtype == np.bool_ and got.mask.shape == (2, 13, 23)
    assert got.iou.dtype == np.float32 and got.iou.shape == (2,)
    assert got.xyxy.dtype == np.float32 and got.xyxy.shape == (2, 4)
    assert got.mask_index.dtype == np.int64 and got.iou_predictions.shape == (2, 4)
    assert got.mask[0].sum() == want["box"]["area"] and got.mask_index[0] == want["box"]["mask_index"]
    np.testing.assert_allclose(got.iou_predictions[0], want["box"]["iou_predictions"], atol=1e-4)
    points = want["points"]["points"]
    p = segmenter.predict(points=[q[:2] for q in points], point_labels=[q[2] for q in points])
    assert p.mask[0].sum() == want["points"]["area"] and p.mask_index[0] == want["points"]["mask_index"]


def test_every_image_form_gives_the_same_masks(sam_dir, image):
    Image = pytest.importorskip("PIL.Image")
    rgb = np.asarray(Image.open(image).convert("RGB"))
    s = vlrt.Segmenter(sam_dir, threads=1)
    want = s.segment(image, boxes=BOX).mask
    with open(image, "rb") as f:
        encoded = f.read()
    for form, bgr in [(encoded, False), (rgb, False), (np.ascontiguousarray(rgb[:, :, ::-1]), True),
                      (Image.open(image), False)]:
        assert np.array_equal(s.segment(form, boxes=BOX, bgr=bgr).mask, want)


def test_detections_get_one_mask_each_and_an_empty_box_an_empty_mask(segmenter):
    detections = types.SimpleNamespace(xyxy=np.array([BOX, [4, 4, 4, 9]], np.float32))  # as sv.Detections
    masks = segmenter.segment_detections(detections)
    assert masks.dtype == np.bool_ and masks.shape == (2, 13, 23)
    assert np.array_equal(masks[0], segmenter.predict(boxes=BOX).mask[0])
    assert not masks[1].any()
    assert segmenter.segment_detections(np.zeros((0, 4), np.float32)).shape == (0, 13, 23)


def test_to_supervision(segmenter):
    masks = segmenter.predict(boxes=BOX)
    detections = vlrt.Detections(masks.xyxy, masks.iou, np.zeros(1, np.int64), ["thing"])
    try:
        import supervision  # noqa: F401
    except ImportError:
        for make in (masks.to_supervision, lambda: detections.to_supervision(mask=masks.mask)):
            with pytest.raises(ImportError, match="pip install supervision"):
                make()
        return
    sv = masks.to_supervision()
    assert np.array_equal(sv.mask, masks.mask) and np.array_equal(sv.confidence, masks.iou)
    assert np.array_equal(detections.to_supervision(mask=masks.mask).mask, masks.mask)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"boxes": [2, 1, 30, 11]}, "box 2,1,30,11 is outside the 23x13 image"),
        ({"boxes": [15, 1, 2, 11]}, "x2 must be greater than x1"),
        ({"boxes": [2, 1, 15]}, r"box 'boxes\[0\]' has 3 numbers; expected x1,y1,x2,y2"),
        ({"boxes": [BOX, BOX], "points": [[6, 5]]}, "points refine the mask of one box"),
        ({"points": [[6, 5]], "point_labels": [2]}, "has label 2; expected"),
        ({"points": [[6, 5]], "point_labels": [1, 0]}, "point_labels has 2 labels for 1 points"),
        ({"points": [[60, 5]]}, "point 60,5 is outside the 23x13 image"),
        ({}, "give at least one box"),
    ],
    ids=["outside", "inverted", "three-numbers", "points-and-boxes", "label", "labels-count", "point-outside",
         "nothing"],
)
def test_bad_prompts_raise_vlrts_message(segmenter, kwargs, message):
    with pytest.raises(vlrt.Error, match=message):
        segmenter.predict(**kwargs)


def test_no_image_set_a_bad_image_and_a_closed_segmenter_raise(sam_dir):
    s = vlrt.Segmenter(sam_dir, threads=1)
    with pytest.raises(vlrt.Error, match=r"no image set: call set_image\(image\) first"):
        s.predict(boxes=BOX)
    with pytest.raises(vlrt.Error, match="HxWx3 uint8"):
        s.set_image(np.zeros((8, 8), np.uint8))
    with pytest.raises(vlrt.Error, match="image bytes"):
        s.set_image(b"not an image")
    s.close()
    assert s._segmenter.closed
    with pytest.raises(vlrt.Error, match="closed"):
        s.predict(boxes=BOX)


def test_a_folder_without_sam_models_raises(tmp_path, image):
    with pytest.raises(vlrt.Error, match="has no encoder 'encoder.onnx'"):
        vlrt.Segmenter(tmp_path)
    with pytest.raises(vlrt.Error, match="is not a directory"):
        vlrt.Segmenter(image)
