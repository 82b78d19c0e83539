"""The one launch orchestrator: kernel test, serve, smoke, bench and isolation, as events.

A front end prepares the launch (epdoctor.launch.config.prepare: configuration, nodes and
the exact commands, ``Launch.lines``), shows the commands and asks; on the operator's yes
it calls ``Session.run()``: on a worker thread (the terminal app) or on the main thread
(`epdoctor run`, where Ctrl-C, SIGTERM and SIGHUP arrive as KeyboardInterrupt). The run
first diagnoses every node read-only (the ``preflight`` gate, unless the request says
``--no-preflight``; a failure starts nothing), then starts the commands on their nodes (this
host, SSH hosts, pods) and reports as it goes:

- ``on_line(pane, line)``: every line, keyed by pane (one per rank, or per process: leader,
  worker1, ...; the session's own lines go to the panes of ``SESSION_PANES``);
- ``on_gate(gate, state, summary, code)``: each step's state as it changes;
- ``on_finding(source, finding)``: what the log analyzer finds, the moment it finds it;
- ``on_verdict(gate)``: a gate decided while the run goes on (an engine's readiness);
- ``on_stopped(lines)``: what stopping a finished step did (each --ab arm of a benchmark);
- ``on_note(text)``: something the operator should read now;

and returns an ``Outcome``. The command line's live panes and ``--json`` and the terminal
app's screen are renderers of these events. ``live()`` is the front end's view while the
session waits on its processes (the command line's rich Live board).

``stop()`` may come from any thread at any moment, also while the commands are
still being started: everything started so far is stopped (a remote process group
through its node's shell: TERM, a grace period, KILL), and whatever was still starting is
stopped as soon as its start returns. However ``run()`` ends (an error, Ctrl-C, the end),
what it started is stopped unless the request asked to detach; the nodes' connections close
when the run ends, never before its processes are stopped.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from epdoctor.launch.outcome import (  # noqa: F401  (the session's event types, re-exported)
    SESSION_PANES,
    WHATS,
    OnFinding,
    OnGate,
    OnLine,
    Outcome,
)
from epdoctor.launch.prepared import Launch
from epdoctor.model import Status


class Session:
    """One confirmed launch: ``run()`` on any thread, ``stop()`` from any thread."""

    def __init__(
        self,
        launch: Launch,
        on_line: OnLine | None = None,
        on_gate: OnGate | None = None,
        on_finding: OnFinding | None = None,
        watch_factory: Callable[[str], Any] | None = None,
        poll_s: float = 0.2,
        *,
        on_verdict: Callable[[Any], None] | None = None,
        on_stopped: Callable[[list[str]], None] | None = None,
        on_note: Callable[[str], None] | None = None,
        live: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.launch = launch
        self.on_line = on_line or (lambda pane, line: None)
        self.on_gate = on_gate or (lambda gate, state, summary, code: None)
        self.on_finding = on_finding or (lambda source, f: None)
        self.on_verdict = on_verdict or (lambda gate: None)
        self.on_stopped = on_stopped or (lambda lines: None)
        self.on_note = on_note or (lambda text: None)
        self.live = live or contextlib.nullcontext
        self.watch_factory = watch_factory
        self.poll_s = poll_s
        self.detach = bool(launch.request and launch.request.detach)
        self._stopping = threading.Event()
        self._lock = threading.Lock()  # one stop at a time: a remote group is stopped once
        self._run: Any = None  # the KernelTestRun / ServeRun in progress
        self._stopped: list[str] = []
        self._ended = False
        self._kept = False  # detached: what started outlives the run

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

    def _stop_current(self) -> list[str]:
        """Stop the run in progress; the lines say what was done to its processes."""
        with self._lock:
            if self._run is None or self._ended:
                return []
            lines = list(self._run.stop())
            self._stopped += [ln for ln in lines if ln not in self._stopped]
            return lines

    def _stop_run(self) -> list[str]:
        """Stop the run in progress; the lines of everything stopped so far."""
        self._stop_current()
        with self._lock:
            return list(self._stopped)

    def _attach(self, run: Any) -> bool:
        """Make `run` the one stop() reaches; False when a stop came first (start nothing)."""
        with self._lock:
            self._run = run
            return not self._stopping.is_set()

    def _wait(self) -> None:
        self._stopping.wait(self.poll_s)

    def _loop(self, step: Callable[[], bool]) -> None:
        """Call step() until it returns False or a stop comes, in the front end's live view."""
        with self.live():
            while not self.stopping and step():
                self._wait()

    # --- running ----------------------------------------------------------------------
    def run(self) -> Outcome:
        what = "isolate" if self.launch.isolate else self.launch.what
        try:
            if self.launch.rollout:  # a Kubernetes plan: epdoctor/launch/kube_rollout.py
                return self._rollout()
            refused = self._node_preflight(what)
            if refused is not None:
                return refused
            return {
                "kernel-test": self._kernel_test,
                "isolate": self._isolate,
                "serve": self._serve,
                "smoke": self._smoke,
                "bench": self._bench,
            }[what]()
        except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP on the main thread
            return Outcome(what, "interrupted", [], self._stop_current(), exc=exc)
        except Exception as exc:  # the launch could not start or be followed
            stopped = self._stop_run()
            return Outcome(what, "error", [], stopped, f"{type(exc).__name__}: {exc}", exc=exc)
        finally:
            self._end()

    def _node_preflight(self, what: str) -> Outcome | None:
        """The read-only diagnose of every node before anything starts on them (the command
        line and the terminal app alike); an Outcome when it stops the launch."""
        from epdoctor.launch.preflight import judge, preflight, preflight_targets

        req = self.launch.request
        if req is None or not req.preflight or what not in ("kernel-test", "isolate", "serve"):
            return None
        cfg = self.launch.cfg
        targets = preflight_targets(req.targets, self.launch.plan, req.plan_file,
                                    len(self.launch.nodes))  # fmt: skip
        self.on_gate("preflight", "running", f"read-only diagnose of {len(targets)} node(s)", None)
        pre = preflight(targets, getattr(cfg, "engine", None) if what == "serve" else None)
        for name, f in pre.failing:
            self.on_finding(name, f)
        advisory = what == "kernel-test" and getattr(cfg, "kind", "") == "builtin"
        advisory = advisory and len(self.launch.nodes) == 1
        gate = judge(pre, self.launch.where, force=req.force, advisory=advisory)
        self.on_gate(gate.name, gate.status.value, gate.summary, gate.code)
        if gate.status is Status.FAIL:
            return Outcome(what, "fail", [gate], reason="preflight")
        return None

    def _end(self) -> None:
        # Whatever ended the run, what it started is stopped (unless detached) before the
        # connections go; a stop that comes later has nothing to reach.
        if not self._kept:
            self._stop_current()
        with self._lock:
            self._ended = True
        self.launch.close()

    def _rollout(self) -> Outcome:
        from epdoctor.launch.kube_rollout import KubeRollout

        plan = self.launch.cfg
        rollout = KubeRollout(plan, None, self.on_line, self.on_gate, self.on_finding,
                              self.watch_factory)  # fmt: skip
        try:
            if not self._attach(rollout):  # stop() reaches rollout.stop(): it deletes
                return self._interrupted()
            with self.live():
                out = rollout.run()  # deletes what it applied as its options say, then ends
            out.result = rollout  # its findings and benchmark, for the front end's report
            return out
        finally:
            plan.api.session.close()

    def _interrupted(self) -> Outcome:
        return Outcome(self.launch.what, "interrupted", [], self._stop_run())

    def _detached(self, gates: list[Any], result: Any = None) -> Outcome:
        self._kept = True
        return Outcome(self.launch.what, "detached", gates, reason="detached", result=result)

    def _kernel_test(self) -> Outcome:
        from epdoctor.launch.kernel_test import KernelTestRun

        cfg = self.launch.cfg
        krun = KernelTestRun(cfg, self.on_line, self.watch_factory, self.on_finding)
        if not self._attach(krun):
            return self._interrupted()
        self.on_gate("kernel test", "running", f"{cfg.world} rank(s) on {self.launch.where}", None)
        t0 = time.monotonic()
        krun.start()
        if self.detach:  # the one way out that leaves the ranks running
            return self._detached([])

        def step() -> bool:
            self.on_gate("kernel test", "running", f"{time.monotonic() - t0:.0f}s", None)
            return krun.step()

        self._loop(step)
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
        return Outcome(
            "kernel-test",
            report.status.value,
            report.gates,
            report.stopped,
            result=report,
            failed_early=krun.failed_early,
        )

    def _isolate(self) -> Outcome:
        """The built-in test on node pairs (half-splits first on large fleets)."""
        from epdoctor.launch import config
        from epdoctor.launch import isolate as iso
        from epdoctor.launch.kernel_test import KernelTestRun, run_to_end

        options = config.isolate_options(self.launch.options)
        by_name = {n.name: n for n in self.launch.nodes}

        def run_group(group: Any) -> Any:
            cfg = config.kernel_config(options, self.launch.plan, [by_name[n] for n in group])
            cfg.run_dir = f"{cfg.run_dir}/{'+'.join(group)}"
            return iso.from_report(run_to_end(KernelTestRun(cfg)), list(group), cfg.gpus)

        results, outliers = iso.isolate(
            list(by_name),
            run_group,
            on_result=lambda r: self.on_line(
                "isolate", f"{'+'.join(r.nodes)}: {'pass' if r.ok else r.summary}"
            ),
            expect_efa=options.expect_efa is not False and options.backend != "gloo",
        )
        ok = not outliers and all(r.ok for r in results)
        return Outcome("isolate", "pass" if ok else "fail", result=(results, outliers))

    def _start_serving(self, srun: Any) -> Any:
        """Start and wait for readiness; the readiness gate, or None when stopped first."""
        srun.start()
        why: list[str] = []

        def step() -> bool:
            r = srun.step()
            p = srun.waiter.last
            self.on_gate(
                "ready",
                "waiting",
                f"{srun.waiter.elapsed:.0f}s of {srun.cfg.budget_s:.0f}s: "
                f"{p.detail if p else 'starting'}",
                None,
            )
            if r is not None and not self.stopping:
                # an engine that exits after the operator's stop was stopped: interrupted,
                # never a failed readiness gate
                why.append(r)
            return r is None

        self._loop(step)
        if not why:
            return None
        gate = srun.gate(why[0])
        self.on_gate(gate.name, gate.status.value, gate.summary, gate.code)
        self.on_verdict(gate)
        return gate

    def _serve(self) -> Outcome:
        from epdoctor.launch.serve import ServeRun

        srun = ServeRun(self.launch.cfg, self.on_line, self.watch_factory, self.on_finding)
        if not self._attach(srun):
            return self._interrupted()
        gate = self._start_serving(srun)
        if gate is None:
            return self._interrupted()
        if gate.status is not Status.PASS:
            stopped = self._stop_run()
            return Outcome(
                "serve",
                gate.status.value,
                [gate],
                stopped,
                reason="not ready",
                result=srun.summary(),
            )
        if self.detach:  # after ready: the one way out that leaves the engine running
            return self._detached([gate], srun.summary())
        self.on_gate("following", "running", "ready: following the logs; s stops the engine", None)

        def follow() -> bool:
            srun.follow()
            return bool(srun.group.running())

        self._loop(follow)
        if self.stopping:
            return Outcome("serve", "interrupted", [gate], self._stop_run())
        self.on_gate("following", "fail", "the engine exited", "E702")
        return Outcome("serve", "fail", [gate], self._stop_run(), reason="exited")

    def _smoke(self) -> Outcome:
        from epdoctor.launch import smoke

        o, plan, nodes = self.launch.options, self.launch.plan, self.launch.nodes
        model = (
            o.model or smoke.first_model(o.url) or str((plan.get("input") or {}).get("model") or "")
        )
        if not model:
            return Outcome("smoke", "error", error=f"no model at {o.url}/v1/models")
        self.on_gate("smoke", "running", f"POST {o.url}/v1/chat/completions ({model})", None)
        python = o.python or "python3"
        if nodes:  # the EFA counters on every node, before and after the request
            from epdoctor.launch.counters import gate_since, snapshots

            before = snapshots(nodes, python)
        res = smoke.smoke(o.url, model, o.max_tokens)
        self.on_line("smoke", f"reply ({res.latency_s:.2f}s): {res.reply!r}")
        gates = [res.gate]
        if nodes:
            gates.append(gate_since(before, nodes, python)[0])
        return Outcome("smoke", res.gate.status.value, gates, result=res)

    def _bench(self) -> Outcome:
        from epdoctor.launch import bench, smoke
        from epdoctor.launch.config import bench_levels
        from epdoctor.launch.serve import ServeRun

        o = self.launch.options
        levels = bench_levels(o)
        results: list[Any] = []
        for label, scfg in self.launch.cfg or [("current", None)]:
            served = scfg is not None
            if served:
                srun = ServeRun(scfg, self.on_line, self.watch_factory, self.on_finding)
                if not self._attach(srun):
                    return self._interrupted()
                gate = self._start_serving(srun)
                if gate is None:
                    return self._interrupted()
                if gate.status is not Status.PASS:
                    stopped = self._stop_current()
                    return Outcome("bench", gate.status.value, [gate], stopped, reason="not ready")
            try:
                model = o.model or smoke.first_model(o.url)
                if not model:
                    self.on_note(f"no model at {o.url}/v1/models; pass --model")
                    return Outcome("bench", "error", error=f"no model at {o.url}/v1/models")
                send = bench.http_sender(o.url, model, o.max_tokens, o.request_timeout)
                self.on_gate("bench", "running", f"levels {levels}", None)
                res = bench.run_bench(
                    send,
                    levels,
                    o.max_tokens,
                    o.requests_per_level,
                    o.warmup,
                    label=label,
                    model=model,
                    on_level=lambda lv: self.on_line(
                        "bench", f"c={lv.concurrency}: {lv.ok}/{lv.n} ok"
                    ),
                )
                results.append(res)
            finally:
                if served:
                    self.on_stopped(self._stop_current())
                    with self._lock:
                        self._run = None
        gates = [r.gate() for r in results]
        status = "pass" if all(r.all_ok for r in results) else "fail"
        if len(results) == 1:  # one sweep: its gate is the verdict
            status = gates[0].status.value
        return Outcome("bench", status, gates, result=results)
