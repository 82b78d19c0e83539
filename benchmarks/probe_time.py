#!/usr/bin/env python3
"""Time one node-probe run against `ldconfig -p` alone, measured in the same run.

    python3 benchmarks/probe_time.py [--runs 7]

Prints the median wall time of each and their ratio. The probe gathers everything epdoctor needs
in one round trip (nvidia-smi, sysfs, ELF scans of every libnccl/plugin, site-packages); the
baseline is the single cheapest command a hand check would start with.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROBE = Path(__file__).resolve().parent.parent / "probes" / "node_probe.py"


def timed(argv: list[str], stdin: bytes | None = None) -> tuple[float, bytes]:
    t0 = time.perf_counter()
    out = subprocess.run(argv, input=stdin, capture_output=True, check=False).stdout
    return time.perf_counter() - t0, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    src = PROBE.read_bytes()
    timed([sys.executable, "-", "--deadline", "60"], src)  # warm the page cache once
    probe_t, base_t = [], []
    doc = b""
    for _ in range(args.runs):
        t, doc = timed([sys.executable, "-", "--deadline", "60"], src)
        probe_t.append(t)
        t, _ = timed([ldconfig, "-p"])
        base_t.append(t)
    p, b = statistics.median(probe_t), statistics.median(base_t)
    sections = json.loads(doc).get("timings", {}) if doc else {}
    slowest = sorted(sections.items(), key=lambda kv: -kv[1])[:4]
    print(
        f"node probe      median {p * 1000:8.1f} ms over {args.runs} runs (one round trip, all sections)"
    )
    print(f"ldconfig -p     median {b * 1000:8.1f} ms (baseline)")
    print(f"ratio probe / ldconfig -p: {p / b:.1f}x")
    print("slowest sections: " + ", ".join(f"{k} {v * 1000:.0f} ms" for k, v in slowest))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
