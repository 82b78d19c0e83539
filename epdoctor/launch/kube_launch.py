"""Where a launch with a Kubernetes plan goes: a rollout of the plan, or the pods already there.

``from_request`` is the one decision both front ends (`epdoctor run`, the terminal app) make
with the typed request of `epdoctor run kernel-test|serve`: a Kubernetes plan with no flag
naming other targets is brought up by epdoctor (epdoctor/launch/kube_rollout.py) unless
``--attach`` says to use what runs, or the plan's StatefulSet or pods exist and epdoctor did
not apply them (then the launch runs in those pods, as before, and ``Attach`` says why).
``launch_of`` wraps the rollout as the Launch the session runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from epdoctor.launch.http import DefaultURL
from epdoctor.launch.kube_objects import load_objects, managers, owned, plan_name, plan_namespace
from epdoctor.launch.kube_rollout import NotEpdoctors, RolloutOptions, RolloutPlan, prepare
from epdoctor.model import EpdoctorError
from epdoctor.requests import KernelTestOptions, LaunchRequest, ServeOptions

if TYPE_CHECKING:
    from epdoctor.launch.prepared import Launch

__all__ = ["Attach", "DefaultURL", "RolloutPlan", "from_request", "launch_of"]


@dataclass(frozen=True)
class Attach:
    """The plan's pods run already and are not epdoctor's: launch in them as they are."""

    note: str


def is_kube_plan(plan: dict[str, Any]) -> bool:
    inp = plan.get("input") if isinstance(plan.get("input"), dict) else {}
    return bool(plan) and inp.get("target") == "kubernetes"


def wanted(req: LaunchRequest, plan: dict[str, Any]) -> bool:
    if not is_kube_plan(plan) or req.targets.names_targets or req.rollout.attach:
        return False
    o = req.options
    return not (isinstance(o, KernelTestOptions) and (o.regate or o.isolate))


def from_request(req: LaunchRequest, plan: dict[str, Any]) -> RolloutPlan | Attach | None:
    """The rollout to confirm; Attach (run in what is there); None (not a rollout)."""
    if not wanted(req, plan):
        return None
    from epdoctor.targets.kube_apply import KubeApply

    t = req.targets
    session = connect(t.context, t.kubeconfig, t.request_timeout, req.plan_file)
    keep_open = False
    try:
        api = KubeApply(session)
        ns = namespace(t.namespace, plan, session)
        there = attachable(api, plan_name(plan), ns, int(plan.get("nodes") or 1))
        if there:
            return Attach(
                f"{there}: epdoctor did not apply it, so the launch runs in those pods as they "
                "are (nothing applied, nothing deleted; --attach says this without asking)"
            )
        objects = load_objects(plan, req.plan_file, ns)
        try:
            rp = prepare(api, objects, plan, options(req), session.context, req.plan_file or "")
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


def launch_of(req: LaunchRequest | None, plan: dict[str, Any], rp: RolloutPlan) -> Launch:
    """The rollout as the Launch the session runs (the same for both front ends)."""
    from epdoctor.launch.prepared import Launch

    return Launch(rp.options.what, rp.lines, req, plan, rp, [])


def connect(
    context: str | None,
    kubeconfig: str | None,
    request_timeout: float | None,
    plan_file: str | None,
) -> Any:
    from epdoctor.targets import kube
    from epdoctor.targets.base import TargetError

    try:
        return kube.KubeSession.connect(context, kubeconfig, request_timeout)
    except TargetError as exc:
        raise EpdoctorError(f"{plan_file or 'the plan'} is a Kubernetes plan: {exc}") from exc


def namespace(given: str | None, plan: dict[str, Any], session: Any) -> str:
    """-n, else the plan's own namespace; a plan left at "default" follows the context's."""
    from epdoctor.targets.kube import valid_namespace

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


def options(req: LaunchRequest) -> RolloutOptions:
    from epdoctor.launch.kube_objects import default_run_dir

    what, o, r = req.what, req.options, req.rollout
    serve = isinstance(o, ServeOptions)
    levels: tuple[int, ...] = ()
    if serve and r.bench:
        try:
            levels = tuple(int(c) for c in str(r.bench).split(",") if c.strip())
        except ValueError:
            levels = ()
        if not levels or any(c < 1 for c in levels):
            raise EpdoctorError(f"--bench: positive integers expected, got {r.bench!r}")
    url = o.url if isinstance(o, ServeOptions) else None
    kernel_timeout = r.kernel_timeout if serve else getattr(o, "timeout", 900.0)
    return RolloutOptions(
        what=what,
        kernel=not (serve and r.no_kernel_test),
        keep=r.keep,
        detach=serve and req.detach,
        bench_levels=levels,
        url=None if url is None or isinstance(url, DefaultURL) else str(url),
        run_dir=getattr(o, "run_dir", None) or default_run_dir("kernel-test"),
        schedule_timeout_s=float(r.schedule_timeout),
        start_timeout_s=float(r.start_timeout),
        kernel_timeout_s=float(kernel_timeout),
        startup_budget_s=float(o.startup_budget if isinstance(o, ServeOptions) else 1800.0),
        smoke_max_tokens=int(r.smoke_max_tokens),
        python=getattr(o, "python", None) or "python3",
        preflight=req.preflight,
        force=req.force,
    )
