#!/usr/bin/env python3
"""epdoctor logs throughput and peak RSS next to `grep -cE` over the same signatures, in one run.

Generates a 16-rank NCCL INFO log (2 nodes x 8 GPUs) from real line shapes: each rank's init
block is the real p5en GIN-proxy sample (tests/fixtures/logs/real-p5en-gin-proxy.log, host, pid
and device rewritten), the bulk is NCCL's own per-operation and connection lines (COLL
`%s: opCount %lx sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d]
stream %p` from src/enqueue.cc; `Channel NN/MM : a[b] -> c[d] [send] via NET/Libfabric/N/GDRDMA`,
`Trees [...]`, `P2P Chunksize set to`, `comm ... nRanks ...` as in tests/fixtures/h200-run/),
interleaved across ranks, with a few rank restarts that re-print the init block.

    python benchmarks/logs_throughput.py            # 256 MB
    python benchmarks/logs_throughput.py --size 1G  # the 1 GB target: >= 1.0x grep, <= 64 MB RSS

The baseline is `grep -cE` with one fixed reference pattern of trouble words (REFERENCE below),
not the scanner's own anchors: the analyzer reads every line that signals trouble (open-world
triage), and is measured against a plain grep for such lines. The page cache is warmed first;
each tool runs --repeat times and the best time counts. `EPDOCTOR_SCANNER=find` measures the
pure-Python scanner of a checkout without RE2.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from epdoctor.facts.logs import scanner  # noqa: E402

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


RUNNER = r"""
import json, resource, sys, time
sys.path.insert(0, sys.argv[2])
from epdoctor.logwatch import analyze_paths
t = time.perf_counter()
a = analyze_paths([sys.argv[1]])
dt = time.perf_counter() - t
rss = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
print(json.dumps({"seconds": dt, "rss_kb": rss, "ranks": len(a.ranks), "findings": [f.code + ":" + f.status.value for f in a.findings], "workers": a.stats.workers, "candidates": a.facts.candidates}))
"""


def run_grep(path: Path) -> tuple[float, int]:
    t = time.perf_counter()
    r = subprocess.run(["grep", "-cE", REFERENCE, str(path)], capture_output=True, check=False)
    return time.perf_counter() - t, int(r.stdout.strip() or 0)


def run_epdoctor(path: Path) -> dict:
    r = subprocess.run(
        [sys.executable, "-c", RUNNER, str(path), str(REPO)], capture_output=True, check=True
    )
    return json.loads(r.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="256M", help="log size (e.g. 256M, 1G)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", metavar="FILE", help="write the log here and keep it")
    args = ap.parse_args()
    size = _size(args.size)
    tmp = None
    if args.keep:
        path = Path(args.keep)
    else:
        tmp = tempfile.TemporaryDirectory()
        path = Path(tmp.name) / "nccl-16rank.log"
    try:
        t = time.perf_counter()
        generate(path, size)
        print(
            f"generated {path.stat().st_size / 1e6:.0f} MB in {time.perf_counter() - t:.1f}s",
            flush=True,
        )
        with path.open("rb") as f:  # warm the page cache for both tools
            while f.read(1 << 24):
                pass
        g = min(run_grep(path) for _ in range(args.repeat))
        e = min((run_epdoctor(path) for _ in range(args.repeat)), key=lambda d: d["seconds"])
        mb = path.stat().st_size / 1e6
        g_tp, e_tp = mb / g[0], mb / e["seconds"]
        print(f"grep -cE (reference pattern): {g[0]:.2f}s  {g_tp:.0f} MB/s  ({g[1]} lines)")
        print(
            f"epdoctor logs: {e['seconds']:.2f}s  {e_tp:.0f} MB/s  ({e['candidates']} lines read, "
            f"{e['ranks']} ranks, {e['workers']} processes, "
            f"{len(scanner.ANCHORS)} anchors, scanner {'find' if scanner._matcher(scanner.ANCHORS) is None else 're2'})"
        )
        print(f"ratio epdoctor/grep: {e_tp / g_tp:.2f}x  (target >= 1.0x)")
        print(f"peak RSS: {e['rss_kb'] / 1024:.0f} MB  (target <= 64 MB at 1 GB)")
        print(f"findings: {', '.join(e['findings'])}")
        print(f"cpus: {os.cpu_count()}")
    finally:
        if tmp:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
