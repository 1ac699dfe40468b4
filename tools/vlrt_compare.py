"""Runs a model in `vlrt run` on numpy inputs and compares its outputs with a reference.

Shared by the scripts that check vlrt against onnxruntime (collect_real_models.py,
check_ort_transformed.py). Needs numpy only.

    outs = run_vlrt(vlrt, model, feeds, threads)        # name -> array; raises VlrtError
    cols, worst = compare_outputs(reference, outs)       # "name: err/scale" per output, max err/scale
"""
import os
import subprocess
import tempfile
from pathlib import Path

import numpy as np


class VlrtError(RuntimeError):
    """`vlrt run` failed or timed out; the message is its first error line."""


def first_line(text):
    for line in text.strip().splitlines():
        if line.strip():
            return line.strip()[:200]
    return "(no message)"


def _output_file(out_dir: Path, name):
    """vlrt writes OUTPUTNAME.npy with characters unsafe in file names dropped."""
    f = out_dir / f"{name}.npy"
    if f.exists():
        return f
    key = name.replace("/", "").replace(":", "").replace("_", "")
    cands = [p for p in out_dir.glob("*.npy") if p.stem.replace("_", "") in key]
    return cands[0] if cands else None


def run_vlrt(vlrt, model, feeds, threads=2, names=None, timeout=600):
    """Runs `vlrt run MODEL` on FEEDS (name -> array); returns name -> array for NAMES (default:
    every .npy it wrote). Raises VlrtError with vlrt's first error line."""
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = Path(tmp) / "out"
        args = [str(vlrt), "run", str(model), "--no-verify-hash", "-o", str(out_dir), "-t", str(threads)]
        for i, (k, v) in enumerate(feeds.items()):
            f = os.path.join(tmp, f"in{i}.npy")
            np.save(f, v)
            args += ["-i", f"{k}={f}"]
        try:
            r = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise VlrtError(f"timed out after {timeout} s") from None
        if r.returncode != 0:
            msg = (r.stderr or r.stdout).replace(str(model) + ": ", "")
            msg = msg.replace("; `vlrt info` lists every unsupported op of a model", "")
            raise VlrtError(first_line(msg).removeprefix("error: "))
        if names is None:
            return {p.stem: np.load(p) for p in sorted(out_dir.glob("*.npy"))}
        outs = {}
        for n in names:
            f = _output_file(out_dir, n)
            if f is not None:
                outs[n] = np.load(f)
        return outs


def compare_outputs(reference, got):
    """Per reference output "name: max abs error/scale" (scale = max |reference|; 1 for integer
    and bool outputs) and the worst error/scale (inf for a missing or misshapen output)."""
    cols, worst = [], 0.0
    for k, want in reference.items():
        if k not in got:
            cols.append(f"{k}: missing")
            worst = float("inf")
            continue
        g = got[k]
        if g.shape != want.shape:
            cols.append(f"{k}: shape {list(g.shape)} vs {list(want.shape)}")
            worst = float("inf")
            continue
        if want.size == 0:
            cols.append(f"{k}: empty")
            continue
        if want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
            err, scale = float(np.abs(g.astype(np.int64) - want.astype(np.int64)).max()), 1.0
        else:
            g64, w64 = g.astype(np.float64), want.astype(np.float64)
            err = float(np.nanmax(np.abs(g64 - w64))) if np.isfinite(w64).any() else 0.0
            scale = float(np.nanmax(np.abs(w64))) or 1.0
        cols.append(f"{k}: {err:.2e}/{scale:.2e}")
        worst = max(worst, err / scale)
    return cols, worst
