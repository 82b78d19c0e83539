"""Checks on what the API server knows about a pod (domain "kube").

The facts are the raw objects a pod target gathered (targets/kube.py
side_facts): ``pod``, ``container``, ``events``, ``node``, ``statefulset``,
``services``, ``logs`` ({"current", "previous"} tails), ``unseen`` (what could
not be read and why) and ``probe_ran``. Plain API JSON: no client types here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from epdoctor.checks import kube_rules
from epdoctor.checks.base import Context, check, finding
from epdoctor.knowledge.stack import instance_spec
from epdoctor.model import Finding, Status

SEGV_EXIT = 139  # 128 + SIGSEGV(11)
_SEGV_LOG = re.compile(
    r"Segmentation fault|SIGSEGV|Fatal Python error: Segmentation fault|signal 11\b", re.I
)
_IMAGE_PULL = {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"}
_INSUFFICIENT = re.compile(r"Insufficient ([A-Za-z0-9./_-]+)")
# The scheduler's other reasons, as kube-scheduler words them in FailedScheduling events.
_OTHER_REASONS = (
    re.compile(r"untolerated taint \{[^}]*\}"),
    re.compile(r"didn't match Pod's node affinity/selector"),
    re.compile(r"didn't match pod anti-affinity rules"),
)


def _status(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("status") or {}


def _cstatus(facts: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for cs in _status(facts["pod"]).get("containerStatuses") or []:
        if cs.get("name") == facts.get("container"):
            return cs
    return None


def _events(facts: Mapping[str, Any], reason: str) -> list[Mapping[str, Any]]:
    return [e for e in facts.get("events") or [] if e.get("reason") == reason]


def _ev_line(e: Mapping[str, Any]) -> str:
    count = e.get("count") or (e.get("series") or {}).get("count") or 1
    return f"event {e.get('type', 'Normal')} {e.get('reason')} (x{count}): {e.get('message', '')}"


def _log_lines(text: str | None, pattern: re.Pattern[str], limit: int = 3) -> list[str]:
    if not text:
        return []
    return [ln.strip() for ln in text.splitlines() if pattern.search(ln)][-limit:]


@check("K101", "K102", "K103", domain="kube")
def container_terminations(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """Last termination of the probed container: segfault, OOM kill, or another error."""
    cs = _cstatus(facts)
    if cs is None:
        return
    state = cs.get("state") or {}
    term = (cs.get("lastState") or {}).get("terminated") or state.get("terminated")
    if not term:
        if cs.get("restartCount"):
            yield finding(
                "K103",
                Status.UNKNOWN,
                title=f"container restarted {cs['restartCount']} times; last termination not recorded",
            )
        return
    code = term.get("exitCode")
    reason = term.get("reason") or ""
    waiting = (state.get("waiting") or {}).get("reason") or ""
    restarts = cs.get("restartCount") or 0
    ev = [
        f"container {cs.get('name')}: restarts {restarts}"
        + (f", now {waiting}" if waiting else ""),
        f"last termination: exitCode {code}, reason {reason or '-'}, signal {term.get('signal', '-')}",
    ]
    segv_lines = _log_lines((facts.get("logs") or {}).get("previous"), _SEGV_LOG)
    if code == SEGV_EXIT or term.get("signal") == 11:
        yield finding(
            "K101",
            Status.FAIL,
            evidence=ev + [f"previous log: {ln}" for ln in segv_lines],
        )
    elif reason == "OOMKilled":
        yield finding("K102", Status.FAIL, evidence=ev)
    elif code not in (0, None) or waiting == "CrashLoopBackOff":
        yield finding(
            "K103",
            Status.FAIL if waiting == "CrashLoopBackOff" else Status.WARN,
            title=f"container exited with code {code} ({reason or 'Error'})",
            evidence=ev + [f"previous log: {ln}" for ln in segv_lines],
        )


@check("K104", "K105", "K106", domain="kube")
def scheduling(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """A Pending pod: which resource the scheduler could not find, from its events."""
    pod = facts["pod"]
    if _status(pod).get("phase") != "Pending":
        return
    failed = _events(facts, "FailedScheduling")
    if facts.get("events") is None:
        yield finding(
            "K106",
            Status.UNKNOWN,
            title="pod is Pending and its events could not be read",
            evidence=[facts.get("unseen", {}).get("events", "events unreadable")],
        )
        return
    if not failed:
        return  # Pending while pulling or starting: the image/probe checks speak to that
    missing = {
        m.rstrip(".,") for e in failed for m in _INSUFFICIENT.findall(e.get("message") or "")
    }
    lines = [_ev_line(e) for e in failed[-3:]]
    huge = sorted(m for m in missing if m.startswith("hugepages-"))
    if huge:
        yield finding("K104", Status.FAIL, evidence=lines + _requests(pod, huge))
    if "vpc.amazonaws.com/efa" in missing:
        yield finding(
            "K105", Status.FAIL, evidence=lines + _requests(pod, ["vpc.amazonaws.com/efa"])
        )
    if not huge and "vpc.amazonaws.com/efa" not in missing:
        others = sorted(
            {m.group(0) for e in failed for rx in _OTHER_REASONS
             for m in [rx.search(e.get("message") or "")] if m}
        )  # fmt: skip
        reasons = [f"insufficient {m}" for m in sorted(missing)] + others
        yield finding(
            "K106",
            Status.FAIL,
            title="pod cannot be scheduled: " + (", ".join(reasons) or "see the event"),
            evidence=lines,
        )


def _requests(pod: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    out = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        lim = {**(res.get("requests") or {}), **(res.get("limits") or {})}
        for k in keys:
            if k in lim:
                out.append(f"container {c.get('name')} asks {k}: {lim[k]}")
    return out


@check("K107", "K108", "K113", domain="kube")
def pull_and_probes(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """Image pull errors, failing readiness/liveness/startup probes, Running but not Ready."""
    cs = _cstatus(facts)
    waiting = ((cs or {}).get("state") or {}).get("waiting") or {}
    pulls = [e for e in facts.get("events") or [] if e.get("reason") in ("Failed", "ErrImagePull")]
    pulls = [e for e in pulls if re.search(r"pull|image", e.get("message") or "", re.I)]
    if waiting.get("reason") in _IMAGE_PULL or pulls:
        ev = (
            [f"container waiting: {waiting.get('reason')}: {waiting.get('message', '')}"]
            if waiting
            else []
        )
        yield finding("K107", Status.FAIL, evidence=ev + [_ev_line(e) for e in pulls[-2:]])
    unhealthy = _events(facts, "Unhealthy")
    if unhealthy:
        kinds = sorted({(e.get("message") or "").split(" probe", 1)[0] for e in unhealthy})
        yield finding(
            "K108",
            Status.WARN,
            title=f"{'/'.join(kinds)} probe failing",
            evidence=[_ev_line(e) for e in unhealthy[-3:]],
        )
    running = cs is not None and "running" in (cs.get("state") or {})
    if running and cs.get("ready") is False and not unhealthy:
        yield finding(
            "K113",
            Status.WARN,
            evidence=[f"container {cs.get('name')} running, ready=false, no Unhealthy event yet"],
        )


@check("K109", "K110", domain="kube")
def node_devices(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """The node's allocatable EFA devices and GPUs against what its instance type has."""
    node = facts.get("node")
    if not isinstance(node, dict):
        why = (facts.get("unseen") or {}).get("node")
        if why and (facts["pod"].get("spec") or {}).get("nodeName"):
            yield finding(
                "K109", Status.UNKNOWN, title="node allocatable not readable", evidence=[why]
            )
        return
    labels = (node.get("metadata") or {}).get("labels") or {}
    itype = (
        next((labels[k] for k in kube_rules.INSTANCE_LABELS if k in labels), None) or ctx.instance
    )
    spec = instance_spec(itype)
    alloc = (node.get("status") or {}).get("allocatable") or {}
    name = node["metadata"]["name"]
    where = f"node {name} ({itype or 'instance type unknown'})"
    efa = kube_rules.quantity(alloc.get(kube_rules.EFA))
    gpu = kube_rules.quantity(alloc.get(kube_rules.GPU))
    ev = [
        f"{where}: allocatable {kube_rules.EFA}={alloc.get(kube_rules.EFA, 'absent')}, "
        f"{kube_rules.GPU}={alloc.get(kube_rules.GPU, 'absent')}, "
        f"hugepages-2Mi={alloc.get('hugepages-2Mi', 'absent')}"
    ]
    if spec is None:
        yield finding(
            "K109",
            Status.UNKNOWN,
            title=f"expected EFA count unknown for instance type {itype or '(no label)'}",
            evidence=ev,
        )
    elif not efa:
        yield finding(
            "K109",
            Status.FAIL,
            title=f"node advertises no {kube_rules.EFA}; {itype} has {spec.efa}",
            evidence=[*ev, "is the aws-efa-k8s-device-plugin DaemonSet running on this node?"],
        )
    elif efa != spec.efa:
        yield finding(
            "K109",
            Status.WARN,
            title=f"node advertises {int(efa)} {kube_rules.EFA}; {itype} has {spec.efa}",
            evidence=ev,
        )
    else:
        yield finding(
            "K109", Status.PASS, title=f"{int(efa)} EFA devices allocatable ({itype})", evidence=ev
        )
    if spec is not None:
        if not gpu:
            yield finding(
                "K110",
                Status.FAIL,
                title=f"node advertises no {kube_rules.GPU}; {itype} has {spec.gpus}",
                evidence=[*ev, "is the NVIDIA device plugin running on this node?"],
            )
        elif gpu < spec.gpus:
            yield finding(
                "K110",
                Status.WARN,
                title=f"node advertises {int(gpu)} of {spec.gpus} GPUs",
                evidence=ev,
            )
        else:
            yield finding("K110", Status.PASS, title=f"{int(gpu)} GPUs allocatable", evidence=ev)


