"""Launching into Kubernetes pods through the real kubernetes client and the exec protocol.

The API server is tests/kube_emulator.py (kmock over real HTTP on loopback, with a real
websocket exec that runs the command as a local process): no real kube-apiserver can run
here. The engine is tests/fake_engine.py, which stands in for vLLM.
"""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from launch_helpers import ENGINE, TORCH_PY, free_port, needs_torch

from epdoctor.cli import main
from epdoctor.launch.http import request

pytest.importorskip("kmock")
from kube_emulator import running_pod

NS = "ep"


@pytest.fixture(scope="module")
def cluster(kube_api):
    kube_api.put(running_pod("engine-0", NS), running_pod("engine-1", NS))
    return kube_api


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_serve_in_a_pod_detached(cluster, tmp_path, capsys):
    port = free_port()
    rc = main(
        [
            "run",
            "serve",
            "--pod",
            "engine-0",
            "-n",
            NS,
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--cmd",
            f"python3 {ENGINE} --port {port}",
            "--yes",
            "--no-preflight",
            "--detach",
            "--json",
            "--run-dir",
            str(tmp_path),
            "--url",
            f"http://127.0.0.1:{port}",
            "--startup-budget",
            "30",
        ]
    )
    out = capsys.readouterr()
    doc = json.loads(out.out)
    pgid = doc["pids"]["leader"]
    try:
        assert rc == 0 and doc["gate"]["status"] == "pass", doc
        assert doc["logs"]["leader"] == f"{NS}/engine-0:{tmp_path}/leader.log"
        assert "[pod ep/engine-0]" in out.err  # the exact command was shown per pod
        assert _group_alive(pgid)
    finally:
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while (
        request(f"http://127.0.0.1:{port}/health", timeout_s=1).status
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert request(f"http://127.0.0.1:{port}/health", timeout_s=1).status is None


@needs_torch
def test_kernel_test_in_two_pods(cluster, tmp_path, capsys):
    rc = main(
        [
            "run",
            "kernel-test",
            "-l",
            "app=engine",
            "-n",
            NS,
            "--kubeconfig",
            str(cluster.kubeconfig),
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
            str(tmp_path),
            "--master-port",
            str(free_port()),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["status"] == "pass", doc["gates"]
    assert [r["numerics"] for r in doc["ranks"]] == ["pass", "pass"]
    assert sorted(doc["logs"])[:2] == ["nccl", "node0"]
    assert doc["logs"]["node1"].startswith(f"{NS}/engine-1:")
