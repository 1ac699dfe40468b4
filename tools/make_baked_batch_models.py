"""Two tiny models for the export lint (tests/passes/test_export_lint.cpp) and
`vlrt check-dynamic` (tests/apps/test_cli_check_dynamic.cpp).

Writes tests/fixtures/export_lint/:
  baked_batch.onnx  x[batch,4,8] -> Linear -> view(int(B), 2, -1, 8) -> transpose(1, 2) -> reshape(x.shape).
                    int() turns the batch size into a constant when traced, so the Reshape's shape
                    constant holds 1 at the batch axis and the -1 takes in the batch: at batch 2 it
                    runs without an error and mixes the two items.
  clean.onnx        the same module with view(B, 2, -1, 8) on the traced size: the batch follows.
Both are exported at batch 1 with dynamic_axes {0: "batch"}.
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


def export(name, bake_batch):
    torch.manual_seed(7)
    model = Regroup(bake_batch).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warning about int() is the point of the fixture
        torch.onnx.export(model, torch.randn(1, 4, 8), os.path.join(OUT, name + ".onnx"), opset_version=17,
                          input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})


def main():
    os.makedirs(OUT, exist_ok=True)
    export("baked_batch", True)
    export("clean", False)


if __name__ == "__main__":
    main()
