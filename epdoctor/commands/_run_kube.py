"""`epdoctor run kernel-test|serve --plan` on a Kubernetes plan, and `epdoctor run down`.

Flags -> a rollout (epdoctor/launch/kube_rollout.py) -> a rich renderer of its events. The
commands in epdoctor/commands/run.py hand a Kubernetes plan here when no target flag names
other pods (``--pod``, ``-l``, ``--ssh``...) and ``--attach`` is not given: the plan's objects
are linted, what applying changes is shown (the API server's dry run) and, on yes (``--yes``),
applied, watched, gated and deleted again. When the plan's StatefulSet or pods exist and
epdoctor did not apply them, the launch runs in those pods as before (nothing applied, nothing
deleted) and says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any


def maybe_rollout(args: argparse.Namespace, plan: dict[str, Any], what: str) -> int | None:
    """The exit code of a rollout of ``plan``, or None when the launch runs in existing pods."""
    from epdoctor.launch.kube_launch import Attach, from_flags
    from epdoctor.options import to_target_spec
    from epdoctor.reports.launch_text import LaunchView

    rp = from_flags(args, plan, what, to_target_spec(args).names_targets)
    if rp is None:
        return None
    out = LaunchView(args.json, not args.no_live)
    if isinstance(rp, Attach):
        out.print(rp.note, markup=False, soft_wrap=True)
        return None
    try:
        code = _confirm(args, out, rp)
        if code is not None:
            return code
        return _run(out, rp)
    finally:
        rp.api.session.close()


def _confirm(args: argparse.Namespace, out: Any, rp: Any) -> int | None:
    from epdoctor import exitcodes

    o = rp.objects
    out.print(
        f"[bold]epdoctor will bring up {o.name} ({rp.engine}, {o.replicas} pod(s)) for "
        f"{rp.options.what}:[/bold]"
    )
    for note in o.lint_notes:
        out.print(f"  lint (info): {note}", markup=False, soft_wrap=True)
    for line in rp.lines:
        out.print(f"  {line}", markup=False, soft_wrap=True)
    if args.dry_run:
        out.print("(dry run: nothing applied)")
        return exitcodes.OK
    if args.yes:
        return None
    if not sys.stdin.isatty():
        out.print("[red]refusing to apply without --yes: stdin is not a terminal[/red]")
        return exitcodes.ERROR
    answer = input("Apply and start? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        out.print("nothing applied")
        return exitcodes.OK
    return None


def _run(out: Any, rp: Any) -> int:
    """The rollout's launch session on a worker thread; this thread draws and turns Ctrl-C
    into stop()."""
    from epdoctor import exitcodes
    from epdoctor.launch.guard import signal_name
    from epdoctor.launch.session import Launch, Session
    from epdoctor.logwatch import log_watch_factory

    board, plain = out.board, out.plain
    sinks = _Sinks(out, board, plain)
    session = Session(
        Launch(rp.options.what, rp.lines, None, {}, rp, []),
        on_line=sinks.line,
        on_gate=sinks.gate,
        on_finding=sinks.finding,
        watch_factory=log_watch_factory(None),
    )
    result: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            result.append(session.run())
        finally:
            done.set()

    worker = threading.Thread(target=work, name="rollout", daemon=True)
    interrupted: BaseException | None = None
    try:
        worker.start()
        _draw(out, board, plain, done)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: later ones are ignored meanwhile
        interrupted = exc
        out.print("[yellow]stopping: deleting what was applied...[/yellow]" if not rp.options.keep
                  else "[yellow]stopping (--keep: nothing is deleted)...[/yellow]")  # fmt: skip
        session.stop()
        _wait(done)
    outcome = result[0] if result else None
    if outcome is None or outcome.result is None:
        out.print(f"[red]the rollout ended without a result {outcome.error if outcome else ''}[/red]")
        return exitcodes.ERROR
    _report(out, rp, outcome.result, outcome, board)
    if interrupted is not None or outcome.status == "interrupted":
        if interrupted is not None:
            out.interrupted(signal_name(interrupted), "what epdoctor applied is handled as said above")
        return exitcodes.INTERRUPTED
    if outcome.status == "error":
        return exitcodes.ERROR
    return exitcodes.FINDINGS if outcome.status in ("fail", "unknown") else exitcodes.OK


def _wait(done: threading.Event) -> None:
    # Sleep-and-look, not Thread.join(): a signal handler's KeyboardInterrupt inside join() can
    # leave the thread marked as ended while it still runs (CPython 3.11).
    while not done.is_set():
        time.sleep(0.1)


def _draw(out: Any, board: Any, plain: bool, done: threading.Event) -> None:
    if plain or out.json:
        _wait(done)
        return
    from rich.live import Live

    with Live(board, console=out.console, refresh_per_second=4, transient=False):
        _wait(done)


class _Sinks:
    """The rollout's events into the board; outside a terminal, the lines worth reading."""

    def __init__(self, out: Any, board: Any, plain: bool) -> None:
        self.out = out
        self.board = board
        self.plain = plain
        self._last: dict[str, str] = {}
        self._lock = threading.Lock()

    def line(self, pane: str, line: str) -> None:
        from epdoctor.launch.kube_watch import KUBE
        from epdoctor.reports.launch_panes import style_of

        self.board.add(pane, line)
        if self.plain and (line.startswith(KUBE) or style_of(line) or pane in ("smoke", "bench")):
            with self._lock:
                self.out.print(
                    f"[{pane}] {line[:300]}", markup=False, highlight=False, soft_wrap=True
                )

    def gate(self, gate: str, state: str, summary: str, code: str | None = None) -> None:
        self.board.set_status(gate, state, summary + (f" ({code})" if code else ""))
        if not self.plain:
            return
        with self._lock:
            if state in ("waiting", "running") and self._last.get(gate) == state:
                return  # progress: said once per state outside a terminal
            self._last[gate] = state
            self.out.print(f"{gate}: {state}: {summary}" + (f" ({code})" if code else ""),
                           markup=False, soft_wrap=True)  # fmt: skip

    def finding(self, source: str, f: Any) -> None:
        text = f"{f.status.value.upper()} {f.code} {f.title} ({source})"
        self.board.note(text)
        if self.plain:
            with self._lock:
                self.out.print(text, markup=False, soft_wrap=True)


