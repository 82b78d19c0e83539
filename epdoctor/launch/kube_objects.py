"""A Kubernetes plan's objects as epdoctor applies them, and what tells them apart once live.

* ``load_objects``: the objects of the plan's own manifest (``kubernetes/NAME.yaml`` beside
  plan.json, what the operator reviewed), or, for another namespace than the plan's, the
  manifest made again from the plan's input (the leader's DNS name holds the namespace, so
  rewriting ``metadata.namespace`` alone would break the rendezvous). Either way the YAML is
  linted exactly as `epdoctor lint` lints it, and nothing that lint flags is applied.
* ``phase``: the objects for one step. The kernel test runs with the pods idle
  (``RUN_SERVE=0``, the GPUs free), serving with ``RUN_SERVE=1``; every object carries
  ``app.kubernetes.io/managed-by: epdoctor``.
* ``owned``: an object is epdoctor's when its managedFields name epdoctor's field manager
  (operation Apply) and it carries the label: only such objects are ever deleted.
* ``changes``: what applying would change in a live object, field by field.
"""

from __future__ import annotations

import copy
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epdoctor.model import EpdoctorError
from epdoctor.targets.kube_apply import FIELD_MANAGER, KINDS

MANAGED_BY = "app.kubernetes.io/managed-by"
NAME_LABEL = "app.kubernetes.io/name"
RUN_SERVE = "RUN_SERVE"
# metadata the API server owns: never part of a diff
_SERVER_META = ("managedFields", "resourceVersion", "uid", "generation", "creationTimestamp",
                "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds")  # fmt: skip


class PlanObjectsError(EpdoctorError):
    """The plan's objects cannot be applied as they are (exit code 2)."""


@dataclass
class PlanObjects:
    """What a Kubernetes plan applies, in the namespace it is applied to."""

    objects: list[dict[str, Any]]
    namespace: str
    name: str  # the StatefulSet (and the leader HTTP Service)
    source: str  # where the objects came from, for the operator
    lint_notes: list[str] = field(default_factory=list)  # info-level lint lines (not blocking)

    @property
    def statefulset(self) -> dict[str, Any]:
        return next(o for o in self.objects if o.get("kind") == "StatefulSet")

    @property
    def selector(self) -> str:
        labels = self.statefulset["spec"]["selector"]["matchLabels"]
        return ",".join(f"{k}={v}" for k, v in sorted(labels.items()))

    @property
    def replicas(self) -> int:
        return int(self.statefulset["spec"].get("replicas", 1))

    @property
    def pod_names(self) -> list[str]:
        return [f"{self.name}-{i}" for i in range(self.replicas)]

    @property
    def container(self) -> dict[str, Any]:
        return self.statefulset["spec"]["template"]["spec"]["containers"][0]

    @property
    def http_port(self) -> int:
        ports = self.container.get("ports") or []
        return int(next((p["containerPort"] for p in ports if p.get("name") == "http"), 8000))

    @property
    def http_service(self) -> str:
        """The Service that routes HTTP to the leader only (the plan's name)."""
        for o in self.objects:
            if o.get("kind") == "Service" and (o.get("spec") or {}).get("clusterIP") != "None":
                return str(o["metadata"]["name"])
        return self.name

    @property
    def leader_address(self) -> str:
        """The leader's name on the headless Service, as the pods resolve it."""
        from epdoctor.schema import DNS_LABEL

        svc = self.statefulset["spec"].get("serviceName", "")
        if not isinstance(svc, str) or len(svc) > 63 or not DNS_LABEL.match(svc):
            raise PlanObjectsError(
                f"the StatefulSet's serviceName {str(svc)[:60]!r} is not a DNS-1123 label"
            )
        return f"{self.name}-0.{svc}.{self.namespace}.svc.cluster.local"

    def refs(self) -> list[tuple[str, str]]:
        """(plural, name) of every object, in apply order."""
        return [(KINDS[(o["apiVersion"], o["kind"])], o["metadata"]["name"]) for o in self.objects]


def plan_name(plan: dict[str, Any]) -> str:
    inp = plan.get("input") if isinstance(plan.get("input"), dict) else {}
    return str(plan.get("name") or inp.get("name") or "")


