"""Kernel-test gates: exit codes, per-rank results, numerics and the EFA banner.

Each gate is one verdict with its evidence. A gate passes only on evidence it
saw; evidence that is missing (a rank that printed nothing, a log that never
showed a provider line) is a failure or unknown, never a pass by omission.
The seeds' run-kernel-test.sh is the model: every node's exit code AND the
provider-specific banner ``Selected provider is efa, fabric is efa-direct
(found N nics)`` on every rank, N equal to the instance's EFA count; a
``tcp;ofi_rxm`` provider or the Socket network fails it.

The per-rank network facts are the log analyzer's (``epdoctor.facts.logs``
``RankFacts``, read with the channel lines: ``LogAnalyzer(transports=True)``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from epdoctor import knowledge
from epdoctor.checks.logs import short_of_nics, why_not_efa
from epdoctor.checks.registry import detector
from epdoctor.facts.logs.model import RankFacts
from epdoctor.model import Finding, Status

RESULT_MARKER = "EPDOCTOR_KERNEL_TEST"


@dataclass(frozen=True, init=False)
class Gate:
    """One launch verdict: the gate's name and the Finding it carries.

    The Finding's code is the trap that explains a failure ("" when none does); the gate's
    summary is its title. Built as ``Gate(name, status, summary, evidence, code)``.
    """

    name: str
    result: Finding

    def __init__(
        self,
        name: str,
        status: Status,
        summary: str,
        evidence: tuple[str, ...] = (),
        code: str | None = None,
    ) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "result", Finding(code or "", status, summary, tuple(evidence)))

    @property
    def status(self) -> Status:
        return self.result.status

    @property
    def summary(self) -> str:
        return self.result.title

    @property
    def evidence(self) -> tuple[str, ...]:
        return self.result.evidence

    @property
    def code(self) -> str | None:
        return self.result.code or None

    def finding(self, target: str = "") -> Finding | None:
        """The Finding to report: a gate that did not pass and has a trap to explain it."""
        if self.code is None or self.status in (Status.PASS, Status.SKIP):
            return None
        trap = knowledge.get(self.code)
        return replace(self.result, fix=trap.fix_text(), target=target)

    def to_json(self) -> dict[str, Any]:
        return {
            "gate": self.name,
            "status": self.status.value,
            "summary": self.summary,
            "evidence": list(self.evidence),
            "code": self.code,
        }


def overall(gates: Iterable[Gate]) -> Status:
    return max((g.status for g in gates), key=lambda s: s.rank, default=Status.UNKNOWN)


@detector("D702", domain="launch")
def exit_code_gate(codes: Mapping[str, int | None]) -> Gate:
    """Every started process exited 0 (None: still running or never reaped)."""
    bad = {n: c for n, c in codes.items() if c != 0}
    ev = tuple(
        f"{n}: exit {c if c is not None else 'unknown (did not exit)'}"
        for n, c in sorted(codes.items())
    )
    if not codes:
        return Gate("exit codes", Status.UNKNOWN, "no process was started", code="D702")
    if bad:
        return Gate(
            "exit codes",
            Status.FAIL,
            f"{len(bad)} of {len(codes)} processes exited non-zero",
            ev,
            "D702",
        )
    return Gate("exit codes", Status.PASS, f"all {len(codes)} processes exited 0", ev)


# What a node's log says when the test never got going: the interpreter lacks a module
# (`python3 -m torch.distributed.run` without PyTorch: "Error while finding module
# specification for 'torch.distributed.run' (ModuleNotFoundError: No module named 'torch')"),
# the script is not there, or the interpreter itself is missing on that node.
_START_FAILURES = (
    ("module", re.compile(r"No module named '(?P<what>[\w.]+)'")),
    ("file", re.compile(r"can't open file '(?P<what>[^']+)'")),
    ("program", re.compile(r"^env: '(?P<what>[^']+)': No such file or directory")),
)
_WHAT_IT_IS = {"torch": "PyTorch", "deep_ep": "DeepEP", "tensorrt_llm": "TensorRT-LLM"}


def start_failure(line: str) -> tuple[str, str] | None:
    """(kind, what) when a log line says why a process could not start its test."""
    for kind, rx in _START_FAILURES:
        m = rx.search(line)
        if m:
            return kind, m.group("what")
    return None


@detector("D702", domain="launch")
def start_gate(
    failures: Mapping[str, tuple[str, str, str]],
    codes: Mapping[str, int | None],
    python: str = "python3",
) -> Gate | None:
    """Why nodes never ran the test: the first such line of every node that exited non-zero.

    ``failures`` maps a node's process name to (kind, what, log line). This is the cause
    when it is there: the results, numerics and network gates only follow from it.
    """
    bad = {n: f for n, f in sorted(failures.items()) if codes.get(n) not in (None, 0)}
    if not bad:
        return None
    kind, what, _ = next(iter(bad.values()))
    if kind == "module":
        top = what.split(".")[0]
        name = _WHAT_IT_IS.get(top, f"module {top!r}")
        summary = f"No module named {what!r} ({python} has no {name}): the test never started"
        if top == "torch":
            summary += "; --python names a python with PyTorch on every node"
    elif kind == "file":
        summary = f"the test script is not there ({what}): the test never started"
    else:
        summary = f"{what} is not installed on the node: the test never started"
    nodes = ", ".join(bad)
    return Gate(
        "start",
        Status.FAIL,
        f"{nodes}: {summary}",
        tuple(f"{n}: {line}" for n, (_, _, line) in bad.items()),
        "D702",
    )


def not_reached(name: str, why: str) -> Gate:
    """A gate the run never got to (the start gate says why)."""
    return Gate(name, Status.SKIP, f"not reached: {why}")


def parse_results(lines: Iterable[str]) -> dict[int, dict[str, Any]]:
    """The built-in test's one JSON line per rank, keyed by rank."""
    out: dict[int, dict[str, Any]] = {}
    for line in lines:
        i = line.find(RESULT_MARKER + " {")
        if i < 0:
            continue
        try:
            doc = json.loads(line[i + len(RESULT_MARKER) + 1 :])
        except ValueError:
            continue
        if isinstance(doc, dict) and isinstance(doc.get("rank"), int):
            out[doc["rank"]] = doc
    return out


