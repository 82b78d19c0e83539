"""A Kubernetes plan brought up, gated and taken down: what `epdoctor run kernel-test|serve
--plan` does with a Kubernetes plan, and what the terminal app runs for one.

``prepare()`` reads the plan's objects (lint-clean, epdoctor/launch/kube_objects.py), checks
that whatever already exists under their names is epdoctor's, and asks the API server what
applying would create or change (server-side apply with ``dryRun=All``): the lines shown before
anything changes. ``KubeRollout.run()`` then walks the steps in the reference recipes' order,
each one a row of ``on_gate(gate, state, summary, code)``:

1. **apply** the objects with the pods idle (``RUN_SERVE=0``): server-side apply under the field
   manager ``epdoctor``, never forced;
2. **pods**: every replica scheduled, pulled and running. Each pod's pane shows the scheduler's
   reason while it is Pending, the pull, init containers, the start, restarts with their last
   log; events that explain a Pending pod (vpc.amazonaws.com/efa, hugepages, GPUs, a taint) and
   a failed pull become findings (``on_finding``). A pull that backs off, a container that
   crashes, a Pending pod past ``schedule_timeout_s`` fail the step;
3. **kernel test**: the plan's own kernel test in every pod at once (the exec of
   epdoctor/launch/shell_node.py), gated on every pod's exit code, the efa-direct banner with
   the instance's NIC count on every rank and the EFA counters (moved, or "unverifiable");
4. **serve**: the objects applied again with ``RUN_SERVE=1`` (the pods restart into the engine),
   every new pod running, each engine log followed through the log analysis;
5. **ready**: the engine's own readiness contract (epdoctor/launch/readiness.py) on the leader
   pod through the API server's proxy, and the leader pod Ready (its readiness probe passes, so
   the leader Service routes to it);
6. **smoke**: one chat completion through the leader Service (HTTP 200, usage, a coherent
   answer);
7. **bench**, when asked.

Then a serve follows the logs until stopped (``detach`` leaves it up and returns). Whatever
ends the run (a failed gate, ``stop()`` from any thread, Ctrl-C / SIGTERM arriving as
KeyboardInterrupt on the thread that runs it, an error) deletes what was applied, and only
what epdoctor applied (field manager and label, kube_objects.owned), unless ``keep``; the
``Outcome.stopped`` lines say what was deleted and what was left alone. ``take_down()`` is the
same deletion for `epdoctor run down`.
"""

from __future__ import annotations

import shlex
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epdoctor.launch.gates import Gate, overall
from epdoctor.launch.kube_objects import (
    MANAGED_BY,
    NAME_LABEL,
    PlanObjects,
    changes,
    managers,
    owned,
    phase,
)
from epdoctor.launch.kube_watch import KUBE, PodWatch
from epdoctor.launch.outcome import Outcome
from epdoctor.model import EpdoctorError, Finding, Status
from epdoctor.targets.base import TargetError
from epdoctor.targets.kube_apply import FIELD_MANAGER, KubeApply, kind_of

OnLine = Callable[[str, str], None]
OnGate = Callable[[str, str, str, "str | None"], None]
OnFinding = Callable[[str, Finding], None]
NCCL_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET,ENV"}


class NotEpdoctors(EpdoctorError):
    """Objects of the plan exist and epdoctor did not apply them: it neither changes nor
    deletes them. ``attachable``: the plan's pods run, so a launch can use them as they are."""

    def __init__(self, message: str, attachable: bool) -> None:
        super().__init__(message)
        self.attachable = attachable


@dataclass
class RolloutOptions:
    what: str  # "kernel-test" or "serve"
    kernel: bool = True  # serve: run the kernel test first
    keep: bool = False  # delete nothing, whatever happens
    detach: bool = False  # serve: leave it up once every gate passed
    bench_levels: tuple[int, ...] = ()
    url: str | None = None  # reach the engine here instead of through the API server's proxy
    run_dir: str = "/tmp/epdoctor-kernel-test"
    schedule_timeout_s: float = 600.0
    start_timeout_s: float = 1800.0  # pulls (20+ GB images) and the start
    kernel_timeout_s: float = 900.0
    startup_budget_s: float = 1800.0
    down_timeout_s: float = 300.0
    max_restarts: int = 3  # serving: one HF 429 restart recovers; three do not
    smoke_max_tokens: int = 64
    bench_max_tokens: int = 128
    poll_s: float = 1.0
    python: str = "python3"
    preflight: bool = True  # the read-only node probe in every pod before the kernel test
    force: bool = False  # go on when the preflight finds a failure