def _report(out: Any, rp: Any, rollout: Any, outcome: Any, board: Any) -> None:
    if out.json:
        doc = {
            "what": outcome.what,
            "status": outcome.status,
            "namespace": rp.ns,
            "objects": [f"{k}/{n}" for k, n in rp.objects.refs()],
            "gates": [g.to_json() for g in outcome.gates],
            "findings": [{"source": s, **f.to_json()} for s, f in rollout.findings],
            "stopped": outcome.stopped,
            "error": outcome.error,
            # the last lines of every pane (a pod's Kubernetes state and its log, each test)
            "panes": {name: list(pane.lines) for name, pane in board.panes.items()},
        }
        bench = getattr(rollout, "bench_result", None)
        if bench is not None:
            doc["bench"] = bench.to_json()
        print(json.dumps(doc, indent=2))
    else:
        if outcome.gates:
            out.gates(outcome.gates)
        for source, f in rollout.findings:
            out.print(f"  {f.status.value.upper()} {f.code} {f.title} [dim]({source})[/dim]")
    if outcome.error:
        out.print(f"[red]error: {outcome.error}[/red]", markup=True)
    out.stopped(outcome.stopped)
    label = "unverifiable" if outcome.status == "unknown" else outcome.status
    out.print(f"{outcome.what} on Kubernetes: {label}")


# --------------------------------------------------------------------------- run down
def run_down(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes
    from epdoctor.launch.config import load_plan
    from epdoctor.launch.kube_launch import connect, is_kube_plan, namespace
    from epdoctor.launch.kube_objects import load_objects, managers, owned
    from epdoctor.launch.kube_rollout import take_down
    from epdoctor.model import EpdoctorError
    from epdoctor.reports.launch_text import LaunchView
    from epdoctor.targets.kube_apply import KubeApply, kind_of

    out = LaunchView(args.json, False)
    plan = load_plan(args.plan)
    if not is_kube_plan(plan):
        raise EpdoctorError(f"{args.plan} is not a Kubernetes plan: there is nothing to take down")
    session = connect(args, plan)
    try:
        api = KubeApply(session)
        ns = namespace(args, plan, session)
        objects = load_objects(plan, args.plan, ns, lint=False)
        plan_lines = []
        for plural, name in objects.refs():
            live = api.read(plural, ns, name)
            label = f"{kind_of(plural).lower()}/{name}"
            if live is None:
                plan_lines.append(f"not there: {label}")
            elif owned(live):
                plan_lines.append(f"delete:    {label}")
            else:
                plan_lines.append(
                    f"leave:     {label} (epdoctor did not apply it; field managers: {managers(live)})"
                )
        if not out.json:
            out.print(f"[bold]epdoctor run down: {objects.name} in namespace {ns}[/bold]")
            for line in plan_lines:
                out.print(f"  {line}", markup=False)
        if args.dry_run:
            out.print("(dry run: nothing deleted)")
            return exitcodes.OK
        if not any(line.startswith("delete") for line in plan_lines) and not args.yes:
            pass  # nothing named to delete: take_down still looks for epdoctor's by label
        elif not args.yes:
            if not sys.stdin.isatty():
                out.print("[red]refusing to delete without --yes: stdin is not a terminal[/red]")
                return exitcodes.ERROR
            if input("Delete them? [y/N] ").strip().lower() not in ("y", "yes"):
                out.print("nothing deleted")
                return exitcodes.OK
        t0 = time.monotonic()
        lines = take_down(api, objects, args.timeout, None)
        if out.json:
            print(json.dumps({"namespace": ns, "name": objects.name, "done": lines,
                              "seconds": round(time.monotonic() - t0, 1)}, indent=2))  # fmt: skip
        else:
            for line in lines:
                out.print(line, markup=False)
        failed = any(line.startswith(("could not", "delete them yourself")) or "still terminating" in line
                     for line in lines)  # fmt: skip
        return exitcodes.ERROR if failed else exitcodes.OK
    finally:
        session.close()
