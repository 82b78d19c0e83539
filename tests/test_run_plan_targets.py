"""`epdoctor run --plan PLAN` launches where the plan says: a Kubernetes plan's pods (through
the real kubernetes client against tests/kube_emulator.py, whose exec runs the command as a
local process), never this host in their place; a plan for several bare nodes is refused
with the flag to pass. Here the plan's pods exist and epdoctor did not apply them (or
--attach says to use what is there): the launch runs in them as they are."""

from __future__ import annotations

import json
import os
import signal
import time

import pytest
from launch_helpers import ENGINE, free_port

from epdoctor.cli import main
from epdoctor.launch.http import request

pytest.importorskip("kmock")
from kube_emulator import running_pod

NS = "planned"


@pytest.fixture(scope="module")
def cluster(kube_api):
    kube_api.put(
        running_pod("vllm-deepep-0", NS),
        running_pod("vllm-deepep-1", NS),
        running_pod("solo-0", NS),
        running_pod("engine-0", "other"),
    )
    return kube_api


def _plan(tmp_path, capsys, *flags: str) -> str:
    out = tmp_path / "plan"
    rc = main(["plan", "--no-input", "--num-experts", "128", "-o", str(out), *flags])
    capsys.readouterr()
    assert rc == 0
    return str(out / "plan.json")


def test_kernel_test_on_a_kubernetes_plan_runs_in_its_pods(cluster, tmp_path, capsys):
    plan = _plan(tmp_path, capsys, "-n", NS)
    rc = main(["run", "kernel-test", "--plan", plan, "--kubeconfig", str(cluster.kubeconfig),
               "--dry-run", "--no-preflight"])  # fmt: skip
    err = capsys.readouterr()
    text = err.out + err.err
    assert rc == 0, text
    assert "(dry run: nothing started)" in text
    # one torchrun per pod of the plan, leader first, each with the plan's 8 processes and env
    starts = [ln.strip() for ln in text.splitlines() if "torch.distributed.run" in ln]
    assert [ln.split("]")[0] for ln in starts] == [
        f"[pod {NS}/vllm-deepep-0",
        f"[pod {NS}/vllm-deepep-1",
    ]
    for rank, ln in enumerate(starts):
        assert f"--nnodes 2 --node-rank {rank} " in ln and "--nproc-per-node 8 " in ln
        assert "NCCL_GIN_TYPE=2" in ln
    assert "[local]" not in text


def test_serve_on_a_one_node_plan_starts_in_the_plans_pod(cluster, tmp_path, capsys):
    plan = _plan(tmp_path, capsys, "-n", NS, "--nodes", "1", "--name", "solo")
    port = free_port()
    rc = main(["run", "serve", "--plan", plan, "--kubeconfig", str(cluster.kubeconfig),
               "--cmd", f"python3 {ENGINE} --port {port}", "--yes", "--no-preflight",
               "--detach", "--json", "--run-dir", str(tmp_path / "run"),
               "--url", f"http://127.0.0.1:{port}", "--startup-budget", "30"])  # fmt: skip
    out = capsys.readouterr()
    doc = json.loads(out.out)
    pgid = doc["pids"]["leader"]
    try:
        assert rc == 0 and doc["gate"]["status"] == "pass", doc
        assert doc["logs"]["leader"] == f"{NS}/solo-0:{tmp_path / 'run'}/leader.log"
        assert f"[pod {NS}/solo-0]" in out.err
    finally:
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while request(f"http://127.0.0.1:{port}/health", timeout_s=1).status:
        assert time.monotonic() < deadline, "the detached engine did not stop"
        time.sleep(0.1)


def test_target_flags_win_over_the_plans_pods(cluster, tmp_path, capsys):
    plan = _plan(tmp_path, capsys, "-n", NS)
    rc = main(["run", "kernel-test", "--plan", plan, "--kubeconfig", str(cluster.kubeconfig),
               "--pod", "engine-0", "-n", "other", "--dry-run", "--no-preflight"])  # fmt: skip
    text = "".join(capsys.readouterr())
    assert rc == 0, text
    assert "[pod other/engine-0]" in text and "vllm-deepep" not in text.split("will run")[1]


def test_plan_pods_not_there_is_one_line_naming_them(cluster, tmp_path, capsys):
    # --attach: run in the plan's pods as they are (without it, the plan is applied first:
    # tests/test_run_kube_rollout.py)
    plan = _plan(tmp_path, capsys, "-n", "empty")
    rc = main(["run", "kernel-test", "--plan", plan, "--kubeconfig", str(cluster.kubeconfig),
               "--attach", "--dry-run", "--no-preflight"])  # fmt: skip
    out = capsys.readouterr()
    assert rc == 2
    lines = out.err.strip().splitlines()
    assert len(lines) == 1, out.err
    assert lines[0].startswith("epdoctor: error: ")
    assert "vllm-deepep-0 .. vllm-deepep-1 (namespace empty)" in lines[0]
    assert "not found" in lines[0] and "--pod / -l" in lines[0]
    assert "will run" not in out.out  # nothing shown as if it were about to start here


@pytest.mark.parametrize(
    ("flags", "want"),
    [
        (("--nodes", "2"), "--ssh NODE0,NODE1"),
        (("--nodes", "2", "--host", "10.0.0.1", "--host", "10.0.0.2"), "--ssh 10.0.0.1,10.0.0.2"),
    ],
)
def test_a_plan_for_several_bare_nodes_is_refused_naming_the_flag(tmp_path, capsys, flags, want):
    plan = _plan(tmp_path, capsys, "--target", "bare", *flags)
    for what in ("kernel-test", "serve"):
        rc = main(["run", what, "--plan", plan, "--dry-run", "--no-preflight"])
        out = capsys.readouterr()
        assert rc == 2, out
        assert out.err.strip().splitlines() == [
            f"epdoctor: error: {plan} plans 2 bare node(s); name them: {want} "
            "(leader first; or --hosts FILE)"
        ]
