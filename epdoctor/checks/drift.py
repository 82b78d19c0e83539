"""Fleet drift: nodes that should match, compared fact by fact (F600-F610).

Input is the list of per-target diagnoses (anything with ``.result`` (TargetResult) and
``.node`` (NodeFacts or None)). For each fact the nodes are grouped by value; the largest
group is the fleet's value and the others are named as the odd nodes out. A node whose
value could not be seen makes the comparison UNKNOWN for it, never a pass; nodes that
could not be diagnosed at all are listed under F600.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from epdoctor.checks.base import Context, check, finding
from epdoctor.facts.node import NodeFacts
from epdoctor.model import Fact, Finding, Status

NA = object()  # this fact does not apply to the node (e.g. hw_counters without EFA devices)


@dataclass(frozen=True)
class Reading:
    """One node's value for one fact: a string, None (unknown, with why) or NA."""

    value: Any
    why: str = ""


def _fact(f: Fact[Any]) -> Reading:
    return Reading(str(f.value)) if f.known else Reading(None, f.reason)


def nccl(n: NodeFacts) -> Reading:
    if not n.nccl:
        return Reading("none found")
    versions = sorted({str(x.version.value) if x.version.known else "?" for x in n.nccl})
    if "?" in versions:
        return Reading(None, "a libnccl.so.2 without a readable version string")
    return Reading(", ".join(versions))


def driver(n: NodeFacts) -> Reading:
    return _fact(n.driver)


def _module(n: NodeFacts, name: str) -> Reading:
    f = n.modules.get(name)
    if f is None:
        return Reading(None, f"the probe did not report /sys/module/{name}")
    if not f.known:
        return Reading(None, f.reason)
    m = f.value
    if not m.loaded:
        return Reading("not loaded")
    return Reading(m.version or "loaded (no version file)")


def efa_ko(n: NodeFacts) -> Reading:
    return _module(n, "efa")


def gdrdrv(n: NodeFacts) -> Reading:
    r = _module(n, "gdrdrv")
    if r.value is None or n.dev_gdrdrv is None:
        return r
    return Reading(f"{r.value}, /dev/gdrdrv {'present' if n.dev_gdrdrv else 'absent'}")


def efa_installer(n: NodeFacts) -> Reading:
    if n.installer.known:
        return Reading(n.installer.value.version)
    return Reading(None, n.installer.reason)


def plugin(n: NodeFacts) -> Reading:
    if not n.plugins:
        return Reading("none found")
    parts = set()
    for p in n.plugins:
        if not p.symbols.known:
            return Reading(None, f"exports of {p.realpath} not readable")
        gin = _iface(p.exports("ncclGinPlugin_v"))
        net = _iface(p.exports("ncclNetPlugin_v"))
        gdr = p.gdrcopy_compiled_in
        gdr_s = ("yes" if gdr.value else "no") if gdr.known else "?"
        head = f"{p.version}: " if p.version else ""
        parts.add(f"{head}GIN {gin}, NET {net}, gdrcopy {gdr_s}")
    return Reading("; ".join(sorted(parts)))


def _iface(symbols: list[str]) -> str:
    """ncclGinPlugin_v11, ncclGinPlugin_v13 -> 'v11,v13' (numeric order)."""
    nums = sorted(int(x) for s in symbols if (x := s.rpartition("_v")[2]).isdigit())
    return ",".join(f"v{n}" for n in nums) or "none"


def libfabric(n: NodeFacts) -> Reading:
    return _fact(n.libfabric)


def efa_count(n: NodeFacts) -> Reading:
    if not n.rdma.known:
        return Reading(None, n.rdma.reason)
    return Reading(str(len(n.efa_devices())))


def instance_type(n: NodeFacts) -> Reading:
    return _fact(n.instance_type)


def hw_counters(n: NodeFacts) -> Reading:
    if not n.rdma.known:
        return Reading(None, n.rdma.reason)
    ports = [p for d in n.efa_devices() for p in d.ports]
    if not ports:
        return Reading(NA)
    have = sum(1 for p in ports if p.hw_counters is not None)
    if have == len(ports):
        return Reading("yes")
    return Reading("no" if have == 0 else f"{have} of {len(ports)} ports")


@dataclass(frozen=True)
class Aspect:
    code: str
    label: str
    read: Callable[[NodeFacts], Reading]
    per_instance_type: bool = False  # compare only among nodes of one instance type


ASPECTS: tuple[Aspect, ...] = (
    Aspect("F601", "NCCL", nccl),
    Aspect("F602", "NVIDIA driver", driver),
    Aspect("F603", "efa.ko", efa_ko),
    Aspect("F604", "gdrdrv", gdrdrv),
    Aspect("F605", "EFA installer", efa_installer),
    Aspect("F606", "aws-ofi-nccl plugin", plugin),
    Aspect("F607", "libfabric", libfabric),
    Aspect("F608", "EFA devices", efa_count, per_instance_type=True),
    Aspect("F609", "instance type", instance_type),
    Aspect("F610", "EFA hw_counters", hw_counters),
)


