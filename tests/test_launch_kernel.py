"""The built-in kernel test run for real: torchrun, gloo on CPU, through epdoctor's launcher.

Needs a Python with PyTorch: this interpreter if it has torch, else the one named by
EPDOCTOR_TORCH_PYTHON (CI creates one with the CPU wheel). Skipped with the reason
otherwise.
"""

from __future__ import annotations

import json
import os

import pytest
from launch_helpers import TORCH_PY, needs_torch
from launch_helpers import free_port as _port

from epdoctor.cli import main
from epdoctor.launch.gates import NetworkExpectation
from epdoctor.launch.kernel_test import KernelTestConfig, KernelTestRun, build_specs, run_to_end
from epdoctor.launch.launcher import LocalNode
from epdoctor.model import Status

SMALL = ("--hidden", "32", "--iters", "2", "--warmup", "1")


def cfg(tmp_path, nodes=1, gpus=2, extra=(), **kw) -> KernelTestConfig:
    return KernelTestConfig(
        kind="builtin",
        nodes=[LocalNode(f"n{i}") for i in range(nodes)],
        gpus=gpus,
        run_dir=str(tmp_path),
        python=TORCH_PY or "python3",
        backend="gloo",
        test_args=("--num-tokens", "16,48", *SMALL, *extra),
        timeout_s=120,
        **kw,
    )


def test_specs_are_one_torchrun_per_node_with_rendezvous(tmp_path):
    specs = build_specs(cfg(tmp_path, nodes=2, gpus=4))
    assert [s.name for s in specs] == ["node0", "node1"]
    a = specs[1].argv
    assert a[a.index("--nnodes") + 1] == "2" and a[a.index("--node-rank") + 1] == "1"
    assert a[a.index("--nproc-per-node") + 1] == "4"
    assert specs[0].env["NCCL_DEBUG"] == "INFO"
    assert "--nccl-log-dir" in a and a[a.index("--backend") + 1] == "gloo"
    # DeepEP: one torchrun per node, the test spawns its own --num-processes
    d = KernelTestConfig(
        kind="deepep",
        nodes=[LocalNode("a"), LocalNode("b")],
        gpus=8,
        run_dir="/r",
        deepep_dir="/opt/DeepEP",
    )
    s = build_specs(d)[0]
    assert s.argv[s.argv.index("--nproc-per-node") + 1] == "1"
    assert s.argv[s.argv.index("--num-processes") + 1] == "8" and s.cwd == "/opt/DeepEP"
    assert s.env["NCCL_DEBUG_FILE"] == "/r/nccl/nccl.%h.%p.log"


@needs_torch
def test_two_ranks_pass_every_gate_and_report_bandwidth(tmp_path):
    panes: dict[str, list[str]] = {}
    run = KernelTestRun(
        cfg(tmp_path, extra=("--baseline",)),
        on_line=lambda p, line: panes.setdefault(p, []).append(line),
    )
    report = run_to_end(run)
    by = {g.name: g for g in report.gates}
    assert by["exit codes"].status is Status.PASS
    assert by["results"].status is Status.PASS and by["numerics"].status is Status.PASS
    assert by["network"].status is Status.SKIP  # gloo: no NCCL
    assert report.status is Status.PASS
    assert [r["rank"] for r in report.per_rank] == [0, 1]
    for row in report.per_rank:
        assert row["numerics"] == "pass" and row["dispatch_gbps"] > 0
        assert [s["num_tokens"] for s in row["sweep"]] == [16, 48]
        assert row["overhead_ratio"] > 0
    assert {"rank0", "rank1"} <= set(panes)  # torchrun's [defaultN]: lines demuxed per rank
    assert (tmp_path / "node0.log").exists()


@needs_torch
def test_two_nodes_on_loopback(tmp_path):
    # two torchrun agents rendezvous over 127.0.0.1 like two hosts would
    c = cfg(
        tmp_path,
        nodes=2,
        gpus=1,
        master_port=_port(),
        expect=NetworkExpectation(efa=None, multi_node=True),
    )
    report = run_to_end(KernelTestRun(c))
    assert report.status is Status.PASS, [g.to_json() for g in report.gates]
    assert len(report.per_rank) == 2
    assert {g.name: g for g in report.gates}["efa counters"].status is Status.SKIP


