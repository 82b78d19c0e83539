"""`epdoctor logs --pod`: pod logs (--previous, --all-containers, --follow) read through the real
kubernetes client from the kmock emulator over HTTP (tests/kube_emulator.py), analyzed like files.

--follow streams are the emulator's chunked follow=true responses: a line appended to a
container's log reaches epdoctor while the stream is open, and stopping epdoctor must close
the stream (the emulator counts the open ones).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import line_within, wait_until
from kube_emulator import running_pod

LOGS = Path(__file__).parent / "fixtures" / "logs"
REPO = Path(__file__).resolve().parent.parent
NS = "ml"
SOCKET_LOG = (LOGS / "real-p4d-socket-fallback.log").read_text()
EFA_LOG = (LOGS / "real-p5en-gin-proxy.log").read_text()
VERSION_LINE = "ip-172-31-3-153:35113:35113 [0] NCCL INFO NCCL version 2.30.4+cuda13.0\n"
SOCKET_LINE = "ip-172-31-3-153:35113:35146 [0] NCCL INFO Using network Socket\n"


def waiting(pod: dict, container: str, reason: str) -> dict:
    """The pod with one more app container that has not started (no log written yet)."""
    pod["spec"]["containers"].append({"name": container, "image": "x"})
    pod["status"]["containerStatuses"].append(
        {
            "name": container,
            "ready": False,
            "restartCount": 0,
            "image": "x",
            "imageID": "",
            "state": {"waiting": {"reason": reason}},
        }
    )
    return pod


@pytest.fixture(scope="module")
def cluster(kube_api):
    kube_api.put(running_pod("engine-0", NS, restarts=1))
    kube_api.emulator.logs[(NS, "engine-0", "vllm", False)] = SOCKET_LOG
    kube_api.emulator.logs[(NS, "engine-0", "vllm", True)] = (
        LOGS / "composed-vllm-segfault.log"
    ).read_text()
    # two ranks in two containers after a model-fetching init container; one more not started
    multi = running_pod("engine-1", NS, containers=("vllm", "bench"), init_containers=("fetch",))
    kube_api.put(waiting(multi, "metrics", "ContainerCreating"))
    kube_api.emulator.logs[(NS, "engine-1", "fetch", False)] = "downloaded 16 safetensors\n"
    kube_api.emulator.logs[(NS, "engine-1", "vllm", False)] = SOCKET_LOG
    kube_api.emulator.logs[(NS, "engine-1", "bench", False)] = EFA_LOG
    for name in ("live-0", "live-1", "live-2"):
        kube_api.put(running_pod(name, NS, containers=("vllm", "bench")))
    return kube_api


def _env(cluster) -> dict[str, str]:
    return {
        **os.environ,
        "KUBECONFIG": str(cluster.kubeconfig),
        "NO_COLOR": "1",
        "PYTHONPATH": str(REPO),
    }


def _logs(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", "logs", "--json", "-n", NS, *args],
        capture_output=True,
        env=_env(cluster),
        timeout=120,
    )


def _follow(cluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "epdoctor", "logs", "--follow", "--findings-only", "-n", NS, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(cluster),
    )


def _open_streams(cluster, pod: str) -> dict[str, int]:
    return {k[2]: n for k, n in cluster.emulator.log_followers.items() if k[1] == pod and n}


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


def test_all_containers_are_separate_sources(cluster):
    r = _logs(cluster, "--pod", "engine-1", "--all-containers")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    sources = {x["rank_key"]: x["sources"] for x in doc["ranks"]}
    assert sources == {
        "ip-172-31-3-153:35113": [f"pod/{NS}/engine-1/vllm"],
        "deepep-efa-bench-0:70124": [f"pod/{NS}/engine-1/bench"],
    }
    codes = {f["code"]: f for f in doc["findings"]}
    # one analysis over every container: the ranks are compared with each other
    assert "F201" in codes and "1 on EFA" in codes["F201"]["title"]
    assert any(e.startswith(f"pod/{NS}/engine-1/vllm:") for e in codes["T701"]["evidence"])
    # the init container was read; the one that has not started was named, not read
    assert doc["lines"] == 1 + SOCKET_LOG.count("\n") + EFA_LOG.count("\n")
    err = r.stderr.decode()
    assert f"pod/{NS}/engine-1/metrics: not read, it has not started (ContainerCreating)" in err
    seen = [q for q in cluster.emulator.seen if "/pods/engine-1/log" in q]
    assert [q.split("container=")[1].split("&")[0] for q in seen[-3:]] == ["fetch", "vllm", "bench"]


def test_pod_flags_are_checked_before_connecting(cluster):
    before = len(cluster.emulator.seen)
    for args, text in (
        (["--pod", "engine-1", "--all-containers", "-c", "vllm"], "leave out -c"),
        (["--pod", "Engine_1"], "invalid pod name"),
        (["--pod", "engine-1", "-n", "ml;rm"], "invalid namespace"),
        (["--pod", "engine-1", "-c", "../x"], "invalid container name"),
        (["--all-containers", str(LOGS / "composed-nothing.log")], "go with --pod"),
        (["--timeout", "3", "--pod", "engine-1"], "goes with --follow"),
    ):
        r = subprocess.run(
            [sys.executable, "-m", "epdoctor", "logs", *args],
            capture_output=True,
            env=_env(cluster),
            timeout=60,
        )
        assert r.returncode == 2 and text in r.stderr.decode(), (args, r.stderr)
    assert len(cluster.emulator.seen) == before


def test_follow_prints_a_finding_when_its_line_arrives_and_ctrl_c_closes_the_stream(cluster):
    key = (NS, "live-0", "vllm", False)
    cluster.append_log(key, VERSION_LINE)
    p = _follow(cluster, "--pod", "live-0")
    try:
        assert wait_until(lambda: _open_streams(cluster, "live-0") == {"vllm": 1}), p.stderr
        cluster.append_log(key, SOCKET_LINE)
        line = line_within(p)
        assert line.startswith("FAIL T701") and line.rstrip().endswith(f"(pod/{NS}/live-0)")
        assert line_within(p).strip() == f"pod/{NS}/live-0:2: {SOCKET_LINE.strip()}"
        # the finding came while the container was still streaming, not at the end
        assert _open_streams(cluster, "live-0") == {"vllm": 1} and p.poll() is None
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err  # Ctrl-C, as kubectl and stern
    assert wait_until(lambda: not _open_streams(cluster, "live-0"), 5.0), "the stream stayed open"
    assert b"Traceback" not in err


def test_follow_all_containers_until_they_end(cluster):
    vllm, bench = (NS, "live-1", "vllm", False), (NS, "live-1", "bench", False)
    p = _follow(cluster, "--pod", "live-1", "--all-containers")
    try:
        assert wait_until(lambda: _open_streams(cluster, "live-1") == {"vllm": 1, "bench": 1})
        cluster.append_log(vllm, VERSION_LINE + SOCKET_LINE)
        line = line_within(p)
        assert line.startswith("FAIL T701") and line.rstrip().endswith(f"(pod/{NS}/live-1/vllm)")
        assert line_within(p).startswith(f"    pod/{NS}/live-1/vllm:2: ")
        # a rank on EFA in the other container: the ranks disagree, said when its line arrives
        cluster.append_log(bench, EFA_LOG)
        line = line_within(p)
        assert line.startswith("FAIL F201") and line.rstrip().endswith(f"(pod/{NS}/live-1/bench)")
        assert _open_streams(cluster, "live-1") == {"vllm": 1, "bench": 1}
        # the containers end: the API server ends their streams, and so does the follow
        cluster.append_log(vllm, "", end=True)
        cluster.append_log(bench, "", end=True)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert p.returncode == 1, err
    # what waits for the end of the log comes last
    assert out.decode().splitlines()[-1].startswith("UNKNOWN T201")
    assert not _open_streams(cluster, "live-1")


def test_follow_timeout_stops_the_stream(cluster):
    cluster.append_log((NS, "live-2", "vllm", False), VERSION_LINE)
    t0 = time.monotonic()
    args = ["--json", "-f", "--timeout", "2", "-n", NS, "--pod", "live-2"]
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "logs", *args],
        capture_output=True,
        env=_env(cluster),
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert 2 <= time.monotonic() - t0 < 30
    doc = json.loads(r.stdout)
    assert [f["code"] for f in doc["findings"]] == ["T701"]
    assert doc["findings"][0]["severity"] == "unknown"  # one version line proves no network
    assert not _open_streams(cluster, "live-2")


def _stern(cluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "epdoctor", "logs", "-f", "-n", NS, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(cluster),
    )


def test_selector_follow_streams_lines_per_pod_with_findings_inline(cluster):
    """`logs -l app=... -f` as stern: every pod the selector names, each line prefixed by its
    pod, the finding right under the line that proved it, the rank summary after Ctrl-C."""
    for name in ("sel-0", "sel-1"):
        pod = running_pod(name, NS)
        pod["metadata"].setdefault("labels", {})["app"] = "stern-test"
        cluster.put(pod)
        cluster.append_log((NS, name, "vllm", False), VERSION_LINE)
    p = _stern(cluster, "-l", "app=stern-test")
    try:
        assert wait_until(
            lambda: _open_streams(cluster, "sel-0") and _open_streams(cluster, "sel-1")
        ), p.stderr
        got = {line_within(p).rstrip() for _ in range(2)}
        assert got == {
            f"pod/{NS}/sel-0 {VERSION_LINE.strip()}",
            f"pod/{NS}/sel-1 {VERSION_LINE.strip()}",
        }
        cluster.append_log((NS, "sel-1", "vllm", False), SOCKET_LINE)
        assert line_within(p).rstrip() == f"pod/{NS}/sel-1 {SOCKET_LINE.strip()}"
        finding = line_within(p)
        assert finding.startswith("  ^ FAIL T701") and f"(pod/{NS}/sel-1)" in finding
    finally:
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 130, err
    assert b"\x1b[" not in out, "NO_COLOR: no escape codes"
    tail = out.decode()
    assert "logs: FAIL" in tail and "ranks" in tail, tail[-2000:]  # the summary on exit
    assert not _open_streams(cluster, "sel-0") and not _open_streams(cluster, "sel-1")


def test_since_and_tail_reach_the_api_server_as_kubectl_sends_them(cluster):
    r = _logs(cluster, "--pod", "engine-0", "--tail", "3", "--since", "1h30m")
    assert r.returncode in (0, 1), r.stderr
    asked = [s for s in cluster.emulator.seen if "/pods/engine-0/log" in s][-1]
    assert "tailLines=3" in asked and "sinceSeconds=5400" in asked
    doc = json.loads(r.stdout)
    assert doc["lines"] <= 3
    bad = _logs(cluster, "--pod", "engine-0", "--since", "ten minutes")
    assert bad.returncode == 2 and b"--since" in bad.stderr and b"Traceback" not in bad.stderr
    assert _logs(cluster, "--since", "5m", "x.log").returncode == 2
