"""Built-in EP kernel test: bandwidth per token count and overhead over plain all_to_all_single.

Runs `epdoctor run kernel-test --builtin --baseline` once over a sweep of token counts (both the
EP exchange and the bare collective of the same bytes are measured in that same run) and prints,
per token count, the median over ranks of dispatch/combine GB/s, baseline GB/s and the overhead
ratio (EP exchange time / baseline time, with the 1.10 target of the multi-GPU issue) and the
step ratio (the exchange plus the local layout and reduction around it / baseline).

    python benchmarks/ep_kernel_bench.py --gpus 8 --tokens 256,1024,4096,16384
    python benchmarks/ep_kernel_bench.py --gpus 2 --backend gloo --tokens 64,256 --hidden 256

Exit 0 when every rank's numerics passed and every overhead ratio is under the target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

TARGET = 1.10


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--gpus", type=int, default=1)
    p.add_argument("--tokens", default="256,1024,4096,16384")
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--python", help="python with PyTorch (default: epdoctor's choice)")
    p.add_argument("--run-dir", default="")
    p.add_argument("--json-out", help="also write the full kernel-test report here")
    a = p.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [
        sys.executable,
        "-m",
        "epdoctor",
        "run",
        "kernel-test",
        "--builtin",
        "--gpus",
        str(a.gpus),
        "--tokens",
        a.tokens,
        "--baseline",
        "--backend",
        a.backend,
        f"--test-arg=--hidden={a.hidden}",
        f"--test-arg=--iters={a.iters}",
        "--yes",
        "--no-preflight",
        "--json",
    ]
    if a.python:
        cmd += ["--python", a.python]
    if a.run_dir:
        cmd += ["--run-dir", a.run_dir]
    env = {**os.environ, "PYTHONPATH": root + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=root, check=False)
    try:
        report = json.loads(proc.stdout)
    except ValueError:
        print(proc.stdout[-4000:], proc.stderr[-4000:], sep="\n", file=sys.stderr)
        return 2
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
    rows = report.get("ranks") or []
    by_size: dict[int, list[dict]] = {}
    for r in rows:
        for s in r.get("sweep") or []:
            by_size.setdefault(s["num_tokens"], []).append(s)
    print(
        f"{'tokens':>8} {'dispatch GB/s':>14} {'combine GB/s':>13} {'a2a GB/s':>9} "
        f"{'EP/a2a':>7} {'step/a2a':>9}  (median over {len(rows)} ranks, target < {TARGET})"
    )
    worst = 0.0
    for n in sorted(by_size):
        ss = by_size[n]

        def med(key: str, ss: list[dict] = ss) -> float:
            vals = [s[key] for s in ss if isinstance(s.get(key), (int, float))]
            return statistics.median(vals) if vals else float("nan")

        ratio = med("overhead_ratio")
        worst = max(worst, ratio)
        print(
            f"{n:>8} {med('dispatch_gbps'):>14.2f} {med('combine_gbps'):>13.2f} "
            f"{med('baseline_gbps'):>9.2f} {ratio:>7.3f} {med('step_ratio'):>9.3f}"
        )
    print("numerics:", ", ".join(f"rank {r['rank']} {r['numerics']}" for r in rows))
    print(
        "network:",
        ", ".join(sorted({str(r.get("network")) for r in rows})),
        "| peers via:",
        ", ".join(sorted({t for r in rows for t in r.get("peers_via", [])})) or "none",
    )
    print("kernel test:", report.get("status"))
    ok = report.get("status") == "pass" and worst < TARGET
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