@check("K111", "K112", domain="kube")
def visibility(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """What the diagnosis could not see: reads RBAC refused, a non-privileged container."""
    unseen = {k: v for k, v in (facts.get("unseen") or {}).items() if "forbidden" in v}
    if unseen:
        yield finding(
            "K112",
            Status.UNKNOWN,
            evidence=[f"{k}: {v}" for k, v in sorted(unseen.items())],
        )
    pod = facts["pod"]
    for c in (pod.get("spec") or {}).get("containers") or []:
        if c.get("name") != facts.get("container"):
            continue
        sc = c.get("securityContext") or {}
        if sc.get("privileged") or not facts.get("probe_ran"):
            return
        yield finding(
            "K111",
            Status.UNKNOWN,
            evidence=[
                f"container {c.get('name')} is not privileged "
                f"(capabilities add: {((sc.get('capabilities') or {}).get('add')) or []})",
                "host processes outside the pod, /dev devices not handed to the pod (gdrdrv, "
                "EFA NICs beyond its allocation) and writable sysfs are invisible to the probe",
            ],
        )


def _live_objects(facts: Mapping[str, Any]) -> kube_rules.Objects:
    items = [facts["pod"]]
    if isinstance(facts.get("statefulset"), dict):
        items.append({"kind": "StatefulSet", "apiVersion": "apps/v1", **facts["statefulset"]})
    for svc in facts.get("services") or []:
        items.append({"kind": "Service", "apiVersion": "v1", **svc})
    items[0] = {"kind": "Pod", "apiVersion": "v1", **facts["pod"]}
    node = facts.get("node") if isinstance(facts.get("node"), dict) else {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    itype = next((labels[k] for k in kube_rules.INSTANCE_LABELS if k in labels), None)
    return kube_rules.Objects(items, instance=itype, live=True)


@check(domain="kube")  # runs the manifest rules, which register their own codes
def live_manifest(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """The manifest rules on the live pod, its StatefulSet and the namespace's Services.

    The pod's own spec and its StatefulSet's template say the same thing; a hit
    on the template is kept and the pod's duplicate dropped.
    """
    objs = _live_objects(facts)
    node = facts.get("node") if isinstance(facts.get("node"), dict) else None
    alloc = ((node or {}).get("status") or {}).get("allocatable") if node else None
    seen: set[tuple[str, str]] = set()
    hits = kube_rules.manifest_hits(objs, alloc)
    hits.sort(key=lambda h: objs.items[h.obj].get("kind") != "StatefulSet")
    for h in hits:
        key = (h.code, h.message)
        if key in seen:
            continue
        seen.add(key)
        o = objs.items[h.obj]
        yield finding(
            h.code,
            h.status,
            title=h.message,
            evidence=[f"{o.get('kind')}/{o['metadata'].get('name')} {_dotted(h.path)}"],
        )


def _dotted(path: kube_rules.Path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


_ENV_VAR = re.compile(r"\b([A-Z_][A-Z0-9_]*)=")


def pod_env_findings(facts: Mapping[str, Any], ctx: Context) -> list[Finding]:
    """The env contract (checks/env.py, the one implementation) on the container's env.

    Only findings about variables the spec sets: the process also gets envFrom,
    the image's ENV and what its launcher exports, so a variable missing from the
    spec may well be set (the probe's --pid view of the process env decides that).
    """
    from epdoctor.checks.env import env_findings

    for c in (facts["pod"].get("spec") or {}).get("containers") or []:
        if c.get("name") != facts.get("container"):
            continue
        env = {e["name"]: str(e["value"]) for e in c.get("env") or [] if "value" in e}
        if not env:
            return []
        where = f"pod {facts['pod']['metadata']['name']} container {c.get('name')} env"
        return [
            f
            for f in env_findings(env, ctx, engines=kube_rules.engines_of(c), where=where)
            if f.status in (Status.WARN, Status.FAIL)
            and any(n in env for e in f.evidence for n in _ENV_VAR.findall(e))
        ]
    return []


def log_findings(facts: Mapping[str, Any], ctx: Context) -> list[Finding]:
    """The log analyzer (checks/logs.py) on the container logs: what they show went wrong.

    Only warnings and failures: a tail that starts after the startup banners shows
    nothing conclusive about them, and that absence is not a finding about the pod.
    """
    try:
        from epdoctor.checks.logs import findings_in
    except ImportError:  # an installation without the log analyzer
        return []
    out: list[Finding] = []
    name = facts["pod"]["metadata"]["name"]
    for which in ("previous", "current"):
        text = (facts.get("logs") or {}).get(which)
        if not text:
            continue
        found = findings_in([text.encode()], ctx, source=f"{name} ({which} log)")
        out.extend(f for f in found if f.status in (Status.WARN, Status.FAIL))
    return out


@check("K114", domain="kube")
def env_and_logs(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """The env contract on the pod's env and the log analyzer on its logs (shared code)."""
    yield from pod_env_findings(facts, ctx)
    found = log_findings(facts, ctx)
    yield from found
    if not found and (facts.get("logs") or {}).get("previous") is None and _restarted(facts):
        why = (facts.get("unseen") or {}).get("logs.previous", "not read")
        yield finding("K114", Status.UNKNOWN, evidence=[f"previous container log: {why}"])


def _restarted(facts: Mapping[str, Any]) -> bool:
    cs = _cstatus(facts)
    return bool(cs and (cs.get("restartCount") or 0) > 0)


@check("K301", domain="kube-job")
def node_job(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """A node whose probe Job gave no document is unknown, never healthy."""
    if facts.get("probe_ran"):
        return
    ev = [f"Job {facts.get('job')} on node {facts.get('node')}: pod {facts.get('phase', '?')}"]
    if facts.get("error"):
        ev.append(str(facts["error"]))
    if facts.get("cleanup_error"):
        ev.append(f"cleanup: {facts['cleanup_error']}")
    yield finding("K301", Status.UNKNOWN, evidence=ev)


@check("K115", domain="kube")
def probe_not_run(facts: Mapping[str, Any], ctx: Context) -> Iterator[Finding]:
    """The node probe could not run in the container: every node fact is unknown."""
    if facts.get("probe_error"):
        yield finding(
            "K115",
            Status.UNKNOWN,
            title=f"node probe did not run: {facts['probe_error']}",
            evidence=[f"pod {facts['pod']['metadata']['name']} container {facts.get('container')}"],
        )