def plan_namespace(plan: dict[str, Any]) -> str:
    inp = plan.get("input") if isinstance(plan.get("input"), dict) else {}
    return str(inp.get("namespace") or "default")


def load_objects(
    plan: dict[str, Any], plan_path: str | None, namespace: str, lint: bool = True
) -> PlanObjects:
    """The plan's objects for ``namespace``, lint-clean, or PlanObjectsError saying why not.
    ``lint=False`` (taking them down) reads their names and labels only."""
    name = plan_name(plan)
    if not name:
        raise PlanObjectsError('the plan names no StatefulSet (no "name")')
    if plan.get("verdict") == "not supported":
        raise PlanObjectsError(
            f'the plan\'s verdict is "not supported" ({_blockers(plan)}): it has nothing to apply'
        )
    manifest = Path(plan_path).parent / "kubernetes" / f"{name}.yaml" if plan_path else None
    if manifest is not None and manifest.is_file() and namespace == plan_namespace(plan):
        from epdoctor.safeio import BadInput, check_source, read_capped

        try:
            check_source(str(manifest), "manifest")
            with open(manifest, "rb") as fh:
                text = read_capped(fh, 4 << 20, f"manifest {manifest}").decode("utf-8", "replace")
        except (BadInput, OSError) as exc:
            raise PlanObjectsError(str(exc)) from None
        source = str(manifest)
        notes = _lint(manifest) if lint else []
    else:
        text = remake_manifest(plan, namespace)
        source = (
            f"the manifest made again from {plan_path or 'the plan'}'s input for namespace "
            f"{namespace}"
        )
        notes = []
        if lint:
            with tempfile.TemporaryDirectory(prefix="epdoctor-plan-") as tmp:
                path = Path(tmp) / "kubernetes" / f"{name}.yaml"
                path.parent.mkdir(parents=True)
                path.write_text(text, encoding="utf-8")
                notes = _lint(path)
    objs = _parse(text)
    _check(objs, namespace, name)
    return PlanObjects(objs, namespace, name, source, notes)


def remake_manifest(plan: dict[str, Any], namespace: str) -> str:
    """The manifest `epdoctor plan` writes for this plan's input, in another namespace."""
    import dataclasses

    from epdoctor.plan import PlanInput, PlanInputError, make_plan
    from epdoctor.plan.render import manifest_yaml

    raw = plan.get("input")
    if not isinstance(raw, dict):
        raise PlanObjectsError('the plan has no "input" to make its manifest from')
    fields = {f.name for f in dataclasses.fields(PlanInput)}
    kw = {k: v for k, v in raw.items() if k in fields}
    kw["hosts"] = tuple(kw.get("hosts") or ())
    kw["namespace"] = namespace
    try:
        made = make_plan(PlanInput(**kw))
    except (PlanInputError, TypeError) as exc:
        raise PlanObjectsError(f"cannot make the plan's manifest again: {exc}") from exc
    if not made.supported:
        raise PlanObjectsError("the plan, made again, is not supported: nothing to apply")
    if made.extra.get("target") != "kubernetes":
        raise PlanObjectsError("the plan is not a Kubernetes plan")
    return manifest_yaml(made)


def _lint(path: Path) -> list[str]:
    """`epdoctor lint` on the manifest: findings above info refuse the apply."""
    from epdoctor.lint import lint_paths

    report = lint_paths([path])
    if report.errors:
        raise PlanObjectsError(
            f"lint could not check {path}: {'; '.join(report.errors)}: nothing applied"
        )
    blocking = [f for f in report.active if f.level() != "info"]
    if blocking:
        lines = "\n".join(
            f"  {path.name}:{f.line}: {f.code} {f.level()}: {f.message}" for f in blocking
        )
        raise PlanObjectsError(
            f"the plan's manifest does not lint clean ({len(blocking)} finding(s)); "
            f"nothing applied:\n{lines}\n(`epdoctor explain CODE` says why; fix the plan, e.g. "
            "`epdoctor plan --image REGISTRY/NAME:TAG`, and run again)"
        )
    return [f"{path.name}:{f.line}: {f.code}: {f.message}" for f in report.active]


