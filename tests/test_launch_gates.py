"""Kernel-test gates on real NCCL logs (tests/fixtures/launch/*.source say where each is from)."""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.facts.logs.model import RankFacts
from epdoctor.launch.gates import (
    NetworkExpectation,
    exit_code_gate,
    network_gate,
    numerics_gate,
    parse_results,
    results_gate,
)
from epdoctor.logwatch import LogAnalyzer
from epdoctor.model import Status

FIX = Path(__file__).parent / "fixtures" / "launch"
EFA16 = NetworkExpectation(efa=True, efa_count=16, multi_node=True)


class Logs:
    """The launch's log reader: the analyzer with channel lines, every stream its own source."""

    def __init__(self) -> None:
        self.an = LogAnalyzer(transports=True)

    def feed(self, text: str, source: str) -> Logs:
        self.an.feed_facts(text.encode(), source)
        return self

    def ranks(self) -> list[RankFacts]:
        self.an.close()
        return self.an.facts.nccl_ranks()


def evidence(*names: str) -> Logs:
    logs = Logs()
    for n in names:
        logs.feed((FIX / n).read_text(), n)
    return logs


def test_p5en_rank_with_efa_direct_16_nics_passes():
    ranks = evidence("p5en_gin_proxy_rank.log").ranks()
    assert [(r.host, r.pid) for r in ranks] == [("deepep-efa-bench-0", 70124)]
    assert ranks[0].providers == [("efa", "efa-direct", 16)]
    assert ranks[0].network == "Libfabric"
    g = network_gate(ranks, 1, EFA16)
    assert g.status is Status.PASS, g
    assert "16 nics" in g.summary


def test_nic_count_below_the_instance_fails():
    ranks = evidence("p5en_gin_proxy_rank.log").ranks()
    g = network_gate(ranks, 1, NetworkExpectation(efa=True, efa_count=32, multi_node=True))
    assert g.status is Status.FAIL and g.code == "T702"
    assert "found 16 nics, the instance has 32" in g.evidence[0]


def test_torchrun_prefixed_lines_are_read():
    ranks = evidence("p6b200_torchrun_prefix.log").ranks()
    assert ranks[0].providers == [("efa", "efa-direct", 4)]
    assert network_gate(ranks, 1, NetworkExpectation(efa=True, efa_count=4)).status is Status.PASS


def test_efa_provider_without_efa_direct_fabric_fails():
    # p4d with aws-ofi-nccl 1.16.2: SENDRECV protocol, fabric "efa", healthy for NCCL but not
    # the RDMA (efa-direct) path GIN needs.
    ranks = evidence("p4d_healthy_efa_fabric.log").ranks()
    g = network_gate(ranks, 1, NetworkExpectation(efa=True, efa_count=4))
    assert g.status is Status.FAIL and g.code == "T701"
    assert "fabric efa (found 1 nics): not efa-direct" in g.evidence[0]


def test_socket_fallback_after_plugin_failure_fails_with_the_reason():
    ranks = evidence("p4d_socket_fallback.log").ranks()
    assert ranks[0].network == "Socket"
    assert any("aws-ofi-nccl initialization failed" in f for f in ranks[0].net_failures)
    g = network_gate(ranks, 1, EFA16)
    assert g.status is Status.FAIL
    assert "NCCL used network Socket" in g.evidence[0]


def test_h200_single_gpu_reports_socket_and_no_peers_when_efa_not_expected():
    ranks = evidence("h200_single_gpu_socket.log").ranks()
    assert len(ranks) == 1 and ranks[0].network == "Socket"
    assert (ranks[0].nccl_version, ranks[0].cuda_version) == ("2.28.9", "13.0")
    one_node = NetworkExpectation(efa=None, reason="one node")
    g = network_gate(ranks, 1, one_node)
    assert g.status is Status.PASS
    assert "Socket" in g.summary and "no traffic crossed a NIC" in g.summary
    # the same log where EFA is demanded fails
    assert network_gate(ranks, 1, EFA16).status is Status.FAIL


def test_tcp_provider_banner_fails():
    # composed from aws-ofi-nccl's format "Selected provider is %s, fabric is %s (found %d nics)"
    # with the tcp;ofi_rxm provider the seeds' loose pattern let through
    line = (
        "node-1:4242:4242 [0] NCCL INFO NET/OFI Selected provider is tcp;ofi_rxm, "
        "fabric is TCP-IP (found 1 nics)"
    )
    g = network_gate(Logs().feed(line + "\n", "node0").ranks(), 1, EFA16)
    assert g.status is Status.FAIL and "provider tcp;ofi_rxm" in g.evidence[0]


