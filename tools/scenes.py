#!/usr/bin/env python3
"""Generated scenes for vlrt's demo detector: coloured shapes on textured backgrounds, with
ground-truth boxes and captions naming present and absent objects. Deterministic: scene `index`
of `seed` is always the same image (numpy's PCG64 seeded with [seed, index]).

Needs numpy only (PNG files are written and read with zlib), so it runs under Debian's
/usr/bin/python3 (training) and any other python3 with numpy (evaluation).

    python3 tools/scenes.py --seed 7 --count 4 --out /tmp/scenes      # PNG + JSON per scene
    python3 tools/scenes.py --seed 7 --index 3 --style tiles --out assets --name demo

A scene's JSON: {"width", "height", "seed", "index", "style", "caption", "present", "absent",
"objects": [{"label": "red circle", "box": [x1, y1, x2, y2]}]} with boxes in pixels (x2, y2
exclusive: the box of the pixels the shape covers at least half of).

Styles: "plain" (gradients, noise, stripes; flat shapes) and "tiles" (checkerboards, bricks,
grids, blotches; shaded shapes with an outline and a shadow).
"""
import argparse
import json
import os
import re
import struct
import zlib

import numpy as np

COLOURS = {
    "red": (215, 35, 35),
    "green": (35, 165, 55),
    "blue": (35, 75, 220),
    "yellow": (240, 215, 25),
    "purple": (140, 45, 185),
    "orange": (250, 135, 15),
    "white": (245, 245, 245),
    "black": (20, 20, 20),
}
SHAPES = ["circle", "square", "triangle", "star", "ring", "cross", "diamond", "heart"]
STYLES = ["plain", "tiles"]
LABELS = [f"{c} {s}" for c in COLOURS for s in SHAPES]

MIN_SIDE, MAX_SIDE = 320, 640
MIN_OBJECT, MAX_OBJECT = 26, 160
SUPERSAMPLE = 3


# ---------------------------------------------------------------- shapes

def _polygon_inside(u, v, pts):
    """Even-odd rule for points (u, v) against a closed polygon pts [(x, y), ...]."""
    inside = np.zeros(u.shape, dtype=bool)
    n = len(pts)
    for i in range(n):
        x1, y1 = pts[i]
        x2, y2 = pts[(i + 1) % n]
        crosses = (y1 > v) != (y2 > v)
        with np.errstate(divide="ignore", invalid="ignore"):
            x_at = x1 + (v - y1) * (x2 - x1) / (y2 - y1)
        inside ^= crosses & (u < x_at)
    return inside


def _star_points(outer=1.0, inner=0.45, points=5):
    a = -np.pi / 2 + np.arange(2 * points) * np.pi / points
    r = np.where(np.arange(2 * points) % 2 == 0, outer, inner)
    return list(zip(r * np.cos(a), r * np.sin(a)))


def shape_inside(shape, u, v):
    """Is (u, v) inside the shape? Local coordinates: the shape spans about [-1, 1]^2, v down."""
    if shape == "circle":
        return u * u + v * v <= 1.0
    if shape == "square":
        return (np.abs(u) <= 0.82) & (np.abs(v) <= 0.82)
    if shape == "triangle":
        h = np.sqrt(3) / 2
        return _polygon_inside(u, v, [(0.0, -1.0), (h * 1.15, 0.72), (-h * 1.15, 0.72)])
    if shape == "star":
        return _polygon_inside(u, v, _star_points())
    if shape == "ring":
        r2 = u * u + v * v
        return (r2 <= 1.0) & (r2 >= 0.52 ** 2)
    if shape == "cross":
        return ((np.abs(u) <= 0.3) & (np.abs(v) <= 1.0)) | ((np.abs(v) <= 0.3) & (np.abs(u) <= 1.0))
    if shape == "diamond":
        return np.abs(u) / 0.68 + np.abs(v) <= 1.0
    if shape == "heart":
        x, y = u * 1.2, -(v * 1.2) + 0.15
        return (x * x + y * y - 1.0) ** 3 - x * x * y ** 3 <= 0.0
    raise ValueError(f"unknown shape {shape!r}")


