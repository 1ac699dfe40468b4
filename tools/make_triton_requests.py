"""Request bodies as tritonclient (the unchanged `tritonclient[http]` package) makes them, for
vlrt serve's Triton tests (tests/serve/test_serve_triton.cpp).

Writes tests/fixtures/serve/:
  tensor_binary.bin  x FP32 [1,4,8,8] (0.01 * arange) as binary data for tests/fixtures/check/base.onnx,
                     output y asked for as binary data
  detect_bytes.bin   image BYTES [1] as binary data (assets/demo.png) and
                     prompt BYTES [1] as JSON, for the demo detector; no outputs named, so all
                     come back as binary data
  requests.json      each body's Inference-Header-Content-Length (the JSON header's size)
Run with `python3 tools/make_triton_requests.py` (tritonclient[http], numpy).
"""
import json
import os

import numpy as np
import tritonclient.http as httpclient

ROOT = os.path.join(os.path.dirname(__file__), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "serve")


def body(name, inputs, outputs, request_id=""):
    data, json_size = httpclient.InferenceServerClient.generate_request_body(
        inputs, outputs=outputs, request_id=request_id)
    with open(os.path.join(OUT, name), "wb") as f:
        f.write(data)
    return json_size


def demo_detect_inputs():
    """The demo detector's inputs as tritonclient sends them: assets/demo.png as a BYTES
    image in binary data, and assets/demo.json's prompt as a BYTES prompt in JSON."""
    with open(os.path.join(ROOT, "assets", "demo.png"), "rb") as f:
        png = f.read()
    with open(os.path.join(ROOT, "assets", "demo.json")) as f:
        prompt = json.load(f)["prompt"]
    image = httpclient.InferInput("image", [1], "BYTES")
    image.set_data_from_numpy(np.array([png], dtype=object), binary_data=True)
    text = httpclient.InferInput("prompt", [1], "BYTES")
    text.set_data_from_numpy(np.array([prompt.encode()], dtype=object), binary_data=False)
    return [image, text]


def main():
    os.makedirs(OUT, exist_ok=True)
    sizes = {}
    x = httpclient.InferInput("x", [1, 4, 8, 8], "FP32")
    x.set_data_from_numpy((0.01 * np.arange(256, dtype=np.float32)).reshape(1, 4, 8, 8), binary_data=True)
    sizes["tensor_binary.bin"] = body("tensor_binary.bin", [x], [httpclient.InferRequestedOutput("y", binary_data=True)],
                                      request_id="t1")

    sizes["detect_bytes.bin"] = body("detect_bytes.bin", demo_detect_inputs(), None, request_id="d1")

    with open(os.path.join(OUT, "requests.json"), "w") as f:
        json.dump({name: {"json_length": n} for name, n in sizes.items()}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
