"""A StatefulSet's pods as they come up, one pane per pod, and the findings that explain them.

``PodWatch.poll()`` reads the pods and their events once (two API calls) and says what changed:
scheduling (and, while Pending, the scheduler's reason), image pulls, init containers, the
container starting, Ready, restarts with the exit code and the last lines of the previous log.
Events that explain a Pending pod or a failing pull, and a container's terminations, become
findings through the same checks `epdoctor diagnose --pod` runs (epdoctor/checks/kube.py:
K104 hugepages, K105 vpc.amazonaws.com/efa, K106 GPUs, taints and the rest, K107 the pull,
K101-K103 the exits). Each running container's log is followed (``follow=true``) on its own
thread; its lines go to the pod's pane and through the log analysis, whose findings are raised
as the lines arrive. Everything shown passes the redactor first.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epdoctor.launch.streams import LineSplitter
from epdoctor.model import Finding, Status
from epdoctor.redact import redact_text
from epdoctor.targets.base import TargetError
from epdoctor.targets.kube_apply import KubeApply

OnLine = Callable[[str, str], None]
OnFinding = Callable[[str, Finding], None]
# Codes the pod's own state raises here; probe noise (K108, K113) is the readiness gate's.
POD_CODES = frozenset({"K101", "K102", "K103", "K104", "K105", "K106", "K107"})
PULL_STUCK = frozenset({"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull"})
LAST_LOG_LINES = 20
KUBE = "k8s: "  # what the API server says about a pod, as opposed to the pod's own log lines


@dataclass
class PodState:
    """One pod as the last poll saw it."""

    name: str
    uid: str
    phase: str
    node: str
    revision: str
    running: bool  # the engine container is running
    ready: bool
    restarts: int
    waiting: str  # the engine container's waiting reason, "" when none
    deleting: bool
    unschedulable: str  # the scheduler's reason while Pending, "" when scheduled
    last_exit: dict[str, Any] = field(default_factory=dict)


class PodWatch:
    """Poll the pods of ``selector`` in ``ns``; report each change once, per pod pane."""

    def __init__(
        self,
        api: KubeApply,
        ns: str,
        selector: str,
        container: str,
        on_line: OnLine,
        on_finding: OnFinding,
        watch_factory: Callable[[str], Any] | None = None,
    ) -> None:
        self.api = api
        self.ns = ns
        self.selector = selector
        self.container = container
        self.on_line = on_line
        self.on_finding = on_finding
        self.watch_factory = watch_factory
        self.pods: dict[str, PodState] = {}
        self.findings: list[tuple[str, Finding]] = []
        self.fatal: tuple[str, Finding] | None = None  # a log finding the engine cannot survive
        self._said: set[tuple[str, ...]] = set()
        self._events_seen: dict[str, int] = {}  # event name -> count already shown
        self._found: set[tuple[str, str, str]] = set()
        self._followers: dict[tuple[str, int], _Follower] = {}
        self._followed: set[tuple[str, int]] = set()
        self._chunks: queue.Queue[tuple[str, bytes | None]] = queue.Queue(maxsize=256)
        self._split: dict[str, LineSplitter] = {}
        self._analyzers: dict[str, Any] = {}
        self.fatal_codes: frozenset[str] = frozenset()
        # when set: the UIDs of the StatefulSets epdoctor applied; a pod that carries the label
        # but is owned by none of them is said once and otherwise left alone
        self.owners: set[str] | None = None

    # -- one look --------------------------------------------------------------------------------

    def poll(self, follow_logs: bool = True) -> dict[str, PodState]:
        """Read pods and events once; report what changed; drain the followed logs."""
        pods = self.api.pods(self.ns, self.selector)
        try:
            events = self.api.events(self.ns)
        except TargetError as exc:  # RBAC may allow pods but not events: said once
            events = []
            self._say("epdoctor", ("events",), f"events unreadable: {exc}")
        by_uid: dict[str, list[dict[str, Any]]] = {}
        for e in events:
            uid = str((e.get("involvedObject") or {}).get("uid") or "")
            by_uid.setdefault(uid, []).append(e)
        now: dict[str, PodState] = {}
        for pod in pods:
            if self.owners is not None and not self.owned_pod(pod):
                continue
            state = self._state(pod)
            now[state.name] = state
            pod_events = sorted(by_uid.get(state.uid, []), key=_event_time)
            self._report(pod, state, pod_events)
            if follow_logs and (state.running or state.restarts):
                self._follow(pod, state)
        for name, old in self.pods.items():
            if name not in now:
                self._say(name, ("gone", old.uid), "pod deleted")
        self.pods = now
        self.drain()
        return now

    def owned_pod(self, pod: dict[str, Any]) -> bool:
        """Owned (ownerReferences, by UID) by an object epdoctor applied; a pod that is not
        is said once in the epdoctor pane and left alone."""
        from epdoctor.launch.kube_rollout import owner_uids

        if self.owners and owner_uids(pod) & self.owners:
            return True
        name = str(pod["metadata"].get("name"))
        self._say("epdoctor", ("bystander", name),
                  f"left alone: pod/{name} carries the plan's labels but is not owned by what "
                  "epdoctor applied (ownerReferences)")  # fmt: skip
        return False

    def drain(self) -> None:
        """Lines of the followed logs that arrived since the last call."""
        while True:
            try:
                source, data = self._chunks.get_nowait()
            except queue.Empty:
                return
            pod = source.split(" ", 1)[0]
            sp = self._split.setdefault(source, LineSplitter())
            lines = sp.flush() if data is None else sp.feed(data)
            for line in lines:
                self.on_line(pod, line)
            if data:
                self._analyze(source, data)

    def close(self) -> None:
        """Stop every followed log (their threads end with their streams)."""
        for f in list(self._followers.values()):
            f.stop()
        for f in list(self._followers.values()):
            f.join(5)
        self._followers.clear()
        self.drain()

    # -- what changed ----------------------------------------------------------------------------

    def _state(self, pod: dict[str, Any]) -> PodState:
        meta, spec, st = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        cs = next(
            (c for c in st.get("containerStatuses") or [] if c.get("name") == self.container), {}
        )
        state = cs.get("state") or {}
        unsched = next(
            (c.get("message") or "" for c in st.get("conditions") or []
             if c.get("type") == "PodScheduled" and c.get("status") == "False"),
            "",
        )  # fmt: skip
        return PodState(
            name=str(meta.get("name")),
            uid=str(meta.get("uid") or meta.get("name")),
            phase=str(st.get("phase") or "Pending"),
            node=str(spec.get("nodeName") or ""),
            revision=str((meta.get("labels") or {}).get("controller-revision-hash") or ""),
            running="running" in state,
            ready=bool(cs.get("ready")),
            restarts=int(cs.get("restartCount") or 0),
            waiting=str((state.get("waiting") or {}).get("reason") or ""),
            deleting=bool(meta.get("deletionTimestamp")),
            unschedulable=str(unsched),
            last_exit=dict((cs.get("lastState") or {}).get("terminated") or {}),
        )

    def _report(self, pod: dict[str, Any], s: PodState, events: list[dict[str, Any]]) -> None:
        uid = s.uid
        self._say(s.name, ("new", uid), f"pod {s.name} created ({_short_rev(s.revision)})")
        for e in events:
            name = str((e.get("metadata") or {}).get("name"))
            count = int(e.get("count") or 1)
            if self._events_seen.get(name, 0) >= count:
                continue
            repeat = f" (x{count})" if count > 1 else ""
            if self._events_seen.get(name) is None or e.get("reason") != "FailedScheduling":
                self.on_line(
                    s.name,
                    redact_text(f"{KUBE}event {e.get('type', 'Normal')} {e.get('reason')}{repeat}: "
                                f"{e.get('message', '')}"),
                )  # fmt: skip
            self._events_seen[name] = count
        if s.node:
            self._say(s.name, ("node", uid), f"scheduled on node {s.node}")
        elif s.unschedulable:
            self._say(
                s.name, ("unschedulable", uid, s.unschedulable), f"Pending: {s.unschedulable}"
            )
        for ic in (pod.get("status") or {}).get("initContainerStatuses") or []:
            st = ic.get("state") or {}
            what = next(iter(st), "waiting")
            self._say(s.name, ("init", uid, ic.get("name"), what),
                      f"init container {ic.get('name')}: {_state_text(st)}")  # fmt: skip
        if s.waiting:
            self._say(s.name, ("waiting", uid, s.waiting, str(s.restarts)),
                      f"container {self.container} waiting: {s.waiting}")  # fmt: skip
        if s.running:
            self._say(s.name, ("running", uid, str(s.restarts)),
                      f"container {self.container} running" + (f" (restart {s.restarts})" if s.restarts else ""))  # fmt: skip
        if s.running:
            self._say(s.name, ("ready", uid, str(s.ready)), "Ready" if s.ready else "not Ready")
        if s.restarts:
            self._restarted(pod, s)
        self._raise(pod, s, events)

    def _restarted(self, pod: dict[str, Any], s: PodState) -> None:
        key = ("restart", s.uid, str(s.restarts))
        if key in self._said:
            return
        t = s.last_exit
        self._say(s.name, key,
                  f"restarted ({s.restarts}): last exit code {t.get('exitCode', '?')} "
                  f"({t.get('reason') or 'Error'})")  # fmt: skip
        instance = (s.uid, s.restarts - 1)
        tail = self._previous_log(pod)
        lines = tail.splitlines()[-LAST_LOG_LINES:]
        for line in lines:
            self.on_line(s.name, redact_text(f"{KUBE}last log: {line}"))
        if tail and instance not in self._followed:  # not read live: analyze it now
            self._analyze(f"{s.name} (previous log)", tail.encode())

    def _previous_log(self, pod: dict[str, Any]) -> str:
        from epdoctor.targets.kube import KubePodTarget

        try:
            target = KubePodTarget(self.api.session, pod, self.container)
            text, why = target.log_tail(previous=True)
        except TargetError as exc:
            return f"(previous log unreadable: {exc})"
        return text if text is not None else f"(previous log unreadable: {why})"

    def _raise(self, pod: dict[str, Any], s: PodState, events: list[dict[str, Any]]) -> None:
        from epdoctor.checks.base import Context
        from epdoctor.checks.kube import container_terminations, pull_and_probes, scheduling

        facts = {"pod": pod, "container": self.container, "events": events,
                 "logs": {}, "unseen": {}}  # fmt: skip
        ctx = Context()
        found: list[Finding] = []
        for check in (scheduling, pull_and_probes, container_terminations):
            found += [f for f in check(facts, ctx) if f.code in POD_CODES]
        for f in found:
            key = (s.uid, f.code, f.title)
            if key in self._found or f.status is Status.PASS:
                continue
            self._found.add(key)
            f = Finding(f.code, f.status, f.title, f.evidence, f.fix, f"{self.ns}/{s.name}")
            self.findings.append((s.name, f))
            self.on_finding(s.name, f)

    def _say(self, pane: str, key: tuple[str, ...], text: str) -> None:
        if key in self._said:
            return
        self._said.add(key)
        self.on_line(pane, redact_text(KUBE + text))

    # -- logs ------------------------------------------------------------------------------------

    def _follow(self, pod: dict[str, Any], s: PodState) -> None:
        key = (s.uid, s.restarts)
        if key in self._followers or not s.running:
            return
        from epdoctor.targets.kube import KubePodTarget

        target = KubePodTarget(self.api.session, pod, self.container)
        stream = target.log_stream(s.name, follow=True)
        f = _Follower(f"{s.name} {self.container}", stream, self._chunks)
        self._followers[key] = f
        self._followed.add(key)
        f.start()

    def _analyze(self, source: str, data: bytes) -> None:
        if self.watch_factory is None:
            return
        watch = self._analyzers.get(source)
        if watch is None:
            watch = self._analyzers[source] = self.watch_factory(source)
        pod = source.split(" ", 1)[0]
        for f in watch.feed(data):
            self.findings.append((pod, f))
            self.on_finding(source, f)
            if f.code in self.fatal_codes and f.status is Status.FAIL and self.fatal is None:
                self.fatal = (pod, f)

    # -- verdicts the rollout asks for ---------------------------------------------------------

    def stuck(self, max_restarts: int) -> tuple[str, str, str | None] | None:
        """(pod, why, code) when a pod will not come up by waiting: a pull that failed, a
        container that crashed ``max_restarts`` times, a log finding it cannot survive."""
        if self.fatal is not None:
            pod, f = self.fatal
            return pod, f"{f.code}: {f.title}", f.code
        for s in self.pods.values():
            if s.waiting in PULL_STUCK:
                return s.name, f"image cannot be pulled ({s.waiting})", "K107"
            if s.restarts >= max_restarts:
                code = "K101" if s.last_exit.get("exitCode") == 139 else "K103"
                return (s.name, f"container restarted {s.restarts} times (last exit code "
                        f"{s.last_exit.get('exitCode', '?')})", code)  # fmt: skip
        return None

    def codes(self, pod: str) -> list[str]:
        return [f.code for p, f in self.findings if p == pod]


class _Follower(threading.Thread):
    """One container log, followed on its own thread into the watch's queue."""

    def __init__(
        self, source: str, stream: Any, out: queue.Queue[tuple[str, bytes | None]]
    ) -> None:
        super().__init__(daemon=True, name=f"follow {source}")
        self.source = source
        self.stream = stream
        self.out = out

    def run(self) -> None:
        try:
            for chunk in self.stream:
                self._put(chunk)
        except TargetError as exc:
            self._put(f"(log stream ended: {exc})\n".encode())
        except Exception as exc:  # a bug in a reader must not stop the rollout it reports on
            self._put(f"(log stream failed: {type(exc).__name__}: {exc})\n".encode())
        finally:
            self._put(None)

    def _put(self, data: bytes | None) -> None:
        while not self.stream.stopping.is_set():
            try:
                self.out.put((self.source, data), timeout=0.5)
                return
            except queue.Full:
                continue

    def stop(self) -> None:
        self.stream.stop()


def _event_time(e: dict[str, Any]) -> str:
    return str(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp") or "")


def _short_rev(revision: str) -> str:
    return f"revision {revision.rsplit('-', 1)[-1]}" if revision else "no revision"


def _state_text(state: dict[str, Any]) -> str:
    if "terminated" in state:
        t = state["terminated"]
        return f"exited {t.get('exitCode')} ({t.get('reason') or ''})".strip()
    if "running" in state:
        return "running"
    return f"waiting ({(state.get('waiting') or {}).get('reason') or ''})"
