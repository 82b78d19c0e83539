"""Typed messages the workers post back to the screens (one place for all of them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message as _Message


class Message(_Message, bubble=False):
    """Posted to the one widget that handles it (the app forwards what screens need)."""

    def __init_subclass__(cls, **kw: Any) -> None:
        kw.setdefault("bubble", False)  # Textual's default for a subclass is to bubble
        super().__init_subclass__(**kw)


@dataclass
class TargetsResolved(Message):
    """The target flags named these targets (before any is probed)."""

    names: list[str]


@dataclass
class TargetProgress(Message):
    """One target changed state: start, done or error."""

    name: str
    state: str


@dataclass
class DiagnosisDone(Message):
    diagnoses: list[Any]  # epdoctor.diagnose.Diagnosis
    fleet: list[Any]  # fleet-level findings (drift), when the core has them


@dataclass
class DiagnosisFailed(Message):
    error: str


@dataclass
class PlanComputed(Message):
    plan: Any | None  # epdoctor.plan.Plan
    error: str = ""
    generation: int = 0  # which recompute asked for it: older answers are dropped


@dataclass
class PlanWritten(Message):
    directory: str
    files: list[str]
    error: str = ""


@dataclass
class SafeOutput(Message):
    """Output of one read-only command from a trap's fix.safe list."""

    command: str
    rc: int | None
    output: str


@dataclass
class LaunchStarted(Message):
    what: str
    commands: list[str]


@dataclass
class GateUpdate(Message):
    gate: str
    state: str
    summary: str
    code: str | None = None


@dataclass
class LaunchFinding(Message):
    source: str
    finding: Any  # epdoctor.model.Finding


@dataclass
class LaunchDone(Message):
    what: str
    status: str  # pass / fail / warn / unknown / interrupted / error
    gates: list[Any]  # epdoctor.launch.gates.Gate
    stopped: list[str]
    error: str = ""


@dataclass
class SshHosts(Message):
    """Concrete Host entries of the ssh config (for picking SSH targets)."""

    names: list[str]
    error: str = ""