def test_a_rank_that_logged_nothing_is_not_a_pass():
    ranks = evidence("p5en_gin_proxy_rank.log").ranks()
    g = network_gate(ranks, 16, EFA16)
    assert g.status is Status.FAIL
    assert any("only 1 of 16 ranks" in e for e in g.evidence)
    assert network_gate([], 2, EFA16).status is Status.UNKNOWN


def test_ranks_are_grouped_by_host_and_pid_across_sources():
    text = (FIX / "p5en_gin_proxy_rank.log").read_text()
    other = text.replace("deepep-efa-bench-0:70124:70124", "deepep-efa-bench-1:555:555")
    logs = Logs().feed(text, "node0").feed(other, "node1")
    assert len(logs.ranks()) == 2
    assert network_gate(logs.ranks(), 2, EFA16).status is Status.PASS


def test_channel_lines_give_the_peer_transports():
    logs = Logs()
    for via in ("P2P/CUMEM/read", "NET/Libfabric/0/GDRDMA", "SHM/direct/direct"):
        logs.feed(f"h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via {via}\n", "node0")
    assert logs.ranks()[0].transports == {"P2P", "NET/Libfabric", "SHM"}


def test_exit_code_gate():
    assert exit_code_gate({"node0": 0, "node1": 0}).status is Status.PASS
    g = exit_code_gate({"node0": 0, "node1": 1})
    assert g.status is Status.FAIL and g.code == "D702" and "node1: exit 1" in g.evidence
    assert exit_code_gate({"node0": None}).status is Status.FAIL
    assert exit_code_gate({}).status is Status.UNKNOWN


def _result(rank: int, ok: bool = True) -> str:
    chk = {"ok": ok, "mismatches": 0 if ok else 3, "elements": 100}
    if not ok:
        chk["first"] = {"index": [0, 1], "got": 1.0, "want": 2.0}
    import json

    doc = {
        "rank": rank,
        "host": "h",
        "pid": 10 + rank,
        "numerics": "pass" if ok else "fail",
        "sizes": [{"num_tokens": 64, "dispatch_check": chk, "combine_check": chk}],
    }
    return f"[default{rank}]:EPDOCTOR_KERNEL_TEST {json.dumps(doc)}"


def test_results_and_numerics_gates():
    res = parse_results([_result(0), "noise", _result(1)])
    assert sorted(res) == [0, 1]
    assert results_gate(res, 2).status is Status.PASS
    assert numerics_gate(res).status is Status.PASS
    missing = results_gate(res, 4)
    assert missing.status is Status.FAIL and "missing ranks: 2-3" in missing.evidence
    bad = parse_results([_result(0), _result(1, ok=False)])
    g = numerics_gate(bad)
    assert g.status is Status.FAIL and g.code == "D701"
    assert "rank 1 dispatch at 64 tokens: 3 of 100 elements differ" in g.evidence[0]
    assert numerics_gate({}).status is Status.UNKNOWN


@pytest.mark.parametrize("name", ["p5en_gin_proxy_rank.log", "p4d_socket_fallback.log"])
def test_findings_carry_catalogue_fix_text(name):
    g = network_gate(evidence(name).ranks(), 2, EFA16)
    f = g.finding("node0")
    assert f is not None and f.code in ("T701", "T702") and f.fix


def test_a_rank_that_stopped_before_the_check_is_unknown_not_a_mismatch():
    res = {0: {"rank": 0, "ok": False, "error": "CUDA is not available to PyTorch on this node"}}
    g = numerics_gate(res)
    assert g.status is Status.UNKNOWN and "stopped before the numerics check" in g.summary
    assert "CUDA is not available" in g.evidence[0]
    assert results_gate(res, 1).status is Status.FAIL


def test_nccl_processes_map_to_ranks_by_file_then_by_short_host_and_pid():
    from epdoctor.launch.kernel_test import _rank_nets

    text = (FIX / "p5en_gin_proxy_rank.log").read_text()
    logs = Logs().feed(text, "rank3 nccl")  # its own NCCL_DEBUG_FILE
    other = text.replace("deepep-efa-bench-0:70124:70124", "deepep-efa-bench-1:555:555")
    logs.feed(other, "node1")  # a shared stream: only host and pid tell
    results = {
        3: {"host": "deepep-efa-bench-0", "pid": 1},
        9: {"host": "deepep-efa-bench-1.ec2.internal", "pid": 555},
    }
    nets = _rank_nets(logs.ranks(), results)
    assert nets[3].pid == 70124 and nets[9].host == "deepep-efa-bench-1"