@needs_torch
def test_a_corrupted_element_fails_the_numerics_gate(tmp_path):
    report = run_to_end(
        KernelTestRun(cfg(tmp_path, extra=("--fault", "dispatch", "--fault-rank", "1")))
    )
    by = {g.name: g for g in report.gates}
    assert by["numerics"].status is Status.FAIL and by["numerics"].code == "D701"
    assert by["exit codes"].status is Status.FAIL  # the rank exits 1 on a mismatch
    assert report.status is Status.FAIL
    assert report.per_rank[1]["numerics"] == "fail"
    # the bad element reached rank 1 in dispatch; its partial went back to its source
    assert any("rank 1 dispatch" in e for e in by["numerics"].evidence)
    assert any("combine" in e for e in by["numerics"].evidence)


@needs_torch
def test_a_failing_node_stops_the_others(tmp_path):
    # node1 cannot start its test (unknown option): node0 would wait at the rendezvous
    c = cfg(tmp_path, nodes=2, gpus=1, master_port=_port())
    run = KernelTestRun(c)
    run.start()
    bad = run.group.procs[1]
    bad.stop(0.1)
    import time

    while run.step():
        time.sleep(0.1)
    report = run.finish()
    assert run.failed_early
    assert report.stopped and any("node0" in s for s in report.stopped)
    assert report.status is Status.FAIL


