#!/usr/bin/python3
"""Exports Segment Anything (SAM, vit_b, from the segment-anything package) to the two ONNX models of
the SAM contract that vlrt's segment pipeline runs, plus PyTorch reference inputs and outputs for a
generated test image.

  encoder.onnx  pixels float32 [1,3,1024,1024] (resized, normalized and padded as SamPredictor does)
                -> image_embeddings float32 [1,256,64,64]
  decoder.onnx  segment-anything's SamOnnxModel as its scripts/export_onnx_model.py writes it (opset 17,
                multimask outputs, point count dynamic; with the crop to the unpadded size kept
                dynamic, which torch 1.13's tracer freezes otherwise): image_embeddings [1,256,64,64],
                point_coords [1,N,2] (in the 1024 frame), point_labels [1,N], mask_input [1,1,256,256],
                has_mask_input [1], orig_im_size [2] (h, w) -> masks [1,4,h,w] (logits),
                iou_predictions [1,4], low_res_masks [1,4,256,256]
  sam.json      what the folder holds and the preprocessing (the pipeline reads it)

Without --checkpoint the weights are random (torch.manual_seed(--seed)); with --checkpoint
(sam_vit_b_01ec64.pth) they are Meta's.

References, from PyTorch on test.png (a generated scene): pixels.npy (SamPredictor's preprocessed
input), expected_image_embeddings.npy; for each prompt P in box, points: P_point_coords.npy,
P_point_labels.npy, mask_input.npy, has_mask_input.npy, orig_im_size.npy and expected_P_masks.npy,
expected_P_iou_predictions.npy, expected_P_low_res_masks.npy; the box prompt's outputs for another
image size (other_orig_im_size.npy, expected_box_other_size_*.npy); reference.json (the prompts in image
pixels, timings, versions). Written to OUT (default models/sam/; generated, never committed,
about 370 MB).

    /usr/bin/python3 -m pip install --user --break-system-packages segment-anything
    /usr/bin/python3 tools/export_sam.py [--out models/sam] [--checkpoint PTH]
    python3 tools/compare_sam.py [--model models/sam]     # vlrt against these references
"""
import argparse
import json
import os
import sys
import time
import types
import warnings

import numpy as np
import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from scenes import make_scene, write_png  # noqa: E402

OPSET = 17
IMAGE_SIZE = 1024
DECODER_INPUTS = ["image_embeddings", "point_coords", "point_labels", "mask_input", "has_mask_input",
                  "orig_im_size"]
DECODER_OUTPUTS = ["masks", "iou_predictions", "low_res_masks"]


class ImageEncoder(torch.nn.Module):
    def __init__(self, sam):
        super().__init__()
        self.image_encoder = sam.image_encoder

    def forward(self, pixels):
        return self.image_encoder(pixels)


def mask_postprocessing(self, masks, orig_im_size):
    """SamOnnxModel.mask_postprocessing with the crop to the unpadded size sliced by tensors: its
    int(prepadded_size[i]) is frozen by the tracer (torch 1.13) to the export's dummy image size,
    so every other aspect ratio would be cropped wrong. The same values in eager mode."""
    masks = F.interpolate(masks, size=(self.img_size, self.img_size), mode="bilinear", align_corners=False)
    prepadded_size = self.resize_longest_image_size(orig_im_size, self.img_size)
    masks = masks[..., : prepadded_size[0], : prepadded_size[1]]
    orig_im_size = orig_im_size.to(torch.int64)
    h, w = orig_im_size[0], orig_im_size[1]
    return F.interpolate(masks, size=(h, w), mode="bilinear", align_corners=False)


def sam_onnx_model(sam):
    """segment-anything's SamOnnxModel as its export script makes it (multimask outputs), with the
    crop of mask_postprocessing kept dynamic."""
    from segment_anything.utils.onnx import SamOnnxModel
    model = SamOnnxModel(sam, return_single_mask=False).eval()
    model.mask_postprocessing = types.MethodType(mask_postprocessing, model)
    return model


