"""A launch followed by a front end (the terminal app): run on one thread, stopped from any.

The front end builds the configuration as `epdoctor run` does and shows the exact
commands (``Launch.lines``); on the operator's yes it calls ``Session.run()`` on a
worker thread. The run starts the commands on their nodes (this host, SSH hosts,
pods), sends every line to ``on_line`` keyed by pane (one per rank, or per
process: leader, worker1, ...), each step's state to ``on_gate`` and what the log
analyzer finds to ``on_finding``, and returns an ``Outcome``.

``stop()`` may come from any thread at any moment, also while the commands are
still being started: everything started so far is stopped (a remote process group
through its node's shell: TERM, a grace period, KILL, as `epdoctor run` does on
Ctrl-C), and whatever was still starting is stopped as soon as its start returns.
The nodes' connections close when the run ends, never before its processes are
stopped.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from epdoctor.launch.launcher import LocalNode, Node
from epdoctor.launch.nodes import close_nodes, where
from epdoctor.model import Finding, Status

OnLine = Callable[[str, str], None]  # (pane, line)
OnGate = Callable[[str, str, str, "str | None"], None]  # (gate, state, summary, code)
OnFinding = Callable[[str, Finding], None]  # (source, finding)
WHATS = ("kernel-test", "serve", "smoke", "bench")


@dataclass
class Launch:
    """A launch ready to confirm: what, where, the exact commands, and its configuration."""

    what: str
    lines: list[str]  # the commands, exactly as they will run
    args: Any  # the parsed flags of `epdoctor run WHAT`
    plan: dict[str, Any] = field(default_factory=dict)
    cfg: Any = None  # KernelTestConfig / ServeConfig; None for smoke and bench (HTTP only)
    nodes: list[Node] = field(default_factory=list)

    @property
    def where(self) -> str:
        if _is_rollout(self.cfg):
            return f"Kubernetes namespace {self.cfg.ns}"
        if self.what in ("smoke", "bench"):
            return str(getattr(self.args, "url", "") or "the leader")
        return where(self.nodes)

    @property
    def remote(self) -> bool:
        return _is_rollout(self.cfg) or any(not isinstance(n, LocalNode) for n in self.nodes)

    def node_of(self, pane: str) -> str | None:
        """The node a pane's lines come from, when the launch reaches beyond this host."""
        if not self.remote:
            return None
        index: int | None = None
        if pane == "leader":
            index = 0
        elif m := re.match(r"^(rank|node|worker)(\d+)\b", pane):
            n = int(m.group(2))
            per_node = max(1, int(getattr(self.cfg, "gpus", 1) or 1))
            index = n // per_node if m.group(1) == "rank" else n
        if index is None or not 0 <= index < len(self.nodes):
            return None
        return self.nodes[index].name

    def close(self) -> None:
        """Drop the nodes' connections (a launch that was not confirmed, or has ended)."""
        close_nodes(self.nodes)


@dataclass
class Outcome:
    what: str
    status: str  # pass / fail / warn / unknown / interrupted / error
    gates: list[Any] = field(default_factory=list)  # epdoctor.launch.gates.Gate
    stopped: list[str] = field(default_factory=list)  # what stopping did, for the operator
    error: str = ""


def _is_rollout(cfg: Any) -> bool:
    from epdoctor.launch.kube_rollout import RolloutPlan

    return isinstance(cfg, RolloutPlan)


