"""Shared by the launch tests: which Python has PyTorch, free loopback ports, the fake engine."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE = str(Path(__file__).parent / "fake_engine.py")  # stands in for the engine


def torch_python() -> str | None:
    """This interpreter if it has torch, else EPDOCTOR_TORCH_PYTHON (CI makes one), else None."""
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    env = os.environ.get("EPDOCTOR_TORCH_PYTHON")
    if env and subprocess.run([env, "-c", "import torch"], capture_output=True).returncode == 0:
        return env
    return None


TORCH_PY = torch_python()
needs_torch = pytest.mark.skipif(
    TORCH_PY is None,
    reason="PyTorch not installed here and EPDOCTOR_TORCH_PYTHON not set "
    "(pip install torch==2.13.0 into a venv and point EPDOCTOR_TORCH_PYTHON at its python)",
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