@detector("D702", domain="launch")
def results_gate(results: Mapping[int, Mapping[str, Any]], world: int) -> Gate:
    missing = [r for r in range(world) if r not in results]
    errors = [f"rank {r}: {d['error']}" for r, d in sorted(results.items()) if d.get("error")]
    if missing:
        return Gate(
            "results",
            Status.FAIL,
            f"{len(missing)} of {world} ranks printed no result line",
            (f"missing ranks: {_ranges(missing)}", *errors),
            "D702",
        )
    if errors:
        return Gate(
            "results", Status.FAIL, f"{len(errors)} ranks reported an error", tuple(errors), "D702"
        )
    return Gate("results", Status.PASS, f"a result line from each of the {world} ranks")


@detector("D701", "D702", domain="launch")
def numerics_gate(results: Mapping[int, Mapping[str, Any]]) -> Gate:
    bad, skipped, not_run, ev = [], [], [], []
    for r, d in sorted(results.items()):
        if d.get("numerics") == "skipped":
            skipped.append(r)
            continue
        if d.get("error") and not d.get("sizes"):
            not_run.append(r)
            ev.append(f"rank {r} stopped before the check: {d['error']}")
            continue
        for size in d.get("sizes") or []:
            for which in ("dispatch_check", "combine_check"):
                chk = size.get(which) or {}
                if not chk.get("ok"):
                    bad.append(r)
                    first = chk.get("first") or {}
                    ev.append(
                        f"rank {r} {which.split('_')[0]} at {size.get('num_tokens')} tokens: "
                        f"{chk.get('mismatches')} of {chk.get('elements')} elements differ"
                        + (
                            f" (first at {first.get('index')}: got {first.get('got')}, "
                            f"want {first.get('want')})"
                            if first
                            else ""
                        )
                    )
        if d.get("numerics") not in ("pass", "fail", "skipped"):
            bad.append(r)
            ev.append(f"rank {r}: no numerics verdict")
        elif d.get("numerics") == "fail" and r not in bad:
            bad.append(r)
            ev.append(f"rank {r}: numerics fail" + (f" ({d['error']})" if d.get("error") else ""))
    if not results:
        return Gate("numerics", Status.UNKNOWN, "no rank reported numerics", code="D701")
    if bad:
        return Gate(
            "numerics",
            Status.FAIL,
            f"dispatch/combine differ from the CPU oracle on ranks {_ranges(sorted(set(bad)))}",
            tuple(ev[:12]),
            "D701",
        )
    if not_run:
        return Gate(
            "numerics",
            Status.UNKNOWN,
            f"ranks {_ranges(not_run)} stopped before the numerics check",
            tuple(ev[:12]),
            "D702",
        )
    if skipped:
        return Gate(
            "numerics",
            Status.UNKNOWN,
            f"numerics not checked on ranks {_ranges(skipped)} (--skip-check)",
            code="D701",
        )
    return Gate(
        "numerics",
        Status.PASS,
        f"dispatch and combine equal the CPU oracle element-wise on all {len(results)} ranks",
    )


