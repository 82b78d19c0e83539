"""What the emulated cluster runs: server-side apply, a StatefulSet controller, a scheduler, a
kubelet whose containers are real local processes, cluster DNS and the API server's proxy.

No real kube-apiserver, scheduler or kubelet can run on the test machines (see the shared
test-infra notes), so tests/kube_emulator.py mixes this in. Each part plays the real
component's observable behaviour through the real API shapes, the way `epdoctor run` and
kubectl see it:

* server-side apply: ``PATCH`` with ``Content-Type: application/apply-patch+yaml`` needs a
  ``fieldManager``; it creates (201) or updates (200) the object, records the manager in
  ``metadata.managedFields`` (operation Apply), refuses with 409 Conflict when another manager
  already set a field to another value (unless ``force=true``), and with ``dryRun=All``
  answers the object it would store without storing it.
* StatefulSet controller (for StatefulSets applied through the API; objects a test puts are
  static fixtures, left as put): pods ``NAME-0`` .. ``NAME-(N-1)`` from the template, labelled with the
  controller-revision-hash, pod-name and pod-index labels and owned by the StatefulSet;
  ``spec.hostname``/``spec.subdomain`` set for per-pod DNS; a template change is rolled out from
  the highest ordinal down, one pod at a time, each waiting for the one above to be Running and
  Ready; pods of a deleted StatefulSet are garbage-collected (propagationPolicy Background).
* scheduler: nodes are the Node objects a test puts (allocatable, labels, taints). A pod is
  bound to a node that matches its nodeSelector, tolerates the node's NoSchedule/NoExecute
  taints, has room for its requests (every resource, ``vpc.amazonaws.com/efa``,
  ``nvidia.com/gpu`` and ``hugepages-2Mi`` included) and holds no pod its required anti-affinity
  excludes; otherwise it stays Pending with a ``FailedScheduling`` event in the real scheduler's
  words (``0/2 nodes are available: 2 Insufficient vpc.amazonaws.com/efa. preemption: ...``).
* kubelet: the image must be registered in ``images`` (an ``Image`` stands in for its
  filesystem: ``bin/`` first on PATH, the image's ``/opt`` under ``root/opt``, its ENV);
  otherwise ``ErrImagePull`` then ``ImagePullBackOff`` with the events a real kubelet
  records. The container's ``command``/``args`` run as a local process in its own session,
  with the pod's env (values and the downward API), its output appended to the container log
  (``follow`` streams see it live); an exit is recorded as ``lastState.terminated`` with the
  exit code, the log moves to ``--previous``, and the container waits in ``CrashLoopBackOff``
  before it is started again. The readiness probe's exec command really runs in the pod.
  Deleting a pod stops its container (TERM, then KILL) and every process exec started in it.
* a pod's own filesystem and network: this machine is every node, so what one pod writes under
  ``/tmp`` or ``/cache`` goes to that pod's own folder, and its container ports are local ports
  of its own: the commands a pod runs (container, exec, probes) see their paths and
  ``127.0.0.1:<containerPort>`` rewritten to the pod's, and ``KUBE_EMULATOR_PORT_<port>`` names
  the local port. This is the one liberty taken with the commands; it is what a pod's mount
  and network namespaces do.
* cluster DNS: a ``getent`` on the pods' PATH answers ``POD.SERVICE.NS.svc.cluster.local`` for
  StatefulSet pods of a headless Service, and only while the pod is Ready unless the Service
  has ``publishNotReadyAddresses`` (the rendezvous trap the manifests avoid).
* proxy: ``/api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH`` and
  ``/services/NAME:PORT/proxy/PATH`` forward the request to the pod (a Service only to its Ready
  endpoints, ``no endpoints available`` otherwise), answering 503 when nothing listens.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import hashlib
import json
import os
import re
import signal
import socket
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import aiohttp.web
import kmock
import yaml

TICK_S = 0.1  # how often the controllers look again
PULL_BACKOFF_S = 0.3
CRASH_BACKOFF_S = 0.3  # the first CrashLoopBackOff wait; doubles up to CRASH_BACKOFF_MAX_S
CRASH_BACKOFF_MAX_S = 2.0
PROBE_PERIOD_S = 0.3
GRACE_MAX_S = 3.0  # terminationGracePeriodSeconds, capped so tests do not wait a minute
POD_MARK = "KUBE_EMULATOR_POD"

_PROXY = re.compile(
    r"^/api/v1/namespaces/(?P<ns>[^/]+)/(?P<kind>pods|services)/(?P<name>[^/:]+)(?::(?P<port>[^/]+))?"
    r"/proxy(?P<path>/.*)?$"
)


@dataclass
class Image:
    """What stands in for a container image on this machine."""

    root: Path | None = None  # bin/ goes first on PATH; the image's /opt is root/opt
    env: dict[str, str] = field(default_factory=dict)  # the image's ENV


@dataclass
class PodRuntime:
    """A pod the kubelet runs: its own folder, its ports, its container processes."""

    ns: str
    name: str
    uid: str
    root: Path
    image: Image | None = None
    ports: dict[int, int] = field(default_factory=dict)
    procs: dict[str, asyncio.subprocess.Process] = field(default_factory=dict)
    deleting: bool = False
    tasks: list[asyncio.Task[Any]] = field(default_factory=list)

    @property
    def mark(self) -> str:
        return f"{self.ns}/{self.name}/{self.uid}"


def now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def quantity(q: Any) -> float:
    """A Kubernetes quantity as a number (0 when absent or unreadable)."""
    if q is None:
        return 0.0
    m = re.fullmatch(r"\s*([0-9.]+)\s*([A-Za-z]*)\s*", str(q))
    if not m:
        return 0.0
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 1e3, "M": 1e6, "G": 1e9,
             "T": 1e12, "m": 1e-3, "": 1}  # fmt: skip
    return float(m.group(1)) * units.get(m.group(2), 1)


def _requests(spec: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        want = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for k, v in want.items():
            out[k] = out.get(k, 0.0) + quantity(v)
    return out


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


def _merge(live: Any, applied: Any) -> Any:
    """Dicts merge key by key; anything else (lists included) is the applied value."""
    if isinstance(live, dict) and isinstance(applied, dict):
        out = dict(live)
        for k, v in applied.items():
            out[k] = _merge(live.get(k), v)
        return out
    return copy.deepcopy(applied)


def _leaves(obj: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    if isinstance(obj, dict):
        out: dict[tuple[str, ...], Any] = {}
        for k, v in obj.items():
            out.update(_leaves(v, (*path, str(k))))
        return out
    return {path: obj}


def _at(obj: Any, path: tuple[str, ...]) -> Any:
    for p in path:
        if not isinstance(obj, dict) or p not in obj:
            return None
        obj = obj[p]
    return obj


class WorkloadsMixin:
    """The cluster behind the API: mixed into KubeEmulator (which provides objects, put, get,
    logs, ended_logs and _status)."""

    # -- state, set up by init_workloads ------------------------------------------------------

    def init_workloads(self) -> None:
        self.images: dict[str, Image] = {}
        self.workdir: Path | None = None  # where pods get their folders (RunningEmulator sets it)
        self.runtimes: dict[tuple[str, str], PodRuntime] = {}
        self.log_generation: dict[tuple[str, str, str, bool], int] = {}
        self._managed: set[str] = set()  # uids of the pods the controller made
        # uids of the StatefulSets it controls: those applied through the API. Objects a test
        # puts as they are (a pod "already running") are static fixtures, left as put.
        self._controlled: set[str] = set()
        self._event_index: dict[tuple[str, str, str, str], str] = {}
        self._tried: dict[str, float] = {}  # pod uid -> when scheduling last failed
        self._loop_task: asyncio.Task[None] | None = None

    def start_controllers(self) -> None:
        self._loop_task = asyncio.create_task(self._controllers())

    async def stop_workloads(self) -> None:
        """Stop every container (the emulator is shutting down)."""
        if self._loop_task is not None:
            self._loop_task.cancel()
        for rt in list(self.runtimes.values()):
            await self._kill_pod(rt, grace=0.5)

    # -- helpers over the object store ---------------------------------------------------------

    def _res(self, plural: str) -> Any:
        group = {"statefulsets": "apps", "jobs": "batch"}.get(plural, "")
        return kmock.resource(group, "v1", plural)

    def _items(self, plural: str, ns: str | None = None) -> list[dict[str, Any]]:
        res = self._res(plural)
        out = []
        for (r, pns, _name), obj in list(self.objects.items()):  # type: ignore[attr-defined]
            if r == res and not obj.deleted and (ns is None or pns == ns):
                out.append(obj.raw)
        return out

    def _store(self, plural: str, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[self._res(plural), meta.get("namespace"), meta["name"]] = obj  # type: ignore[attr-defined]

    def _remove(self, plural: str, ns: str | None, name: str) -> None:
        key = (self._res(plural), ns, name)
        if key in self.objects and not self.objects[key].deleted:  # type: ignore[attr-defined]
            self.objects[key].delete()  # type: ignore[attr-defined]

    def _pod(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.get("pods", ns, name)  # type: ignore[attr-defined]

    def _update_pod(self, rt: PodRuntime, fn: Any) -> None:
        pod = self._pod(rt.ns, rt.name)
        if pod is None or pod["metadata"].get("uid") != rt.uid:
            return
        pod = copy.deepcopy(pod)
        fn(pod)
        self._store("pods", pod)

    def event(self, obj: dict[str, Any], kind: str, type_: str, reason: str, message: str,
              component: str = "kubelet") -> None:  # fmt: skip
        """Record an event the way the event recorder does: a repeat raises the count."""
        meta = obj["metadata"]
        ns = meta.get("namespace") or "default"
        key = (meta.get("uid", ""), reason, message, ns)
        stamp = now()
        name = self._event_index.get(key)
        existing = self.get("events", ns, name) if name else None  # type: ignore[attr-defined]
        if existing is not None:
            existing = copy.deepcopy(existing)
            existing["count"] = int(existing.get("count") or 1) + 1
            existing["lastTimestamp"] = stamp
            self._store("events", existing)
            return
        name = f"{meta['name']}.{uuid.uuid4().hex[:16]}"
        self._event_index[key] = name
        self._store(
            "events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": ns},
                "involvedObject": {"kind": kind, "name": meta["name"], "namespace": ns,
                                   "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion")},
                "reason": reason,
                "message": message,
                "type": type_,
                "count": 1,
                "firstTimestamp": stamp,
                "lastTimestamp": stamp,
                "source": {"component": component},
            },
        )  # fmt: skip

    # -- server-side apply ---------------------------------------------------------------------

    async def serve_apply(
        self, raw: aiohttp.web.BaseRequest, group: str, plural: str, ns: str | None, name: str
    ) -> aiohttp.web.StreamResponse:
        q = raw.query
        manager = q.get("fieldManager")
        if not manager:
            return self._status(  # type: ignore[attr-defined]
                400, "BadRequest", "PATCH: fieldManager is required for apply requests"
            )
        try:
            applied = yaml.safe_load(await raw.read())
        except yaml.YAMLError as exc:
            return self._status(400, "BadRequest", f"error decoding YAML: {exc}")  # type: ignore[attr-defined]
        if not isinstance(applied, dict) or (applied.get("metadata") or {}).get("name") != name:
            return self._status(  # type: ignore[attr-defined]
                400, "BadRequest", "the name of the object does not match the name on the URL"
            )
        applied.setdefault("metadata", {})["namespace"] = ns
        live = self.get(plural, ns, name, group)  # type: ignore[attr-defined]
        if live is not None and q.get("force") not in ("true", "1"):
            conflicts = self._conflicts(live, applied, manager)
            if conflicts:
                other, paths = conflicts
                lines = "\n".join(f"- {other}: .{'.'.join(p)}" for p in paths[:8])
                return self._status(  # type: ignore[attr-defined]
                    409,
                    "Conflict",
                    f'Apply failed with {len(paths)} conflict(s): conflict with "{other}":\n'
                    + lines,
                )
        result = self._applied(live, applied, manager)
        created = live is None
        if q.get("dryRun") != "All":
            self._store(plural, result)
            if plural == "statefulsets":
                self._controlled.add(result["metadata"]["uid"])
        return aiohttp.web.json_response(result, status=201 if created else 200)

    def _conflicts(
        self, live: dict[str, Any], applied: dict[str, Any], manager: str
    ) -> tuple[str, list[tuple[str, ...]]] | None:
        others = [m.get("manager") for m in (live["metadata"].get("managedFields") or [])
                  if m.get("manager") != manager]  # fmt: skip
        if not others:
            return None
        want = _leaves({k: v for k, v in applied.items() if k not in ("apiVersion", "kind")})
        paths = [
            p for p, v in want.items()
            if p[:2] not in (("metadata", "name"), ("metadata", "namespace"))
            and _at(live, p) is not None and _at(live, p) != v
        ]  # fmt: skip
        return (str(others[0]), paths) if paths else None

    def _applied(self, live: dict[str, Any] | None, applied: dict[str, Any], manager: str) -> Any:
        if live is None:
            out = copy.deepcopy(applied)
            meta = out["metadata"]
            meta["uid"] = str(uuid.uuid4())
            meta["creationTimestamp"] = now()
            meta["generation"] = 1
            meta["resourceVersion"] = "1"
        else:
            out = copy.deepcopy(live)
            for k, v in applied.items():
                if k == "metadata":
                    for mk in ("labels", "annotations"):
                        if mk in v:
                            out["metadata"][mk] = {**(live["metadata"].get(mk) or {}), **v[mk]}
                elif k != "status":
                    out[k] = copy.deepcopy(v)  # the applier owns every field it sends
            meta = out["metadata"]
            if out.get("spec") != live.get("spec"):
                meta["generation"] = int(meta.get("generation") or 1) + 1
            meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 1) + 1)
        entries = [m for m in (out["metadata"].get("managedFields") or [])
                   if m.get("manager") != manager]  # fmt: skip
        fields = {f"f:{k}": {} for k in applied if k not in ("apiVersion", "kind")}
        entries.append({"manager": manager, "operation": "Apply",
                        "apiVersion": applied.get("apiVersion"), "time": now(),
                        "fieldsType": "FieldsV1", "fieldsV1": fields})  # fmt: skip
        out["metadata"]["managedFields"] = entries
        return out

    # -- the controllers' loop -----------------------------------------------------------------

    async def _controllers(self) -> None:
        while True:
            try:
                self._statefulsets()
                self._collect_garbage()
                self._schedule()
                self._write_dns()
            except Exception as exc:  # a bug here must show, not silently stop the cluster
                print(f"kube emulator controllers: {type(exc).__name__}: {exc}", flush=True)
            await asyncio.sleep(TICK_S)

    # StatefulSet controller
    def _statefulsets(self) -> None:
        for sts in self._items("statefulsets"):
            if sts["metadata"].get("uid") in self._controlled:
                self._sync_statefulset(sts)

    def _sync_statefulset(self, sts: dict[str, Any]) -> None:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        ns, name = meta.get("namespace"), meta["name"]
        tpl = spec.get("template") or {}
        digest = hashlib.sha256(json.dumps(tpl, sort_keys=True).encode()).hexdigest()[:10]
        revision = f"{name}-{digest}"
        replicas = int(spec.get("replicas", 1))
        pods = {
            p["metadata"]["name"]: p
            for p in self._items("pods", ns)
            if any(o.get("uid") == meta.get("uid") for o in p["metadata"].get("ownerReferences") or [])
        }  # fmt: skip
        for i in range(replicas):
            pod_name = f"{name}-{i}"
            if pod_name not in pods and self._pod(ns, pod_name) is None:
                self._create_pod(sts, i, revision)
        for pod_name, pod in pods.items():
            index = int(pod["metadata"]["labels"].get("apps.kubernetes.io/pod-index", "0"))
            if index >= replicas:
                self._delete_pod(ns, pod_name)
        self._roll(sts, pods, revision)
        ready = [p for p in pods.values() if _ready(p)]
        updated = [p for p in pods.values() if _revision(p) == revision]
        status = {
            "observedGeneration": meta.get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": len(ready),
            "availableReplicas": len(ready),
            "updatedReplicas": len(updated),
            "currentReplicas": len(updated),
            "updateRevision": revision,
            "currentRevision": revision if len(updated) == len(pods) else (sts.get("status") or {}).get("currentRevision", revision),
        }  # fmt: skip
        if sts.get("status") != status:
            sts = copy.deepcopy(sts)
            sts["status"] = status
            self._store("statefulsets", sts)

    def _roll(self, sts: dict[str, Any], pods: dict[str, dict[str, Any]], revision: str) -> None:
        """RollingUpdate: from the highest ordinal down, one at a time, each once the pods
        above it run the new revision and are Ready. OnDelete: nothing; a deleted pod comes
        back at the new revision (the StatefulSet controller's two update strategies)."""
        strategy = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type")
        if strategy == "OnDelete":
            return
        if any(p["metadata"].get("deletionTimestamp") for p in pods.values()):
            return
        by_index = sorted(pods.values(), key=lambda p: -_index(p))
        for pod in by_index:
            if _revision(pod) == revision:
                if not _ready(pod):
                    return  # wait for it before touching the next one down
                continue
            self._delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])
            return

    def _create_pod(self, sts: dict[str, Any], index: int, revision: str) -> None:
        meta, spec = sts["metadata"], sts.get("spec") or {}
        tpl = copy.deepcopy(spec.get("template") or {})
        name = f"{meta['name']}-{index}"
        labels = {**((tpl.get("metadata") or {}).get("labels") or {}),
                  "controller-revision-hash": revision,
                  "statefulset.kubernetes.io/pod-name": name,
                  "apps.kubernetes.io/pod-index": str(index)}  # fmt: skip
        uid = str(uuid.uuid4())
        pod_spec = {"restartPolicy": "Always", **(tpl.get("spec") or {}),
                    "hostname": name, "subdomain": spec.get("serviceName", "")}  # fmt: skip
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name, "namespace": meta.get("namespace"), "uid": uid, "labels": labels,
                "creationTimestamp": now(),
                "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                     "name": meta["name"], "uid": meta.get("uid"),
                                     "controller": True, "blockOwnerDeletion": True}],
            },
            "spec": pod_spec,
            "status": {"phase": "Pending", "qosClass": _qos(pod_spec)},
        }  # fmt: skip
        self._managed.add(uid)
        self._store("pods", pod)
        self.event(sts, "StatefulSet", "Normal", "SuccessfulCreate",
                   f"create Pod {name} in StatefulSet {meta['name']} successful",
                   "statefulset-controller")  # fmt: skip

    # garbage collector
    def _collect_garbage(self) -> None:
        owners = {s["metadata"].get("uid") for s in self._items("statefulsets")}
        for pod in self._items("pods"):
            if pod["metadata"].get("uid") not in self._managed:
                continue  # a static fixture: nothing collects it
            refs = pod["metadata"].get("ownerReferences") or []
            if any(r.get("kind") == "StatefulSet" for r in refs) and not any(
                r.get("uid") in owners for r in refs
            ):
                self._delete_pod(pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _delete_pod(self, ns: str, name: str) -> None:
        """What DELETE on a pod starts: Terminating, the container stopped, then gone."""
        pod = self._pod(ns, name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return
        uid = pod["metadata"].get("uid")
        rt = self.runtimes.get((ns, name))
        if uid not in self._managed or rt is None or rt.uid != uid:
            self._remove("pods", ns, name)
            return
        pod = copy.deepcopy(pod)
        pod["metadata"]["deletionTimestamp"] = now()
        self._store("pods", pod)
        rt.deleting = True
        self._tasks.append(asyncio.create_task(self._finish_delete(rt, pod)))  # type: ignore[attr-defined]

    async def _finish_delete(self, rt: PodRuntime, pod: dict[str, Any]) -> None:
        grace = min(float(pod["spec"].get("terminationGracePeriodSeconds", 30)), GRACE_MAX_S)
        for c in pod["spec"].get("containers") or []:
            self.event(pod, "Pod", "Normal", "Killing", f"Stopping container {c['name']}")
        await self._kill_pod(rt, grace)
        current = self._pod(rt.ns, rt.name)
        if current is not None and current["metadata"].get("uid") == rt.uid:
            self._remove("pods", rt.ns, rt.name)
        if self.runtimes.get((rt.ns, rt.name)) is rt:
            del self.runtimes[(rt.ns, rt.name)]

    async def _kill_pod(self, rt: PodRuntime, grace: float) -> None:
        rt.deleting = True
        for t in rt.tasks:
            if t is not asyncio.current_task():
                t.cancel()
        groups = {p.pid for p in rt.procs.values() if p.returncode is None}
        groups |= _marked_groups(rt.mark)
        for g in groups:
            _signal_group(g, signal.SIGTERM)
        deadline = asyncio.get_running_loop().time() + grace
        while groups and asyncio.get_running_loop().time() < deadline:
            groups = {g for g in groups if _group_alive(g)}
            await asyncio.sleep(0.05)
        for g in groups | _marked_groups(rt.mark):
            _signal_group(g, signal.SIGKILL)
        for p in rt.procs.values():
            with contextlib.suppress(ProcessLookupError):
                await asyncio.wait_for(p.wait(), 2)
        for key in list(self.logs):  # type: ignore[attr-defined]
            if key[:2] == (rt.ns, rt.name):
                self.ended_logs.add(key)  # type: ignore[attr-defined]

    # scheduler
    def _schedule(self) -> None:
        nodes = self._items("nodes")
        for pod in self._items("pods"):
            meta = pod["metadata"]
            if meta.get("uid") not in self._managed or (pod.get("spec") or {}).get("nodeName"):
                continue
            if meta.get("deletionTimestamp"):
                continue
            node, why = self._fit(pod, nodes)
            if node is None:
                cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                        "message": why, "lastTransitionTime": now()}  # fmt: skip
                old = ((pod.get("status") or {}).get("conditions") or [{}])[0]
                if old.get("message") != why:
                    pod = copy.deepcopy(pod)
                    pod["status"]["conditions"] = [cond]
                    self._store("pods", pod)
                # the scheduler retries with a back-off: one event a second at most here
                clock = asyncio.get_running_loop().time()
                if clock - self._tried.get(meta["uid"], 0.0) >= 1.0:
                    self._tried[meta["uid"]] = clock
                    self.event(pod, "Pod", "Warning", "FailedScheduling", why, "default-scheduler")
                continue
            pod = copy.deepcopy(pod)
            pod["spec"]["nodeName"] = node
            pod["status"]["conditions"] = [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": now()}
            ]
            self._store("pods", pod)
            self.event(pod, "Pod", "Normal", "Scheduled",
                       f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
                       "default-scheduler")  # fmt: skip
            self._start_kubelet(pod)

    def _fit(self, pod: dict[str, Any], nodes: list[dict[str, Any]]) -> tuple[str | None, str]:
        if not nodes:
            return None, "no nodes available to schedule pods"
        spec = pod.get("spec") or {}
        want = _requests(spec)
        reasons: dict[str, int] = {}
        placed = [p for p in self._items("pods") if (p.get("spec") or {}).get("nodeName")
                  and not p["metadata"].get("deletionTimestamp")]  # fmt: skip
        for node in nodes:
            name = node["metadata"]["name"]
            why: list[str] = []
            labels = node["metadata"].get("labels") or {}
            sel = spec.get("nodeSelector") or {}
            if any(labels.get(k) != v for k, v in sel.items()):
                why.append("node(s) didn't match Pod's node affinity/selector")
            for taint in (node.get("spec") or {}).get("taints") or []:
                if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerates(
                    spec.get("tolerations") or [], taint
                ):
                    value = taint.get("value", "")
                    why.append(f"node(s) had untolerated taint {{{taint.get('key')}: {value}}}")
                    break
            alloc = (node.get("status") or {}).get("allocatable") or {}
            used: dict[str, float] = {}
            for p in placed:
                if p["spec"]["nodeName"] == name:
                    for k, v in _requests(p["spec"]).items():
                        used[k] = used.get(k, 0.0) + v
            for res, amount in sorted(want.items()):
                if amount > quantity(alloc.get(res)) - used.get(res, 0.0) + 1e-9:
                    why.append(f"Insufficient {res}")
            if self._anti_affinity_blocks(
                spec, [p for p in placed if p["spec"]["nodeName"] == name]
            ):
                why.append("node(s) didn't match pod anti-affinity rules")
            if not why:
                return name, ""
            for w in why:
                reasons[w] = reasons.get(w, 0) + 1
        n = len(nodes)
        text = ", ".join(f"{c} {r}" for r, c in sorted(reasons.items()))
        return None, (
            f"0/{n} nodes are available: {text}. preemption: 0/{n} nodes are available: "
            f"{n} Preemption is not helpful for scheduling."
        )

    @staticmethod
    def _anti_affinity_blocks(spec: dict[str, Any], on_node: list[dict[str, Any]]) -> bool:
        terms = (((spec.get("affinity") or {}).get("podAntiAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution")) or []  # fmt: skip
        for term in terms:
            match = (term.get("labelSelector") or {}).get("matchLabels") or {}
            for p in on_node:
                labels = p["metadata"].get("labels") or {}
                if match and all(labels.get(k) == v for k, v in match.items()):
                    return True
        return False

    # kubelet
    def _start_kubelet(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        ns, name = meta["namespace"], meta["name"]
        base = (self.workdir or Path("/tmp")) / "pods" / ns / f"{name}-{meta['uid'][:8]}"
        for sub in ("tmp", "cache"):
            (base / sub).mkdir(parents=True, exist_ok=True)
        rt = PodRuntime(ns, name, meta["uid"], base)
        for c in pod["spec"].get("containers") or []:
            for port in c.get("ports") or []:
                rt.ports[int(port["containerPort"])] = _free_port()
        self.runtimes[(ns, name)] = rt
        rt.tasks.append(asyncio.create_task(self._run_pod(rt)))

    async def _run_pod(self, rt: PodRuntime) -> None:
        pod = self._pod(rt.ns, rt.name)
        if pod is None:
            return
        containers = pod["spec"].get("containers") or []
        images = [c.get("image", "") for c in pod["spec"].get("initContainers") or []] + [
            c.get("image", "") for c in containers
        ]
        for image in dict.fromkeys(images):
            if not await self._pull(rt, image):
                return
        rt.image = self.images.get(containers[0].get("image", "")) if containers else None
        for ic in pod["spec"].get("initContainers") or []:
            if not await self._run_init(rt, ic):
                return
        rt.tasks.append(asyncio.create_task(self._probe(rt)))
        await asyncio.gather(*(self._run_container(rt, c) for c in containers))

    async def _pull(self, rt: PodRuntime, image: str) -> bool:
        backoff = PULL_BACKOFF_S
        while not rt.deleting:
            pod = self._pod(rt.ns, rt.name)
            if pod is None:
                return False
            self.event(pod, "Pod", "Normal", "Pulling", f'Pulling image "{image}"')
            if image in self.images:
                self.event(pod, "Pod", "Normal", "Pulled",
                           f'Successfully pulled image "{image}" in 112ms (112ms including waiting)')  # fmt: skip
                return True
            err = (
                f'rpc error: code = NotFound desc = failed to pull and unpack image "{image}": '
                f'failed to resolve reference "{image}": {image}: not found'
            )
            self.event(pod, "Pod", "Warning", "Failed", f'Failed to pull image "{image}": {err}')
            self.event(pod, "Pod", "Warning", "Failed", "Error: ErrImagePull")
            self._waiting(rt, pod, "ErrImagePull", err)
            await asyncio.sleep(backoff)
            pod = self._pod(rt.ns, rt.name)
            if pod is None:
                return False
            self.event(pod, "Pod", "Normal", "BackOff", f'Back-off pulling image "{image}"')
            self.event(pod, "Pod", "Warning", "Failed", "Error: ImagePullBackOff")
            self._waiting(rt, pod, "ImagePullBackOff", f'Back-off pulling image "{image}"')
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, CRASH_BACKOFF_MAX_S)
        return False

    def _waiting(self, rt: PodRuntime, pod: dict[str, Any], reason: str, message: str) -> None:
        def set_waiting(p: dict[str, Any]) -> None:
            p["status"]["containerStatuses"] = [
                {"name": c["name"], "image": c.get("image"), "imageID": "", "ready": False,
                 "started": False, "restartCount": 0,
                 "state": {"waiting": {"reason": reason, "message": message}}}
                for c in p["spec"].get("containers") or []
            ]  # fmt: skip

        self._update_pod(rt, set_waiting)

    async def _run_init(self, rt: PodRuntime, c: dict[str, Any]) -> bool:
        pod = self._pod(rt.ns, rt.name)
        if pod is None:
            return False
        self.event(pod, "Pod", "Normal", "Created", f"Created container {c['name']}")
        self.event(pod, "Pod", "Normal", "Started", f"Started container {c['name']}")
        self._set_init(rt, c["name"], {"running": {"startedAt": now()}})
        proc = await self._spawn(rt, pod, c)
        rc = await self._pump(rt, proc, c["name"])
        state = {"terminated": {"exitCode": rc, "reason": "Completed" if rc == 0 else "Error",
                                "finishedAt": now()}}  # fmt: skip
        self._set_init(rt, c["name"], state)
        return rc == 0 and not rt.deleting

    def _set_init(self, rt: PodRuntime, name: str, state: dict[str, Any]) -> None:
        def upd(p: dict[str, Any]) -> None:
            sts = [s for s in p["status"].get("initContainerStatuses") or [] if s["name"] != name]
            sts.append({"name": name, "state": state, "ready": "terminated" in state,
                        "restartCount": 0, "image": "", "imageID": ""})  # fmt: skip
            p["status"]["initContainerStatuses"] = sts
            p["status"]["phase"] = "Pending"

        self._update_pod(rt, upd)

    async def _run_container(self, rt: PodRuntime, c: dict[str, Any]) -> None:
        restarts, backoff = 0, CRASH_BACKOFF_S
        key = (rt.ns, rt.name, c["name"], False)
        while not rt.deleting:
            pod = self._pod(rt.ns, rt.name)
            if pod is None:
                return
            self.logs[key] = ""  # type: ignore[attr-defined]
            self.ended_logs.discard(key)  # type: ignore[attr-defined]
            self.log_generation[key] = self.log_generation.get(key, 0) + 1
            self.event(pod, "Pod", "Normal", "Created", f"Created container {c['name']}")
            proc = await self._spawn(rt, pod, c)
            rt.procs[c["name"]] = proc
            self.event(pod, "Pod", "Normal", "Started", f"Started container {c['name']}")
            started = now()
            self._set_container(rt, c, restarts, {"running": {"startedAt": started}}, None)
            rc = await self._pump(rt, proc, c["name"])
            self.ended_logs.add(key)  # type: ignore[attr-defined]
            if rt.deleting:
                return
            term = {"exitCode": rc, "reason": "Completed" if rc == 0 else "Error",
                    "startedAt": started, "finishedAt": now(), "containerID": f"emu://{proc.pid}"}  # fmt: skip
            if rc >= 128:
                term["signal"] = rc - 128
            restarts += 1
            self.logs[(rt.ns, rt.name, c["name"], True)] = self.logs.get(key, "")  # type: ignore[attr-defined]
            msg = f"back-off {backoff:.0f}s restarting failed container={c['name']} pod={rt.name}_{rt.ns}({rt.uid})"
            self._set_container(rt, c, restarts,
                                {"waiting": {"reason": "CrashLoopBackOff", "message": msg}}, term)  # fmt: skip
            pod = self._pod(rt.ns, rt.name)
            if pod is not None:
                self.event(pod, "Pod", "Warning", "BackOff",
                           f"Back-off restarting failed container {c['name']} in pod {rt.name}_{rt.ns}({rt.uid})")  # fmt: skip
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, CRASH_BACKOFF_MAX_S)

    def _set_container(self, rt: PodRuntime, c: dict[str, Any], restarts: int,
                       state: dict[str, Any], last: dict[str, Any] | None) -> None:  # fmt: skip
        def upd(p: dict[str, Any]) -> None:
            old = next((s for s in p["status"].get("containerStatuses") or []
                        if s["name"] == c["name"]), {})  # fmt: skip
            status = {"name": c["name"], "image": c.get("image"), "imageID": f"{c.get('image')}@sha256:emu",
                      "ready": False, "started": "running" in state, "restartCount": restarts,
                      "state": state}  # fmt: skip
            last_state = {"terminated": last} if last else old.get("lastState")
            if last_state:
                status["lastState"] = last_state
            others = [
                s for s in p["status"].get("containerStatuses") or [] if s["name"] != c["name"]
            ]
            p["status"]["containerStatuses"] = [*others, status]
            p["status"]["phase"] = "Running"
            p["status"]["podIP"] = "127.0.0.1"
            p["status"]["hostIP"] = "127.0.0.1"
            p["status"].setdefault("startTime", now())
            _set_ready(p)

        self._update_pod(rt, upd)

    async def _spawn(self, rt: PodRuntime, pod: dict[str, Any], c: dict[str, Any]) -> Any:
        argv = [self.in_pod(rt, a) for a in (c.get("command") or []) + (c.get("args") or [])]
        env = self.pod_env(rt, pod, c)
        try:
            return await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT, env=env, cwd=str(rt.root),
                start_new_session=True,
            )  # fmt: skip
        except OSError as exc:
            return _Failed(f"exec: {argv[0] if argv else ''}: {exc.strerror}")

    async def _pump(self, rt: PodRuntime, proc: Any, container: str) -> int:
        key = (rt.ns, rt.name, container, False)
        if isinstance(proc, _Failed):
            self.logs[key] = self.logs.get(key, "") + proc.message + "\n"  # type: ignore[attr-defined]
            return 128
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(32768):
            self.logs[key] = self.logs.get(key, "") + chunk.decode("utf-8", "replace")  # type: ignore[attr-defined]
        rc = await proc.wait()
        return 128 - rc if rc < 0 else rc  # killed by a signal: the shell's 128 + N

    # the pod's view: env, paths and ports
    def pod_env(self, rt: PodRuntime, pod: dict[str, Any], c: dict[str, Any]) -> dict[str, str]:
        image = self.images.get(c.get("image", "")) or rt.image or Image()
        path = os.environ.get("PATH", "/usr/bin:/bin")
        node_bin = str(self._node_bin())
        if image.root is not None:
            path = f"{image.root}/bin:{node_bin}:{path}"
        else:
            path = f"{node_bin}:{path}"
        env = {
            "PATH": path,
            "HOME": str(rt.root / "tmp"),
            "HOSTNAME": rt.name,
            "KUBE_EMULATOR_HOSTS": str(self._hosts_file()),
            POD_MARK: rt.mark,
            **{f"KUBE_EMULATOR_PORT_{cp}": str(hp) for cp, hp in rt.ports.items()},
        }
        if image.root is not None:
            env["PYTHONPATH"] = str(image.root / "python")
        env.update({k: self.in_pod(rt, v) for k, v in image.env.items()})
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = self.in_pod(rt, str(e["value"]))
            elif "valueFrom" in e:
                env[e["name"]] = _downward(pod, e["valueFrom"])
        return env

    def in_pod(self, rt: PodRuntime, text: str) -> str:
        """A command or value as the pod sees it: its own /tmp and /cache, its image's /opt,
        and its own container ports on 127.0.0.1."""
        paths = {"/tmp/": f"{rt.root}/tmp/", "/cache/": f"{rt.root}/cache/"}
        if rt.image is not None and rt.image.root is not None:
            paths["/opt/"] = f"{rt.image.root}/opt/"
        # what is already a path of this machine stays one: a checkout, a venv or the pods'
        # own folders may themselves live under /tmp
        host = [str(rt.root), str(self.workdir or ""), str(Path(__file__).resolve().parent),
                sys.prefix]  # fmt: skip
        if rt.image is not None and rt.image.root is not None:
            host.append(str(rt.image.root))
        host = [h.rstrip("/") + "/" for h in host if h]
        pattern = "|".join(re.escape(p) for p in paths)

        def swap(m: re.Match[str]) -> str:
            if any(text.startswith(h, m.start()) for h in host):
                return m.group(0)
            return paths[m.group(0)]

        # a path starts a word, or follows a shell default's `:-` ("${DEEPEP_SRC:-/opt/DeepEP}")
        text = re.sub(rf"(?<![\w./~])(?<!(?<!:)-)(?:{pattern})", swap, text)
        for cp, hp in rt.ports.items():
            text = re.sub(rf"\b(?:127\.0\.0\.1|localhost):{cp}\b", f"127.0.0.1:{hp}", text)
        return text

    def exec_setup(
        self, ns: str, name: str, command: list[str]
    ) -> tuple[list[str], dict[str, str] | None, str | None]:
        """(argv, env, cwd) for an exec into a pod the kubelet runs; env None: not one of them."""
        rt = self.runtimes.get((ns, name))
        pod = self._pod(ns, name)
        if rt is None or pod is None or pod["metadata"].get("uid") != rt.uid:
            return command, None, None
        c = (pod["spec"].get("containers") or [{}])[0]
        return [self.in_pod(rt, a) for a in command], self.pod_env(rt, pod, c), str(rt.root)

    # readiness
    async def _probe(self, rt: PodRuntime) -> None:
        failures = 0
        while not rt.deleting:
            await asyncio.sleep(PROBE_PERIOD_S)
            pod = self._pod(rt.ns, rt.name)
            if pod is None or pod["metadata"].get("uid") != rt.uid:
                return
            for c in pod["spec"].get("containers") or []:
                ok = await self._probe_once(rt, pod, c)
                if ok is False:
                    failures += 1
                    if failures in (1, 10) or failures % 50 == 0:
                        self.event(pod, "Pod", "Warning", "Unhealthy",
                                   "Readiness probe failed: the probe command exited non-zero")  # fmt: skip
                elif ok:
                    failures = 0
                self._set_ready_flag(rt, c["name"], bool(ok))

    async def _probe_once(
        self, rt: PodRuntime, pod: dict[str, Any], c: dict[str, Any]
    ) -> bool | None:
        st = next(
            (s for s in pod["status"].get("containerStatuses") or [] if s["name"] == c["name"]),
            None,
        )
        if st is None or "running" not in (st.get("state") or {}):
            return None
        probe = c.get("readinessProbe")
        if not probe:
            return True
        cmd = ((probe.get("exec") or {}).get("command")) or []
        if not cmd:
            return True
        argv = [self.in_pod(rt, a) for a in cmd]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                env=self.pod_env(rt, pod, c), cwd=str(rt.root), start_new_session=True)  # fmt: skip
        except OSError:
            return False
        try:
            rc = await asyncio.wait_for(proc.wait(), float(probe.get("timeoutSeconds", 1)))
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)
            return False
        return rc == 0

    def _set_ready_flag(self, rt: PodRuntime, name: str, ready: bool) -> None:
        pod = self._pod(rt.ns, rt.name)
        st = next((s for s in (pod or {}).get("status", {}).get("containerStatuses") or []
                   if s["name"] == name), None)  # fmt: skip
        if st is None or st.get("ready") == ready:
            return

        def upd(p: dict[str, Any]) -> None:
            for s in p["status"].get("containerStatuses") or []:
                if s["name"] == name and "running" in (s.get("state") or {}):
                    s["ready"] = ready
            _set_ready(p)

        self._update_pod(rt, upd)

    # -- cluster DNS ---------------------------------------------------------------------------

    def _node_bin(self) -> Path:
        d = (self.workdir or Path("/tmp")) / "node-bin"
        getent = d / "getent"
        if not getent.exists():
            d.mkdir(parents=True, exist_ok=True)
            getent.write_text(
                "#!/bin/sh\n"
                "# the emulated node's resolver: cluster names from the emulator's DNS records\n"
                '[ "$1" = hosts ] || exec /usr/bin/getent "$@"\n'
                'exec awk -v n="$2" \'$2 == n {print $1 "  " $2; f = 1} END {exit !f}\' '
                '"$KUBE_EMULATOR_HOSTS"\n'
            )
            getent.chmod(0o755)
        return d

    def _hosts_file(self) -> Path:
        return (self.workdir or Path("/tmp")) / "cluster-dns.hosts"

    def _write_dns(self) -> None:
        if self.workdir is None:
            return
        lines = []
        for svc in self._items("services"):
            spec = svc.get("spec") or {}
            ns, name = svc["metadata"].get("namespace"), svc["metadata"]["name"]
            lines.append(f"10.96.0.10 {name}.{ns}.svc.cluster.local")
            if spec.get("clusterIP") != "None" or not spec.get("selector"):
                continue
            for pod in self._items("pods", ns):
                labels = pod["metadata"].get("labels") or {}
                ps = pod.get("spec") or {}
                if ps.get("subdomain") != name or not ps.get("hostname"):
                    continue
                if any(labels.get(k) != v for k, v in spec["selector"].items()):
                    continue
                if not (_ready(pod) or spec.get("publishNotReadyAddresses")):
                    continue
                if not (pod.get("status") or {}).get("podIP"):
                    continue
                lines.append(f"127.0.0.1 {ps['hostname']}.{name}.{ns}.svc.cluster.local")
        text = "\n".join(lines) + "\n"
        target = self._hosts_file()
        if not target.exists() or target.read_text() != text:
            tmp = target.with_suffix(".new")
            tmp.write_text(text)
            tmp.replace(target)

    # -- the API server's proxy ----------------------------------------------------------------

    async def serve_proxy(self, raw: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse | None:
        m = _PROXY.match(raw.path)
        if not m:
            return None
        ns, kind, name, port = m.group("ns"), m.group("kind"), m.group("name"), m.group("port")
        path = m.group("path") or "/"
        if kind == "pods":
            target = self._pod_port(ns, name, port)
            if isinstance(target, str):
                return self._status(503, "ServiceUnavailable", target)  # type: ignore[attr-defined]
        else:
            target = self._service_port(ns, name, port)
            if isinstance(target, str):
                return self._status(503, "ServiceUnavailable", target)  # type: ignore[attr-defined]
        body = await raw.read()
        headers = {k: v for k, v in raw.headers.items() if k.lower() in ("content-type", "accept")}
        url = f"http://127.0.0.1:{target}{path}"
        if raw.query_string:
            url += f"?{raw.query_string}"
        try:
            async with aiohttp.ClientSession() as s, s.request(
                raw.method, url, data=body or None, headers=headers,
                timeout=aiohttp.ClientTimeout(total=600),
            ) as resp:  # fmt: skip
                data = await resp.read()
                ctype = resp.headers.get("Content-Type", "application/json")
                return aiohttp.web.Response(body=data, status=resp.status,
                                            headers={"Content-Type": ctype})  # fmt: skip
        except (aiohttp.ClientConnectorError, ConnectionRefusedError):
            return self._status(  # type: ignore[attr-defined]
                503,
                "ServiceUnavailable",
                f"error trying to reach service: dial tcp 127.0.0.1:{target}: connect: "
                "connection refused",
            )
        except (aiohttp.ClientError, OSError) as exc:
            return self._status(  # type: ignore[attr-defined]
                503, "ServiceUnavailable", f"error trying to reach service: {exc}"
            )

    def _pod_port(self, ns: str, name: str, port: str | None) -> int | str:
        pod = self._pod(ns, name)
        if pod is None:
            return f'pods "{name}" not found'
        rt = self.runtimes.get((ns, name))
        if rt is None or not rt.ports:
            return f"pod {name} has no port this emulator maps"
        cp = self._container_port(pod, port)
        if cp is None or cp not in rt.ports:
            return f"pod {name} has no port {port}"
        return rt.ports[cp]

    @staticmethod
    def _container_port(pod: dict[str, Any], port: str | None) -> int | None:
        ports = [p for c in pod["spec"].get("containers") or [] for p in c.get("ports") or []]
        if port is None:
            return int(ports[0]["containerPort"]) if ports else None
        if port.isdigit():
            return int(port)
        return next((int(p["containerPort"]) for p in ports if p.get("name") == port), None)

    def _service_port(self, ns: str, name: str, port: str | None) -> int | str:
        svc = self.get("services", ns, name)  # type: ignore[attr-defined]
        if svc is None:
            return f'services "{name}" not found'
        spec = svc.get("spec") or {}
        sports = spec.get("ports") or []
        sp = next((p for p in sports if port is None or p.get("name") == port
                   or str(p.get("port")) == port), None)  # fmt: skip
        if sp is None:
            return f'no port {port} on service "{name}"'
        for pod in self._items("pods", ns):
            labels = pod["metadata"].get("labels") or {}
            if any(labels.get(k) != v for k, v in (spec.get("selector") or {}).items()):
                continue
            if not (_ready(pod) or spec.get("publishNotReadyAddresses")):
                continue
            target = sp.get("targetPort", sp.get("port"))
            got = self._pod_port(ns, pod["metadata"]["name"], str(target))
            if isinstance(got, int):
                return got
        return f'no endpoints available for service "{name}"'


class _Failed:
    """A container whose command could not be started (the runtime's own error)."""

    def __init__(self, message: str) -> None:
        self.message = message
        self.pid = -1
        self.returncode = 128

    async def wait(self) -> int:
        return 128


def _downward(pod: dict[str, Any], value_from: dict[str, Any]) -> str:
    path = ((value_from.get("fieldRef") or {}).get("fieldPath")) or ""
    m = re.fullmatch(r"metadata\.labels\['([^']+)'\]", path)
    if m:
        return str((pod["metadata"].get("labels") or {}).get(m.group(1), ""))
    fields = {
        "metadata.name": pod["metadata"]["name"],
        "metadata.namespace": pod["metadata"].get("namespace", ""),
        "metadata.uid": pod["metadata"].get("uid", ""),
        "spec.nodeName": (pod.get("spec") or {}).get("nodeName", ""),
        "status.podIP": "127.0.0.1",
    }
    return str(fields.get(path, ""))


def _index(pod: dict[str, Any]) -> int:
    return int((pod["metadata"].get("labels") or {}).get("apps.kubernetes.io/pod-index", "0"))


def _revision(pod: dict[str, Any]) -> str:
    return str((pod["metadata"].get("labels") or {}).get("controller-revision-hash", ""))


def _ready(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def _set_ready(pod: dict[str, Any]) -> None:
    statuses = pod["status"].get("containerStatuses") or []
    ready = bool(statuses) and all(s.get("ready") for s in statuses)
    flag = "True" if ready else "False"
    conds = [c for c in pod["status"].get("conditions") or []
             if c.get("type") not in ("Initialized", "ContainersReady", "Ready")]  # fmt: skip
    conds += [{"type": "Initialized", "status": "True"},
              {"type": "ContainersReady", "status": flag},
              {"type": "Ready", "status": flag}]  # fmt: skip
    pod["status"]["conditions"] = conds


def _qos(spec: dict[str, Any]) -> str:
    guaranteed = True
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for r in ("cpu", "memory"):
            if r not in lim or quantity(req.get(r, lim[r])) != quantity(lim[r]):
                guaranteed = False
    return "Guaranteed" if guaranteed else "Burstable"


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(") ", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            return True
    return False


def _marked_groups(mark: str) -> set[int]:
    """Process groups of every process carrying the pod's mark (exec'd into the pod)."""
    needle = f"{POD_MARK}={mark}".encode()
    out = set()
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if needle in environ.read_bytes().split(b"\0"):
                out.add(os.getpgid(int(environ.parent.name)))
        except (OSError, ValueError):
            continue
    return out
