"""No evidence is dropped: a failing rank after a million candidate lines is reported, a worker
returns every candidate it found, and a rank's latest trouble lines are kept with its first."""

from __future__ import annotations

import os

from epdoctor.facts.logs.model import MAX_TROUBLES_PER_RANK, LogFacts
from epdoctor.logwatch import analyze_paths
from epdoctor.targets import logstream


def test_a_failing_rank_after_a_million_candidate_lines_is_reported(tmp_path):
    path = tmp_path / "big.log"
    storm = b"".join(
        b"h%d:%d:%d [%d] NCCL WARN NET/OFI Could not find any optimal provider, retrying\n"
        % (i % 8, 100 + i % 8, 100 + i % 8, i % 8)
        for i in range(64)
    )
    with open(path, "wb") as f:
        for _ in range(1_000_000 // 64 + 1):  # a million candidate lines, a warning storm
            f.write(storm)
        f.write(b"late:9:9 [0] transport/net.cc:100 NCCL WARN Cuda failure 'out of memory'\n")
    assert os.path.getsize(path) > logstream.PARALLEL_MIN  # two processes read it
    a = analyze_paths([str(path)])
    late = [f for f in a.findings if f.code == "E803"]
    assert late and any("late:9" in e for e in late[0].evidence), [f.code for f in a.findings]
    assert a.to_json()["dropped_lines"] == 0 and a.to_json()["repeated_lines"] > 900_000


def test_a_worker_returns_every_candidate_it_found(tmp_path):
    path = tmp_path / "dense.log"
    n = 250_000  # more than a worker used to return before counting the rest as dropped
    path.write_bytes(b"".join(b"h:1:1 [0] NCCL WARN oddity %d\n" % i for i in range(n)))
    with open(tmp_path / "spool", "w+b") as spool:
        lines, count, _ = logstream.scan_range(str(path), 0, path.stat().st_size, spool.fileno())
        spool.seek(0)
        got = list(logstream._read_spool(spool, count))
    assert lines == n and count == n and got[-1] == (n, b"h:1:1 [0] NCCL WARN oddity %d" % (n - 1))


def test_a_ranks_latest_trouble_lines_are_kept_with_its_first():
    f = LogFacts()
    total = MAX_TROUBLES_PER_RANK + 1000
    for i in range(total):
        f.add("x", i + 1, b"h:1:1 [0] NCCL WARN oddity number %d" % i)
    kept = f.all_troubles()
    assert kept[0].line_no == 1 and kept[-1].line_no == total  # the first and the last
    assert f.summarised == total - len(kept) > 0  # the ones between are counted, said
    # the same line again is one trouble with a count, not a new line to judge
    g = LogFacts()
    for i in range(5):
        g.add("x", i + 1, b"h:1:1 [0] NCCL WARN same thing")
    (t,) = g.all_troubles()
    assert t.repeats == 4 and t.last_line == 5 and "4 more times, last at line 5" in t.evidence()
