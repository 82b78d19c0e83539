"""What a launch reports: the event callbacks every front end renders, and the Outcome a run
returns. A leaf of the launch wing: the session and the Kubernetes rollout both produce these,
so neither has to import the other for them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epdoctor.model import Finding

OnLine = Callable[[str, str], None]  # (pane, line)
OnGate = Callable[[str, str, str, "str | None"], None]  # (gate, state, summary, code)
OnFinding = Callable[[str, Finding], None]  # (source, finding)
WHATS = ("kernel-test", "serve", "smoke", "bench")
SESSION_PANES = ("smoke", "bench", "isolate")  # the session's own lines: replies, levels, pairs


@dataclass
class Outcome:
    what: str  # kernel-test, serve, smoke, bench or isolate
    status: str  # pass / fail / warn / unknown / interrupted / error / detached
    gates: list[Any] = field(default_factory=list)  # epdoctor.launch.gates.Gate
    stopped: list[str] = field(default_factory=list)  # what stopping did, for the operator
    error: str = ""
    reason: str = ""  # why a serve ended early: "not ready", "exited"
    result: Any = None  # KernelReport, a serve summary, SmokeResult, BenchResults, isolation
    failed_early: bool = False  # a node failed and the others were stopped
    exc: BaseException | None = None  # the error, or the interrupt (Ctrl-C, SIGTERM, SIGHUP)
    left: list[str] = field(default_factory=list)  # applied, to be deleted, and still there

    def gate(self, name: str) -> Any:
        """The gate of that name (the last one), or None: gates are found by name, never by
        their position in the list."""
        return next((g for g in reversed(self.gates) if g.name == name), None)

    def to_json(self) -> dict[str, Any]:
        """The outcome as `--json` prints it (every front end the same shape)."""
        return {
            "what": self.what,
            "status": self.status,
            "gates": [g.to_json() for g in self.gates],
            "stopped": list(self.stopped),
            "left": list(self.left),
            "error": self.error,
            "reason": self.reason,
        }
