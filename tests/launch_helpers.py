"""Shared by the launch tests: which Python has PyTorch, free loopback ports, the fake engine."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ENGINE = str(Path(__file__).parent / "fake_engine.py")  # stands in for the engine
ROOT = Path(__file__).resolve().parent.parent


def cli_env() -> dict[str, str]:
    """The environment for `python -m epdoctor` run from the checkout in a subprocess."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a zombie is gone for our purposes)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def shared_dir(prefix: str = "epd-launch-") -> str:
    """A run folder the SSH tests' remote user can write its logs into."""
    d = tempfile.mkdtemp(prefix=prefix)
    os.chmod(d, 0o777)
    return d


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
