"""`epdoctor diagnose --nodes -l ...`: one probe Job per node, shown first, cleaned up after.

Over the emulator (tests/kube_emulator.py) with the real client in the real CLI.
The emulator stands in for the Job controller and the kubelet too: a created
Job gets a pod whose container command really runs here, with its hostPath
mounts laid out as symlinks to this machine's paths (this machine is the node),
and deleting the Job collects its pod as the garbage collector would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from kube_emulator import running

from epdoctor.targets.base import ProbeOptions
from epdoctor.targets.kube_job import HOST_MOUNTS, job_object, shown

REPO = Path(__file__).resolve().parent.parent
SELECTOR = "node.kubernetes.io/instance-type=p5en.48xlarge"


def _node(name: str, itype: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"node.kubernetes.io/instance-type": itype, "kubernetes.io/hostname": name},
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "16"}},
    }


@pytest.fixture()
def cluster(tmp_path):
    with running(tmp_path) as emu:
        emu.emulator.host_root = tmp_path / "node-root"
        emu.put(
            _node("ip-10-0-1-10.ec2.internal", "p5en.48xlarge"),
            _node("ip-10-0-1-11.ec2.internal", "p5en.48xlarge"),
            _node("ip-10-0-9-99.ec2.internal", "p5.48xlarge"),
        )
        yield emu


def run_cli(cluster, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", "diagnose", *args],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=REPO,
        input=stdin,
    )


def remaining(cluster, plural: str, group: str = "") -> list[str]:
    em = cluster.emulator
    return [
        name
        for (res, _ns, name), obj in list(em.objects.items())
        if res.plural == plural and res.group == group and not obj.deleted
    ]


def test_one_job_per_selected_node_gathered_and_cleaned(cluster):
    r = run_cli(cluster, "--nodes", "-l", SELECTOR, "-n", "epdoctor", "--yes", "--json")
    assert r.stdout.strip(), r.stderr[-2000:]
    doc = json.loads(r.stdout)
    targets = {t["target"]["name"]: t for t in doc["targets"]}
    assert sorted(targets) == ["ip-10-0-1-10.ec2.internal", "ip-10-0-1-11.ec2.internal"]
    for t in targets.values():
        assert t["target"]["kind"] == "job"
        assert t["error"] is None, t["error"]
        assert t["facts"], "the probe's document came back through the pod log"
        assert "K301" not in {f["code"] for f in t["findings"]}
    # what will be created is said in one line; the YAML only when asked for
    assert "will create 2 Job(s) in namespace epdoctor" in r.stderr
    assert "ip-10-0-1-10.ec2.internal" in r.stderr and "kind: Job" not in r.stderr
    posts = [s for s in cluster.emulator.seen if s.startswith("POST ")]
    assert len(posts) == 2 and all("/apis/batch/v1/namespaces/epdoctor/jobs" in p for p in posts)
    # nothing is left behind: Jobs deleted, their pods collected
    assert remaining(cluster, "jobs", "batch") == []
    assert remaining(cluster, "pods") == []


def test_refuses_without_a_terminal_or_yes(cluster):
    r = run_cli(cluster, "--nodes", "-l", SELECTOR, "-n", "epdoctor", stdin="")
    assert r.returncode == 2
    assert "pass --yes" in r.stderr
    assert "will create 2 Job(s)" in r.stderr, "what would be created is still said"
    assert not [s for s in cluster.emulator.seen if s.startswith("POST ")]


def test_show_manifests_prints_the_exact_jobs_before_asking(cluster):
    r = run_cli(cluster, "--nodes", "-l", SELECTOR, "-n", "epdoctor", "--show-manifests", stdin="")
    assert r.returncode == 2 and "pass --yes" in r.stderr
    assert "kind: Job" in r.stderr and "operator: Exists" in r.stderr
    assert "kubernetes.io/hostname: ip-10-0-1-10.ec2.internal" in r.stderr


def test_dry_run_prints_the_jobs_on_stdout_and_creates_none(cluster):
    import yaml

    r = run_cli(cluster, "--nodes", "-l", SELECTOR, "-n", "epdoctor", "--dry-run")
    assert r.returncode == 0, r.stderr
    docs = list(yaml.safe_load_all(r.stdout))
    assert [d["kind"] for d in docs] == ["Job", "Job"]
    assert "none created" in r.stderr
    assert not [s for s in cluster.emulator.seen if s.startswith("POST ")]


def test_nodes_needs_a_valid_selector(cluster):
    r = run_cli(cluster, "--nodes", "-n", "epdoctor", "--yes")
    assert r.returncode == 2 and "--nodes needs -l SELECTOR" in r.stderr
    r = run_cli(cluster, "--nodes", "-l", "a=b;c", "--yes")
    assert r.returncode == 2 and "invalid label selector" in r.stderr
    r = run_cli(
        cluster, "--nodes", "-l", "node.kubernetes.io/instance-type=p6-b300.48xlarge", "--yes"
    )
    assert r.returncode == 2 and "no nodes match" in r.stderr


def test_job_object_is_read_only_and_tolerates_taints():
    job = job_object("n1", "abc123", 0, "epdoctor", "img:1", ProbeOptions(timeout_s=30))
    spec = job["spec"]["template"]["spec"]
    c = spec["containers"][0]
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert spec["nodeSelector"] == {"kubernetes.io/hostname": "n1"}
    assert spec["automountServiceAccountToken"] is False
    assert all(m["readOnly"] for m in c["volumeMounts"])
    assert {v["hostPath"]["path"] for v in spec["volumes"]} == set(HOST_MOUNTS)
    assert "privileged" not in c["securityContext"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert c["command"][:2] == ["python3", "-c"] and c["command"][-2:] == ["--root", "/host"]
    assert job["spec"]["ttlSecondsAfterFinished"] > 0 and job["spec"]["backoffLimit"] == 0
    assert len(job["metadata"]["name"]) <= 63
    assert (
        "epdoctor node probe"
        in shown(job)["spec"]["template"]["spec"]["containers"][0]["command"][2]
    )
