"""Streaming, chunking, parallel ranges, prefixes and fuzzing of the log scanner and parsers."""

from __future__ import annotations

import gzip
import os
import random
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epdoctor.checks.base import Context
from epdoctor.facts.logs import scanner
from epdoctor.facts.logs.model import LogFacts
from epdoctor.facts.logs.prefix import parse_line
from epdoctor.logwatch import LogAnalyzer, analyze_paths, analyze_stream
from epdoctor.model import Status
from epdoctor.targets import logstream

LOGS = Path(__file__).parent / "fixtures" / "logs"
ALL = sorted(LOGS.glob("*.log"))


def _summary(a) -> tuple:
    return (
        [r.to_json() for r in a.ranks],
        sorted((f.code, f.status.value, f.title, f.evidence) for f in a.findings),
    )


def test_random_chunking_gives_the_same_analysis():
    data = b"".join(p.read_bytes() for p in ALL)
    whole = analyze_stream([data], Context())
    rng = random.Random(7)
    for _ in range(20):
        chunks, i = [], 0
        while i < len(data):
            n = rng.randint(1, 300)
            chunks.append(data[i : i + n])
            i += n
        assert _summary(analyze_stream(chunks, Context())) == _summary(whole)


def test_line_numbers_count_every_line():
    data = b"a\nb\nh:1:1 [0] NCCL INFO Using network Socket\n\nx\nh:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.0"
    out = [(n, raw) for n, raw in scanner.Feeder().feed(data)] + scanner.Feeder().close()
    got, _ = scanner.scan_block(data, len(data), 0)
    assert [n for n, _ in got] == [3, 6]
    assert out[0][0] == 3


def test_parallel_ranges_equal_one_process(tmp_path, monkeypatch):
    monkeypatch.setattr(logstream, "PARALLEL_MIN", 1)
    body = (LOGS / "composed-16rank-mixed.log").read_bytes()
    noise = b"h:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read\n" * 997
    p = tmp_path / "big.log"
    p.write_bytes(noise + body + noise + (LOGS / "composed-gin-errors.log").read_bytes() + noise)
    par = analyze_paths([str(p)], parallel=True)
    one = analyze_paths([str(p)], parallel=False)
    assert par.stats.workers == 2 and one.stats.workers == 1
    assert _summary(par) == _summary(one)
    assert par.stats.lines == one.stats.lines == p.read_bytes().count(b"\n")


def test_gzip_and_stdin_like_streams(tmp_path):
    src = LOGS / "real-p4d-socket-fallback.log"
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(src.read_bytes()))
    a, b = analyze_paths([str(gz)]), analyze_paths([str(src)])
    assert [f.code for f in a.findings] == [f.code for f in b.findings]


def test_incremental_feed_raises_a_finding_when_its_line_arrives():
    an = LogAnalyzer(Context(transport="gin-proxy"), source="node0")
    assert an.feed(b"h:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.0\n") == []
    assert an.feed(b"h:1:1 [0] NCCL INFO Using netw") == []  # partial line: not yet
    got = an.feed(b"ork Socket\n")
    assert [(f.code, f.status) for f in got] == [("T701", Status.FAIL)]
    assert an.feed(b"h:1:1 [0] NCCL INFO Using network Socket\n") == []  # once per key
    assert [r.key for r in an.ranks()] == ["h:1"]
    final = an.finish()
    assert all(f.status is not Status.PASS for f in final)


def test_incremental_pass_only_at_finish():
    an = LogAnalyzer()
    line = b"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)\n"
    assert an.feed(line) == []
    assert [(f.code, f.status) for f in an.finish()] == [("T701", Status.PASS)]


def test_huge_line_is_scanned_in_fragments_with_bounded_carry():
    an = LogAnalyzer()
    big = b"x" * (3 * scanner.MAX_CARRY) + b" Segmentation fault " + b"y" * scanner.MAX_CARRY
    got = []
    for i in range(0, len(big), 1 << 16):
        got += an.feed(big[i : i + (1 << 16)])
        assert len(an._feeder._carry) <= scanner.MAX_CARRY + (1 << 16)
    got += an.feed(b"\n") + an.finish()
    assert [f.code for f in got] == ["E203", "T701"]  # T701: no NCCL line, unknown


def test_label_joins_traceback_lines_to_the_nccl_rank():
    f = LogFacts()
    f.add("s", 1, b"[rank3]:ip-1:55:55 [3] NCCL INFO NCCL version 2.30.4+cuda13.0")
    f.add("s", 2, b"[rank3]: RuntimeError: CUDA error: an illegal memory access was encountered")
    f.add("s", 3, b"(Worker_DP1_EP1 pid=77) ERROR x RuntimeError: nccl-ep is not installed.")
    f.add("s", 4, b"ip-1:77:80 [1] NCCL INFO NCCL version 2.30.4+cuda13.0")
    assert [e.rank_key for e in f.events] == ["ip-1:55", "Worker_DP1_EP1"]
    f.add(
        "s",
        5,
        b"(Worker_DP1_EP1 pid=77) ERROR RuntimeError: CUDA error: unspecified launch failure",
    )
    assert f.events[-1].rank_key == "ip-1:77"  # vLLM's pid= is NCCL's pid


