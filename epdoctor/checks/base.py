"""Conventions shared by every check.

A check is a plain function ``(facts, ctx) -> Iterable[Finding]`` registered
with ``@check("CODE", ...)``. It never does I/O. It returns PASS only on
evidence it could see; when the evidence is absent it returns UNKNOWN (or
SKIP when the trap does not apply to the chosen transport or stack). Titles
and fixes default to the catalogue entry, so the text lives in one place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from epdoctor import knowledge

# Context lives in epdoctor.model (every layer reads it); the checks keep importing it from here.
from epdoctor.model import Context, Finding, Status

TRANSPORTS = ("gin-proxy", "efa-gda")

CheckFn = Callable[[Any, Context], Iterable[Finding]]


@dataclass(frozen=True)
class Registered:
    codes: tuple[str, ...]
    fn: CheckFn
    domain: str


REGISTRY: list[Registered] = []


def check(*codes: str, domain: str = "node") -> Callable[[CheckFn], CheckFn]:
    """Register a check for one or more trap codes in a domain (node, logs, k8s, ...)."""

    def deco(fn: CheckFn) -> CheckFn:
        REGISTRY.append(Registered(tuple(codes), fn, domain))
        return fn

    return deco


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
    for reg in REGISTRY:
        if reg.domain == domain:
            out.extend(reg.fn(facts, ctx))
    return out
