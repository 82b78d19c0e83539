"""Conventions shared by every check.

A check is a plain function ``(facts, ctx) -> Iterable[Finding]`` registered
with ``@check("CODE", ...)`` (the detector registry, checks/registry.py). It never does I/O.
It returns PASS only on evidence it could see; when the evidence is absent it returns UNKNOWN (or
SKIP when the trap does not apply to the chosen transport or stack). Titles
and fixes default to the catalogue entry, so the text lives in one place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from epdoctor import knowledge
from epdoctor.checks.registry import check, detectors

# Context lives in epdoctor.model (every layer reads it); the checks keep importing it from here.
from epdoctor.model import Context, Finding, Status

__all__ = ["TRANSPORTS", "Context", "check", "finding", "run_checks"]

TRANSPORTS = ("gin-proxy", "efa-gda")


def finding(
    code: str,
    status: Status,
    title: str | None = None,
    evidence: Iterable[str] = (),
    fix: str | None = None,
) -> Finding:
    """A Finding whose title and fix default to the catalogue's text for `code`."""
    trap = knowledge.get(code)
    return Finding(
        code=trap.code,
        status=status,
        title=title or trap.title,
        evidence=tuple(str(e) for e in evidence),
        fix=trap.fix_text() if fix is None else fix,
    )


def run_checks(facts: Any, ctx: Context, domain: str = "node") -> list[Finding]:
    out: list[Finding] = []
    for d in detectors(domain):
        if d.check:
            out.extend(d.fn(facts, ctx))
    return out