def _max_rotation(shape):
    # Rotations that keep a shape what its name says (a square at 45 degrees is a diamond).
    return {"circle": 0, "ring": 0, "square": 12, "diamond": 12, "cross": 18, "heart": 20,
            "triangle": 180, "star": 180}[shape]


def render_coverage(shape, size, angle_deg, cx, cy, height, width):
    """Coverage in [0, 1] of the shape (extent `size` px, centred at cx, cy) on the pixel grid,
    as (y0, x0, coverage) for the window that holds it."""
    half = size / 2.0
    reach = half * 1.45 + 2
    x0, x1 = max(0, int(np.floor(cx - reach))), min(width, int(np.ceil(cx + reach)))
    y0, y1 = max(0, int(np.floor(cy - reach))), min(height, int(np.ceil(cy + reach)))
    s = SUPERSAMPLE
    offs = (np.arange(s) + 0.5) / s
    xs = (np.arange(x0, x1)[:, None] + offs[None, :]).reshape(-1)
    ys = (np.arange(y0, y1)[:, None] + offs[None, :]).reshape(-1)
    X, Y = np.meshgrid(xs, ys)
    a = np.deg2rad(angle_deg)
    dx, dy = (X - cx) / half, (Y - cy) / half
    u = np.cos(a) * dx + np.sin(a) * dy
    v = -np.sin(a) * dx + np.cos(a) * dy
    inside = shape_inside(shape, u, v).astype(np.float32)
    cov = inside.reshape(y1 - y0, s, x1 - x0, s).mean(axis=(1, 3))
    return y0, x0, cov


# ---------------------------------------------------------------- backgrounds

def _smooth_noise(rng, height, width, cell):
    """Bilinearly upsampled coarse noise in [0, 1] (blotches)."""
    gh, gw = height // cell + 2, width // cell + 2
    g = rng.random((gh, gw)).astype(np.float32)
    ys = np.arange(height) / cell
    xs = np.arange(width) / cell
    y0, x0 = ys.astype(int), xs.astype(int)
    fy, fx = (ys - y0)[:, None], (xs - x0)[None, :]
    a = g[y0][:, x0]
    b = g[y0][:, x0 + 1]
    c = g[y0 + 1][:, x0]
    d = g[y0 + 1][:, x0 + 1]
    return (a * (1 - fy) * (1 - fx) + b * (1 - fy) * fx + c * fy * (1 - fx) + d * fy * fx)


def _muted_colour(rng, lo=60, hi=200, spread=32):
    base = rng.uniform(lo, hi)
    return np.clip(base + rng.uniform(-spread, spread, 3), 0, 255).astype(np.float32)


def background(rng, style, height, width):
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    c1, c2 = _muted_colour(rng), _muted_colour(rng)
    if style == "plain":
        a = rng.uniform(0, 2 * np.pi)
        t = (np.cos(a) * xx / width + np.sin(a) * yy / height)
        t = (t - t.min()) / max(1e-6, t.max() - t.min())
        img = c1[None, None] * (1 - t[..., None]) + c2[None, None] * t[..., None]
        kind = rng.integers(0, 3)
        if kind == 1:  # stripes
            period = rng.uniform(6, 40)
            b = rng.uniform(0, np.pi)
            s = np.sin((np.cos(b) * xx + np.sin(b) * yy) * 2 * np.pi / period)
            img += (s * rng.uniform(8, 25))[..., None]
        elif kind == 2:  # blotches
            img += ((_smooth_noise(rng, height, width, int(rng.integers(24, 96))) - 0.5)
                    * rng.uniform(30, 70))[..., None]
        noise_sigma = rng.uniform(2, 9)
    else:
        kind = rng.integers(0, 3)
        cell = rng.uniform(14, 56)
        if kind == 0:  # checkerboard
            t = ((np.floor(xx / cell) + np.floor(yy / cell)) % 2)
        elif kind == 1:  # bricks
            row = np.floor(yy / (cell * 0.5))
            t = ((np.mod(xx + (row % 2) * cell * 0.5, cell) < 3) | (np.mod(yy, cell * 0.5) < 3)).astype(np.float32)
        else:  # grid lines over blotches
            t = ((np.mod(xx, cell) < 2) | (np.mod(yy, cell) < 2)).astype(np.float32)
            t = np.maximum(t, _smooth_noise(rng, height, width, int(rng.integers(32, 128))) * 0.6)
        c2 = np.clip(c1 + rng.choice([-1, 1]) * rng.uniform(18, 45) + rng.uniform(-10, 10, 3), 0, 255)
        img = c1[None, None] * (1 - t[..., None]) + c2[None, None] * t[..., None]
        noise_sigma = rng.uniform(2, 6)
    img += rng.normal(0, noise_sigma, (height, width, 1)).astype(np.float32) * rng.uniform(0.5, 1.0, 3)
    return img


