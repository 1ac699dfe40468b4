#!/usr/bin/python3
"""Writes tests/fixtures/image: a small PNG, its PIL bilinear resizes (the reference
GroundingDINO preprocessing resizes with PIL), a JPEG with an EXIF orientation tag,
the same pixels as lossless WebP, LZW TIFF and a two-frame GIF (its first frame a
palette image, also written as PNG), and broken files for the error paths.

    /usr/bin/python3 tools/make_image_fixtures.py   (needs numpy and Pillow: python3-pil)
"""
import io
import os

import numpy as np
from PIL import Image

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "image")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(3)
    src = rng.integers(0, 256, (23, 37, 3), dtype=np.uint8)
    src[5:15, 10:20] = [255, 0, 0]
    img = Image.fromarray(src)
    img.save(os.path.join(OUT, "src.png"))
    for w, h in [(80, 50), (18, 11), (37, 60), (25, 23)]:
        img.resize((w, h), Image.BILINEAR).save(os.path.join(OUT, f"pil_{w}x{h}.png"))

    # Orientation 6: the stored pixels must be rotated 90 degrees clockwise for display.
    tall = Image.fromarray(np.tile(np.arange(16, dtype=np.uint8)[:, None, None] * 16, (1, 8, 3)))  # 8 wide, 16 high
    exif = Image.Exif()
    exif[0x0112] = 6
    tall.save(os.path.join(OUT, "orient6.jpg"), quality=95, exif=exif.tobytes())

    buf = io.BytesIO()
    tall.save(buf, format="JPEG", quality=95)
    data = buf.getvalue()
    with open(os.path.join(OUT, "truncated.jpg"), "wb") as f:
        f.write(data[: len(data) // 2])
    # A PNG header claiming 50000x50000 pixels, with no pixel data behind it.
    png = io.BytesIO()
    Image.new("RGB", (1, 1)).save(png, format="PNG")
    b = bytearray(png.getvalue())
    b[16:24] = (50000).to_bytes(4, "big") + (50000).to_bytes(4, "big")
    with open(os.path.join(OUT, "huge_header.png"), "wb") as f:
        f.write(bytes(b))
    with open(os.path.join(OUT, "not_an_image.png"), "wb") as f:
        f.write(b"hello, this is text\n")

    # Other formats users' folders hold; each decodes to the pixels of a PNG beside it.
    img.save(os.path.join(OUT, "src.webp"), lossless=True, quality=100)
    img.save(os.path.join(OUT, "src.tif"), compression="tiff_lzw")
    # GIF holds at most 256 colors: its reference is the palette image itself. The second
    # frame (inverted) must not show: decoders read the first.
    palette = img.quantize(colors=64, dither=Image.Dither.NONE)
    palette.convert("RGB").save(os.path.join(OUT, "palette.png"))
    second = Image.fromarray(255 - np.asarray(palette.convert("RGB"))).quantize(colors=64, dither=Image.Dither.NONE)
    palette.save(os.path.join(OUT, "palette.gif"), save_all=True, append_images=[second], duration=100, loop=0)


if __name__ == "__main__":
    main()
