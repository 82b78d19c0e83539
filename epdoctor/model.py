"""The shapes that flow through epdoctor: facts, findings, target results.

Everything here is plain data (frozen dataclasses); no layer below reaches
back up. A fact is either known (with the raw evidence it came from) or
unknown (with the reason), never a guess.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Status(str, enum.Enum):
    """Verdict of one check. Ordered by how much it should worry an operator."""

    PASS = "pass"
    SKIP = "skip"  # not applicable to the chosen transport or stack
    INFO = "info"  # a note or precondition that does not change a verdict (plan, lint)
    UNKNOWN = "unknown"  # the evidence could not be seen: never a pass
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK = {
    Status.PASS: 0,
    Status.SKIP: 0,
    Status.INFO: 0,
    Status.UNKNOWN: 1,
    Status.WARN: 2,
    Status.FAIL: 3,
}


@dataclass(frozen=True)
class Fact(Generic[T]):
    """One typed fact. `known` is False when the source was absent or unparseable."""

    value: T | None = None
    known: bool = True
    reason: str = ""
    evidence: tuple[str, ...] = ()

    @classmethod
    def of(cls, value: T, *evidence: str) -> Fact[T]:
        return cls(value=value, known=True, evidence=tuple(evidence))

    @classmethod
    def unknown(cls, reason: str, *evidence: str) -> Fact[Any]:
        return cls(value=None, known=False, reason=reason, evidence=tuple(evidence))

    def to_json(self) -> Any:
        if not self.known:
            return {"unknown": self.reason}
        return _jsonable(self.value)


def _jsonable(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "__dataclass_fields__"):
        return {k: _jsonable(getattr(value, k)) for k in value.__dataclass_fields__}
    if isinstance(value, enum.Enum):
        return value.value
    return value


@dataclass(frozen=True)
class Location:
    """Where in a file a finding points: 1-based line, and column when the rule knows it."""

    path: str
    line: int
    column: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "line": self.line, "column": self.column}


@dataclass(frozen=True)
class Finding:
    """What one detector concluded, tied to a trap code in the catalogue.

    Every detector returns this one type: node and Kubernetes checks, the log analyzer, lint
    rules (with a ``location`` in a file), plan rules and launch gates. ``subject`` names what
    the finding is about when one code can be raised about several things (a log's network
    verdict per provider, per rank group); a streaming analyzer raises each (code, subject)
    once. ``suppressed`` is the reason given by an in-source suppression (lint).
    """

    code: str
    status: Status
    title: str
    evidence: tuple[str, ...] = ()
    fix: str = ""
    target: str = ""
    location: Location | None = None
    subject: str = ""
    suppressed: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "code": self.code,
            "severity": self.status.value,
            "title": self.title,
            "evidence": list(self.evidence),
            "fix": self.fix,
            "target": self.target,
        }
        if self.location is not None:
            out["location"] = self.location.to_json()
        return out


@dataclass(frozen=True)
class Context:
    """What the operator told us about the intended stack.

    transport None means "not chosen": checks whose verdict depends on the
    transport report what each transport would need instead of failing.
    """

    transport: str | None = None
    engine: str | None = None
    instance: str | None = None
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TargetInfo:
    """Where a diagnosis came from: kind is local, ssh, pod, bundle or job."""

    name: str
    kind: str
    detail: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, **self.detail}


@dataclass
class TargetResult:
    """One target's diagnosis, or the error that stopped it."""

    target: TargetInfo
    facts: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    error: str | None = None
    elapsed_s: float | None = None

    def worst(self) -> Status:
        ranks = [f.status for f in self.findings]
        return max(ranks, key=lambda s: s.rank, default=Status.PASS)


class EpdoctorError(Exception):
    """epdoctor itself could not do what was asked (exit code 2).

    Its text is redacted (epdoctor.redact): an error line quotes the paths, names and values
    it was given, and is printed wherever it is shown (stderr, the TUI).
    """

    def __str__(self) -> str:
        from epdoctor.redact import redact_text

        return redact_text(super().__str__())
