"""How long `epdoctor plan` takes, against baselines measured in the same run.

Prints, for the CLI, the wall time of `epdoctor plan --no-input --json` over
`epdoctor --help` (the start-up every command pays), and in process, the cost
of planning + rendering every engine x transport x instance x target
combination per plan, over one `json.dumps` of the trap catalogue (a pass over
the same knowledge with no rules). Ratios, not absolute targets.

    python benchmarks/plan_time.py [--repeat N]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def wall(cmd: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        subprocess.run(cmd, cwd=ROOT, capture_output=True, check=True)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    py = sys.executable
    help_s = wall([py, "-m", "epdoctor", "--help"], args.repeat)
    plan_s = wall(
        [py, "-m", "epdoctor", "plan", "--no-input", "--json", "--num-experts", "128"], args.repeat
    )
    print(
        f"cli: epdoctor --help {help_s * 1e3:.0f} ms; plan --json {plan_s * 1e3:.0f} ms; "
        f"ratio {plan_s / help_s:.2f}x"
    )

    from epdoctor import knowledge
    from epdoctor.knowledge import stack as pk
    from epdoctor.plan import PlanInput, make_plan
    from epdoctor.plan.model import ENGINES, TARGETS, TRANSPORTS

    t0 = time.perf_counter()
    for _ in range(args.repeat):
        json.dumps([t.to_json() for t in knowledge.all_traps()])
    base = (time.perf_counter() - t0) / args.repeat
    combos = list(itertools.product(ENGINES, TRANSPORTS, pk.instances(), TARGETS))
    with tempfile.TemporaryDirectory() as d:
        t0 = time.perf_counter()
        for i, (e, t, inst, target) in enumerate(combos):
            p = make_plan(
                PlanInput(engine=e, transport=t, instance=inst, target=target, num_experts=128)
            )
            p.render(f"{d}/{i}")
        per = (time.perf_counter() - t0) / len(combos)
    print(
        f"in process: {len(combos)} plans, {per * 1e3:.2f} ms per plan+render; "
        f"catalogue dump {base * 1e3:.2f} ms; ratio {per / base:.1f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
