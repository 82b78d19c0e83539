"""`epdoctor run serve` ended by SIGTERM or SIGHUP stops the engine it started, here and over SSH.

Real processes only: epdoctor runs as a subprocess (`python -m epdoctor run serve`), the engine
is tests/fake_engine.py in its own session (as vLLM is: a signal to epdoctor never reaches it),
the remote host is a real loopback OpenSSH server (tests/sshd_fixture.py). A dropped SSH session
is a tmux session killed under epdoctor: SIGHUP, and a terminal that is gone. `--detach` leaves
the engine running and prints the command that stops it; the test runs that command.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch_helpers import ENGINE, alive, cli_env, free_port, shared_dir
from sshd_fixture import user_processes

ROOT = Path(__file__).resolve().parent.parent


def _engines(port: int) -> list[int]:
    """The fake engine processes for `port`, by pgrep (any user; not epdoctor or bash -c)."""
    p = subprocess.run(
        ["pgrep", "-f", rf"^\S*python\S* \S*fake_engine\.py --port {port}( |$)"],
        capture_output=True,
        text=True,
    )
    return [int(x) for x in p.stdout.split()]


def _serve_argv(port: int, run_dir: str, *extra: str, delay: float = 0.0) -> list[str]:
    cmd = f"{sys.executable} {ENGINE} --port {port}" + (f" --start-delay {delay}" if delay else "")
    return [
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
        run_dir,
        "--url",
        f"http://127.0.0.1:{port}",
        "--startup-budget",
        "120",
        *extra,
    ]


def _wait(pred, timeout: float = 30.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _engine_pid(log: Path) -> int:
    """The engine's own pid, from its first log line ("... starting, pid N")."""

    def pid() -> int | None:
        m = re.search(r"starting, pid (\d+)", log.read_text() if log.exists() else "")
        return int(m.group(1)) if m else None

    return _wait(pid, what=f"the engine's pid in {log}")


def _gone(pids: list[int], timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return True
        time.sleep(0.1)
    return False


# --------------------------------------------------------------------------- this host
@pytest.mark.parametrize(
    "sig,phase",
    [
        (signal.SIGTERM, "ready"),  # following the logs of a ready engine
        (signal.SIGHUP, "ready"),
        (signal.SIGTERM, "starting"),  # still waiting for readiness
        (signal.SIGHUP, "starting"),
    ],
)
def test_sigterm_and_sighup_stop_the_engine_on_this_host(tmp_path, sig, phase):
    port = free_port()
    delay = 60.0 if phase == "starting" else 0.0
    p = subprocess.Popen(
        _serve_argv(port, str(tmp_path), delay=delay),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=cli_env(),
        cwd=ROOT,
    )
    try:
        pid = _engine_pid(tmp_path / "leader.log")
        if phase == "ready":
            _wait(lambda: "listening on" in (tmp_path / "leader.log").read_text(), what="listening")
            time.sleep(0.5)  # epdoctor saw it ready and follows the logs
        assert alive(pid) and _engines(port) == [pid]
        p.send_signal(sig)
        out, _ = p.communicate(timeout=40)
    finally:
        if p.poll() is None:
            p.kill()
    text = out.decode()
    name = signal.Signals(sig).name
    assert p.returncode == 128 + sig, text
    assert "stopped: leader: pid" in text and "process group stopped (SIGTERM)" in text, text
    assert f"interrupted ({name}): everything epdoctor started is stopped" in text
    assert _gone([pid]) and _engines(port) == []


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_a_dropped_terminal_stops_the_engine(tmp_path):
    """The SSH session of the operator drops: its terminal goes and epdoctor gets SIGHUP."""
    port = free_port()
    session = f"epd-hup-{os.getpid()}"
    argv = [a for a in _serve_argv(port, str(tmp_path)) if a != "--no-live"]  # live panes
    cmd = f"cd {ROOT} && PYTHONPATH={ROOT} {shlex.join(argv)}; echo EXIT=$? > {tmp_path}/rc"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "80", "-y", "24", cmd], check=True
    )
    try:
        pid = _engine_pid(tmp_path / "leader.log")
        _wait(lambda: "listening on" in (tmp_path / "leader.log").read_text(), what="listening")
        time.sleep(0.5)
        assert alive(pid)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert _gone([pid]), "the engine outlived the terminal epdoctor ran in"
    assert _engines(port) == []


