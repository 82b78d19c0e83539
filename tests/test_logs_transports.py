"""Which transport carried each rank's traffic: NCCL's channel lines and NET/Socket lines.

Real logs only: tests/fixtures/launch/*.source say where each is from; the H200 logs in
tests/fixtures/h200-run/ were captured by epdoctor on one H200.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.facts.logs import scanner
from epdoctor.facts.logs import signatures as sig
from epdoctor.facts.logs.prefix import parse_line
from epdoctor.logwatch import LogAnalyzer, analyze_paths

FIX = Path(__file__).parent / "fixtures"
CHANNEL_LOGS = ("p4d_4rank_socket_p2p.log", "g6e_4rank_shm.log", "g6e_pods_libfabric.log")


def _lines(name: str) -> list[bytes]:
    return (FIX / "launch" / name).read_bytes().splitlines()


def _channel_lines(name: str) -> list[bytes]:
    return [ln for ln in _lines(name) if sig.CHANNEL_VIA.match(parse_line(ln.decode()).msg)]


def _candidates(data: bytes, anchors: tuple[bytes, ...]) -> list[bytes]:
    f = scanner.Feeder(anchors)
    return [raw for _, raw in f.feed(data) + f.close()]


@pytest.mark.parametrize("name", CHANNEL_LOGS)
def test_default_anchors_never_return_a_channel_line(name):
    # channel lines are the bulk of a large NCCL INFO log: `epdoctor logs` must not decode them
    # (a Socket or IB channel's send side is read: it shows a rank off EFA where no "Using
    # network" line was kept)
    channels = [ln for ln in _channel_lines(name) if b"[send] via NET/Socket" not in ln
                and b"[send] via NET/IB" not in ln]  # fmt: skip
    assert len(channels) >= 20
    assert not any(a in ln for ln in channels for a in scanner.ANCHORS)
    data = (FIX / "launch" / name).read_bytes()
    assert not set(channels) & set(_candidates(data, scanner.ANCHORS))
    # with the transport anchor every one of them comes back, and ring-order lines do not
    got = _candidates(data, scanner.ANCHORS + sig.TRANSPORT_ANCHORS)
    assert set(channels) <= set(got)
    assert not any(b"Channel" in ln and ln not in channels for ln in got)


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        ("p4d_4rank_socket_p2p.log", {"P2P"}),
        ("g6e_4rank_shm.log", {"SHM"}),
        ("g6e_pods_libfabric.log", {"NET/Libfabric"}),
    ],
)
def test_transports_per_rank_on_real_logs(name, kinds):
    an = LogAnalyzer(transports=True, source=name)
    an.feed((FIX / "launch" / name).read_bytes())
    an.finish()
    ranks = an.facts.nccl_ranks()
    assert ranks and all(r.transports == kinds for r in ranks)
    first = _channel_lines(name)[0].decode()
    owner = next(r for r in ranks if f"{r.host}:{r.pid}:" in first)
    kind = next(iter(kinds))
    assert owner.evidence[f"transport:{kind}"].endswith(parse_line(first).text)
    assert all(r.to_json()["transports"] == sorted(kinds) for r in ranks)


def test_epdoctor_logs_says_transports_were_not_read():
    # the default path leaves them unread (None), which is not "no peer" (an empty list)
    a = analyze_paths([str(FIX / "launch" / "p4d_4rank_socket_p2p.log")])
    assert [r["transports"] for r in a.to_json()["ranks"]] == [None] * 4


def test_ring_order_lines_of_a_real_single_h200_run_are_no_transport():
    # one rank: 64 "Channel NN/64 : 0" ring lines and no peer, so no transport at all
    data = (FIX / "h200-run" / "nccl-rank0.log").read_bytes()
    assert data.count(b"NCCL INFO Channel ") >= 32
    an = LogAnalyzer(transports=True, source="rank0 nccl")
    an.feed(data)
    an.finish()
    (r,) = an.facts.nccl_ranks()
    assert r.transports == set()
    assert r.network == "Socket" and r.socket_ifs == ["[0]eth0:192.0.2.2<0>"]
    n = next(i for i, ln in enumerate(data.splitlines(), 1) if b"NET/Socket : Using" in ln)
    assert r.evidence["net_socket"].startswith(f"rank0 nccl:{n}: ")
    assert r.net_failures == ["Failed to initialize NET plugin IB"]


def test_net_socket_lines_are_read_without_the_transport_anchor():
    a = analyze_paths([str(FIX / "launch" / "p4d_socket_fallback.log")])
    (r,) = a.facts.nccl_ranks()
    assert r.socket_ifs == ["[0]ens32:172.31.3.153<0>"]
    assert "NET/OFI aws-ofi-nccl initialization failed" in r.net_failures
    assert a.to_json()["ranks"][0]["net_socket"] == ["[0]ens32:172.31.3.153<0>"]


def test_interleaved_streams_keep_their_own_lines_and_line_numbers():
    # the launch feeds one analyzer with chunks of every stream as they arrive
    a_data = (FIX / "launch" / "p4d_socket_fallback.log").read_bytes()
    b_data = (FIX / "h200-run" / "nccl-rank0.log").read_bytes()
    mixed = LogAnalyzer(transports=True)
    for i in range(0, max(len(a_data), len(b_data)), 7):
        mixed.feed_facts(a_data[i : i + 7], "a")
        mixed.feed_facts(b_data[i : i + 7], "b")
    mixed.close()
    apart = LogAnalyzer(transports=True)
    apart.feed_facts(a_data, "a")
    apart.feed_facts(b_data, "b")
    apart.close()
    assert [r.to_json() for r in mixed.ranks()] == [r.to_json() for r in apart.ranks()]
    assert [r.evidence for r in mixed.ranks()] == [r.evidence for r in apart.ranks()]
    assert mixed.analysis().stats.bytes == len(a_data) + len(b_data)


@pytest.mark.parametrize(
    ("via", "kind"),
    [
        ("P2P/CUMEM/read", "P2P"),
        ("P2P/direct", "P2P"),
        ("SHM/direct/direct", "SHM"),
        ("NET/Libfabric/0/GDRDMA", "NET/Libfabric"),
        ("NET/Socket/0", "NET/Socket"),
        ("NET/IB/3(1)/GDRDMA/Shared", "NET/IB"),
    ],
)
def test_transport_kind(via, kind):
    assert sig.transport_kind(via) == kind