@dataclass
class RolloutPlan:
    """A rollout ready to confirm: its objects, what applying changes, and the steps."""

    objects: PlanObjects
    options: RolloutOptions
    engine: str
    gpus: int
    efa: int
    model: str
    kernel_run: str
    context: str = ""
    diff: list[str] = field(default_factory=list)
    plan_path: str = ""
    api: Any = None  # the KubeApply it was prepared with (its session closes with the launch)

    @property
    def ns(self) -> str:
        return self.objects.namespace

    @property
    def lines(self) -> list[str]:
        """Everything that will happen, for the confirmation."""
        o, obj = self.options, self.objects
        where = f"namespace {self.ns}" + (f" (context {self.context})" if self.context else "")
        phase_note = "RUN_SERVE=0, idle for the kernel test" if o.kernel else "RUN_SERVE=1"
        out = [f"apply to {where} as field manager {FIELD_MANAGER} ({phase_note}):"]
        out += [f"  {line}" for line in self.diff]
        out.append(f"  from {obj.source}")
        step = 1
        out.append(f"{step}. wait for {obj.replicas} pod(s) to schedule, pull and start; "
                   "a Pending pod's events are explained")  # fmt: skip
        if o.preflight:
            step += 1
            out.append(f"{step}. read-only diagnose inside every pod (the node probe over exec; "
                       "--no-preflight skips it)")  # fmt: skip
        if o.kernel:
            step += 1
            out.append(
                f"{step}. kernel test in every pod at once: bash -c {shlex.quote(self.kernel_command())}"
            )
        if o.what == "serve":
            if o.kernel:
                step += 1
                out.append(f"{step}. apply RUN_SERVE=1: the pods restart into the engine")
            step += 1
            out.append(f"{step}. readiness ({self.engine}): {self._reach('pod')}")
            step += 1
            out.append(
                f"{step}. smoke: one chat completion at temperature 0 {self._reach('service')}"
            )
            if o.bench_levels:
                step += 1
                out.append(f"{step}. bench at concurrency {','.join(map(str, o.bench_levels))}")
            out.append(
                "then follow the logs until Ctrl-C"
                if not o.detach
                else "then leave it running (--detach)"
            )
        if o.keep:
            out.append("--keep: nothing applied is deleted, whatever happens")
        else:
            out.append("Ctrl-C, SIGTERM, a failed gate or the end of the run deletes what was applied "
                       "(only what epdoctor applied); --keep leaves it")  # fmt: skip
        return out

    def _reach(self, how: str) -> str:
        if self.options.url:
            return f"at {self.options.url}"
        if how == "pod":
            return f"/health, /v1/models on pod {self.objects.name}-0:{self.objects.http_port} through the API server"
        return f"through service {self.objects.http_service} (API server proxy)"

    def kernel_command(self) -> str:
        """The plan's kernel test with the rendezvous variables the manifest's script sets."""
        # the address is checked (kube_objects) and quoted: a manifest is untrusted input
        from epdoctor.plan.manifests import POD_RANK

        resolve = (
            f'NODE_RANK="{POD_RANK}"; LEADER_ADDR="$(getent hosts '
            f"{shlex.quote(self.objects.leader_address)} | awk '{{print $1; exit}}')\"; "
            "export NODE_RANK LEADER_ADDR; "
        )
        return resolve + self.kernel_run


