"""Find the bad node: the built-in kernel test on node pairs (half-splits for large fleets).

Each pair run is a full kernel test with its gates. A node is an outlier when
* its runs fail while runs without it pass (F701),
* its ranks' NCCL used a network other than EFA (F702), or
* the bandwidth of its runs is well below the fleet median (F703),
each with the evidence of the runs behind it. Pairs form a ring (every node in
two pairs) so a failure can be pinned on the node both of its pairs share.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from epdoctor import knowledge
from epdoctor.checks.registry import detector
from epdoctor.launch.gates import KernelReport
from epdoctor.model import Finding, Status

SLOW_FRACTION = 0.6  # below 60% of the fleet median is "well below"
HALVES_FROM = 16  # fleets this large start with half-splits


def pair_plan(nodes: Sequence[str]) -> list[tuple[str, str]]:
    """A ring of pairs: n0-n1, n1-n2, ..., n(k-1)-n0 (just one pair for two nodes)."""
    n = len(nodes)
    if n < 2:
        return []
    if n == 2:
        return [(nodes[0], nodes[1])]
    return [(nodes[i], nodes[(i + 1) % n]) for i in range(n)]


def halves(nodes: Sequence[str]) -> tuple[list[str], list[str]]:
    mid = len(nodes) // 2
    return list(nodes[:mid]), list(nodes[mid:])


@dataclass
class GroupResult:
    """One kernel-test run over a group of nodes, reduced to what isolation needs."""

    nodes: tuple[str, ...]
    ok: bool
    network: dict[str, str | None] = field(default_factory=dict)  # node -> provider/fabric
    gbps: dict[str, float | None] = field(default_factory=dict)  # node -> median dispatch GB/s
    summary: str = ""


def from_report(report: KernelReport, nodes: Sequence[str], gpus: int) -> GroupResult:
    """Ranks 0..g-1 ran on nodes[0], g..2g-1 on nodes[1], ... (torchrun node-rank order)."""
    net: dict[str, str | None] = {}
    bw: dict[str, float | None] = {}
    for i, node in enumerate(nodes):
        rows = [r for r in report.per_rank if i * gpus <= r["rank"] < (i + 1) * gpus]
        provs = {r.get("provider") for r in rows}
        net[node] = next(iter(provs)) if len(provs) == 1 else ", ".join(sorted(map(str, provs)))
        vals = [r["dispatch_gbps"] for r in rows if isinstance(r.get("dispatch_gbps"), float)]
        bw[node] = statistics.median(vals) if vals else None
    bad = [g for g in report.gates if g.status in (Status.FAIL, Status.UNKNOWN)]
    ok = not bad
    summary = "pass" if ok else "; ".join(f"{g.name}: {g.summary}" for g in bad)
    return GroupResult(tuple(nodes), ok, net, bw, summary)


@dataclass(frozen=True)
class Outlier:
    node: str
    code: str
    reason: str
    evidence: tuple[str, ...]

    def finding(self) -> Finding:
        trap = knowledge.get(self.code)
        status = Status.WARN if trap.default_status is Status.WARN else Status.FAIL
        return Finding(
            self.code,
            status,
            f"{self.node}: {self.reason}",
            self.evidence,
            trap.fix_text(),
            self.node,
        )


@detector("F701", "F702", "F703", domain="launch")
def find_outliers(
    results: Sequence[GroupResult], expect_efa: bool = True, slow_fraction: float = SLOW_FRACTION
) -> list[Outlier]:
    out: list[Outlier] = []
    nodes = sorted({n for r in results for n in r.nodes})
    runs_of = {n: [r for r in results if n in r.nodes] for n in nodes}
    for n in nodes:
        mine = runs_of[n]
        if not mine or any(r.ok for r in mine):
            continue
        # every run with n failed: n is the outlier if a partner passes without it (when
        # every run fails, the problem is the fleet's, not one node's)
        partners = {p for r in mine for p in r.nodes if p != n}
        cleared = [p for p in partners if any(r.ok for r in runs_of[p])]
        if cleared:
            out.append(
                Outlier(
                    n,
                    "F701",
                    f"all {len(mine)} runs with it failed",
                    tuple(f"{'+'.join(r.nodes)}: {r.summary}" for r in mine),
                )
            )
    if expect_efa:
        for n in nodes:
            nets = {r.network.get(n) for r in runs_of[n] if n in r.network}
            bad = [x for x in nets if x is not None and not str(x).startswith("efa/efa-direct")]
            missing = [x for x in nets if x is None]
            if bad or (missing and nets == {None}):
                shown = ", ".join(sorted(map(str, nets)))
                out.append(
                    Outlier(
                        n,
                        "F702",
                        f"its ranks did not use efa-direct ({shown})",
                        tuple(
                            f"{'+'.join(r.nodes)}: provider {r.network.get(n)}" for r in runs_of[n]
                        ),
                    )
                )
    per_node = {
        n: [v for r in runs_of[n] if r.ok and (v := r.gbps.get(n)) is not None] for n in nodes
    }
    medians = {n: statistics.median(v) for n, v in per_node.items() if v}
    if len(medians) >= 3:
        fleet = statistics.median(medians.values())
        for n, m in sorted(medians.items()):
            if fleet > 0 and m < slow_fraction * fleet:
                out.append(
                    Outlier(
                        n,
                        "F703",
                        f"{m:.1f} GB/s, {m / fleet:.0%} of the fleet median {fleet:.1f}",
                        tuple(
                            f"{'+'.join(r.nodes)}: {r.gbps.get(n)} GB/s" for r in runs_of[n] if r.ok
                        ),
                    )
                )
    return out


RunGroup = Callable[[Sequence[str]], GroupResult]


def isolate(
    nodes: Sequence[str],
    run_group: RunGroup,
    on_result: Callable[[GroupResult], None] | None = None,
    expect_efa: bool = True,
) -> tuple[list[GroupResult], list[Outlier]]:
    """Half-splits first on large fleets (bisect towards failing halves), then pairs."""
    results: list[GroupResult] = []

    def run(group: Sequence[str]) -> GroupResult:
        r = run_group(group)
        results.append(r)
        if on_result:
            on_result(r)
        return r

    suspects = list(nodes)
    while len(suspects) >= HALVES_FROM:
        a, b = halves(suspects)
        ra, rb = run(a), run(b)
        if ra.ok and rb.ok:
            break
        suspects = a if not ra.ok else b
    for pair in pair_plan(suspects if len(suspects) < len(nodes) else list(nodes)):
        run(pair)
    return results, find_outliers(results, expect_efa=expect_efa)


def to_json(results: Sequence[GroupResult], outliers: Sequence[Outlier]) -> dict[str, Any]:
    return {
        "runs": [
            {
                "nodes": list(r.nodes),
                "ok": r.ok,
                "summary": r.summary,
                "network": r.network,
                "gbps": r.gbps,
            }
            for r in results
        ],
        "outliers": [
            {"node": o.node, "code": o.code, "reason": o.reason, "evidence": list(o.evidence)}
            for o in outliers
        ],
    }
