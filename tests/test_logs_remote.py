"""`epdoctor logs --pod`: a pod's log (and --previous) read through the real kubernetes client
from the kmock emulator over HTTP, analyzed like a file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kube_emulator import running

LOGS = Path(__file__).parent / "fixtures" / "logs"
REPO = Path(__file__).resolve().parent.parent
NS = "ml"


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "engine"}},
        "spec": {"containers": [{"name": "vllm", "image": "x"}]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "containerStatuses": [
                {
                    "name": "vllm",
                    "ready": True,
                    "restartCount": 1,
                    "image": "x",
                    "imageID": "x",
                    "state": {"running": {"startedAt": "2026-12-03T10:00:00Z"}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running(tmp_path_factory.mktemp("kube")) as emu:
        emu.put(pod("engine-0"))
        emu.emulator.logs[(NS, "engine-0", "vllm", False)] = (
            LOGS / "real-p4d-socket-fallback.log"
        ).read_text()
        emu.emulator.logs[(NS, "engine-0", "vllm", True)] = (
            LOGS / "composed-vllm-segfault.log"
        ).read_text()
        yield emu


def _logs(cluster, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "NO_COLOR": "1",
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", "logs", "--json", "-n", NS, *args],
        capture_output=True,
        env=env,
        timeout=120,
    )


def test_pod_log(cluster):
    r = _logs(cluster, "--pod", "engine-0")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ranks"][0]["network"] == "Socket"
    assert doc["ranks"][0]["sources"] == [f"pod/{NS}/engine-0"] or doc["ranks"][0]["sources"][
        0
    ].startswith("pod/")
    assert {"T701", "N201"} <= {f["code"] for f in doc["findings"]}


def test_previous_pod_log(cluster):
    doc = json.loads(_logs(cluster, "--pod", "engine-0", "--previous").stdout)
    assert "D101" in {f["code"] for f in doc["findings"]}


def test_missing_pod_is_exit_2(cluster):
    r = _logs(cluster, "--pod", "nope-0")
    assert r.returncode == 2 and r.stderr