def prepare(
    api: KubeApply,
    objects: PlanObjects,
    plan: dict[str, Any],
    options: RolloutOptions,
    context: str = "",
    plan_path: str = "",
) -> RolloutPlan:
    """The rollout for ``plan``: every existing object checked to be epdoctor's, and the
    API server's dry run of applying the first step compared with what is live."""
    inp = plan.get("input") if isinstance(plan.get("input"), dict) else {}
    commands = plan.get("commands") if isinstance(plan.get("commands"), dict) else {}
    kernel_run = str(commands.get("kernel_run") or commands.get("kernel_test") or "")
    if options.kernel and not kernel_run:
        raise EpdoctorError("the plan has no kernel test command (commands.kernel_run)")
    rp = RolloutPlan(
        objects=objects,
        options=options,
        engine=str(inp.get("engine") or "vllm"),
        gpus=int(plan.get("gpus_per_node") or 1),
        efa=int(plan.get("efa_per_node") or 0),
        model=str(inp.get("model") or ""),
        kernel_run=kernel_run,
        context=context,
        plan_path=plan_path,
    )
    ns = objects.namespace
    foreign = []
    for (plural, name), obj in zip(objects.refs(), phase(objects, not options.kernel), strict=True):
        live = api.read(plural, ns, name)
        label = f"{kind_of(plural).lower()}/{name}"
        if live is not None and not owned(live):
            foreign.append((plural, label, live))
            continue
        dry = api.apply(obj, dry_run=True)
        if live is None:
            extra = f" ({objects.replicas} pods)" if plural == "statefulsets" else ""
            rp.diff.append(f"create     {label}{extra}")
            continue
        diff = changes(live, dry)
        rp.diff.append(f"{'change' if diff else 'unchanged':<10} {label}")
        rp.diff += [f"             {d}" for d in diff]
    pods_there = _foreign_pods(api, objects)
    if foreign or pods_there:
        what = [f"{label} (field managers: {managers(live)})" for _, label, live in foreign]
        what += [f"pod/{p}" for p in pods_there]
        attachable = bool(pods_there) or any(p == "statefulsets" for p, _, _ in foreign)
        raise NotEpdoctors(
            f"the plan's objects exist in namespace {ns} and epdoctor did not apply them: "
            f"{', '.join(what)}; epdoctor neither changes nor deletes them",
            attachable,
        )
    return rp


def _foreign_pods(api: KubeApply, objects: PlanObjects) -> list[str]:
    """The plan's pod names held by pods no epdoctor StatefulSet owns (run by hand, or by
    another controller): applying would hand them to the StatefulSet."""
    out = []
    for pod in api.pods(objects.namespace, f"{NAME_LABEL}={objects.name}") + _named_pods(
        api, objects
    ):
        refs = pod["metadata"].get("ownerReferences") or []
        name = pod["metadata"]["name"]
        if name in objects.pod_names and not any(r.get("kind") == "StatefulSet" for r in refs):
            out.append(name)
    return sorted(set(out))


def _named_pods(api: KubeApply, objects: PlanObjects) -> list[dict[str, Any]]:
    from epdoctor.targets.kube import KubeApiError

    out = []
    for name in objects.pod_names:
        try:
            out.append(
                api.session.call(
                    f"pod {name}", api.session.core.read_namespaced_pod, name, objects.namespace
                )
            )
        except KubeApiError as exc:
            if exc.status != 404:
                raise
    return out


class _Stopped(Exception):
    """stop() was called: unwind to run()'s end."""