@needs_torch
def test_epdoctor_run_kernel_test_cli(tmp_path, capsys):
    rc = main(
        [
            "run",
            "kernel-test",
            "--builtin",
            "--gpus",
            "2",
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
            "--run-dir",
            str(tmp_path),
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["status"] == "pass"
    assert [r["numerics"] for r in doc["ranks"]] == ["pass", "pass"]
    assert sorted(os.listdir(tmp_path / "torchrun" / "node0"))  # per-rank torchrun logs kept


@needs_torch
def test_a_finished_run_can_be_regated_from_its_directory(tmp_path, capsys):
    from epdoctor.launch.kernel_test import regate

    live = run_to_end(KernelTestRun(cfg(tmp_path)))
    assert (tmp_path / "report.json").exists()
    again = regate(str(tmp_path))
    assert [(g.name, g.status) for g in again.gates] == [(g.name, g.status) for g in live.gates]
    assert [r["numerics"] for r in again.per_rank] == ["pass", "pass"]
    rc = main(["run", "kernel-test", "--regate", str(tmp_path), "--json"])
    assert rc == 0 and json.loads(capsys.readouterr().out)["status"] == "pass"


def test_regate_reads_the_nccl_files(tmp_path):
    # a run directory as an NCCL run leaves it: results on the node stream, one NCCL file per
    # rank (the NCCL lines are the real p5en excerpt, re-homed to this run's host and pid)
    from pathlib import Path

    from epdoctor.launch.kernel_test import regate

    real = (Path(__file__).parent / "fixtures" / "launch" / "p5en_gin_proxy_rank.log").read_text()
    (tmp_path / "nccl").mkdir()
    lines = []
    for r in range(2):
        (tmp_path / "nccl" / f"nccl-rank{r}.log").write_text(
            real.replace("deepep-efa-bench-0:70124:70124", f"h{r}:{100 + r}:{100 + r}")
        )
        doc = {
            "rank": r,
            "host": f"h{r}",
            "pid": 100 + r,
            "numerics": "pass",
            "sizes": [
                {
                    "num_tokens": 8,
                    "dispatch_check": {"ok": True},
                    "combine_check": {"ok": True},
                    "dispatch_gbps": 40.0 + r,
                }
            ],
        }
        lines.append(f"[default0]:EPDOCTOR_KERNEL_TEST {json.dumps(doc)}")
    (tmp_path / "node0.log").write_text(lines[0] + "\n")
    (tmp_path / "node1.log").write_text(lines[1] + "\n")
    (tmp_path / "report.json").write_text(
        json.dumps(
            {
                "exit_codes": {"node0": 0, "node1": 0},
                "config": {
                    "kind": "builtin",
                    "gpus": 1,
                    "nodes": ["h0", "h1"],
                    "expect_efa": True,
                    "efa_count": 16,
                    "multi_node": True,
                },
            }
        )
    )
    rep = regate(str(tmp_path))
    net = {g.name: g for g in rep.gates}["network"]
    assert net.status is Status.PASS and "efa-direct on all 2 ranks" in net.summary
    assert [r["provider"] for r in rep.per_rank] == ["efa/efa-direct/16"] * 2
    assert rep.status is Status.PASS


def test_regate_reads_which_transport_each_rank_used(tmp_path):
    # one node's stream holding the real 4-rank p4d log (Socket network, NVLink peers) and each
    # rank's result line: the ranks are told apart by host and pid, their peers by channel lines
    from pathlib import Path

    from epdoctor.launch.kernel_test import regate

    real = (Path(__file__).parent / "fixtures" / "launch" / "p4d_4rank_socket_p2p.log").read_text()
    results = []
    for r in range(4):
        doc = {
            "rank": r,
            "host": "ip-172-31-3-153",
            "pid": 35113 + r,
            "numerics": "pass",
            "sizes": [
                {"num_tokens": 8, "dispatch_check": {"ok": True}, "combine_check": {"ok": True}}
            ],
        }
        results.append(f"[default{r}]:EPDOCTOR_KERNEL_TEST {json.dumps(doc)}\n")
    (tmp_path / "node0.log").write_text(real + "".join(results))
    (tmp_path / "report.json").write_text(
        json.dumps(
            {
                "exit_codes": {"node0": 0},
                "config": {"kind": "builtin", "gpus": 4, "nodes": ["h0"], "expect_efa": None},
            }
        )
    )
    rep = regate(str(tmp_path))
    assert [(r["network"], r["peers_via"]) for r in rep.per_rank] == [("Socket", ["P2P"])] * 4
    net = {g.name: g for g in rep.gates}["network"]
    assert net.status is Status.PASS and "no traffic crossed a NIC" in net.summary
    assert rep.status is Status.PASS


@needs_torch
def test_float32_and_uneven_expert_layout(tmp_path):
    c = cfg(
        tmp_path, gpus=3, extra=("--dtype", "float32", "--num-experts", "12", "--num-topk", "5")
    )
    report = run_to_end(KernelTestRun(c))
    assert report.status is Status.PASS, [g.to_json() for g in report.gates]
    assert [r["numerics"] for r in report.per_rank] == ["pass"] * 3


class ReplayNode(LocalNode):
    """Stands in for a node whose ranks print a real NCCL log (the p4d Socket fallback excerpt
    of tests/fixtures/launch/) instead of running a test: the launch's log analysis is what
    is under test here."""

    def start(self, spec):
        from pathlib import Path

        from epdoctor.launch.launcher import ProcSpec

        log = Path(__file__).parent / "fixtures" / "launch" / "p4d_socket_fallback.log"
        return super().start(ProcSpec(spec.name, ("cat", str(log)), spec.log_path, spec.env))


def test_log_findings_appear_while_the_kernel_test_runs(tmp_path):
    from epdoctor.logwatch import log_watch_factory

    factory = log_watch_factory()
    if factory is None:
        pytest.skip("the log analyzer is not installed")
    seen = []
    run = KernelTestRun(
        KernelTestConfig(
            kind="builtin", nodes=[ReplayNode("a")], gpus=1, run_dir=str(tmp_path), counters=False
        ),
        watch_factory=factory,
        on_finding=lambda src, f: seen.append((src, f.code)),
    )
    report = run_to_end(run)
    assert ("node0", "N201") in seen  # aws-ofi-nccl failed to initialize: NCCL fell back
    assert any(f["code"] == "N201" for f in report.findings_seen)
    assert {g.name: g for g in report.gates}["results"].status is Status.FAIL  # no result line