def _parse(text: str) -> list[dict[str, Any]]:
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(text) if d]
    except yaml.YAMLError as exc:
        raise PlanObjectsError(f"the plan's manifest is not valid YAML: {exc}") from exc
    if not all(isinstance(d, dict) for d in docs):
        raise PlanObjectsError("the plan's manifest holds something other than objects")
    return docs


def _check(objs: list[dict[str, Any]], namespace: str, name: str) -> None:
    """Only what a plan writes, in the namespace it is applied to, one StatefulSet named NAME."""
    from epdoctor.targets.base import TargetError
    from epdoctor.targets.kube import valid_pod_name

    for o in objs:
        key = (str(o.get("apiVersion")), str(o.get("kind")))
        if key not in KINDS:
            raise PlanObjectsError(
                f"the plan's manifest holds a {key[1]} ({key[0]}): epdoctor applies only what "
                "a plan writes (Services and a StatefulSet)"
            )
        meta = o.setdefault("metadata", {})
        if meta.get("namespace", namespace) != namespace:
            raise PlanObjectsError(
                f"{key[1]} {meta.get('name')} is for namespace {meta.get('namespace')}, "
                f"not {namespace}"
            )
        meta["namespace"] = namespace
        try:
            valid_pod_name(str(meta.get("name") or ""))
        except TargetError as exc:
            raise PlanObjectsError(str(exc)) from exc
    sts = [o for o in objs if o["kind"] == "StatefulSet"]
    if len(sts) != 1 or sts[0]["metadata"]["name"] != name:
        raise PlanObjectsError(f"the plan's manifest must hold one StatefulSet named {name}")
    _check_statefulset(sts[0])


def _check_statefulset(sts: dict[str, Any]) -> None:
    """The fields the rollout reads, in their shapes and bounds (the manifest is untrusted
    input: a replicas of 100000 would be 100000 API reads before any other check)."""
    from epdoctor.schema import DNS_LABEL, MAX_NODES

    spec = sts.get("spec")
    if not isinstance(spec, dict):
        raise PlanObjectsError("the StatefulSet has no spec")
    replicas = spec.get("replicas", 1)
    if (
        isinstance(replicas, bool)
        or not isinstance(replicas, int)
        or not 1 <= replicas <= MAX_NODES
    ):
        raise PlanObjectsError(
            f"the StatefulSet's replicas must be 1..{MAX_NODES}, not {str(replicas)[:40]!r}"
        )
    svc = spec.get("serviceName", "")
    if not isinstance(svc, str) or len(svc) > 63 or not DNS_LABEL.match(svc):
        raise PlanObjectsError(
            f"the StatefulSet's serviceName {str(svc)[:60]!r} is not a DNS-1123 label"
        )
    sel = (
        (spec.get("selector") or {}).get("matchLabels")
        if isinstance(spec.get("selector"), dict)
        else None
    )
    if not isinstance(sel, dict) or not sel or not all(isinstance(v, str) for v in sel.values()):
        raise PlanObjectsError("the StatefulSet has no selector.matchLabels of strings")
    tmpl = spec.get("template")
    pod = tmpl.get("spec") if isinstance(tmpl, dict) else None
    containers = pod.get("containers") if isinstance(pod, dict) else None
    if (
        not isinstance(containers, list)
        or not containers
        or not all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in containers)
    ):
        raise PlanObjectsError("the StatefulSet's pod template has no named containers")


def phase(objects: PlanObjects, run_serve: bool) -> list[dict[str, Any]]:
    """Deep copies labelled as epdoctor's, the StatefulSet's RUN_SERVE set for the step."""
    out = []
    for o in objects.objects:
        o = copy.deepcopy(o)
        o["metadata"].setdefault("labels", {})[MANAGED_BY] = FIELD_MANAGER
        if o["kind"] == "StatefulSet":
            for c in o["spec"]["template"]["spec"].get("containers") or []:
                env = [e for e in c.get("env") or [] if e.get("name") != RUN_SERVE]
                env.append({"name": RUN_SERVE, "value": "1" if run_serve else "0"})
                c["env"] = env
        out.append(o)
    return out