# ---------------------------------------------------------------- scenes

def _place_objects(rng, height, width, count, min_object=MIN_OBJECT):
    """Sizes, angles and centres; an object may cover at most 20% of one drawn before it."""
    placed = []
    occupancy = np.full((height, width), -1, dtype=np.int32)
    tries = 0
    while len(placed) < count and tries < 200:
        tries += 1
        shape = SHAPES[rng.integers(len(SHAPES))]
        colour = list(COLOURS)[rng.integers(len(COLOURS))]
        top = min(MAX_OBJECT, 0.5 * min(height, width))
        size = float(np.exp(rng.uniform(np.log(min_object), np.log(top))))
        m = _max_rotation(shape)
        angle = float(rng.uniform(-m, m)) if m else 0.0
        margin = size * 0.35
        cx = float(rng.uniform(margin, width - margin))
        cy = float(rng.uniform(margin, height - margin))
        y0, x0, cov = render_coverage(shape, size, angle, cx, cy, height, width)
        solid = cov >= 0.5
        if solid.sum() < 60:
            continue
        window = occupancy[y0:y0 + cov.shape[0], x0:x0 + cov.shape[1]]
        ok = True
        for j, p in enumerate(placed):
            covered = np.count_nonzero(solid & (window == j))
            if covered > 0.2 * p["area"]:
                ok = False
                break
        if not ok:
            continue
        ys, xs = np.nonzero(solid)
        box = [int(x0 + xs.min()), int(y0 + ys.min()), int(x0 + xs.max() + 1), int(y0 + ys.max() + 1)]
        if box[0] < 0 or box[1] < 0 or box[2] > width or box[3] > height:
            continue
        window[solid] = len(placed)
        placed.append(dict(shape=shape, colour=colour, size=size, angle=angle, cx=cx, cy=cy,
                           y0=y0, x0=x0, cov=cov, box=box, area=int(solid.sum())))
    return placed


def _draw(rng, img, style, p):
    y0, x0, cov = p["y0"], p["x0"], p["cov"]
    h, w = cov.shape
    base = np.array(COLOURS[p["colour"]], dtype=np.float32) + rng.uniform(-14, 14, 3)
    region = img[y0:y0 + h, x0:x0 + w]
    if style == "plain":
        fill = np.broadcast_to(base, (h, w, 3))
    else:
        # A shadow, a vertical shade and an outline (the outline inside the shape's own edge).
        sh = int(max(2, p["size"] * 0.06))
        shadow = np.zeros_like(cov)
        shadow[sh:, sh:] = cov[:-sh, :-sh]
        region *= (1 - 0.35 * shadow)[..., None]
        shade = np.linspace(1.12, 0.85, h, dtype=np.float32)[:, None, None]
        fill = np.clip(base[None, None] * shade, 0, 255) * np.ones((1, w, 1), np.float32)
        inner = cov.copy()
        k = max(1, int(p["size"] * 0.045))
        for dy, dx in ((k, 0), (-k, 0), (0, k), (0, -k)):
            inner = np.minimum(inner, np.roll(np.roll(cov, dy, 0), dx, 1))
        edge = np.clip(cov - inner, 0, 1)[..., None]
        lum = base.mean()
        outline = np.full(3, 25.0 if lum > 90 else 200.0, np.float32)
        fill = fill * (1 - edge) + outline * edge
    region[:] = region * (1 - cov[..., None]) + fill * cov[..., None]