@dataclass(frozen=True)
class NetworkExpectation:
    """What the network gate demands. efa=None: report what was used, demand nothing."""

    efa: bool | None
    efa_count: int | None = None  # the instance's EFA interface count, when known
    multi_node: bool = False
    reason: str = ""


@detector("T701", "T702", domain="launch")
def network_gate(ranks: Sequence[RankFacts], expected_ranks: int, exp: NetworkExpectation) -> Gate:
    """The provider banner on every rank (when EFA is expected), the network NCCL used otherwise.

    ``ranks`` are NCCL processes (``LogFacts.nccl_ranks()``).
    """
    seen = len(ranks)
    ev: list[str] = []
    for r in ranks:
        prov = ", ".join(f"{p}/{f} ({n} nics)" for p, f, n in r.providers) or "no provider line"
        ev.append(
            f"{r.key} dev {sorted(r.devs)}: network {r.network or 'not logged'}; "
            f"provider {prov}; peers via {', '.join(_peers(r)) or 'no channel'}"
        )
    if seen == 0:
        return Gate(
            "network",
            Status.UNKNOWN,
            "no NCCL INFO line from any rank: the network NCCL used cannot be seen "
            "(is NCCL_DEBUG=INFO reaching the processes?)",
            code="T701",
        )
    short = seen < expected_ranks
    if exp.efa is None or exp.efa is False:
        nets = sorted({r.network or "not logged" for r in ranks})
        used_net = any(t.startswith("NET/") for r in ranks for t in _peers(r))
        if exp.multi_node and not any(r.on_efa() for r in ranks):
            return Gate(
                "network",
                Status.WARN,
                f"multi-node run without EFA: NCCL used {', '.join(nets)}"
                + (f" ({exp.reason})" if exp.reason else ""),
                tuple(ev),
                "T701",
            )
        paths = sorted({t for r in ranks for t in _peers(r)})
        summary = (
            f"NCCL network plugin {', '.join(nets)}; peers via {', '.join(paths) or 'none (one rank)'}"
            + ("" if used_net else ": no traffic crossed a NIC")
            + (f"; EFA not expected ({exp.reason})" if exp.reason else "")
        )
        status = Status.WARN if short else Status.PASS
        if short:
            summary += f"; only {seen} of {expected_ranks} ranks logged"
        return Gate("network", status, summary, tuple(ev), "T701" if short else None)
    bad: list[str] = []
    wrong_count: list[str] = []
    for r in ranks:
        if r.on_efa() is not True:
            bad.append(f"{r.key}: {why_not_efa(r)}")
        elif r in short_of_nics([r], exp.efa_count) and r.provider is not None:
            wrong_count.append(
                f"{r.key}: found {r.provider[2]} nics, the instance has {exp.efa_count}"
            )
    if short:
        bad.append(
            f"only {seen} of {expected_ranks} ranks logged NCCL lines: "
            "the banner cannot be seen on the others"
        )
    if bad:
        return Gate(
            "network",
            Status.FAIL,
            f"the efa-direct banner is missing on {len(bad)} of {max(seen, expected_ranks)} ranks",
            tuple(bad + ev)[:16],
            "T701",
        )
    if wrong_count:
        return Gate(
            "network",
            Status.FAIL,
            f"NCCL found fewer EFA NICs than the instance has on {len(wrong_count)} ranks",
            tuple(wrong_count + ev)[:16],
            "T702",
        )
    nics = sorted({r.provider[2] for r in ranks if r.provider})
    suffix = (
        "" if exp.efa_count is not None else " (instance EFA count unknown: NIC count not checked)"
    )
    return Gate(
        "network",
        Status.PASS,
        f"efa-direct on all {seen} ranks, {'/'.join(map(str, nics))} nics{suffix}",
        tuple(ev),
    )


