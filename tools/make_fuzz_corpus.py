#!/usr/bin/env python3
"""Writes the generated seeds of fuzz/corpus (the rest are copies of committed fixtures).

Each harness's input layout is described at the top of its fuzz/<parser>_fuzzer.cpp.
"""
import base64
import io
import json
import pathlib
import struct

import numpy as np
from PIL import Image

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def write(parser, name, data):
    path = CORPUS / parser / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def main():
    for name, array in {"i64_scalar": np.array(7, dtype=np.int64),
                        "bool_2x2": np.array([[True, False], [False, True]]),
                        "f16_empty": np.zeros((0, 3), dtype=np.float16)}.items():
        np.save(CORPUS / "npy" / f"{name}.npy", array)
    Image.new("RGB", (5, 3), (10, 200, 30)).save(CORPUS / "image" / "small.bmp")

    write("wordpiece", "caption.txt", "a cat . a remote control .")
    write("wordpiece", "mixed.txt", "Héllo, WORLD! 中文字 naïve\tcafé\x00\x7f")
    write("wordpiece", "specials.txt", "[CLS] don't [SEP] ##ing")
    write("byte_level_bpe", "ascii.txt", "Hello world, 123 tokens!")
    write("byte_level_bpe", "specials.txt", "\x01<|im_start|>user\nDescribe <|image_pad|> 图片 ☃️ 😀<|im_end|>")
    write("byte_level_bpe", "spaces.txt", "\x00  multiple   spaces\n\n\tand  Ünïcödé ")
    write("chat_template", "image_turns.txt", "You are brief.\n\x01Describe\x01this image.\n\x02It is a cat.\n\x01And this?\x01")
    write("chat_template", "one_turn.txt", "\x01What is 2+2?")

    # KServe: byte 0 even -> a JSON body; odd -> bytes 1-2 the JSON header's length, then the body.
    fp32 = {"inputs": [{"name": "x", "shape": [2, 2], "datatype": "FP32", "data": [[1, 2], [3, 4.5]]}],
            "outputs": [{"name": "output", "parameters": {"binary_data": True}}], "id": "7"}
    write("kserve_request", "json_fp32.bin", b"\x00" + json.dumps(fp32).encode())
    strings = {"inputs": [{"name": "s", "shape": [2], "datatype": "BYTES", "data": ["a", "bc"]},
                          {"name": "b", "shape": [3], "datatype": "BOOL", "data": [True, False, True]}]}
    write("kserve_request", "json_bytes_bool.bin", b"\x00" + json.dumps(strings).encode())
    binary = (ROOT / "tests/fixtures/serve/tensor_binary.bin").read_bytes()
    json_length = json.loads((ROOT / "tests/fixtures/serve/requests.json").read_text())["tensor_binary.bin"]["json_length"]
    write("kserve_request", "binary_tensor.bin", b"\x01" + struct.pack("<H", json_length) + binary)

    write("json_body", "detect.json", json.dumps({"prompt": "cat . dog .", "box_threshold": 0.35, "image": "iVBORw0KGgo="}))
    write("json_body", "nested.json", '{"a": [1, {"b": [true, null, "\\u00e9"]}], "c": -1.5e300}')
    write("json_body", "array.json", "[1, 2, 3]")
    # /v1/detect: byte 0 even -> a JSON body; odd -> multipart fields "name\x01content" split by "\x00".
    write("detect_request", "json.bin", b"\x00" + json.dumps(
        {"image": "iVBORw0KGgo=", "prompt": "cat . dog .", "box_threshold": 0.3, "text_threshold": 0.25}).encode())
    write("detect_request", "multipart.bin", b"\x01image\x01\x89PNG\r\n\x00prompt\x01cat .\x00box_threshold\x010.35")
    write("detect_request", "wrong_type.bin", b"\x80{\"prompt\": \"cat .\"}")
    # OpenAI chat completion bodies, one with a 4x3 PNG as a data URI.
    png = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 30, 30)).save(png, format="PNG")
    uri = "data:image/png;base64," + base64.b64encode(png.getvalue()).decode()
    for name, body in {
        "text.json": {"model": "demo-vlm", "messages": [{"role": "user", "content": "Is there a red star?"}]},
        "image.json": {"messages": [{"role": "system", "content": "Answer briefly."},
                                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": uri}},
                                                                 {"type": "text", "text": "What is in the image?"}]}],
                       "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "seed": 3},
        "stream.json": {"messages": [{"role": "user", "content": [{"type": "text", "text": "How many objects?"}]},
                                     {"role": "assistant", "content": "2."}, {"role": "user", "content": "And stars?"}],
                        "stream": True, "stream_options": {"include_usage": True}, "stop": ["<|im_end|>"], "n": 1,
                        "max_completion_tokens": 4},
        "bare_image_url.json": {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": uri}]}],
                                "stop": "<|endoftext|>"},
    }.items():
        write("openai_chat_request", name, json.dumps(body))

    manifest = (ROOT / "models/demo/model.onnx.manifest.json").read_text()
    write("manifest", "demo.json", manifest)
    write("manifest", "absolute_path.json", json.dumps({"model": "m.onnx", "files": [
        {"path": "/m.onnx", "size": 1, "sha256": "0" * 64}]}))


if __name__ == "__main__":
    main()
