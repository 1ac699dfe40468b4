import os
import pathlib

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def repo() -> pathlib.Path:
    return REPO


@pytest.fixture(scope="session")
def vlrt_cli() -> str:
    """The vlrt program of the same build (ctest sets VLRT_BINARY)."""
    path = os.environ.get("VLRT_BINARY", str(REPO / "build" / "vlrt"))
    assert os.path.exists(path), f"{path} not found: build vlrt or set VLRT_BINARY"
    return path