def test_prefix_shapes():
    p = parse_line("[1,3]<stdout>:h:5:6 [3] NCCL INFO Using network Libfabric")
    assert (p.labels, p.nccl_key, p.msg) == (("mpi 1,3",), "h:5", "Using network Libfabric")
    p = parse_line("vllm-leader-0 vllm [default2]:h:5:6 [2] NCCL INFO x")
    assert p.labels == ("pod/vllm-leader-0/vllm", "default2")
    p = parse_line("[DeepEP] EFA detected: capping num_allocated_qps 129 -> 2")
    assert p.labels == () and p.host is None
    assert parse_line("non-eager mode is on").labels == ()
    p = parse_line(
        "\x1b[1;31m2026-01-02T10:24:27.5Z h:1:2 [0] NCCL INFO NCCL version 2.30.4\x1b[0m\r"
    )
    assert p.nccl_key == "h:1" and p.msg == "NCCL version 2.30.4"


# --- fuzz: no exception escapes ---------------------------------------------------------------
PIECES = [
    b"h:1:1 [0] NCCL INFO ",
    b"NCCL WARN ",
    b"[rank",
    b"(Worker_DP",
    b" pid=",
    b"\x1b[3",
    b"\r",
    b"\n",
    b"Selected provider is ",
    b"(found ",
    b"NCCL version ",
    b" set by environment to ",
    b"Using network ",
    b"rror",
    b"\xff\xfe",
    b"[pod/",
    b"1: ",
]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(st.binary(max_size=40), st.sampled_from(PIECES)), max_size=60))
def test_fuzz_analyzer_never_raises(parts):
    data = b"".join(parts)
    an = LogAnalyzer(Context(transport="efa-gda", instance="p5en.48xlarge"))
    for i in range(0, len(data), 7):
        an.feed(data[i : i + 7])
    an.finish()
    an.analysis().to_json()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_fuzz_parse_line_never_raises(text):
    parse_line(text)


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=0, max_size=200_000))
def test_fuzz_scan_block_spans_are_lines(buf):
    got, n = scanner.scan_block(buf, len(buf), 0)
    assert n == buf.count(b"\n")
    assert all(b"\n" not in raw for _, raw in got)


def _naive(buf: bytes) -> list[tuple[int, bytes]]:
    """Reference: every line that holds an anchor, and the line after "Last error", from 1."""
    lines = buf.split(b"\n")
    return [
        (n, line)
        for n, line in enumerate(lines, 1)
        if any(a in line for a in scanner.ANCHORS)
        or (n > 1 and scanner.FOLLOWED in lines[n - 2] and n < len(lines) + (not buf.endswith(b"\n")))
    ]


def test_plan_sends_rare_bytes_to_memchr_and_common_ones_whole(monkeypatch):
    monkeypatch.setenv("EPDOCTOR_SCANNER", "find")  # the plan of a checkout without RE2
    bulk = b"h:1:2 [0] NCCL INFO AllReduce: opCount 1f sendbuff 0x7f00 recvbuff 0x7f10 count 1024\n"
    groups, whole = scanner.make_plan(bulk * 1000)
    by_byte = {b: [a for a, _ in m] for b, m in groups}
    assert b"NCCL INFO N" in whole  # every byte of it is on every line here
    assert b"WARN" in by_byte[b"W"]  # no W in the bulk: one memchr pass
    assert all(a not in whole for ms in by_byte.values() for a in ms)
    assert sorted(whole + tuple(a for ms in by_byte.values() for a in ms)) == sorted(
        scanner.ANCHORS
    )


def test_rare_byte_that_turns_common_falls_back_and_misses_nothing(monkeypatch):
    monkeypatch.setenv("EPDOCTOR_SCANNER", "find")
    # planned on a sample without 'W'; the block then has a W on every line, with one warning
    sample = b"h:1:2 [0] NCCL INFO AllReduce: opCount 1f count 1024\n" * 100
    plan = scanner.make_plan(sample)
    assert any(b == b"W" for b, _ in plan[0])
    noisy = b"h:1:2 [0] NCCL INFO Wait for peer W\n" * 5000
    buf = noisy + b"h:1:2 [0] NCCL WARN NET/OFI cntr_open_ext failed\n" + noisy
    got, n, replan = scanner._scan(buf, len(buf), 0, plan)
    assert replan and n == 10001
    assert got == [(5001, b"h:1:2 [0] NCCL WARN NET/OFI cntr_open_ext failed")]


def test_anchor_at_the_edges_of_a_block():
    for a in scanner.ANCHORS:
        for buf in (a + b"\nx\n", b"x\n" + a, a):
            got, _ = scanner.scan_block(buf, len(buf), 0)
            assert got == _naive(buf), (a, buf)


_pieces = st.lists(
    st.sampled_from(
        [*scanner.ANCHORS, b"\n", b"W", b"g", b"P", b"_", b"x", b"NCCL INFO ", b"rr", b"a" * 50]
    ),
    max_size=400,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_pieces, st.binary(max_size=64))
def test_fuzz_scan_finds_exactly_the_anchor_lines(pieces, sample):
    buf = b"".join(pieces)
    old = os.environ.get("EPDOCTOR_SCANNER")
    try:
        for how in ("find", "re2"):  # the plan of a checkout without RE2, and RE2's one pass
            os.environ["EPDOCTOR_SCANNER"] = how
            for plan in (scanner.make_plan(sample), scanner.make_plan(buf)):
                got, n, _ = scanner._scan(buf, len(buf), 0, plan)
                assert n == buf.count(b"\n")
                assert got == _naive(buf)
    finally:
        if old is None:
            os.environ.pop("EPDOCTOR_SCANNER", None)
        else:
            os.environ["EPDOCTOR_SCANNER"] = old