class KubeRollout:
    """One confirmed rollout: ``run()`` on one thread, ``stop()`` from any."""

    def __init__(
        self,
        plan: RolloutPlan,
        api: KubeApply | None = None,
        on_line: OnLine | None = None,
        on_gate: OnGate | None = None,
        on_finding: OnFinding | None = None,
        watch_factory: Callable[[str], Any] | None = None,
    ) -> None:
        from epdoctor.launch.serve import FATAL_CODES

        self.plan = plan
        self.api = api or plan.api
        self.on_line = on_line or (lambda pane, line: None)
        self.on_gate = on_gate or (lambda gate, state, summary, code: None)
        self.findings: list[tuple[str, Finding]] = []  # every finding raised, in order
        told = on_finding or (lambda source, f: None)

        def found(source: str, f: Finding) -> None:
            self.findings.append((source, f))
            told(source, f)

        self.on_finding = found
        self.watch_factory = watch_factory
        o = plan.objects
        self.watch = PodWatch(self.api, o.namespace, o.selector, str(o.container.get("name")),
                              self.on_line, self.on_finding, watch_factory)  # fmt: skip
        self.watch.fatal_codes = FATAL_CODES
        self.gates: list[Gate] = []
        self.kept = False  # left up on purpose (--keep, or --detach after every gate passed)
        self._stopping = threading.Event()
        self._lock = threading.RLock()  # an apply and the take-down never overlap
        self._applied = False
        self._owner_uids: set[str] = set()  # the StatefulSets this rollout applied
        self._restarted: set[tuple[str, str]] = set()  # (pod, revision) deleted for a new one
        self.left: list[str] = []  # what the take-down could not delete
        self.watch.owners = self._owner_uids
        self._krun: Any = None
        self._down: list[str] | None = None
        self._t0 = time.monotonic()

    # -- stopping ------------------------------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    def stop(self) -> list[str]:
        """Stop the kernel test and delete what was applied (unless keep); what was done."""
        self._stopping.set()
        return self._shutdown()

    def _shutdown(self) -> list[str]:
        with self._lock:
            if self._down is not None:
                return self._down
            lines: list[str] = []
            if self._krun is not None:
                lines += self._krun.stop()
            o = self.plan.options
            if not self._applied:
                lines.append("nothing was applied")
            elif o.keep or self.kept:
                why = "--keep" if o.keep else "--detach"
                lines.append(
                    f"left running ({why}): {', '.join(self._labels())} in namespace "
                    f"{self.plan.ns}; `epdoctor run down --plan {self.plan.plan_path or 'PLAN'}"
                    f" -n {self.plan.ns}` deletes it"
                )
            else:
                done = take_down(self.api, self.plan.objects, self.plan.options.down_timeout_s,
                                 self._stopping_down)  # fmt: skip
                lines += done
                self.left = list(done.left)
            self._down = lines
            return lines

    def _stopping_down(self, line: str) -> None:
        self.on_line("epdoctor", line)

    def _labels(self) -> list[str]:
        return [f"{kind_of(p).lower()}/{n}" for p, n in self.plan.objects.refs()]

    def _check(self) -> None:
        if self._stopping.is_set():
            raise _Stopped

    def _sleep(self, seconds: float) -> None:
        if self._stopping.wait(seconds):
            raise _Stopped

    # -- running -------------------------------------------------------------------------------

    def run(self) -> Outcome:
        o = self.plan.options
        error = ""
        status = ""
        try:
            ok = self._up(run_serve=not o.kernel) and self._preflight()
            if ok and o.kernel:
                ok = self._kernel_test()
            if ok and o.what == "serve":
                ok = ((not o.kernel or self._up(run_serve=True)) and self._ready()
                      and self._smoke() and self._bench())  # fmt: skip
                if ok and o.detach:
                    self.kept = True
                elif ok:
                    self._follow()
        except (_Stopped, KeyboardInterrupt):
            self._stopping.set()
            status = "interrupted"
        except TargetError as exc:
            error = api_error(exc)
            status = "error"
        except EpdoctorError as exc:
            error = str(exc)
            status = "error"
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
            # an answer of the API server in a shape nobody documents: an error, and the
            # take-down below still runs
            error = f"Kubernetes API: an answer of an unexpected shape ({type(exc).__name__}: {exc})"
            status = "error"
        except Exception as exc:  # the rollout could not be followed: stop and delete anyway
            error = f"{type(exc).__name__}: {exc}"
            status = "error"
        finally:
            try:
                self.watch.close()
            finally:
                stopped = self._shutdown()
        if not status:
            status = overall(self.gates).value if self.gates else "unknown"
        return Outcome(o.what, status, list(self.gates), stopped, error, left=list(self.left))

    def _our_pods(self) -> list[dict[str, Any]]:
        """The live pods owned (ownerReferences, by UID) by the StatefulSet this rollout
        applied, by pod index; any other pod with the label is said and left alone: no exec
        runs in it and it joins no test."""
        out = []
        for p in self.api.pods(self.plan.ns, self.plan.objects.selector):
            if p["metadata"].get("deletionTimestamp") or not self.watch.owned_pod(p):
                continue
            out.append(p)
        return sorted(out, key=_pod_index)

    def _gate(self, gate: Gate) -> Gate:
        self.gates.append(gate)
        self.on_gate(gate.name, gate.status.value, gate.summary, gate.code)
        return gate

    # 1-2 / 4: apply and wait for the pods
    def _up(self, run_serve: bool) -> bool:
        restart = run_serve and self.plan.options.kernel  # idle pods restart into the engine
        with self._lock:
            self._check()
            for obj in phase(self.plan.objects, run_serve):
                self._applied = True  # from the first request on: it may have been stored
                stored = self.api.apply(obj)
                uid = (stored.get("metadata") or {}).get("uid")
                if obj.get("kind") == "StatefulSet" and isinstance(uid, str) and uid:
                    self._owner_uids.add(uid)
        if restart:
            what = "RUN_SERVE=1: the pods restart into the engine"
        else:
            what = "RUN_SERVE=1" if run_serve else "RUN_SERVE=0: the pods idle for the kernel test"
        gate = "serve" if restart else "apply"
        self._gate(Gate(gate, Status.PASS, f"applied {', '.join(self._labels())} ({what})"))
        return self._wait_pods("pods serving" if restart else "pods", run_serve)

    def _wait_pods(self, gate: str, serving: bool) -> bool:
        o, objs = self.plan.options, self.plan.objects
        t0 = time.monotonic()
        max_restarts = o.max_restarts if serving else 1
        while True:
            self._check()
            pods = self.watch.poll()
            rev = self._update_revision()
            self._restart_stale(pods, rev)
            current = [p for p in pods.values() if rev and p.revision == rev and not p.deleting]
            running = [p for p in current if p.running]
            elapsed = time.monotonic() - t0
            if len(running) >= objs.replicas:
                nodes = ", ".join(sorted({p.node for p in running}))
                self._gate(Gate(gate, Status.PASS,
                                f"{len(running)} pod(s) running ({nodes}) after {elapsed:.0f}s"))  # fmt: skip
                return True
            stuck = self.watch.stuck(max_restarts)
            if stuck:
                pod, why, code = stuck
                return self._fail(gate, f"{pod}: {why}", code, pod)
            pending = [p for p in pods.values() if p.unschedulable and not p.deleting]
            if pending and elapsed > o.schedule_timeout_s:
                p = pending[0]
                code = next(
                    (c for c in self.watch.codes(p.name) if c in ("K104", "K105", "K106")), "K106"
                )
                return self._fail(
                    gate, f"{p.name} Pending for {elapsed:.0f}s: {p.unschedulable}", code, p.name
                )
            if elapsed > o.start_timeout_s:
                return self._fail(gate, f"{len(running)} of {objs.replicas} pods running after {elapsed:.0f}s",
                                  "K106" if pending else "K103", None)  # fmt: skip
            self.on_gate(gate, "waiting", _progress(pods, current, objs.replicas, elapsed), None)
            self._sleep(o.poll_s)

    def _restart_stale(self, pods: dict[str, Any], rev: str) -> None:
        """The plan's StatefulSet updates OnDelete (its ranks' rendezvous is one-shot): after an
        apply that changed its spec, the pods of an older revision are deleted here, all in the
        same poll, and come back together at the new one. Only pods owned by what this rollout
        applied reach here (PodWatch skips the others)."""
        if not rev or not self.watch.owners:
            return
        for p in pods.values():
            stale = (p.name, p.revision)
            if p.revision and p.revision != rev and not p.deleting and stale not in self._restarted:
                self._restarted.add(stale)
                if self.api.delete_pod(self.plan.ns, p.name, p.uid):
                    self.on_line(p.name, f"{KUBE}pod {p.name} deleted to restart at the new "
                                 "spec with its peers (updateStrategy OnDelete)")  # fmt: skip

    def _update_revision(self) -> str:
        sts = self.api.read("statefulsets", self.plan.ns, self.plan.objects.name)
        if sts is None:
            return ""
        st = sts.get("status") or {}
        if int(st.get("observedGeneration") or 0) < int(sts["metadata"].get("generation") or 1):
            return ""  # the controller has not seen this spec yet
        return str(st.get("updateRevision") or "")

    def _fail(self, gate: str, summary: str, code: str | None, pod: str | None) -> bool:
        evidence = tuple(
            f"{p}: {f.code} {f.title}" for p, f in self.watch.findings if pod in (None, p)
        )
        self._gate(Gate(gate, Status.FAIL, summary, evidence[-8:], code))
        return False

    # 2b: the read-only node probe inside every pod, as `epdoctor run` does on any node
    def _preflight(self) -> bool:
        from epdoctor.launch.preflight import judge, preflight
        from epdoctor.targets.kube import KubePodTarget

        o, rp = self.plan.options, self.plan
        if not o.preflight:
            return True
        self._check()
        container = str(rp.objects.container.get("name"))
        pods = self._our_pods()
        self.on_gate("preflight", "running", f"read-only diagnose inside {len(pods)} pod(s)", None)
        targets = [KubePodTarget(self.api.session, p, container) for p in pods]
        pre = preflight(targets, rp.engine)
        for name, f in pre.failing:
            self.on_finding(name, f)
        gate = self._gate(judge(pre, f"{len(pods)} pod(s)", force=o.force))
        return gate.status is not Status.FAIL

    # 3: kernel test
    def _kernel_test(self) -> bool:
        from epdoctor.launch.gates import NetworkExpectation
        from epdoctor.launch.kernel_test import KernelTestConfig, KernelTestRun
        from epdoctor.launch.launcher import ProcSpec
        from epdoctor.launch.nodes import remote_node
        from epdoctor.targets.kube import KubePodTarget

        rp, o = self.plan, self.plan.options
        pods = self._our_pods()
        container = str(rp.objects.container.get("name"))
        nodes = [remote_node(KubePodTarget(self.api.session, p, container)) for p in pods]
        names = [p["metadata"]["name"] for p in pods]
        multi = len(nodes) > 1
        env = {**NCCL_ENV, "NCCL_DEBUG_FILE": f"{o.run_dir}/nccl/nccl.%h.%p.log"}
        cmd = rp.kernel_command()
        specs = [ProcSpec(f"node{i}", ("bash", "-c", cmd), f"{o.run_dir}/node{i}.log", env)
                 for i in range(len(nodes))]  # fmt: skip
        cfg = KernelTestConfig(
            kind="plan", nodes=nodes, gpus=rp.gpus, run_dir=o.run_dir, python=o.python,
            expect=NetworkExpectation(
                efa=True if multi else None, efa_count=rp.efa or None, multi_node=multi,
                reason="" if multi else "one node: ranks talk over NVLink/PCIe, not a NIC",
            ),
            timeout_s=o.kernel_timeout_s, specs=specs,
        )  # fmt: skip

        def pane(p: str, line: str) -> None:
            if p.startswith("node") and p[4:].isdigit() and int(p[4:]) < len(names):
                p = f"{names[int(p[4:])]} kernel test"
            self.on_line(p, line)

        krun = KernelTestRun(cfg, pane, self.watch_factory, self.on_finding)
        with self._lock:
            self._check()
            self._krun = krun
        self.on_gate("kernel test", "running", f"{cfg.world} rank(s) in {len(nodes)} pod(s)", None)
        t0 = time.monotonic()
        krun.start()
        while krun.step():
            self._check()
            self.on_gate("kernel test", "running", f"{time.monotonic() - t0:.0f}s", None)
            self._sleep(min(o.poll_s, 0.5))
        self._check()
        report = krun.finish()
        with self._lock:
            self._krun = None
        gates = [_counters_in_pods(g, multi, rp.efa) for g in report.gates]
        for g in gates:
            self.gates.append(g)
        status = overall(gates)
        start = next((g for g in gates if g.name == "start"), None)
        worst = next((g for g in gates if g.status is status and g.status is not Status.PASS), None)
        summary = (start.summary if start else
                   f"{len(names)} pod(s), {cfg.world} rank(s): " +
                   "; ".join(f"{g.name} {_label(g.status)}" for g in gates))  # fmt: skip
        self.on_gate(
            "kernel test",
            status.value,
            summary,
            (start or worst).code if (start or worst) else None,
        )
        return status is not Status.FAIL

    # 5: readiness
    def _fetch(self, kind: str) -> Any:
        from epdoctor.launch.http import http_fetch, json_reply

        o, objs = self.plan.options, self.plan.objects
        if o.url:
            return http_fetch(o.url)
        if kind == "pods":
            name, port = f"{objs.name}-0", str(objs.http_port)
        else:
            name, port = objs.http_service, "http"

        def fetch(path: str, payload: dict[str, Any] | None = None, timeout_s: float = 10.0) -> Any:
            r = self.api.proxy(objs.namespace, kind, name, port, path, payload, timeout_s)
            return json_reply(r.status, r.body, r.elapsed_s, r.error)

        return fetch

    def _ready(self) -> bool:
        from epdoctor.launch.readiness import Waiter

        rp, o = self.plan, self.plan.options
        leader = f"{rp.objects.name}-0"
        where = o.url or f"pod {leader} through the API server"
        waiter = Waiter(where, rp.engine, o.startup_budget_s, poll_s=2.0, fetch=self._fetch("pods"))
        waiter.t0 = time.monotonic()
        said = ""
        while True:
            self._check()
            pods = self.watch.poll()
            stuck = self.watch.stuck(o.max_restarts)
            if stuck:
                pod, why, code = stuck
                return self._fail("ready", f"{pod}: {why}", code, pod)
            p = waiter.step()
            if p is not None and p.detail != said:  # each new answer once, in its own pane
                said = p.detail
                self.on_line("ready", f"{waiter.elapsed:.0f}s: {p.detail}")
            leader_ready = bool(pods.get(leader) and pods[leader].ready)
            if p is not None and p.ready and leader_ready:
                self._gate(waiter.gate())
                return True
            if waiter.expired:
                if p is not None and p.ready:
                    return self._fail(
                        "ready",
                        f"the engine answers on {leader} but the pod is not Ready: its readiness "
                        f"probe fails, so service/{rp.objects.http_service} routes nothing",
                        "K108",
                        leader,
                    )
                self._gate(waiter.gate())
                return False
            detail = p.detail if p else "starting"
            if p is not None and p.ready:
                detail += f"; waiting for pod {leader} to be Ready"
            self.on_gate("ready", "waiting",
                         f"{waiter.elapsed:.0f}s of {o.startup_budget_s:.0f}s: {detail}", None)  # fmt: skip
            self._sleep(min(o.poll_s, 1.0))

    # 6: smoke
    def _smoke(self) -> bool:
        from epdoctor.launch import smoke

        self._check()
        o = self.plan.options
        fetch = self._fetch("services")
        model = smoke.first_model("", fetch=fetch) or self.plan.model
        self.on_gate("smoke", "running", f"POST /v1/chat/completions ({model})", None)
        res = smoke.smoke("", model, o.smoke_max_tokens, fetch=fetch)
        self.on_line("smoke", f"reply ({res.latency_s:.2f}s): {res.reply!r}")
        self._gate(res.gate)
        self._smoke_model = model
        return res.gate.status is Status.PASS

    # 7: bench
    def _bench(self) -> bool:
        from epdoctor.launch import bench

        o = self.plan.options
        if not o.bench_levels:
            return True
        self._check()
        model = getattr(self, "_smoke_model", self.plan.model)
        send = bench.fetch_sender(self._fetch("services"), model, o.bench_max_tokens, 600.0)
        self.on_gate("bench", "running", f"levels {list(o.bench_levels)}", None)
        res = bench.run_bench(
            send, list(o.bench_levels), o.bench_max_tokens, None, 1, label="current", model=model,
            on_level=lambda lv: self.on_line("bench", f"c={lv.concurrency}: {lv.ok}/{lv.n} ok"),
        )  # fmt: skip
        self.bench_result = res
        return self._gate(res.gate()).status is Status.PASS

    # after the gates: follow until stopped
    def _follow(self) -> None:
        o = self.plan.options
        self.on_gate(
            "following",
            "running",
            "ready: following the logs; Ctrl-C stops and deletes what was applied",
            None,
        )
        while True:
            self._check()
            self.watch.poll()
            stuck = self.watch.stuck(o.max_restarts)
            if stuck:
                pod, why, code = stuck
                self._fail("following", f"{pod}: {why}", code, pod)
                return
            self._sleep(max(o.poll_s, 1.0))


