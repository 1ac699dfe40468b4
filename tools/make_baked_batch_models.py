"""Two tiny models for the export lint (tests/passes/test_export_lint.cpp) and
`vlrt check-dynamic` (tests/apps/test_cli_check_dynamic.cpp).

Writes tests/fixtures/export_lint/:
  baked_batch.onnx  x[batch,4,8] -> Linear -> view(int(B), 2, -1, 8) -> transpose(1, 2) -> reshape(x.shape).
                    int() turns the batch size into a constant when traced, so the Reshape's shape
                    constant holds 1 at the batch axis and the -1 takes in the batch: at batch 2 it
                    runs without an error and mixes the two items.
  clean.onnx        the same module with view(B, 2, -1, 8) on the traced size: the batch follows.
  baked_window_reverse.onnx
                    x[batch,4,4,8] -> 2x2 windows -> Linear -> back as Swin's window_reverse does, with
                    B = int(windows.shape[0] / ...) -> + x. The reverse Reshape's constant holds 1 at
                    the batch axis and its -1 takes in the batch, so at batch 2 shape inference fails
                    at the Add ([2,4,4,8] and [1,4,4,16]), not at the Reshape.
All are exported at batch 1 with dynamic_axes {0: "batch"}.
Run with Debian's python and torch: `/usr/bin/python3 tools/make_baked_batch_models.py`.
"""
import os
import warnings

import torch

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "export_lint")


class Regroup(torch.nn.Module):
    def __init__(self, bake_batch):
        super().__init__()
        self.bake_batch = bake_batch
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        batch = int(x.shape[0]) if self.bake_batch else x.shape[0]
        y = self.proj(x).view(batch, 2, -1, 8).transpose(1, 2)
        return y.reshape(x.shape)


class WindowReverse(torch.nn.Module):
    """Swin's window_partition, a Linear per window, then window_reverse (which computes B with int())
    and the residual Add."""

    window = 2

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        B, H, W, C = x.shape
        ws = self.window
        windows = x.view(B, H // ws, ws, W // ws, ws, C).permute(0, 1, 3, 2, 4, 5).reshape(-1, ws, ws, C)
        windows = self.proj(windows)
        B = int(windows.shape[0] / (H * W / ws / ws))
        y = windows.view(B, H // ws, W // ws, ws, ws, -1).permute(0, 1, 3, 2, 4, 5).reshape(B, H, W, -1)
        return x + y


def export(name, model, example):
    torch.manual_seed(7)
    model = model().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warning about int() is the point of the fixture
        torch.onnx.export(model, example, os.path.join(OUT, name + ".onnx"), opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})


def main():
    os.makedirs(OUT, exist_ok=True)
    export("baked_batch", lambda: Regroup(True), torch.randn(1, 4, 8))
    export("clean", lambda: Regroup(False), torch.randn(1, 4, 8))
    export("baked_window_reverse", WindowReverse, torch.randn(1, 4, 4, 8))


if __name__ == "__main__":
    main()
