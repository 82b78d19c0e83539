"""Where a launch with a Kubernetes plan goes: a rollout of the plan, or the pods already there.

``from_flags`` is the one decision both front ends (`epdoctor run`, the terminal app) make
with the flags of `epdoctor run kernel-test|serve`: a Kubernetes plan with no flag naming other
targets is brought up by epdoctor (epdoctor/launch/kube_rollout.py) unless ``--attach``
says to use what runs, or the plan's StatefulSet or pods exist and epdoctor did not apply them
(then the launch runs in those pods, as before, and ``Attach`` says why). The flags are read
by name (``getattr``), so a typed request can take their place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from epdoctor.launch.http import DefaultURL
from epdoctor.launch.kube_objects import load_objects, managers, owned, plan_name, plan_namespace
from epdoctor.launch.kube_rollout import NotEpdoctors, RolloutOptions, RolloutPlan, prepare

__all__ = ["Attach", "DefaultURL", "RolloutPlan", "from_flags"]
from epdoctor.model import EpdoctorError


@dataclass(frozen=True)
class Attach:
    """The plan's pods run already and are not epdoctor's: launch in them as they are."""

    note: str


def is_kube_plan(plan: dict[str, Any]) -> bool:
    inp = plan.get("input") if isinstance(plan.get("input"), dict) else {}
    return bool(plan) and inp.get("target") == "kubernetes"


def wanted(flags: Any, plan: dict[str, Any], targets_named: bool) -> bool:
    if not is_kube_plan(plan) or targets_named or getattr(flags, "attach", False):
        return False
    return not (getattr(flags, "regate", None) or getattr(flags, "isolate", False))


def from_flags(
    flags: Any, plan: dict[str, Any], what: str, targets_named: bool
) -> RolloutPlan | Attach | None:
    """The rollout to confirm; Attach (run in what is there); None (not a rollout)."""
    if not wanted(flags, plan, targets_named):
        return None
    from epdoctor.targets.kube_apply import KubeApply

    session = connect(flags, plan)
    keep_open = False
    try:
        api = KubeApply(session)
        ns = namespace(flags, plan, session)
        there = attachable(api, plan_name(plan), ns, int(plan.get("nodes") or 1))
        if there:
            return Attach(
                f"{there}: epdoctor did not apply it, so the launch runs in those pods as they "
                "are (nothing applied, nothing deleted; --attach says this without asking)"
            )
        objects = load_objects(plan, getattr(flags, "plan", None), ns)
        try:
            rp = prepare(api, objects, plan, options(flags, what), session.context,
                         getattr(flags, "plan", None) or "")  # fmt: skip
        except NotEpdoctors as exc:
            raise EpdoctorError(
                f"{exc}: delete them, re-plan with another --name, or --attach to run in "
                "what is there"
            ) from exc
        rp.api = api
        keep_open = True
        return rp
    finally:
        if not keep_open:
            session.close()


def connect(flags: Any, plan: dict[str, Any]) -> Any:
    from epdoctor.targets import kube
    from epdoctor.targets.base import TargetError

    try:
        return kube.KubeSession.connect(
            getattr(flags, "context", None),
            getattr(flags, "kubeconfig", None),
            getattr(flags, "request_timeout", None),
        )
    except TargetError as exc:
        raise EpdoctorError(
            f"{getattr(flags, 'plan', None) or 'the plan'} is a Kubernetes plan: {exc}"
        ) from exc


def namespace(flags: Any, plan: dict[str, Any], session: Any) -> str:
    """-n, else the plan's own namespace; a plan left at "default" follows the context's."""
    from epdoctor.targets.kube import valid_namespace

    given = getattr(flags, "namespace", None)
    ns = given or plan_namespace(plan)
    if not given and ns == "default" and session.namespace:
        ns = session.namespace
    return valid_namespace(ns)


def attachable(api: Any, name: str, ns: str, replicas: int) -> str:
    """What of the plan runs already and is not epdoctor's ("" when nothing)."""
    from epdoctor.targets.kube import KubeApiError

    sts = api.read("statefulsets", ns, name)
    if sts is not None:
        if owned(sts):
            return ""
        return f"statefulset/{name} exists in {ns} (field managers: {managers(sts)})"
    for i in range(replicas):
        pod = f"{name}-{i}"
        try:
            api.session.call(f"pod {pod}", api.session.core.read_namespaced_pod, pod, ns)
        except KubeApiError as exc:
            if exc.status == 404:
                continue
            raise
        return f"pod {pod} exists in {ns} without a StatefulSet of epdoctor's"
    return ""


def options(flags: Any, what: str) -> RolloutOptions:
    from epdoctor.launch.kube_objects import default_run_dir

    serve = what == "serve"
    levels: tuple[int, ...] = ()
    bench = getattr(flags, "bench", None) if serve else None
    if bench:
        try:
            levels = tuple(int(c) for c in str(bench).split(",") if c.strip())
        except ValueError:
            levels = ()
        if not levels or any(c < 1 for c in levels):
            raise EpdoctorError(f"--bench: positive integers expected, got {bench!r}")
    url = getattr(flags, "url", None)
    return RolloutOptions(
        what=what,
        kernel=not (serve and getattr(flags, "no_kernel_test", False)),
        keep=bool(getattr(flags, "keep", False)),
        detach=bool(serve and getattr(flags, "detach", False)),
        bench_levels=levels,
        url=None if url is None or isinstance(url, DefaultURL) else str(url),
        run_dir=getattr(flags, "run_dir", None) or default_run_dir("kernel-test"),
        schedule_timeout_s=float(getattr(flags, "schedule_timeout", 600.0)),
        start_timeout_s=float(getattr(flags, "start_timeout", 1800.0)),
        kernel_timeout_s=float(getattr(flags, "kernel_timeout" if serve else "timeout", 900.0)),
        startup_budget_s=float(getattr(flags, "startup_budget", 1800.0)),
        smoke_max_tokens=int(getattr(flags, "smoke_max_tokens", 64)),
        python=getattr(flags, "python", None) or "python3",
        preflight=not getattr(flags, "no_preflight", False),
        force=bool(getattr(flags, "force", False)),
    )
