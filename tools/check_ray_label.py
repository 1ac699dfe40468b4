#!/usr/bin/env python3
"""Checks that labelling a folder on a Ray cluster (vlrt.ray.LabelImages in map_batches) gives
what `vlrt label --format coco` gives on the same folder: per image the same boxes, scores and
labels, and the same records (compared as parsed JSON). Starts a local Ray cluster of `--workers` CPUs with one detector
actor per CPU; the scenes are generated demo scenes (tools/scenes.py), written to a temporary
folder.

    pip install "ray[data]"
    PYTHONPATH=build/python python3 tools/check_ray_label.py --count 200 --vlrt build/vlrt

Prints the counts compared; fails on the first image that differs.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scenes  # noqa: E402

PROMPT = "red circle . blue square . yellow heart . black ring . green star ."


def write_scenes(folder: pathlib.Path, count: int, seed: int):
    """The images of `count` scenes (PNG only: `vlrt label` would also read any other file)."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        img, _ = scenes.make_scene(seed, i, None)
        scenes.write_png(str(folder / f"scene_{seed}_{i:05d}.png"), img)


def label_with_cli(vlrt: str, folder: pathlib.Path, out: pathlib.Path, prompt: str, threads: int) -> dict:
    subprocess.run([vlrt, "label", str(folder), "--prompt", prompt, "--out", str(out), "--format", "coco",
                    "--threads", str(threads)], check=True, capture_output=True, text=True)
    return json.loads((out / "annotations.json").read_text())


def label_with_ray(folder: pathlib.Path, prompt: str, workers: int, batch_size: int) -> list:
    import ray

    import vlrt.ray

    paths = sorted(str(p) for p in folder.glob("*.png"))
    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        ds = ray.data.from_items([{"path": p} for p in paths])
        labelled = ds.map_batches(vlrt.ray.LabelImages, fn_constructor_kwargs={"prompt": prompt, "threads": 1},
                                  concurrency=workers, batch_size=batch_size, num_cpus=1)
        return labelled.take_all()
    finally:
        ray.shutdown()


def by_image(coco: dict) -> dict:
    """file name -> (width, height, sorted (label, bbox, score, area)): the COCO file with its ids
    resolved, so that two files numbered in another order compare equal."""
    names = {c["id"]: c["name"] for c in coco["categories"]}
    images = {i["id"]: i for i in coco["images"]}
    out = {i["file_name"]: (i["width"], i["height"], []) for i in coco["images"]}
    for a in coco["annotations"]:
        out[images[a["image_id"]]["file_name"]][2].append(
            (names[a["category_id"]], tuple(a["bbox"]), a["score"], a["area"]))
    return {k: (w, h, sorted(anns)) for k, (w, h, anns) in out.items()}


def compare(rows: list, cli_out: pathlib.Path, folder: pathlib.Path) -> dict:
    """Raises AssertionError naming the first image that differs; returns counts."""
    import vlrt.ray

    cli = json.loads((cli_out / "annotations.json").read_text())
    coco = vlrt.ray.coco_json(rows, root=str(folder))
    errors = [r["error"] for r in rows if r["error"]]
    assert not errors, f"{len(errors)} images failed under Ray, the first: {errors[0]}"
    ray_images, cli_images = by_image(coco), by_image(cli)
    assert sorted(ray_images) == sorted(cli_images), "the two runs labelled different images"
    for name in sorted(cli_images):
        assert ray_images[name] == cli_images[name], f"{name}: Ray {ray_images[name]} != vlrt label {cli_images[name]}"
    assert [c["name"] for c in coco["categories"]] == [c["name"] for c in cli["categories"]]
    records_same = 0
    for r in rows:
        name = os.path.relpath(r["path"], folder)
        cli_record = (cli_out / ".vlrt-label" / "records" / (name + ".json")).read_text()
        assert json.loads(r["record"]) == json.loads(cli_record), f"{name}: record {r['record']} != vlrt label's {cli_record}"
        records_same += 1
    # Parsed, not as text: a float exactly between two shortest decimal forms may be printed
    # with either last digit (nlohmann's Grisu2 and Python's repr differ there), same value.
    return {"images": len(cli_images), "annotations": len(cli["annotations"]), "records_same": records_same,
            "same_file": coco == cli}


def check(vlrt: str, work: pathlib.Path, count: int, seed: int = 11, workers: int = 2, batch_size: int = 8,
          prompt: str = PROMPT) -> dict:
    folder = work / "images"
    write_scenes(folder, count, seed)
    t0 = time.time()
    label_with_cli(vlrt, folder, work / "cli", prompt, threads=workers)
    t1 = time.time()
    rows = label_with_ray(folder, prompt, workers, batch_size)
    t2 = time.time()
    result = compare(rows, work / "cli", folder)
    result.update(cli_s=round(t1 - t0, 1), ray_s=round(t2 - t1, 1))
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=200, help="scenes to generate and label")
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--workers", type=int, default=2, help="Ray CPUs, one detector actor each")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--prompt", default=PROMPT)
    ap.add_argument("--vlrt", default="build/vlrt", help="the vlrt program")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        r = check(args.vlrt, pathlib.Path(tmp), args.count, args.seed, args.workers, args.batch_size, args.prompt)
    print(f"{r['images']} images, {r['annotations']} annotations: the same boxes, scores and labels per image "
          f"from Ray ({args.workers} actors, {r['ray_s']} s) and vlrt label ({r['cli_s']} s); "
          f"{r['records_same']} records equal; the whole COCO file equal, ids included: {r['same_file']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