def caption_for(rng, present, n_absent):
    """Present labels (each once) and n_absent labels not in the scene, shuffled. Half of the
    absent ones share a colour or a shape with a present object, so words alone do not tell."""
    absent = []
    pool = [l for l in LABELS if l not in present]
    for _ in range(n_absent):
        if present and rng.random() < 0.6:
            c, s = present[rng.integers(len(present))].split(" ")
            hard = [l for l in pool if (l.startswith(c + " ") or l.endswith(" " + s)) and l not in absent]
            if hard:
                absent.append(hard[rng.integers(len(hard))])
                continue
        rest = [l for l in pool if l not in absent]
        absent.append(rest[rng.integers(len(rest))])
    phrases = list(present) + absent
    order = rng.permutation(len(phrases))
    return " . ".join(phrases[i] for i in order) + " .", absent


def visible_masks(placed, height, width):
    """Each object's visible pixels (bool HxW): those it covers at least half of and no object
    drawn after it covers at least half of."""
    masks = []
    for p in placed:
        m = np.zeros((height, width), dtype=bool)
        h, w = p["cov"].shape
        m[p["y0"]:p["y0"] + h, p["x0"]:p["x0"] + w] = p["cov"] >= 0.5
        masks.append(m)
    for j in range(len(masks)):
        for later in masks[j + 1:]:
            masks[j] &= ~later
    return masks


def make_scene(seed, index, style=None, size=None, n_objects=None, masks=False, min_object=MIN_OBJECT):
    """Scene `index` of `seed`: (uint8 image HxWx3, annotation dict), objects at least `min_object`
    pixels high, and with `masks` a third value: each object's visible pixels (visible_masks), in
    the order of ann["objects"]."""
    rng = np.random.default_rng([seed, index])
    if style is None:
        style = STYLES[rng.integers(len(STYLES))]
    if size is None:
        height, width = (int(v) for v in rng.integers(MIN_SIDE, MAX_SIDE + 1, 2))
    else:
        height, width = size
    img = background(rng, style, height, width)
    count = int(n_objects) if n_objects else int(rng.integers(1, 7))
    placed = _place_objects(rng, height, width, count, min_object)
    for p in placed:
        _draw(rng, img, style, p)
    img = np.clip(np.rint(img), 0, 255).astype(np.uint8)
    labels = [f"{p['colour']} {p['shape']}" for p in placed]
    present = list(dict.fromkeys(labels))
    caption, absent = caption_for(rng, present, int(rng.integers(1, 4)))
    ann = {"width": width, "height": height, "seed": seed, "index": index, "style": style,
           "caption": caption, "present": present, "absent": absent,
           "objects": [{"label": l, "box": p["box"]} for l, p in zip(labels, placed)]}
    if masks:
        return img, ann, visible_masks(placed, height, width)
    return img, ann


# ---------------------------------------------------------------- PNG (zlib only)