def test_detach_leaves_it_running_and_says_how_to_stop_it(tmp_path):
    port = free_port()
    p = subprocess.run(
        _serve_argv(port, str(tmp_path), "--detach"),
        capture_output=True,
        text=True,
        env=cli_env(),
        cwd=ROOT,
        timeout=60,
    )
    pid = _engine_pid(tmp_path / "leader.log")
    try:
        assert p.returncode == 0, p.stdout + p.stderr
        time.sleep(0.5)
        assert alive(pid) and _engines(port) == [pid]  # epdoctor exited, the engine did not
        lines = p.stdout.splitlines()
        i = lines.index(next(ln for ln in lines if "Stop it later with:" in ln))
        stop = lines[i + 1].strip()
        assert stop == f"kill -s TERM -- -{os.getpgid(pid)}"
        subprocess.run(["sh", "-c", stop], check=True)  # what the operator would type
        assert _gone([pid]) and _engines(port) == []
    finally:
        if alive(pid):
            os.killpg(os.getpgid(pid), signal.SIGKILL)


def test_an_error_after_the_first_node_started_stops_it(tmp_path, capsys):
    """Two nodes, the second cannot start (its log folder is a file): the first is stopped."""
    from epdoctor.launch.launcher import LaunchError, LocalNode, ProcSpec

    port = free_port()

    class Broken(LocalNode):
        def start(self, spec: ProcSpec):
            raise LaunchError(f"{spec.name}: cannot start (test)")

    from epdoctor.commands import run as runcmd

    nodes = [LocalNode("a"), Broken("b")]
    orig = runcmd.nodes_from_args
    runcmd.nodes_from_args = lambda args, plan=None: nodes  # type: ignore[assignment]
    try:
        from epdoctor.cli import main

        rc = main(
            [
                "run",
                "serve",
                "--cmd",
                f"{sys.executable} {ENGINE} --port {port}",
                "--worker-cmd",
                "sleep 600",
                "--yes",
                "--no-preflight",
                "--json",
                "--run-dir",
                str(tmp_path),
                "--url",
                f"http://127.0.0.1:{port}",
            ]
        )
    finally:
        runcmd.nodes_from_args = orig  # type: ignore[assignment]
    err = capsys.readouterr().err
    assert rc == 2 and "epdoctor run serve: worker1: cannot start (test)" in err, err
    m = re.search(r"stopped: leader: pid (\d+) process group", err)
    assert m, err
    with pytest.raises(ProcessLookupError):  # the whole group is gone
        os.killpg(int(m.group(1)), 0)
    assert _engines(port) == []


# --------------------------------------------------------------------------- over SSH
pytest_sshd = pytest.mark.sshd


@pytest.fixture(scope="module")
def host(ssh_lab):
    return ssh_lab.start_host("signals")


@pytest_sshd
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_stop_the_engine_on_the_ssh_host(ssh_lab, host, sig):
    port = free_port()
    rdir = shared_dir("epd-sig-")
    argv = _serve_argv(port, rdir, *ssh_lab.cli_args(host.spec))
    argv[argv.index("--cmd") + 1] = f"python3 {ENGINE} --port {port}"
    p = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=cli_env(), cwd=ROOT
    )
    try:
        _wait(lambda: user_processes(f"--port {port}"), what="the engine on the SSH host")
        _wait(lambda: "listening on" in Path(rdir, "leader.log").read_text(), what="listening")
        time.sleep(0.5)
        p.send_signal(sig)
        out, _ = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    text = out.decode()
    assert p.returncode == 128 + sig, text
    assert f"127.0.0.1:{host.port} process group" in text and "stopped (SIGTERM)" in text, text
    assert _wait(lambda: not user_processes(f"--port {port}"), what="the remote engine gone")


@pytest_sshd
def test_detach_over_ssh_prints_the_ssh_command_that_stops_it(ssh_lab, host):
    port = free_port()
    rdir = shared_dir("epd-sig-")
    argv = _serve_argv(port, rdir, "--detach", *ssh_lab.cli_args(host.spec))
    argv[argv.index("--cmd") + 1] = f"python3 {ENGINE} --port {port}"
    p = subprocess.run(argv, capture_output=True, text=True, env=cli_env(), cwd=ROOT, timeout=60)
    pids = user_processes(f"--port {port}")
    try:
        assert p.returncode == 0, p.stdout + p.stderr
        assert pids, "the engine is not running after --detach"
        lines = p.stdout.splitlines()
        i = lines.index(next(ln for ln in lines if "Stop it later with:" in ln))
        stop = lines[i + 1].strip()
        pgid = os.getpgid(pids[0])
        assert stop == (
            f"ssh -i {ssh_lab.key} -o UserKnownHostsFile={ssh_lab.known_hosts} "
            f"-p {host.port} epdoctor-ssh@127.0.0.1 'kill -s TERM -- -{pgid}'"
        )
        # the operator's command, with the lab's ssh config so the client reads no other
        words = shlex.split(stop)
        words[1:1] = ["-F", str(ssh_lab.ssh_config), "-o", "BatchMode=yes"]
        r = subprocess.run(words, capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert _wait(lambda: not user_processes(f"--port {port}"), what="the remote engine gone")
    finally:
        for pid in user_processes(f"--port {port}"):
            os.kill(pid, signal.SIGKILL)
