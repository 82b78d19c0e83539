"""Ordering and summaries shared by every renderer."""

from __future__ import annotations

from collections import Counter

from epdoctor.knowledge.catalogue import LAYERS, layers
from epdoctor.model import Finding, Status, TargetResult

LAYER_ORDER = {la.letter: la.order for la in layers()}
SHOWN_BY_DEFAULT = (Status.FAIL, Status.WARN, Status.UNKNOWN)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (-f.status.rank, LAYER_ORDER.get(f.code[:1], 99), f.code))


def counts(findings: list[Finding]) -> dict[str, int]:
    c = Counter(f.status.value for f in findings)
    return {
        s.value: c.get(s.value, 0)
        for s in (Status.FAIL, Status.WARN, Status.UNKNOWN, Status.PASS, Status.SKIP)
    }


def verdict(result: TargetResult) -> str:
    if result.error:
        return "error"
    return result.worst().value


def layer_name(code: str) -> str:
    return LAYERS.get(code[:1], "?")


def headline(result: TargetResult) -> str:
    """One sentence an on-call can act on."""
    if result.error:
        return f"could not diagnose: {result.error}"
    fails = [f for f in result.findings if f.status is Status.FAIL]
    if any(f.code == "H101" for f in fails):
        return "no NVIDIA GPU on this host: it cannot run the stack (the findings below say what else is missing)"
    c = counts(result.findings)
    if fails:
        return f"{c['fail']} failure(s), {c['warn']} warning(s), {c['unknown']} unverifiable"
    if c["warn"] or c["unknown"]:
        return f"no failures; {c['warn']} warning(s), {c['unknown']} unverifiable"
    return "no failures, warnings or unverifiable checks"