def write_png(path, img):
    """8-bit RGB PNG; each row filtered with whichever of None/Sub/Up is smallest."""
    img = np.ascontiguousarray(img, dtype=np.uint8)
    h, w, _ = img.shape
    rows = img.reshape(h, w * 3).astype(np.int16)
    sub = np.concatenate([rows[:, :3], rows[:, 3:] - rows[:, :-3]], axis=1) % 256
    up = np.concatenate([rows[:1], rows[1:] - rows[:-1]], axis=0) % 256
    cands = [rows, sub, up]

    def cost(r):  # the usual heuristic: sum of absolute values as signed bytes
        return np.abs(np.where(r > 127, r - 256, r)).sum(axis=1)

    choice = np.argmin(np.stack([cost(c) for c in cands]), axis=0)
    raw = bytearray()
    for y in range(h):
        raw.append(int(choice[y]))
        raw += cands[choice[y]][y].astype(np.uint8).tobytes()

    def chunk(tag, data):
        c = tag + data
        return struct.pack(">I", len(data)) + c + struct.pack(">I", zlib.crc32(c) & 0xFFFFFFFF)

    tmp = path + ".part"
    with open(tmp, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n")
        f.write(chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)))
        f.write(chunk(b"IDAT", zlib.compress(bytes(raw), 9)))
        f.write(chunk(b"IEND", b""))
    os.replace(tmp, path)


def read_png(path):
    """8-bit RGB or RGBA, non-interlaced PNG -> uint8 HxWx3."""
    with open(path, "rb") as f:
        data = f.read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path}: not a PNG"
    pos, idat = 8, b""
    while pos < len(data):
        n, tag = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if tag == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and ctype in (2, 6) and interlace == 0, f"{path}: unsupported PNG"
        elif tag == b"IDAT":
            idat += body
        pos += 12 + n
    bpp = 3 if ctype == 2 else 4
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8).reshape(h, 1 + w * bpp)
    out = np.zeros((h, w * bpp), dtype=np.uint8)
    prev = np.zeros(w * bpp, dtype=np.int32)
    for y in range(h):
        f, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 1:
            cur = np.cumsum(line.reshape(w, bpp), axis=0).reshape(-1) % 256
        elif f == 2:
            cur = (line + prev) % 256
        else:
            cur = np.zeros_like(line)
            for x in range(w * bpp):
                a = cur[x - bpp] if x >= bpp else 0
                b, c = prev[x], (prev[x - bpp] if x >= bpp else 0)
                if f == 3:
                    cur[x] = (line[x] + (a + b) // 2) % 256
                else:
                    p = a + b - c
                    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                    pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                    cur[x] = (line[x] + pred) % 256
        out[y] = cur
        prev = cur
    return out.reshape(h, w, bpp)[..., :3]


def save_scene(directory, name, img, ann):
    os.makedirs(directory, exist_ok=True)
    write_png(os.path.join(directory, name + ".png"), img)
    text = json.dumps(ann, indent=1)
    text = re.sub(r"\[\s*(-?\d+),\s*(-?\d+),\s*(-?\d+),\s*(-?\d+)\s*\]", r"[\1, \2, \3, \4]", text)
    with open(os.path.join(directory, name + ".json"), "w") as f:
        f.write(text + "\n")


def load_scene(directory, name):
    with open(os.path.join(directory, name + ".json")) as f:
        ann = json.load(f)
    return read_png(os.path.join(directory, name + ".png")), ann


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--count", type=int, default=1)
    ap.add_argument("--index", type=int, default=0, help="first scene index")
    ap.add_argument("--style", choices=STYLES, help="default: drawn per scene")
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", help="file name (one scene); default scene_SEED_INDEX")
    ap.add_argument("--captions", action="store_true",
                    help="also write NAME.txt with the caption (the prompt `vlrt quantize --calibrate` reads)")
    args = ap.parse_args()
    for i in range(args.index, args.index + args.count):
        img, ann = make_scene(args.seed, i, args.style)
        ann["prompt"] = ann["caption"]  # what to give `vlrt detect --prompt` for this scene
        name = args.name if args.name and args.count == 1 else f"scene_{args.seed}_{i:05d}"
        save_scene(args.out, name, img, ann)
        if args.captions:
            with open(os.path.join(args.out, name + ".txt"), "w") as f:
                f.write(ann["caption"])
        print(f"{name}: {ann['width']}x{ann['height']} {ann['style']}: {ann['caption']}")


if __name__ == "__main__":
    main()