class Session:
    """One confirmed launch: ``run()`` on a worker thread, ``stop()`` from any thread."""

    def __init__(
        self,
        launch: Launch,
        on_line: OnLine | None = None,
        on_gate: OnGate | None = None,
        on_finding: OnFinding | None = None,
        watch_factory: Callable[[str], Any] | None = None,
        poll_s: float = 0.2,
    ) -> None:
        self.launch = launch
        self.on_line = on_line or (lambda pane, line: None)
        self.on_gate = on_gate or (lambda gate, state, summary, code: None)
        self.on_finding = on_finding or (lambda source, f: None)
        self.watch_factory = watch_factory
        self.poll_s = poll_s
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # one stop at a time: a remote group is stopped once
        self._run: Any = None  # the KernelTestRun / ServeRun, once made
        self._stopped: list[str] = []
        self._ended = False

    @property
    def stopping(self) -> bool:
        return self._stopping.is_set()

    @property
    def procs(self) -> list[Any]:
        """The processes started so far (each with .name, .pid, .node and .spec)."""
        group = getattr(self._run, "group", None)
        return list(group.procs) if group is not None else []

    # --- stopping ---------------------------------------------------------------------
    def stop(self) -> list[str]:
        """Stop everything this launch started; the lines say what was done to each process."""
        self._stopping.set()
        return self._stop_run()

    def _stop_run(self) -> list[str]:
        with self._lock:
            if self._run is not None and not self._ended:
                for line in self._run.stop():
                    if line not in self._stopped:
                        self._stopped.append(line)
            return list(self._stopped)

    def _attach(self, run: Any) -> bool:
        """Make `run` the one stop() reaches; False when a stop came first (start nothing)."""
        with self._lock:
            self._run = run
            return not self._stopping.is_set()

    def _wait(self) -> None:
        self._stopping.wait(self.poll_s)

    # --- running ----------------------------------------------------------------------
    def run(self) -> Outcome:
        what = self.launch.what
        try:
            if _is_rollout(self.launch.cfg):  # a Kubernetes plan: epdoctor/launch/kube_rollout.py
                return self._rollout()
            return {
                "kernel-test": self._kernel_test,
                "serve": self._serve,
                "smoke": self._smoke,
                "bench": self._bench,
            }[what]()
        except Exception as exc:  # the launch could not start or be followed
            return Outcome(what, "error", [], self._stop_run(), f"{type(exc).__name__}: {exc}")
        finally:
            self._end()

    def _end(self) -> None:
        # Every way out of run() has stopped what it started (finish() stops what still
        # runs): the connections can go, and a stop that comes later has nothing to reach.
        with self._lock:
            self._ended = True
        self.launch.close()

    def _interrupted(self) -> Outcome:
        return Outcome(self.launch.what, "interrupted", [], self._stop_run())

    def _rollout(self) -> Outcome:
        from epdoctor.launch.kube_rollout import KubeRollout

        plan = self.launch.cfg
        rollout = KubeRollout(plan, None, self.on_line, self.on_gate, self.on_finding,
                              self.watch_factory)  # fmt: skip
        try:
            if not self._attach(rollout):  # stop() reaches rollout.stop(): it deletes
                return self._interrupted()
            return rollout.run()
        finally:
            plan.api.session.close()

    def _kernel_test(self) -> Outcome:
        from epdoctor.launch.kernel_test import KernelTestRun

        cfg = self.launch.cfg
        krun = KernelTestRun(cfg, self.on_line, self.watch_factory, self.on_finding)
        if not self._attach(krun):
            return self._interrupted()
        self.on_gate("kernel test", "running", f"{cfg.world} rank(s) on {self.launch.where}", None)
        t0 = time.monotonic()
        krun.start()
        while not self.stopping and krun.step():
            self.on_gate("kernel test", "running", f"{time.monotonic() - t0:.0f}s", None)
            self._wait()
        if self.stopping:
            return self._interrupted()
        report = krun.finish()
        # the run's own row ends with its verdict; a test that never started says why there
        start = next((g for g in report.gates if g.name == "start"), None)
        self.on_gate(
            "kernel test",
            report.status.value,
            start.summary if start else f"ended after {time.monotonic() - t0:.0f}s",
            start.code if start else None,
        )
        return Outcome("kernel-test", report.status.value, report.gates, report.stopped)

    def _serve(self) -> Outcome:
        from epdoctor.launch.serve import ServeRun

        srun = ServeRun(self.launch.cfg, self.on_line, self.watch_factory, self.on_finding)
        if not self._attach(srun):
            return self._interrupted()
        srun.start()
        why = None
        while not self.stopping and why is None:
            why = srun.step()
            p = srun.waiter.last
            self.on_gate(
                "ready",
                "waiting",
                f"{srun.waiter.elapsed:.0f}s of {srun.cfg.budget_s:.0f}s: "
                f"{p.detail if p else 'starting'}",
                None,
            )
            if why is None:
                self._wait()
        if why is None:
            return self._interrupted()
        gate = srun.gate(why)
        self.on_gate(gate.name, gate.status.value, gate.summary, gate.code)
        if gate.status is not Status.PASS:
            return Outcome("serve", gate.status.value, [gate], self._stop_run())
        self.on_gate("following", "running", "ready: following the logs; s stops the engine", None)
        while not self.stopping and srun.group.running():
            srun.follow()
            self._wait()
        if self.stopping:
            return Outcome("serve", "interrupted", [gate], self._stop_run())
        self.on_gate("following", "fail", "the engine exited", "E702")
        return Outcome("serve", "fail", [gate], self._stop_run())

    def _smoke(self) -> Outcome:
        from epdoctor.launch import smoke

        a, plan = self.launch.args, self.launch.plan
        model = (
            a.model or smoke.first_model(a.url) or str((plan.get("input") or {}).get("model") or "")
        )
        if not model:
            return Outcome("smoke", "error", error=f"no model at {a.url}/v1/models")
        self.on_gate("smoke", "running", f"POST {a.url}/v1/chat/completions ({model})", None)
        res = smoke.smoke(a.url, model, a.max_tokens)
        self.on_line("smoke", f"reply ({res.latency_s:.2f}s): {res.reply!r}")
        return Outcome("smoke", res.gate.status.value, [res.gate])

    def _bench(self) -> Outcome:
        from epdoctor.launch import bench, smoke

        a = self.launch.args
        model = a.model or smoke.first_model(a.url)
        if not model:
            return Outcome("bench", "error", error=f"no model at {a.url}/v1/models")
        levels = [int(c) for c in a.concurrency.split(",") if c.strip()]
        send = bench.http_sender(a.url, model, a.max_tokens, a.request_timeout)
        self.on_gate("bench", "running", f"levels {levels}", None)
        res = bench.run_bench(
            send,
            levels,
            a.max_tokens,
            a.requests_per_level,
            a.warmup,
            label="current",
            model=model,
            on_level=lambda lv: self.on_line("bench", f"c={lv.concurrency}: {lv.ok}/{lv.n} ok"),
        )
        gate = res.gate()
        return Outcome("bench", gate.status.value, [gate])