def api_error(exc: BaseException) -> str:
    """One line for a failed API call that names the API's status: ``Kubernetes API (HTTP 403):
    statefulset/x: forbidden ...``; no answer, or an answer that is not the API's, says so."""
    from epdoctor.safeio import plain

    status = getattr(exc, "status", None)
    if isinstance(status, int) and status > 0:
        tag = f"HTTP {status}"
    elif status == 0:
        tag = "no answer"
    elif status is not None:
        tag = "not an API answer"
    else:
        tag = "error"
    return plain(f"Kubernetes API ({tag}): {exc}").replace("\n", " ")[:600]


class TakeDown(list[str]):
    """The lines of a take-down, and what of epdoctor's is still there (``left``): an object
    that could not be read or deleted, or pods still terminating. ``complete`` when nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.left: list[str] = []

    @property
    def complete(self) -> bool:
        return not self.left


def take_down(
    api: KubeApply, objects: PlanObjects, timeout_s: float, say: Callable[[str], None] | None = None
) -> TakeDown:
    """Delete the plan's objects that epdoctor applied, and only those; wait for their pods.

    Candidates are the plan's objects by name and any Service or StatefulSet labelled as
    epdoctor's for this plan; each is deleted only when kube_objects.owned() says epdoctor
    applied it. The lines say what was deleted, what was left alone and why. An answer that is
    not the object (an error, a proxy page, the wrong shape) is never read as "not
    epdoctor's": the object is counted in ``left``."""
    say = say or (lambda line: None)
    ns = objects.namespace
    lines = TakeDown()

    def note(line: str) -> None:
        lines.append(line)
        say(line)

    keys = list(objects.refs())
    selector = f"{MANAGED_BY}={FIELD_MANAGER},{NAME_LABEL}={objects.name}"
    try:
        for plural in ("statefulsets", "services"):
            for o in api.listed(plural, ns, selector):
                key = (plural, str(o["metadata"]["name"]))
                if key not in keys:
                    keys.append(key)
    except TargetError as exc:
        note(f"could not list epdoctor's objects in {ns}: {exc}")
    deleted_sts: list[str] = []
    failed: list[str] = []
    for plural, name in sorted(keys, key=lambda k: k[0] != "statefulsets"):
        label = f"{kind_of(plural).lower()}/{name}"
        try:
            live = api.read(plural, ns, name)
            if live is None:
                continue
            if not owned(live):
                note(
                    f"left alone: {label} (epdoctor did not apply it; field managers: {managers(live)})"
                )
                continue
            if api.delete(plural, ns, name):
                note(f"deleted {label} in namespace {ns}")
                if plural == "statefulsets":
                    deleted_sts.append(str(live["metadata"].get("uid")))
        except TargetError as exc:
            failed.append(label)
            note(f"could not delete {label}: {exc}")
    lines.left += failed
    if failed:
        note(f"delete them yourself: kubectl -n {ns} delete {' '.join(failed)}")
    if deleted_sts:
        said, pods_left = _wait_gone(api, objects, deleted_sts, timeout_s)
        lines.left += [p if p.startswith("its ") else f"pod/{p}" for p in pods_left]
        note(said)
    if not lines:
        note(f"nothing of epdoctor's for {objects.name} in namespace {ns}")
    return lines


