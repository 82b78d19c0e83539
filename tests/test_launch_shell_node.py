"""The remote launch protocol (ShellNode) run for real through `sh -c` on this host.

SSH hosts and Kubernetes pods give ShellNode an exec function over their own
transport; here the exec is a local `sh -c`, so the shell side (setsid process
groups, the .rc file, tail offsets, quoting, staging the probe files) is the real one.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from launch_helpers import TORCH_PY, free_port, needs_torch

from epdoctor.launch.gates import NetworkExpectation
from epdoctor.launch.kernel_test import KernelTestConfig, KernelTestRun, build_specs, run_to_end
from epdoctor.launch.launcher import ProcSpec
from epdoctor.launch.shell_node import ShellNode
from epdoctor.model import Status


def local_exec(cmd: str, stdin: bytes, timeout: float):
    p = subprocess.run(
        ["sh", "-c", cmd], input=stdin, capture_output=True, timeout=timeout, check=False
    )
    return p.returncode, p.stdout, p.stderr


@pytest.fixture
def node():
    return ShellNode("far", "sh", local_exec)


def _live_members(pgid: int) -> list[int]:
    """Processes of the group that are not zombies (a zombie has already exited)."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                rest = Path(f"/proc/{d}/stat").read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if rest[0] != "Z" and int(rest[2]) == pgid:
                out.append(int(d))
    return out


def wait_rc(proc, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rc = proc.poll()
        if rc is not None:
            return rc
        time.sleep(0.05)
    return None


def test_start_follow_exit_code_and_quoting(node, tmp_path):
    weird = 'it\'s a "test" $HOME `x` ; rm -rf /'
    spec = ProcSpec(
        "r0",
        ("sh", "-c", 'printf "%s|%s\\n" "$1" "$EPD_X"; exit 3', "sh", weird),
        str(tmp_path / "logs" / "r0.log"),
        {"EPD_X": "a b;c"},
    )
    p = node.start(spec)
    assert p.pid and wait_rc(p) == 3
    assert p.read_new() == f"{weird}|a b;c\n".encode()
    assert p.read_new() == b""
    assert "had exited" in p.stop()


def test_stop_reaches_the_whole_group(node, tmp_path):
    spec = ProcSpec(
        "r0", ("sh", "-c", "sleep 300 & sleep 300 & echo up; wait"), str(tmp_path / "r0.log")
    )
    p = node.start(spec)
    deadline = time.monotonic() + 5
    log = tmp_path / "r0.log"
    while time.monotonic() < deadline and not (log.exists() and b"up" in log.read_bytes()):
        time.sleep(0.05)
    assert p.poll() is None
    line = p.stop(grace_s=2)
    assert "stopped (SIGTERM)" in line and str(p.pid) in line
    assert not _live_members(p.pid)
    assert p.poll() is not None


def test_files_listing_and_staging(node, tmp_path):
    node.put_file(str(tmp_path / "a" / "b.txt"), b"hello")
    assert node.read_file(str(tmp_path / "a" / "b.txt"), 2) == b"llo"
    assert node.list_dir(str(tmp_path / "a")) == ["b.txt"]
    assert node.list_dir(str(tmp_path / "none")) == []
    assert node.read_file(str(tmp_path / "none.txt")) == b""


def test_kernel_test_command_is_the_staged_probe_on_remote_nodes(node, tmp_path):
    cfg = KernelTestConfig(kind="builtin", nodes=[node], gpus=2, run_dir="/r")
    argv = build_specs(cfg)[0].argv
    assert "/r/probes/ep_kernel_test.py" in argv


@needs_torch
def test_kernel_test_over_two_shell_nodes(tmp_path):
    nodes = [ShellNode("h0", "sh", local_exec), ShellNode("h1", "sh", local_exec)]
    cfg = KernelTestConfig(
        kind="builtin",
        nodes=nodes,
        gpus=1,
        run_dir=str(tmp_path),
        python=TORCH_PY,
        backend="gloo",
        test_args=("--num-tokens", "16", "--hidden", "16", "--iters", "1"),
        master_port=free_port(),
        timeout_s=90,
        expect=NetworkExpectation(efa=None, multi_node=True),
    )
    report = run_to_end(KernelTestRun(cfg))
    assert (tmp_path / "probes" / "ep_kernel_test.py").exists()  # staged, then run from there
    assert report.status is Status.PASS, [g.to_json() for g in report.gates]
    assert [r["numerics"] for r in report.per_rank] == ["pass", "pass"]
