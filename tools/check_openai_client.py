#!/usr/bin/env python3
"""Checks `vlrt serve` for a VLM folder with the unchanged OpenAI Python client
(`pip install openai`): starts the server on a free loopback port, asks one question about an
image (sent as a data URI) without and with streaming, compares both answers with
`vlrt chat --json`'s for the same image and prompt (greedy), checks /v1/models, and that a
malformed request gets a 4xx with a message. Exits 1 on the first failed check.

    python3 tools/check_openai_client.py [--model tests/fixtures/vlm/qwen2-vl] [--image IMG]
        [--prompt "..."] [--vlrt build/vlrt]
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile

import openai

from serve_check import check, serving  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default=os.path.join(ROOT, "tests/fixtures/vlm/qwen2-vl"))
    ap.add_argument("--image", help="default: the folder's image1.png")
    ap.add_argument("--prompt", default="What is in the image?")
    ap.add_argument("--max-tokens", type=int, default=20)
    ap.add_argument("--vlrt", default=os.path.join(ROOT, "build/vlrt"))
    args = ap.parse_args()
    image = args.image or os.path.join(args.model, "image1.png")

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "chat.json")
        subprocess.run([args.vlrt, "chat", args.model, "--image", image, "-p", args.prompt, "--greedy",
                        "--max-new-tokens", str(args.max_tokens), "--json", out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        expected = json.load(open(out))["text"]
    print(f"vlrt chat --json: {len(expected)} characters: {expected!r}")

    with serving(args.vlrt, args.model, "--model-name", "vlm") as server:
        url = server.url
        print(f"vlrt serve {args.model} on {url}")
        client = openai.OpenAI(base_url=url + "/v1", api_key="none")
        mime = "image/jpeg" if image.lower().endswith((".jpg", ".jpeg")) else "image/png"
        data_uri = f"data:{mime};base64," + base64.b64encode(open(image, "rb").read()).decode()
        messages = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": data_uri}},
                                                 {"type": "text", "text": args.prompt}]}]

        models = client.models.list()
        check([m.id for m in models.data] == ["vlm"], f"GET /v1/models lists {[m.id for m in models.data]}")

        r = client.chat.completions.create(model="vlm", messages=messages, temperature=0, max_tokens=args.max_tokens)
        text = r.choices[0].message.content
        check(text == expected, f"non-streamed: {r.usage.completion_tokens} tokens, finish_reason "
                                f"{r.choices[0].finish_reason}, text equals vlrt chat's")

        pieces = []
        finish = None
        for chunk in client.chat.completions.create(model="vlm", messages=messages, temperature=0,
                                                    max_tokens=args.max_tokens, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                pieces.append(chunk.choices[0].delta.content)
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
        check("".join(pieces) == expected,
              f"streamed: {len(pieces)} chunks, finish_reason {finish}, concatenated text equals vlrt chat's")

        try:
            client.chat.completions.create(model="vlm", messages=[{"role": "robot", "content": "hi"}])
            check(False, "a message with role 'robot' is refused")
        except openai.APIStatusError as e:
            check(400 <= e.status_code < 500, f"malformed request (role 'robot'): {e.status_code} {e.message}")
        try:
            client.chat.completions.create(model="vlm", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]}])
            check(False, "an http image URL is refused")
        except openai.APIStatusError as e:
            check(400 <= e.status_code < 500, f"http image URL: {e.status_code} {e.message}")
    print("all checks passed")


if __name__ == "__main__":
    main()
