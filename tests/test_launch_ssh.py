"""Launching over real SSH: loopback OpenSSH servers (tests/sshd_fixture.py), real key auth
and known_hosts, the processes started on the far side as the test user by ShellNode."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest
from launch_helpers import ENGINE, TORCH_PY, free_port, needs_torch, shared_dir
from sshd_fixture import user_processes

from epdoctor.cli import main
from epdoctor.launch.http import request

pytestmark = pytest.mark.sshd


@pytest.fixture(scope="module")
def hosts(ssh_lab):
    return [ssh_lab.start_host("launch-a"), ssh_lab.start_host("launch-b")]


def test_serve_over_ssh_then_smoke_then_stop(ssh_lab, hosts, capsys):
    port = free_port()
    rdir = shared_dir()
    rc = main(
        [
            "run",
            "serve",
            *ssh_lab.cli_args(hosts[0].spec),
            "--cmd",
            f"python3 {ENGINE} --port {port}",
            "--yes",
            "--no-preflight",
            "--detach",
            "--json",
            "--run-dir",
            rdir,
            "--url",
            f"http://127.0.0.1:{port}",
            "--startup-budget",
            "30",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    pgid = doc["pids"]["leader"]
    try:
        assert rc == 0 and doc["gate"]["status"] == "pass", doc
        assert doc["logs"]["leader"].endswith(f"{hosts[0].port}:{rdir}/leader.log")
        # it runs as the remote user, in its own session: the SSH connection is gone
        assert user_processes(f"--port {port}")
        assert os.getpgid(user_processes(f"--port {port}")[0]) == pgid
        assert main(["run", "smoke", "--url", f"http://127.0.0.1:{port}", "--yes", "--json"]) == 0
        capsys.readouterr()
    finally:
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while user_processes(f"--port {port}") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not user_processes(f"--port {port}")


def test_serve_over_ssh_stops_the_remote_group_at_the_budget(ssh_lab, hosts, capsys):
    port = free_port()
    rc = main(
        [
            "run",
            "serve",
            *ssh_lab.cli_args(hosts[1].spec),
            "--cmd",
            f"python3 {ENGINE} --port {port} --start-delay 600",
            "--yes",
            "--no-preflight",
            "--json",
            "--run-dir",
            shared_dir(),
            "--url",
            f"http://127.0.0.1:{port}",
            "--startup-budget",
            "2",
        ]
    )
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert rc == 1 and doc["gate"]["code"] == "E702"
    assert "stopped: leader:" in out.err and "process group" in out.err
    assert not user_processes(f"--port {port}")
    assert request(f"http://127.0.0.1:{port}/health", timeout_s=1).status is None


def _others_can_run(path: str | None) -> bool:
    """The test user is not root: the interpreter and every folder above it must be open."""
    if not path:
        return False
    real = os.path.realpath(path)
    parts = Path(real).parents
    return os.stat(real).st_mode & 0o005 == 0o005 and all(os.stat(p).st_mode & 0o001 for p in parts)


@needs_torch
@pytest.mark.skipif(
    not _others_can_run(TORCH_PY), reason="the PyTorch python is not readable by the SSH test user"
)
def test_kernel_test_on_two_ssh_hosts(ssh_lab, hosts, capsys):
    rdir = shared_dir()
    rc = main(
        [
            "run",
            "kernel-test",
            *ssh_lab.cli_args(*(h.spec for h in hosts)),
            "--builtin",
            "--gpus",
            "1",
            "--backend",
            "gloo",
            "--python",
            TORCH_PY,
            "--tokens",
            "16",
            "--test-arg=--hidden=16",
            "--test-arg=--iters=1",
            "--no-expect-efa",
            "--yes",
            "--no-preflight",
            "--json",
            "--run-dir",
            rdir,
            "--master-port",
            str(free_port()),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["status"] == "pass", doc["gates"]
    assert [r["numerics"] for r in doc["ranks"]] == ["pass", "pass"]
    # the probe was staged through the SSH channel and run from the run directory
    assert (Path(rdir) / "probes" / "ep_kernel_test.py").exists()
    assert Path(rdir, "report.json").exists()


def test_a_failing_preflight_stops_the_launch(ssh_lab, hosts, capsys):
    # these hosts have no GPU and no EFA: diagnose finds failures, so nothing may start
    rdir = shared_dir()
    rc = main(
        [
            "run",
            "kernel-test",
            *ssh_lab.cli_args(*(h.spec for h in hosts)),
            "--builtin",
            "--gpus",
            "1",
            "--yes",
            "--run-dir",
            rdir,
        ]
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    assert "preflight failed: nothing started" in out and "FAIL" in out
    assert not list(Path(rdir).iterdir())
