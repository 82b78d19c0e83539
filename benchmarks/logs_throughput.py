#!/usr/bin/env python3
"""epdoctor logs throughput and peak RSS next to `grep -cE` over the same signatures, in one run.

Generates a 16-rank NCCL INFO log (2 nodes x 8 GPUs) from real line shapes: each rank's init
block is the real p5en GIN-proxy sample (tests/fixtures/logs/real-p5en-gin-proxy.log, host, pid
and device rewritten), the bulk is NCCL's own per-operation and connection lines (COLL
`%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d]
stream %p` from src/enqueue.cc; `Channel NN/MM : a[b] -> c[d] [send] via NET/Libfabric/N/GDRDMA`,
`Trees [...]`, `P2P Chunksize set to`, `comm ... nRanks ...` as in tests/fixtures/h200-run/),
interleaved across ranks, with a few rank restarts that re-print the init block.

A second file is the repository's real logs (tests/fixtures/logs/, the blind sets left out)
concatenated to the same size: a log full of failures.

    python benchmarks/logs_throughput.py            # 256 MB each
    python benchmarks/logs_throughput.py --size 1G  # targets: synthetic >= 1.0x grep, <= 64 MB;
                                                    # real fixtures >= 0.5x grep, <= 128 MB

The baseline is `grep -cE` with one fixed reference pattern of trouble words (REFERENCE below),
not the scanner's own anchors: the analyzer reads every line that signals trouble, and is
measured against a plain grep for such lines. Both run as whole commands (`epdoctor logs --json
FILE`, process start included), alternated, --repeat times each after the page cache is warmed;
the medians are compared and the spread printed. `EPDOCTOR_SCANNER=find` measures the
pure-Python scanner of a checkout without RE2.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


REFERENCE = (
    "WARN|[Ee]rror|[Ff]ail|fault|exitcode|Traceback|timed? ?out|abort|unsupported|denied|"
    "refused|cannot|not found"
)

INIT = REPO / "tests" / "fixtures" / "logs" / "real-p5en-gin-proxy.log"
HOSTS = ("p5en-st-0", "p5en-st-1")


def _size(s: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    s = s.strip().upper().rstrip("B")
    return int(float(s[:-1]) * units[s[-1]]) if s[-1] in units else int(s)


def _init_block(host: str, pid: int, dev: int) -> bytes:
    lines = []
    for line in INIT.read_text().splitlines():
        _, _, rest = line.partition("] ")
        lines.append(f"{host}:{pid}:{pid} [{dev}] {rest}")
    return ("\n".join(lines) + "\n").encode()


def generate(path: Path, size: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    ranks = [
        (h, 40000 + 1000 * hi + d, d, hi * 8 + d) for hi, h in enumerate(HOSTS) for d in range(8)
    ]
    ops = ("AllReduce", "AllGather", "ReduceScatter", "Broadcast", "SendRecv")
    with path.open("wb") as f:
        written = 0
        for h, pid, d, _ in ranks:
            written += f.write(_init_block(h, pid, d))
        op = 0
        restarts = {size // 3, 2 * size // 3}
        while written < size:
            buf = []
            for _ in range(4096):
                h, pid, d, r = ranks[rng.randrange(16)]
                tid = pid + rng.randrange(1, 48)
                k = rng.random()
                op += 1
                if k < 0.80:
                    msg = (
                        f"{ops[op % 5]}: opCount {op:x} sendbuff 0x7f{rng.getrandbits(36):09x} "
                        f"recvbuff 0x7f{rng.getrandbits(36):09x} count {rng.choice((1024, 262144, 1048576, 4194304))} "
                        f"datatype {rng.choice((7, 9))} op 0 root 0 comm 0x55{rng.getrandbits(32):08x} "
                        f"[nranks=16] stream 0x55{rng.getrandbits(32):08x}"
                    )
                elif k < 0.95:
                    peer = (r + 8) % 16
                    msg = f"Channel {op % 32:02d}/0 : {r}[{d}] -> {peer}[{d}] [send] via NET/Libfabric/{d}/GDRDMA"
                elif k < 0.98:
                    msg = f"Trees [0] {(r + 1) % 16}/-1/-1->{r}->{(r + 15) % 16} [1] {(r + 2) % 16}/-1/-1->{r}->-1"
                elif k < 0.99:
                    msg = "P2P Chunksize set to 524288"
                else:
                    msg = f"comm 0x55{rng.getrandbits(32):08x} rank {r} nRanks 16 nNodes 2 localRanks 8 localRank {d} MNNVL 0"
                buf.append(f"{h}:{pid}:{tid} [{d}] NCCL INFO {msg}\n")
            chunk = "".join(buf).encode()
            written += f.write(chunk)
            for mark in list(restarts):
                if written >= mark:
                    restarts.discard(mark)
                    h, pid, d, _ = ranks[rng.randrange(16)]
                    written += f.write(_init_block(h, pid + 7, d))


def real_fixtures(path: Path, size: int) -> None:
    """The repository's real failing and healthy logs (tests/fixtures/logs/, the blind sets
    left out) concatenated to ``size``: a log full of failures, as an on-call pastes them."""
    files = sorted(
        p
        for p in (REPO / "tests" / "fixtures" / "logs").rglob("*.log")
        if "blind" not in p.parts[-2]
    )
    one = b"".join(p.read_bytes() for p in files)
    with path.open("wb") as f:
        written = 0
        while written < size:
            written += f.write(one)


def _timed(cmd: list[str]) -> float:
    """Wall seconds of a whole command, process start included."""
    t = time.perf_counter()
    subprocess.run(cmd, capture_output=True, check=False)
    return time.perf_counter() - t


def measure(path: Path, repeat: int) -> dict:
    """grep and `epdoctor logs --json` alternated, each run a whole command; medians, spread."""
    epd = [sys.executable, "-m", "epdoctor", "logs", "--json", str(path)]
    grep = ["grep", "-cE", REFERENCE, str(path)]
    with path.open("rb") as f:  # warm the page cache for both tools
        while f.read(1 << 24):
            pass
    g_times, e_times, e_rss, doc = [], [], [], {}
    for _ in range(repeat):
        g_times.append(_timed(grep))
        # peak RSS of one epdoctor run and its worker: a fresh child each time
        r = subprocess.run(
            [sys.executable, "-c", RSS_RUNNER, *epd], capture_output=True, check=False, cwd=REPO
        )
        info = json.loads(r.stdout.splitlines()[-1])
        e_times.append(info["seconds"])
        e_rss.append(info["rss_kb"])
        doc = json.loads(info["out"]) if info["out"] else {}
    return {"grep": g_times, "epdoctor": e_times, "rss_kb": max(e_rss), "doc": doc}


# runs one whole command as a child and reports its wall time and the peak RSS of it and its
# worker processes (resource.RUSAGE_CHILDREN of this wrapper holds only that command's tree)
RSS_RUNNER = r"""
import json, resource, subprocess, sys, time
t = time.perf_counter()
r = subprocess.run(sys.argv[1:], capture_output=True)
dt = time.perf_counter() - t
print(json.dumps({"seconds": dt, "rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                  "out": r.stdout.decode("utf-8", "replace")}))
"""


def _report(name: str, path: Path, m: dict, target: float, rss_target: int) -> None:
    mb = path.stat().st_size / 1e6
    g, e = statistics.median(m["grep"]), statistics.median(m["epdoctor"])
    doc = m["doc"]
    print(f"== {name}: {mb:.0f} MB, {len(m['grep'])} runs each, whole commands")
    print(
        f"grep -cE (reference pattern): median {g:.2f}s (spread {min(m['grep']):.2f}-{max(m['grep']):.2f})"
    )
    print(
        f"epdoctor logs --json: median {e:.2f}s (spread {min(m['epdoctor']):.2f}-"
        f"{max(m['epdoctor']):.2f}); {doc.get('candidate_lines')} candidate lines, "
        f"{doc.get('repeated_lines')} repeated, {doc.get('dropped_lines')} dropped"
    )
    print(f"ratio epdoctor/grep speed: {g / e:.2f}x  (target >= {target}x)")
    print(f"peak RSS: {m['rss_kb'] / 1024:.0f} MB  (target <= {rss_target} MB)")
    print(
        f"findings: {', '.join(f['code'] + ':' + f['severity'] for f in doc.get('findings', [])[:8])}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="256M", help="log size (e.g. 256M, 1G)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each command (median, spread)")
    ap.add_argument("--only", choices=("synthetic", "real"), help="one of the two files")
    args = ap.parse_args()
    size = _size(args.size)
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "synthetic"):
            path = Path(tmp) / "nccl-16rank.log"
            generate(path, size)
            _report("synthetic 16-rank NCCL INFO log", path, measure(path, args.repeat), 1.0, 64)
            path.unlink()
        if args.only in (None, "real"):
            path = Path(tmp) / "real-fixtures.log"
            real_fixtures(path, size)
            _report("real fixture logs concatenated", path, measure(path, args.repeat), 0.5, 128)
    print(f"cpus: {os.cpu_count()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
