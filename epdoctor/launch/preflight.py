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


def judge(pre: Preflight, where: str, force: bool = False, advisory: bool = False) -> Any:
    """The preflight's gate: pass when nothing fails; warn when --force (or a one-node built-in
    kernel test, which crosses no NIC) goes on anyway; else fail, and nothing starts."""
    from epdoctor.launch.gates import Gate

    n = len(pre.failing)
    ev = tuple([f"{name}: {f.code} {f.title}" for name, f in pre.failing] + pre.errors)
    if pre.clean:
        return Gate("preflight", Status.PASS, f"no failing finding on {where}")
    codes = ", ".join(sorted({f.code for _, f in pre.failing})) or "the probe did not run"
    if force:
        return Gate("preflight", Status.WARN, f"--force: going on despite {codes}", ev[:12])
    if advisory and not pre.errors:
        return Gate(
            "preflight",
            Status.WARN,
            f"advisory for a one-node built-in test, which needs only PyTorch and the GPUs and "
            f"crosses no NIC: going on despite {codes} (they still matter for serving)",
            ev[:12],
        )
    first = pre.failing[0][1].code if pre.failing else "K115"
    summary = (
        f"{n} failing finding(s) ({codes}) on {where}: nothing started; `epdoctor explain CODE`, "
        "or --force to launch anyway"
    )
    return Gate("preflight", Status.FAIL, summary, ev[:12], first)


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
