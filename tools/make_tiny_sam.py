#!/usr/bin/python3
"""Writes the SAM fixtures of vlrt's tests (tests/fixtures/sam/), with segment-anything's own code:

  tiny.png         a 23x13 image of random pixels
  preprocess.json  SamPredictor's encoder input for it at 1024 (ResizeLongestSide.apply_image and
                   Sam.preprocess): the resized size, per-channel sums and a few values
  tiny/            a random SAM-contract model folder (encoder.onnx, decoder.onnx, sam.json) of a
                   tiny SAM (ViT with 16 channels and one block, 128x128 input, 8x8 embeddings) and
                   expected.json: SamPredictor's IoU predictions, chosen mask and its area for a
                   box prompt and a point prompt on tiny.png; decoder_batched.onnx is the
                   decoder with a dynamic prompt batch axis (B of point_coords and point_labels)

    /usr/bin/python3 -m pip install --user --break-system-packages segment-anything
    /usr/bin/python3 tools/make_tiny_sam.py
"""
import json
import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from export_sam import ImageEncoder, export_decoder, folder_description, sam_onnx_model  # noqa: E402
from scenes import write_png  # noqa: E402

OUT = os.path.join(os.path.dirname(HERE), "tests", "fixtures", "sam")
TINY_SIZE = 128


def tiny_sam():
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer
    dim, embedding = 16, TINY_SIZE // 16
    encoder = ImageEncoderViT(img_size=TINY_SIZE, patch_size=16, embed_dim=16, depth=1, num_heads=2,
                              out_chans=dim, window_size=0, global_attn_indexes=())
    prompt = PromptEncoder(embed_dim=dim, image_embedding_size=(embedding, embedding),
                           input_image_size=(TINY_SIZE, TINY_SIZE), mask_in_chans=4)
    decoder = MaskDecoder(num_multimask_outputs=3, transformer_dim=dim, iou_head_depth=2, iou_head_hidden_dim=16,
                          transformer=TwoWayTransformer(depth=1, embedding_dim=dim, mlp_dim=32, num_heads=2))
    sam = Sam(encoder, prompt, decoder, pixel_mean=[123.675, 116.28, 103.53], pixel_std=[58.395, 57.12, 57.375])
    with torch.no_grad():  # larger weights than the default init, so the masks are not all one side of 0
        for p in sam.mask_decoder.parameters():
            p.mul_(3)
    return sam.eval()


def preprocess_numbers(image):
    from segment_anything.utils.transforms import ResizeLongestSide
    resized = ResizeLongestSide(1024).apply_image(image)
    mean = torch.tensor([123.675, 116.28, 103.53]).view(-1, 1, 1)
    std = torch.tensor([58.395, 57.12, 57.375]).view(-1, 1, 1)
    x = (torch.as_tensor(resized).permute(2, 0, 1).float() - mean) / std
    x = torch.nn.functional.pad(x, (0, 1024 - x.shape[2], 0, 1024 - x.shape[1]))
    picks = [[0, 0, 0], [1, 100, 500], [2, 575, 1023], [0, 300, 77], [1, 576, 10], [2, 1023, 1023]]
    return {"image_size": 1024, "resized": [resized.shape[1], resized.shape[0]],
            "channel_sums": x.double().sum(dim=(1, 2)).tolist(),
            "values": [[c, y, xx, float(x[c, y, xx])] for c, y, xx in picks]}


def main():
    from segment_anything import SamPredictor
    os.makedirs(os.path.join(OUT, "tiny"), exist_ok=True)
    rng = np.random.default_rng(5)
    image = rng.integers(0, 256, (13, 23, 3), dtype=np.uint8)
    write_png(os.path.join(OUT, "tiny.png"), image)
    with open(os.path.join(OUT, "preprocess.json"), "w") as f:
        json.dump(preprocess_numbers(image), f, indent=1)

    torch.manual_seed(3)
    sam = tiny_sam()
    predictor = SamPredictor(sam)
    predictor.set_image(image)
    prompts = {"box": {"box": [2.0, 1.0, 15.0, 11.0]}, "points": {"points": [[6.0, 5.0, 1], [20.0, 3.0, 0]]}}
    expected = {"image": "tiny.png", "prompts": {}}
    onnx_model = sam_onnx_model(sam)
    for name, pr in prompts.items():
        kw = {"box": np.array(pr["box"])} if "box" in pr else {
            "point_coords": np.array([p[:2] for p in pr["points"]]), "point_labels": np.array([p[2] for p in pr["points"]])}
        with torch.no_grad():
            masks, iou, _ = predictor.predict(multimask_output=True, return_logits=True, **kw)
            single, iou0, _ = predictor.predict(multimask_output=False, return_logits=True, **kw)
        ious = [float(iou0[0])] + iou.tolist()
        logits = np.concatenate([single, masks])
        points = len(pr.get("points", [])) + (2 if "box" in pr else 1)
        index = 0 if points > 2 else 1 + int(np.argmax(iou))  # SamOnnxModel.select_masks
        chosen = logits[index] > sam.mask_threshold
        expected["prompts"][name] = {**pr, "iou_predictions": ious, "mask_index": index, "area": int(chosen.sum()),
                                     "min_abs_logit": float(np.abs(logits[index]).min())}
        print(name, expected["prompts"][name])
    with open(os.path.join(OUT, "tiny", "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    with open(os.path.join(OUT, "tiny", "sam.json"), "w") as f:
        json.dump({**folder_description(sam), "image_size": TINY_SIZE}, f, indent=1)
    pixels = torch.zeros(1, 3, TINY_SIZE, TINY_SIZE)
    torch.onnx.export(ImageEncoder(sam), (pixels,), os.path.join(OUT, "tiny", "encoder.onnx"), opset_version=17,
                      input_names=["pixels"], output_names=["image_embeddings"])
    export_decoder(onnx_model, os.path.join(OUT, "tiny", "decoder.onnx"), embedding_dim=16,
                   embedding_size=TINY_SIZE // 16)
    export_decoder(onnx_model, os.path.join(OUT, "tiny", "decoder_batched.onnx"), embedding_dim=16,
                   embedding_size=TINY_SIZE // 16, batch_prompts=True)
    for f in sorted(os.listdir(os.path.join(OUT, "tiny"))):
        print(f, os.path.getsize(os.path.join(OUT, "tiny", f)))


if __name__ == "__main__":
    main()
