"""vlrt.ray on a local 2-CPU Ray cluster gives what `vlrt label` gives (skipped without Ray;
tools/check_ray_label.py runs the same check on 200 scenes)."""
import json
import sys

import numpy as np
import pytest

import vlrt
import vlrt.ray

PROMPT = "yellow heart . black ring ."


def test_a_batch_of_paths_gives_the_records_label_writes(repo):
    demo = str(repo / "assets" / "demo.png")
    udf = vlrt.ray.LabelImages(prompt=PROMPT, threads=1)
    out = udf({"path": np.array([demo, "no_such_image.png"]), "id": np.array([7, 8])})
    assert list(out["id"]) == [7, 8]
    record = json.loads(out["record"][0])
    d = vlrt.Detector(threads=1).predict(demo, prompt=PROMPT)
    assert (record["width"], record["height"]) == (d.width, d.height) and d.width > 0
    assert [x["label"] for x in record["detections"]] == d.class_name
    assert json.loads(out["categories"][0]) == ["yellow heart", "black ring"]
    assert out["error"][0] == "" and "no_such_image.png" in out["error"][1] and out["record"][1] == ""


def test_arrays_give_what_paths_give(repo):
    Image = pytest.importorskip("PIL.Image")
    demo = str(repo / "assets" / "demo.png")
    rgb = np.asarray(Image.open(demo).convert("RGB"))
    udf = vlrt.ray.LabelImages(classes=["yellow heart", "black ring"], threads=1)
    by_array = udf({"image": np.array([rgb, rgb[:200]], dtype=object)})
    by_path = udf({"path": np.array([demo])})
    assert "image" not in by_array and by_array["record"][0] == by_path["record"][0]
    assert json.loads(by_array["record"][1])["height"] == 200


def test_coco_json_numbers_as_label_does():
    rows = [{"path": "d/b.png", "record": json.dumps({"width": 4, "height": 2, "detections": [
                {"label": "x", "class": 0, "score": 0.5, "box": [1.0, 0.0, 3.0, 2.0]},
                {"label": "", "class": -1, "score": 0.4, "box": [0.0, 0.0, 1.0, 1.0]}]}),
             "categories": '["x", "y"]', "error": ""},
            {"path": "d/a.png", "record": "", "categories": "null", "error": "cannot decode"}]
    coco = vlrt.ray.coco_json(rows, root="d")
    assert coco["categories"] == [{"id": 1, "name": "x"}, {"id": 2, "name": "y"}]
    assert coco["images"] == [{"file_name": "b.png", "height": 2, "id": 2, "width": 4}]
    assert coco["annotations"] == [{"area": 4.0, "bbox": [1.0, 0.0, 2.0, 2.0], "category_id": 1, "id": 1,
                                    "image_id": 2, "iscrowd": 0, "score": 0.5}]


@pytest.mark.parametrize("kwargs, message", [({}, "either prompt"), ({"prompt": "a .", "classes": ["a"]}, "either")])
def test_bad_settings_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        vlrt.ray.LabelImages(**kwargs)


def test_a_batch_without_images_is_refused():
    with pytest.raises(ValueError, match="'path' or an 'image' column"):
        vlrt.ray.LabelImages(prompt=PROMPT, threads=1)({"file": np.array(["a.png"])})


def test_two_ray_actors_label_as_vlrt_label_does(repo, vlrt_cli, tmp_path):
    pytest.importorskip("ray")
    sys.path.insert(0, str(repo / "tools"))
    import check_ray_label

    result = check_ray_label.check(vlrt_cli, tmp_path, count=4, workers=2, batch_size=2)
    assert result["images"] == 4 and result["records_same"] == 4 and result["same_file"]