def export_decoder(onnx_model, path, embedding_dim=256, embedding_size=64, batch_prompts=False):
    """As segment-anything's scripts/export_onnx_model.py does it: opset 17, the point count dynamic
    (with batch_prompts, the prompt batch too: B prompts of N points on one image's embedding)."""
    e = embedding_size
    dummy = {"image_embeddings": torch.randn(1, embedding_dim, e, e, dtype=torch.float),
             "point_coords": torch.randint(low=0, high=16 * e, size=(1, 5, 2), dtype=torch.float),
             "point_labels": torch.randint(low=0, high=4, size=(1, 5), dtype=torch.float),
             "mask_input": torch.randn(1, 1, 4 * e, 4 * e, dtype=torch.float),
             "has_mask_input": torch.tensor([1], dtype=torch.float),
             "orig_im_size": torch.tensor([1500, 2250], dtype=torch.float)}
    dynamic = {"point_coords": {1: "num_points"}, "point_labels": {1: "num_points"}}
    if batch_prompts:
        dummy["point_coords"], dummy["point_labels"] = dummy["point_coords"].repeat(2, 1, 1), dummy["point_labels"].repeat(2, 1)
        for v in dynamic.values():
            v[0] = "num_prompts"
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        torch.onnx.export(onnx_model, tuple(dummy.values()), path, export_params=True, verbose=False,
                          opset_version=OPSET, do_constant_folding=True, input_names=DECODER_INPUTS,
                          output_names=DECODER_OUTPUTS, dynamic_axes=dynamic)


def folder_description(sam):
    return {"pipeline": "segment", "encoder": "encoder.onnx", "decoder": "decoder.onnx",
            "image_size": IMAGE_SIZE, "pixel_mean": sam.pixel_mean.flatten().tolist(),
            "pixel_std": sam.pixel_std.flatten().tolist(), "mask_threshold": sam.mask_threshold}


