"""The plan's env contract through the same env checks diagnose and lint use.

There is one implementation of the env rules (epdoctor.checks.env); the plan
runs its own contract through it so a plan can never write what the doctor
would then flag.
"""

from __future__ import annotations

from packaging.version import Version

from epdoctor.checks.env import env_findings
from epdoctor.model import Context, Finding, Status
from epdoctor.plan.model import Plan


def env_check(plan: Plan, env: dict[str, str] | None = None) -> list[Finding]:
    """Every finding the shared env checks give for the plan's contract (or `env`)."""
    ctx = Context(
        transport=plan.input.transport,
        engine=plan.input.engine,
        instance=plan.instance,
    )
    return env_findings(
        plan.env_dict() if env is None else env,
        ctx,
        nccl_version=Version(plan.nccl) if plan.nccl else None,
        engines=[plan.input.engine],
        where="plan env contract",
    )


def env_problems(plan: Plan) -> list[Finding]:
    """The findings worse than a pass (warn, fail, unknown)."""
    return [f for f in env_check(plan) if f.status.rank > Status.SKIP.rank]


def manifest_problems(plan: Plan) -> list[Finding]:
    """The shared manifest rules (epdoctor.checks.kube_rules, which lint and the
    Kubernetes checks apply) over the plan's objects and their notes: anything
    worse than a pass."""
    from epdoctor.checks import kube_rules
    from epdoctor.plan import manifests

    objs = kube_rules.Objects(manifests.objects(plan), notes=manifests.notes(plan))
    return [
        Finding(code=h.code, status=h.status, title=h.message)
        for h in kube_rules.manifest_hits(objs)
        if h.status.rank > Status.SKIP.rank
    ]
