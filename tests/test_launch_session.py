"""The launch session the terminal app drives: run on one thread, stopped from another.

The nodes are ShellNodes over a local `sh -c` (the remote launch protocol for real: setsid
process groups, .rc files, tail offsets), named and kinded as SSH hosts; the engine is
tests/fake_engine.py. The app's own pilot tests (tests/test_tui_remote.py) run the same
session over real sshd hosts and emulated pods.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from launch_helpers import free_port

from epdoctor.launch.gates import NetworkExpectation
from epdoctor.launch.kernel_test import KernelTestConfig
from epdoctor.launch.launcher import LocalNode
from epdoctor.launch.serve import ServeConfig, describe
from epdoctor.launch.session import Launch, Session
from epdoctor.launch.shell_node import ShellNode

ENGINE = str(Path(__file__).parent / "fake_engine.py")


def local_exec(cmd: str, stdin: bytes, timeout: float):
    p = subprocess.run(
        ["sh", "-c", cmd], input=stdin, capture_output=True, timeout=timeout, check=False
    )
    return p.returncode, p.stdout, p.stderr


def lost_exec(cmd: str, stdin: bytes, timeout: float):
    return None, b"", b"connection to far-b lost: EOF"  # how a dropped SSH channel answers


class Closing(ShellNode):
    """A ShellNode that remembers being closed (a target's close drops its connection)."""

    closed = False

    def close(self) -> None:
        self.closed = True


def group_alive(pgid: int) -> bool:
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                rest = Path(f"/proc/{d}/stat").read_text().rsplit(") ", 1)[1].split()
            except (OSError, IndexError):
                continue
            if rest[0] != "Z" and int(rest[2]) == pgid:
                return True
    return False


def serve_launch(tmp_path: Path, nodes: list, port: int) -> Launch:
    engine = f"{sys.executable} {ENGINE} --start-delay 600"
    cfg = ServeConfig(
        nodes=nodes,
        leader_cmd=f"{engine} --port {port}",
        worker_cmd=f"{engine} --port {free_port()}",
        url=f"http://127.0.0.1:{port}",
        run_dir=str(tmp_path),
        budget_s=300,
    )
    return Launch("serve", describe(cfg), None, {}, cfg, nodes)


def until(pred, timeout: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    return pred()


def test_serve_on_two_nodes_stopped_from_another_thread(tmp_path):
    a, b = Closing("far-a", "ssh", local_exec), Closing("far-b", "ssh", local_exec)
    launch = serve_launch(tmp_path, [a, b], free_port())
    assert launch.where == "2 SSH hosts (far-a, far-b)" and launch.remote
    assert [launch.node_of(p) for p in ("leader", "worker1", "epdoctor")] == [
        "far-a",
        "far-b",
        None,
    ]
    lines: list[tuple[str, str]] = []
    gates: list[tuple[str, str]] = []
    session = Session(
        launch, lambda p, ln: lines.append((p, ln)), lambda g, s, *_: gates.append((g, s))
    )
    out: list = []
    worker = threading.Thread(target=lambda: out.append(session.run()))
    worker.start()
    assert until(lambda: len(session.procs) == 2 and ("ready", "waiting") in gates)
    pgids = [p.pid for p in session.procs]
    assert all(group_alive(g) for g in pgids)
    said = session.stop()
    worker.join(30)
    assert not worker.is_alive()
    assert out[0].status == "interrupted"
    assert [ln.split(" process group")[0] for ln in said] == ["leader: far-a", "worker1: far-b"]
    assert out[0].stopped == said  # each stopped once, told the same way both times
    assert not any(group_alive(g) for g in pgids)
    assert a.closed and b.closed  # the connections go once everything is stopped
    assert session.stop() == said  # a later stop has nothing left to reach


def test_a_stop_before_the_run_starts_nothing(tmp_path):
    launch = serve_launch(tmp_path, [Closing("far-a", "ssh", local_exec)], free_port())
    session = Session(launch)
    assert session.stop() == []
    out = session.run()
    assert out.status == "interrupted" and out.stopped == [] and session.procs == []
    assert not list(tmp_path.iterdir())  # not even a log file
    assert launch.nodes[0].closed


def test_a_node_that_cannot_start_stops_the_one_that_did(tmp_path):
    a, b = Closing("far-a", "ssh", local_exec), Closing("far-b", "ssh", lost_exec)
    session = Session(serve_launch(tmp_path, [a, b], free_port()))
    out = session.run()
    assert out.status == "error" and "far-b: could not start worker1" in out.error
    assert "connection to far-b lost" in out.error
    assert len(out.stopped) == 1 and out.stopped[0].startswith("leader: far-a process group")
    assert not group_alive(session.procs[0].pid)
    assert a.closed and b.closed


def test_kernel_test_panes_name_their_node():
    nodes = [ShellNode("p5en-a", "ssh", local_exec), ShellNode("p5en-b", "ssh", local_exec)]
    cfg = KernelTestConfig(
        "builtin", nodes, gpus=8, run_dir="/tmp/x", expect=NetworkExpectation(efa=True)
    )
    launch = Launch("kernel-test", [], None, {}, cfg, nodes)
    assert launch.node_of("rank7") == "p5en-a" and launch.node_of("rank8") == "p5en-b"
    assert launch.node_of("rank12 nccl") == "p5en-b" and launch.node_of("node1") == "p5en-b"
    assert launch.node_of("rank16") is None  # no such node: no label rather than a wrong one
    local = Launch("kernel-test", [], None, {}, cfg, [LocalNode()])
    assert local.node_of("rank0") is None and local.where == "this host"
