"""`epdoctor run` in real terminals and under Ctrl-C: real processes, real signals, tmux."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch_helpers import ENGINE, TORCH_PY, alive, cli_env, free_port, needs_torch

ROOT = Path(__file__).resolve().parent.parent


def test_ctrl_c_stops_everything_started_and_says_so(tmp_path):
    port = free_port()
    cmd = f"{sys.executable} {ENGINE} --port {port} --start-delay 60"
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "epdoctor",
            "run",
            "serve",
            "--cmd",
            cmd,
            "--yes",
            "--no-preflight",
            "--no-live",
            "--run-dir",
            str(tmp_path),
            "--url",
            f"http://127.0.0.1:{port}",
            "--startup-budget",
            "120",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        cwd=ROOT,
    )
    log = tmp_path / "leader.log"
    deadline = time.monotonic() + 20
    pid = None
    while time.monotonic() < deadline and pid is None:
        m = re.search(r"pid (\d+)", log.read_text() if log.exists() else "")
        pid = int(m.group(1)) if m else None
        time.sleep(0.1)
    assert pid and alive(pid)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=30)
    text = out.decode()
    assert p.returncode == 130, text
    assert "stopped: leader: pid" in text and "everything epdoctor started is stopped" in text
    time.sleep(0.2)
    assert not alive(pid)


@needs_torch
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_live_panes_in_a_real_terminal(tmp_path):
    session = f"epd-{os.getpid()}"
    cmd = (
        f"cd {ROOT} && PYTHONPATH={ROOT} {sys.executable} -m epdoctor run kernel-test "
        f"--builtin --gpus 2 --backend gloo --python {TORCH_PY} --tokens 16 "
        f"--test-arg=--hidden=16 --test-arg=--iters=1 --yes --no-preflight "
        f"--run-dir {tmp_path}; echo EXIT=$?; sleep 30"
    )
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "180", "-y", "60", cmd], check=True
    )
    try:
        screen = ""
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and "EXIT=" not in screen:
            time.sleep(0.5)
            screen = subprocess.run(
                ["tmux", "capture-pane", "-p", "-t", session, "-S", "-200"],
                capture_output=True,
                text=True,
            ).stdout
        assert "EXIT=0" in screen, screen
        assert re.search(r"rank0 \(\d+ lines\)", screen) and re.search(
            r"rank1 \(\d+ lines\)", screen
        )
        assert "kernel test: pass" in screen
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