def decoder_inputs(predictor, coords, labels, image_size_hw):
    """SamOnnxModel's inputs as segment-anything's ONNX example makes them: coordinates scaled to
    the 1024 frame (ResizeLongestSide.apply_coords), no mask input."""
    c = predictor.transform.apply_coords(np.asarray(coords, np.float64), image_size_hw).astype(np.float32)
    return {"point_coords": c[None], "point_labels": np.asarray(labels, np.float32)[None],
            "mask_input": np.zeros((1, 1, 256, 256), np.float32),
            "has_mask_input": np.zeros(1, np.float32),
            "orig_im_size": np.asarray(image_size_hw, np.float32)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join(ROOT, "models", "sam"))
    p.add_argument("--checkpoint", default=None, help="sam_vit_b_01ec64.pth (default: random weights)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-export", action="store_true", help="references only")
    p.add_argument("--decoder-only", action="store_true", help="write decoder.onnx alone (same seed, no references)")
    a = p.parse_args()
    from segment_anything import SamPredictor, sam_model_registry

    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()
    torch.manual_seed(a.seed)
    sam = sam_model_registry["vit_b"](checkpoint=a.checkpoint).eval()
    if a.decoder_only:
        export_decoder(sam_onnx_model(sam), os.path.join(a.out, "decoder.onnx"))
        return
    predictor = SamPredictor(sam)

    image, ann = make_scene(11, 2, style="tiles", size=(600, 900), n_objects=3)
    image_path = os.path.join(a.out, "test.png")
    write_png(image_path, image)
    hw = image.shape[:2]

    t0 = time.time()
    with torch.no_grad():
        predictor.set_image(image)
    t_encoder = time.time() - t0
    input_image = predictor.transform.apply_image(image)
    pixels = sam.preprocess(torch.as_tensor(input_image).permute(2, 0, 1).contiguous()[None].float())
    embeddings = predictor.get_image_embedding()
    with torch.no_grad():
        direct = ImageEncoder(sam)(pixels)
    assert torch.equal(direct, embeddings), "the encoder wrapper differs from SamPredictor"
    np.save(os.path.join(a.out, "pixels.npy"), pixels.numpy())
    np.save(os.path.join(a.out, "expected_image_embeddings.npy"), embeddings.numpy())

    # Prompts in image pixels: a box (two corners, labels 2 and 3) and two points with the padding
    # point (0,0) label -1 that a prompt without a box takes.
    x1, y1, x2, y2 = (float(v) for v in ann["objects"][0]["box"])
    fx, fy = (x1 + x2) / 2, (y1 + y2) / 2
    ox, oy = ann["objects"][1]["box"][:2]
    prompts = {"box": {"box": [x1, y1, x2, y2], "coords": [[x1, y1], [x2, y2]], "labels": [2, 3]},
               "points": {"points": [[fx, fy, 1], [ox + 2.0, oy + 2.0, 0]],
                          "coords": [[fx, fy], [ox + 2.0, oy + 2.0], [0.0, 0.0]], "labels": [1, 0, -1]}}
    onnx_model = sam_onnx_model(sam)
    info = {"image": "test.png", "width": int(hw[1]), "height": int(hw[0]), "seed": a.seed,
            "checkpoint": a.checkpoint, "torch": torch.__version__, "opset": OPSET,
            "pytorch_encoder_s": t_encoder, "prompts": {}}
    for name, pr in prompts.items():
        inputs = decoder_inputs(predictor, pr["coords"], pr["labels"], hw)
        t0 = time.time()
        with torch.no_grad():
            masks, iou, low = onnx_model(embeddings, *(torch.from_numpy(inputs[k]) for k in DECODER_INPUTS[1:]))
        t_dec = time.time() - t0
        # The ONNX wrapper must agree with SamPredictor.predict on the same prompt.
        kw = {"box": np.array(pr["box"])} if "box" in pr else {
            "point_coords": np.array([q[:2] for q in pr["points"]]), "point_labels": np.array([q[2] for q in pr["points"]])}
        with torch.no_grad():
            pm, piou, _ = predictor.predict(multimask_output=True, return_logits=True, **kw)
        d_pred = float(np.abs(pm - masks[0, 1:].numpy()).max())
        for k in ["point_coords", "point_labels"]:
            np.save(os.path.join(a.out, f"{name}_{k}.npy"), inputs[k])
        for k in ["mask_input", "has_mask_input", "orig_im_size"]:
            np.save(os.path.join(a.out, k + ".npy"), inputs[k])
        for k, v in zip(DECODER_OUTPUTS, (masks, iou, low)):
            np.save(os.path.join(a.out, f"expected_{name}_{k}.npy"), v.numpy())
        area = int((masks[0] > sam.mask_threshold).sum(dim=(-1, -2))[0])
        info["prompts"][name] = {k: v for k, v in pr.items() if k in ("box", "points")}
        info["prompts"][name].update({"iou_predictions": iou[0].tolist(), "mask0_area": area,
                                      "pytorch_decoder_s": t_dec, "onnx_wrapper_vs_predictor": d_pred,
                                      "logit_range": [float(masks.min()), float(masks.max())]})
        print(f"{name}: iou {np.round(iou[0].numpy(), 4).tolist()}, mask 0 area {area}, logits "
              f"[{masks.min():.1f}, {masks.max():.1f}], wrapper vs SamPredictor {d_pred:.1e}")

    # The box prompt's decoder inputs at another image size (h 500, w 700: 731x1024 before padding,
    # where the export's dummy size gives 683x1024): the crop and the upscaling must follow orig_im_size.
    other = np.array([500, 700], np.float32)
    np.save(os.path.join(a.out, "other_orig_im_size.npy"), other)
    with torch.no_grad():
        outs = onnx_model(embeddings, *(torch.from_numpy(np.load(os.path.join(a.out, f))) for f in (
            "box_point_coords.npy", "box_point_labels.npy", "mask_input.npy", "has_mask_input.npy")),
            torch.from_numpy(other))
    for k, v in zip(DECODER_OUTPUTS, outs):
        np.save(os.path.join(a.out, f"expected_box_other_size_{k}.npy"), v.numpy())
    info["other_size"] = {"orig_im_size": other.tolist(), "masks_shape": list(outs[0].shape)}

    if not a.no_export:
        warnings.filterwarnings("ignore", category=torch.jit.TracerWarning)
        path = os.path.join(a.out, "encoder.onnx")
        t0 = time.time()
        torch.onnx.export(ImageEncoder(sam), (pixels,), path, opset_version=OPSET, input_names=["pixels"],
                          output_names=["image_embeddings"], do_constant_folding=True)
        print(f"exported {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.time() - t0:.0f} s")
        path = os.path.join(a.out, "decoder.onnx")
        export_decoder(onnx_model, path)
        print(f"exported {path} ({os.path.getsize(path) / 1e6:.1f} MB)")

    with open(os.path.join(a.out, "sam.json"), "w") as f:
        json.dump(folder_description(sam), f, indent=1)
    info["total_s"] = time.time() - t_start
    with open(os.path.join(a.out, "reference.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(f"wrote {a.out} in {info['total_s']:.0f} s")


if __name__ == "__main__":
    main()
