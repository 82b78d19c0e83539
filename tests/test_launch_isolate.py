"""Finding the bad node: pair plans, outlier rules, and a real isolation run on loopback."""

from __future__ import annotations

import pytest
from launch_helpers import TORCH_PY, needs_torch
from launch_helpers import free_port as _port

from epdoctor.launch import isolate as iso
from epdoctor.launch.gates import NetworkExpectation
from epdoctor.launch.kernel_test import KernelTestConfig, KernelTestRun, run_to_end
from epdoctor.launch.launcher import LocalNode, ProcSpec
from epdoctor.model import Status

EFA = "efa/efa-direct/16"


def gr(nodes, ok=True, net=None, gbps=None):
    nodes = tuple(nodes)
    return iso.GroupResult(
        nodes,
        ok,
        {n: (net or {}).get(n, EFA) for n in nodes},
        {n: (gbps or {}).get(n, 100.0) for n in nodes},
        "pass" if ok else "exit codes: 1 of 2 processes exited non-zero",
    )


def test_pair_plan_is_a_ring():
    assert iso.pair_plan(["a"]) == []
    assert iso.pair_plan(["a", "b"]) == [("a", "b")]
    assert iso.pair_plan(["a", "b", "c"]) == [("a", "b"), ("b", "c"), ("c", "a")]
    assert all(sum(n in p for p in iso.pair_plan(list("abcdef"))) == 2 for n in "abcdef")


def test_the_node_all_of_whose_pairs_fail_is_the_outlier():
    res = [gr("ab"), gr("bc", ok=False), gr("ca", ok=False)]
    out = iso.find_outliers(res)
    assert [(o.node, o.code) for o in out] == [("c", "F701")]
    assert "b+c: exit codes" in out[0].evidence[0]
    f = out[0].finding()
    assert f.status is Status.FAIL and f.target == "c" and f.fix


def test_a_fleet_wide_failure_blames_no_single_node():
    assert iso.find_outliers([gr("ab", False), gr("bc", False), gr("ca", False)]) == []


def test_non_efa_node_is_named():
    res = [
        gr("ab", net={"b": "tcp;ofi_rxm/TCP-IP/1"}),
        gr("bc", net={"b": "tcp;ofi_rxm/TCP-IP/1"}),
        gr("ca"),
    ]
    out = iso.find_outliers(res)
    assert [(o.node, o.code) for o in out] == [("b", "F702")]
    assert iso.find_outliers(res, expect_efa=False) == []


def test_slow_node_is_well_below_the_median():
    slow = {"d": 30.0}
    res = [gr(p, gbps=slow) for p in iso.pair_plan(list("abcde"))]
    out = iso.find_outliers(res)
    assert [(o.node, o.code) for o in out] == [("d", "F703")]
    assert "30% of the fleet median 100.0" in out[0].reason
    assert out[0].finding().status is Status.WARN
    # 80% of the median is not "well below"
    assert iso.find_outliers([gr(p, gbps={"d": 80.0}) for p in iso.pair_plan(list("abcde"))]) == []


def test_large_fleets_bisect_before_pairs():
    nodes = [f"n{i:02d}" for i in range(16)]
    bad = "n13"
    calls = []

    def run_group(group):
        calls.append(tuple(group))
        return gr(group, ok=bad not in group)

    _, out = iso.isolate(nodes, run_group)
    assert calls[0] == tuple(nodes[:8]) and calls[1] == tuple(nodes[8:])
    assert all(len(c) == 2 for c in calls[2:])  # pairs within the failing half
    assert [(o.node, o.code) for o in out] == [(bad, "F701")]
    assert len(calls) < len(nodes) + 2


class BrokenNode(LocalNode):
    """A node whose kernel-test process fails at once (a host that cannot run the test)."""

    def start(self, spec: ProcSpec):
        return super().start(ProcSpec(spec.name, ("false",), spec.log_path, spec.env))


@needs_torch
def test_isolation_on_loopback_finds_the_broken_node(tmp_path):
    nodes = {"n0": LocalNode("n0"), "n1": LocalNode("n1"), "n2": BrokenNode("n2")}

    def run_group(group):
        cfg = KernelTestConfig(
            kind="builtin",
            nodes=[nodes[n] for n in group],
            gpus=1,
            run_dir=str(tmp_path / "+".join(group)),
            python=TORCH_PY,
            backend="gloo",
            test_args=("--num-tokens", "16", "--hidden", "16", "--iters", "1"),
            master_port=_port(),
            timeout_s=60,
            expect=NetworkExpectation(efa=None, multi_node=True),
        )
        return iso.from_report(run_to_end(KernelTestRun(cfg)), group, 1)

    results, out = iso.isolate(list(nodes), run_group)
    assert [r.ok for r in results] == [True, False, False]
    assert results[0].gbps["n0"] is not None
    assert [(o.node, o.code) for o in out if o.code == "F701"] == [("n2", "F701")]


@pytest.mark.parametrize("n", [2, 5, 9])
def test_to_json_shape(n):
    names = [f"h{i}" for i in range(n)]
    doc = iso.to_json([gr(p) for p in iso.pair_plan(names)], [])
    assert len(doc["runs"]) == (1 if n == 2 else n) and doc["outliers"] == []


@needs_torch
def test_epdoctor_run_kernel_test_isolate(tmp_path, capsys, monkeypatch):
    import json

    from epdoctor.cli import main
    from epdoctor.commands import run as runcmd

    # the node set a launch would get from --ssh; here three local "hosts", one broken
    fleet = [LocalNode("h0"), LocalNode("h1"), BrokenNode("h2")]
    monkeypatch.setattr(runcmd, "nodes_from_args", lambda args, plan=None: fleet)
    rc = main(
        [
            "run",
            "kernel-test",
            "--isolate",
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
            "--yes",
            "--no-preflight",
            "--json",
            "--master-port",
            str(_port()),
            "--run-dir",
            str(tmp_path),
            "--no-expect-efa",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert [r["ok"] for r in doc["runs"]] == [True, False, False]
    assert [(o["node"], o["code"]) for o in doc["outliers"]] == [("h2", "F701")]
