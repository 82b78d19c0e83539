"""Before a launch: a read-only diagnose of every node it will run on.

The targets are opened afresh (a diagnosis closes what it probed): the plan's pods, the
target flags' hosts or pods, else this host once per node. The front end says what the
failing findings mean for the launch (stop, go on with --force, or advisory).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from epdoctor.model import Context, EpdoctorError, Finding, Status
from epdoctor.requests import ProbeOptions, TargetSpec


@dataclass
class Preflight:
    failing: list[tuple[str, Finding]] = field(default_factory=list)  # (target, finding)
    errors: list[str] = field(default_factory=list)  # targets whose probe could not run

    @property
    def clean(self) -> bool:
        return not self.failing and not self.errors


def preflight(targets: list[Any], engine: str | None = None) -> Preflight:
    """Diagnose every node the launch runs on; what fails, and what could not be probed."""
    from epdoctor.diagnose import diagnose_many

    diags = diagnose_many(targets, Context(engine=engine), ProbeOptions(timeout_s=60))
    return Preflight(
        failing=[
            (d.result.target.name, f)
            for d in diags
            for f in d.result.findings
            if f.status is Status.FAIL
        ],
        errors=[d.result.error for d in diags if d.result.error],
    )


def preflight_targets(
    spec: TargetSpec, plan: dict[str, Any], plan_file: str | None, count: int
) -> list[Any]:
    """Fresh targets for the read-only diagnose (diagnose closes what it probed)."""
    from epdoctor.launch.nodes import plan_targets
    from epdoctor.targets.base import TargetError
    from epdoctor.targets.local import LocalTarget
    from epdoctor.targets.selection import open_targets

    planned = plan_targets(spec, plan, plan_file)
    if planned is not None:
        return planned
    try:
        targets = open_targets(spec)
    except TargetError as exc:
        raise EpdoctorError(str(exc)) from exc
    return targets or [LocalTarget() for _ in range(count)]