def _wait_gone(
    api: KubeApply, objects: PlanObjects, owners: list[str], timeout_s: float
) -> tuple[str, list[str]]:
    """Wait until no pod of the deleted StatefulSets is left (the garbage collector's work):
    the line to say, and the pods still there ("" and [] when gone)."""
    deadline = time.monotonic() + timeout_s
    left: list[str] = []
    while True:
        try:
            pods = api.pods(objects.namespace, objects.selector)
        except TargetError as exc:
            # the owners are deleted: the garbage collector removes their pods; not watched
            return f"could not list the pods to see them go (their owner is deleted): {exc}", []
        left = [p["metadata"]["name"] for p in pods if owner_uids(p) & set(owners)]
        if not left:
            return "its pods are gone", []
        if time.monotonic() > deadline:
            return (f"{len(left)} pod(s) still terminating after {timeout_s:.0f}s: {', '.join(left)} "
                    f"(kubectl -n {objects.namespace} get pods -l {objects.selector})", left)  # fmt: skip
        time.sleep(0.5)


def owner_uids(obj: dict[str, Any]) -> set[str]:
    """The UIDs of an object's ownerReferences (garbage answers give none)."""
    refs = obj.get("metadata", {}).get("ownerReferences")
    if not isinstance(refs, list):
        return set()
    return {str(r["uid"]) for r in refs if isinstance(r, dict) and isinstance(r.get("uid"), str)}