def test_gates_on_the_builtin_test_captured_on_a_real_h200():
    # tests/fixtures/h200-run/: the built-in test on one H200 (NCCL 2.28.9, no EFA), see its README
    run = Path(__file__).parent / "fixtures" / "h200-run"
    res = parse_results((run / "kernel.txt").read_text().splitlines())
    assert list(res) == [0] and res[0]["gpu"] == "NVIDIA H200"
    assert results_gate(res, 1).status is Status.PASS
    g = numerics_gate(res)
    assert g.status is Status.PASS and "element-wise" in g.summary
    ranks = Logs().feed((run / "nccl-rank0.log").read_text(), "rank0 nccl").ranks()
    assert len(ranks) == 1 and ranks[0].network == "Socket" and ranks[0].transports == set()
    one = network_gate(ranks, 1, NetworkExpectation(efa=None, reason="one node"))
    assert one.status is Status.PASS and "no traffic crossed a NIC" in one.summary
    assert network_gate(ranks, 1, EFA16).status is Status.FAIL


def test_socket_fallback_on_one_node_shows_the_ranks_talk_over_p2p():
    # all four ranks of the p4d run behind p4d_socket_fallback.log: Socket network, NVLink peers
    ranks = evidence("p4d_4rank_socket_p2p.log").ranks()
    assert [r.key for r in ranks] == [f"ip-172-31-3-153:{p}" for p in (35113, 35114, 35115, 35116)]
    assert {r.network for r in ranks} == {"Socket"}
    assert all(r.transports == {"P2P"} for r in ranks)
    assert all(r.socket_ifs == ["[0]ens32:172.31.3.153<0>"] for r in ranks)
    one = network_gate(ranks, 4, NetworkExpectation(efa=None, reason="one node"))
    assert one.status is Status.PASS
    assert "peers via P2P" in one.summary and "no traffic crossed a NIC" in one.summary
    assert all("peers via P2P" in e for e in one.evidence)
    efa = network_gate(ranks, 4, EFA16)
    assert efa.status is Status.FAIL and efa.code == "T701"
    assert (
        "NCCL used network Socket after: NET/OFI Failed to initialize sendrecv protocol"
        in (efa.evidence[0])
    )


def test_shm_channel_lines_without_a_connection_index_are_read():
    # g6e.48xlarge, one pod, four processes, no NVLink: NCCL's SHM line is "Channel %02d : ..."
    ranks = evidence("g6e_4rank_shm.log").ranks()
    assert len(ranks) == 4 and all(r.transports == {"SHM"} for r in ranks)
    assert all(r.provider == ("efa", "efa", 4) and r.network == "Libfabric" for r in ranks)
    one = network_gate(ranks, 4, NetworkExpectation(efa=None, reason="one node"))
    assert one.status is Status.PASS
    assert "peers via SHM" in one.summary and "no traffic crossed a NIC" in one.summary
    g = network_gate(ranks, 4, NetworkExpectation(efa=True, efa_count=4))
    assert g.status is Status.FAIL and "not efa-direct" in g.evidence[0]


def test_channels_over_the_network_plugin_count_as_traffic_on_a_nic():
    # g6e pods with one GPU and one EFA each: the peers are reached through NET/Libfabric
    ranks = evidence("g6e_pods_libfabric.log").ranks()
    assert len(ranks) == 1 and ranks[0].transports == {"NET/Libfabric"}
    g = network_gate(ranks, 1, NetworkExpectation(efa=None))
    assert g.status is Status.PASS
    assert "peers via NET/Libfabric" in g.summary and "no traffic crossed a NIC" not in g.summary
    from epdoctor.launch.gates import rank_table

    rows = rank_table({0: {"host": "llama-3-8b-node-0-0", "numerics": "pass"}}, {0: ranks[0]}, 1)
    assert rows[0]["peers_via"] == ["NET/Libfabric"] and rows[0]["provider"] == "efa/efa/4"


def test_the_reason_efa_is_not_expected_matches_the_launch():
    from epdoctor.cli import build_parser
    from epdoctor.launch.config import kernel_config
    from epdoctor.launch.launcher import LocalNode

    def expect(*flags: str, nodes: int):
        args = build_parser().parse_args(["run", "kernel-test", *flags])
        return kernel_config(args, {}, [LocalNode(f"n{i}") for i in range(nodes)]).expect

    assert expect(nodes=1).reason.startswith("one node")
    two = expect(nodes=2)
    assert two.efa is True and two.multi_node and two.reason == ""
    off = expect("--no-expect-efa", nodes=2)
    assert off.efa is False and off.reason == "--no-expect-efa"
    g = network_gate(evidence("p4d_4rank_socket_p2p.log").ranks(), 4, off)
    assert g.status is Status.WARN and g.summary.endswith("(--no-expect-efa)")