def owned(live: dict[str, Any]) -> bool:
    """Applied by epdoctor: its field manager owns it (Apply) and it carries the label."""
    meta = live.get("metadata") if isinstance(live.get("metadata"), dict) else {}
    managers = meta.get("managedFields") if isinstance(meta.get("managedFields"), list) else []
    labels = meta.get("labels") if isinstance(meta.get("labels"), dict) else {}
    applied = any(
        isinstance(m, dict) and m.get("manager") == FIELD_MANAGER and m.get("operation") == "Apply"
        for m in managers
    )
    return applied and labels.get(MANAGED_BY) == FIELD_MANAGER


def managers(live: dict[str, Any]) -> str:
    from epdoctor.safeio import plain

    meta = live.get("metadata") if isinstance(live.get("metadata"), dict) else {}
    fields = meta.get("managedFields") if isinstance(meta.get("managedFields"), list) else []
    names = sorted({plain(m.get("manager"))[:63] for m in fields if isinstance(m, dict)})
    return ", ".join(names[:8]) or "no field manager recorded"


def changes(live: dict[str, Any], want: dict[str, Any], limit: int = 12) -> list[str]:
    """``path: old -> new`` for every field applying ``want`` would change in ``live``, the
    values of secret-looking env variables masked and every line through the redactor."""
    from epdoctor.redact import is_secret_name, redact_text

    a, b = _comparable(live), _comparable(want)
    out: list[str] = []
    _diff(a, b, "", out)
    masked = []
    for line in out:
        name = re.search(r"\benv\[([^\]]+)\]", line)
        if name and is_secret_name(name.group(1)):
            line = line.split(":", 1)[0] + ": (value hidden)"
        masked.append(redact_text(line))
    out = masked
    if len(out) > limit:
        out = [*out[:limit], f"... and {len(out) - limit} more"]
    return out


def _comparable(obj: dict[str, Any]) -> dict[str, Any]:
    o = copy.deepcopy(obj)
    o.pop("status", None)
    meta = o.get("metadata") or {}
    for k in _SERVER_META:
        meta.pop(k, None)
    ann = meta.get("annotations") or {}
    ann.pop("kubectl.kubernetes.io/last-applied-configuration", None)
    if not ann:
        meta.pop("annotations", None)
    return o


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k), b.get(k), f"{path}.{k}" if path else str(k), out)
    elif isinstance(a, list) and isinstance(b, list):
        ka, kb = _keyed(a), _keyed(b)
        if ka is not None and kb is not None:
            for k in list(dict.fromkeys([*ka, *kb])):
                _diff(ka.get(k), kb.get(k), f"{path}[{k}]", out)
        elif len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                _diff(x, y, f"{path}[{i}]", out)
        else:
            out.append(f"{path}: {_short(a)} -> {_short(b)}")
    elif a != b:
        out.append(f"{path}: {_short(a)} -> {_short(b)}")


def _keyed(items: list[Any]) -> dict[str, Any] | None:
    """A list of named things (containers, env, ports, volumes) keyed by name."""
    if not items or not all(isinstance(i, dict) and "name" in i for i in items):
        return None
    return {str(i["name"]): i for i in items}


def _short(v: Any) -> str:
    """A value for a diff line: redacted whole (a URL's password, a token anywhere in it), then
    cleaned of control characters, then cut; cutting first would leave half a token that no
    finder recognises."""
    from epdoctor.redact import redact_obj
    from epdoctor.safeio import plain

    if v is None:
        return "(none)"
    v = redact_obj(v)
    text = repr(v) if not isinstance(v, str) else v
    text = plain(text.replace("\n", "\\n"))
    return text if len(text) <= 60 else text[:57] + "..."


def _blockers(plan: dict[str, Any]) -> str:
    codes = [str(r.get("code")) for r in plan.get("reasons") or [] if r.get("level") == "blocker"]
    return ", ".join(codes) or "see plan.json"


def default_run_dir(what: str) -> str:
    import time

    return f"/tmp/epdoctor-{what}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