def _peers(r: RankFacts) -> list[str]:
    """The transports its channel lines name (P2P, SHM, NET/...); none when not read."""
    return sorted(r.transports or ())


def _ranges(nums: Sequence[int]) -> str:
    out, start, prev = [], None, None
    for n in nums:
        if start is None:
            start = prev = n
        elif n == prev + 1:  # type: ignore[operator]
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ",".join(out)


@dataclass
class KernelReport:
    """Everything a kernel-test run concluded, for panes, JSON and the exit code."""

    kind: str
    gates: list[Gate] = field(default_factory=list)
    per_rank: list[dict[str, Any]] = field(default_factory=list)
    counters: dict[str, Any] = field(default_factory=dict)
    stopped: list[str] = field(default_factory=list)
    logs: dict[str, str] = field(default_factory=dict)
    findings_seen: list[dict[str, Any]] = field(default_factory=list)  # from the log analyzer

    @property
    def status(self) -> Status:
        return overall(self.gates)

    def findings(self, target: str = "") -> list[Finding]:
        return [f for g in self.gates if (f := g.finding(target))]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "status": self.status.value,
            "gates": [g.to_json() for g in self.gates],
            "ranks": self.per_rank,
            "counters": self.counters,
            "stopped": self.stopped,
            "logs": self.logs,
            "log_findings": self.findings_seen,
        }


def rank_table(
    results: Mapping[int, Mapping[str, Any]], nets: Mapping[int, RankFacts | None], world: int
) -> list[dict[str, Any]]:
    """One row per expected rank: host, numerics, network, bandwidth (largest size)."""
    rows = []
    for r in range(world):
        d = results.get(r) or {}
        sizes = d.get("sizes") or []
        big = max(sizes, key=lambda s: s.get("num_tokens", 0)) if sizes else {}
        n = nets.get(r)
        rows.append(
            {
                "rank": r,
                "host": d.get("host") or (n.host if n else None),
                "numerics": d.get("numerics", "no result"),
                "network": (n.network if n else None),
                "provider": ("/".join(map(str, n.provider)) if n and n.provider else None),
                "peers_via": _peers(n) if n else [],
                "num_tokens": big.get("num_tokens"),
                "dispatch_gbps": big.get("dispatch_gbps"),
                "combine_gbps": big.get("combine_gbps"),
                "overhead_ratio": big.get("overhead_ratio"),
                "sweep": [
                    {
                        k: s.get(k)
                        for k in (
                            "num_tokens",
                            "dispatch_gbps",
                            "combine_gbps",
                            "baseline_gbps",
                            "overhead_ratio",
                            "step_ratio",
                            "layout_us",
                            "reduce_us",
                        )
                    }
                    for s in sizes
                ],
            }
        )
    return rows