def _names(nodes: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(nodes[:limit])
    return shown + (f" and {len(nodes) - limit} more" if len(nodes) > limit else "")


def compare(aspect: Aspect, readings: dict[str, Reading], scope: str = "") -> Finding | None:
    """One finding for one fact over the nodes in `readings` (None when it applies to none)."""
    groups: dict[str, list[str]] = {}
    unknown: list[tuple[str, str]] = []
    for name, r in readings.items():
        if r.value is NA:
            continue
        if r.value is None:
            unknown.append((name, r.why))
        else:
            groups.setdefault(r.value, []).append(name)
    if not groups and not unknown:
        return None
    where = f" ({scope})" if scope else ""
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    evidence = [
        f"{aspect.label} {value}: {_names(nodes)} ({len(nodes)})" for value, nodes in ranked
    ]
    evidence += [f"{aspect.label} unknown on {name}: {why}" for name, why in unknown]
    if len(groups) > 1:
        top, top_nodes = ranked[0]
        tie = len(ranked[1][1]) == len(top_nodes)
        if tie:
            title = f"{aspect.label} differs between nodes{where}: " + "; ".join(
                f"{_names(n, 3)} {v}" for v, n in ranked[:4]
            )
        else:
            odd = [n for _, nodes in ranked[1:] for n in nodes]
            odd_value = f" ({ranked[1][0]})" if len(ranked) == 2 else ""
            title = (
                f"{aspect.label} differs{where} on {_names(odd, 4)}{odd_value}; "
                f"the other {len(top_nodes)} node(s) have {top}"
            )
        status = _SEVERITY.get(aspect.code, Status.WARN)
        return _finding(aspect.code, status, title, evidence)
    if unknown:
        known = f"the others agree on {ranked[0][0]}" if ranked else "no node could tell"
        title = f"{aspect.label} unknown on {_names([n for n, _ in unknown], 4)}{where}; {known}"
        return _finding(aspect.code, Status.UNKNOWN, title, evidence)
    value, nodes = ranked[0]
    if len(nodes) < 2:
        return None  # one node in this scope: nothing to compare
    return _finding(
        aspect.code,
        Status.PASS,
        f"{aspect.label} the same on all {len(nodes)} nodes{where}: {value}",
        evidence,
    )


def _finding(code: str, status: Status, title: str, evidence: list[str]) -> Finding:
    from dataclasses import replace

    return replace(finding(code, status, title, evidence), target="fleet")


def _status(default: Status) -> Status:
    return default if default in (Status.FAIL, Status.WARN) else Status.WARN


def _severities() -> dict[str, Status]:
    from epdoctor import knowledge

    return {a.code: _status(knowledge.get(a.code).default_status) for a in ASPECTS}


_SEVERITY: dict[str, Status] = {}


def drift_findings(diagnoses: Sequence[Any]) -> list[Finding]:
    """Drift findings for a fleet run (F600 for nodes that could not be compared)."""
    if not _SEVERITY:
        _SEVERITY.update(_severities())
    nodes: dict[str, NodeFacts] = {}
    missing: list[tuple[str, str]] = []
    for d in diagnoses:
        name = d.result.target.name
        if d.node is not None:
            nodes[_unique(name, nodes)] = d.node
        else:
            missing.append((name, d.result.error or "no probe document"))
    out: list[Finding] = []
    if missing:
        ev = [f"{n}: {why}" for n, why in missing]
        noun = "pod" if all(d.result.target.kind == "pod" for d in diagnoses) else "node"
        title = f"{len(missing)} of {len(diagnoses)} {noun}(s) not probed, so not compared: {_names([n for n, _ in missing], 4)}"
        out.append(_finding("F600", Status.UNKNOWN, title, ev))
    if len(nodes) < 2:
        return out
    types = {name: instance_type(n).value for name, n in nodes.items()}
    for aspect in ASPECTS:
        readings = {name: aspect.read(n) for name, n in nodes.items()}
        if aspect.per_instance_type and len(set(types.values())) > 1:
            for itype in sorted({t or "" for t in types.values()}):
                scope = {k: v for k, v in readings.items() if (types[k] or "") == itype}
                f = compare(aspect, scope, scope=itype or "instance type unknown")
                if f:
                    out.append(f)
            continue
        f = compare(aspect, readings)
        if f:
            out.append(f)
    return out


def _unique(name: str, taken: dict[str, Any]) -> str:
    if name not in taken:
        return name
    i = 2
    while f"{name}#{i}" in taken:
        i += 1
    return f"{name}#{i}"


@check(*(["F600"] + [a.code for a in ASPECTS]), domain="fleet")
def fleet_drift(diagnoses: Iterable[Any], ctx: Context) -> Iterable[Finding]:
    """The registry entry for the fleet domain (`run_checks(diagnoses, ctx, "fleet")`)."""
    return drift_findings(list(diagnoses))