def _counters_in_pods(g: Gate, multi: bool, efa: int) -> Gate:
    """A pod that asks for EFA devices but shows none under /sys/class/infiniband cannot have
    its counters read: that is unverifiable, not "no EFA device, not applicable"."""
    if (
        g.name == "efa counters"
        and g.status is Status.SKIP
        and multi
        and efa
        and "no EFA device" in g.summary
    ):
        return Gate(
            g.name, Status.UNKNOWN,
            f"unverifiable: the pods ask for {efa} vpc.amazonaws.com/efa each but no EFA device "
            "with hw_counters is visible in them; the NCCL banner is the only evidence",
            g.evidence, "T703",
        )  # fmt: skip
    return g


def _pod_index(pod: dict[str, Any]) -> int:
    labels = pod["metadata"].get("labels")
    index = labels.get("apps.kubernetes.io/pod-index") if isinstance(labels, dict) else None
    if not (isinstance(index, str) and index.isdigit()):
        index = str(pod["metadata"].get("name")).rsplit("-", 1)[-1]
    return int(index) if index.isdigit() and len(index) < 7 else 1 << 30


def _label(s: Status) -> str:
    return "unverifiable" if s is Status.UNKNOWN else s.value


def _progress(pods: dict[str, Any], current: list[Any], want: int, elapsed: float) -> str:
    running = sum(1 for p in current if p.running)
    parts = [f"{running} of {want} running after {elapsed:.0f}s"]
    for p in sorted(pods.values(), key=lambda p: p.name):
        if p.running and p in current:
            continue
        why = "Pending (unschedulable)" if p.unschedulable else (p.waiting or p.phase)
        if p.deleting:
            why = "terminating"
        parts.append(f"{p.name}: {why}")
    return "; ".join(parts)
