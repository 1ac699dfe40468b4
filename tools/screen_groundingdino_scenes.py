#!/usr/bin/python3
"""Which of export_groundingdino.py's synthetic scenes have near-tied encoder proposals that
vlrt takes in another order than PyTorch.

GroundingDINO's decoder query i starts from the encoder's i-th best proposal (TopK over some
20000 scores). Scores one or two float32 ulps apart are common among the best 900, and a
runtime that rounds differently from PyTorch may take such a pair in the other order; two
queries then trade places and the per-query comparison of compare_groundingdino.py fails
there although the detections are the same. This runs, for each scene, PyTorch up to the
encoder's proposal scores (the same random weights as the export: the decoder's calibration
does not touch them) and `vlrt run` on a copy of the export whose TopK indices are an extra
output, and prints the ranks where the two orders differ. A scene with none is one on which
the strict comparison can hold:

    /usr/bin/python3 tools/screen_groundingdino_scenes.py --scenes 1-40
    /usr/bin/python3 tools/export_groundingdino.py --scene N --out models/gdino_sceneN
    python3 tools/compare_groundingdino.py --dir models/gdino_sceneN --strict

Needs an export with the default seed and prompt in --dir (its model.onnx and text inputs).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import export_groundingdino as ex  # noqa: E402

TOPK = "/transformer/TopK"


class Stop(Exception):
    pass


def scene_list(text):
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(ex.ROOT, "models", "gdino"))
    ap.add_argument("--vlrt", default=os.path.join(ex.ROOT, "build", "vlrt"))
    ap.add_argument("--scenes", default="0-20", help="e.g. 0-20 or 3,7,10-12")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    import onnx

    ex.import_groundingdino(os.path.join(a.dir, "vocab.txt"))
    from PIL import Image

    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "model.onnx")
        m = onnx.load(os.path.join(a.dir, "model.onnx"))
        if not any(n.name == TOPK for n in m.graph.node):
            sys.exit(f"{a.dir}/model.onnx has no node {TOPK}")
        m.graph.output.append(onnx.helper.make_tensor_value_info(TOPK + "_output_1", onnx.TensorProto.INT64, None))
        onnx.save(m, model_path)
        del m

        transform = ex.image_transform()
        model, _, _ = ex.build_model(None, 0)
        wrapper = ex.ExportWrapper(model).eval()
        text = [torch.from_numpy(np.load(os.path.join(a.dir, n + ".npy"))) for n in ex.INPUTS[1:]]
        seen = {}

        def keep_and_stop(module, inputs, output):
            seen["scores"] = output.max(-1).values
            raise Stop()

        model.transformer.enc_out_class_embed.register_forward_hook(keep_and_stop)
        for scene in scene_list(a.scenes):
            png, img_npy = os.path.join(tmp, "scene.png"), os.path.join(tmp, "img.npy")
            ex.write_test_image(png, scene)
            img = transform(Image.open(png).convert("RGB"), None)[0][None].contiguous()
            try:
                with torch.no_grad():
                    wrapper(img, *text)
            except Stop:
                pass
            # The same call as the model's own: topk's order for equal values depends on k.
            want = torch.topk(seen["scores"], model.num_queries, dim=1).indices[0].numpy()
            np.save(img_npy, img.numpy())
            out = os.path.join(tmp, "out")
            cmd = [a.vlrt, "run", model_path, "--no-verify-hash", "--output-dir", out, "--threads",
                   str(a.threads), "--input", f"img={img_npy}"]
            for n in ex.INPUTS[1:]:
                cmd += ["--input", f"{n}={os.path.join(a.dir, n + '.npy')}"]
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            got = np.load(os.path.join(out, TOPK.replace("/", "_") + "_output_1.npy"))[0]
            ranks = np.nonzero(got != want)[0].tolist()
            print(json.dumps({"scene": scene, "reordered_ranks": ranks}), flush=True)


if __name__ == "__main__":
    main()
