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

from epdoctor import exitcodes
from epdoctor.model import EpdoctorError
from epdoctor.requests import LaunchRequest


class TakeDownIncomplete(EpdoctorError):
    """Something epdoctor applied is still there after a take-down (exit code 3)."""

    exit_code = exitcodes.TAKEDOWN_INCOMPLETE


def api_failed(exc: BaseException, left: str) -> EpdoctorError:
    """An API failure as one line that names the API's status and what is left applied."""
    from epdoctor.launch.kube_rollout import api_error

    return EpdoctorError(f"{api_error(exc)}; {left}")


def maybe_rollout(req: LaunchRequest, plan: dict[str, Any]) -> int | None:
    """The exit code of a rollout of ``plan``, or None when the launch runs in existing pods."""
    from epdoctor.launch.kube_launch import Attach, from_request
    from epdoctor.reports.launch_text import LaunchView
    from epdoctor.targets.base import TargetError

    try:
        rp = from_request(req, plan)
    except TargetError as exc:
        raise api_failed(exc, "nothing was applied") from None
    except (KeyError, TypeError, AttributeError, IndexError) as exc:
        raise EpdoctorError(
            f"Kubernetes API: an answer of an unexpected shape ({type(exc).__name__}); "
            "nothing was applied"
        ) from None
    if rp is None:
        return None
    out = LaunchView(req.json, req.live)
    if isinstance(rp, Attach):
        out.print(rp.note, markup=False, soft_wrap=True)
        return None
    try:
        code = _confirm(req, out, rp)
        if code is not None:
            return code
        return _run(out, req, plan, rp)
    finally:
        rp.api.session.close()


def _confirm(req: LaunchRequest, out: Any, rp: Any) -> int | None:
    from epdoctor.safeio import markup

    o = rp.objects
    out.print(
        f"[bold]epdoctor will bring up {markup(o.name)} ({markup(rp.engine)}, {o.replicas} "
        f"pod(s)) for {rp.options.what}:[/bold]"
    )
    for note in o.lint_notes:
        out.print(f"  lint (info): {note}", markup=False, soft_wrap=True)
    for line in rp.lines:
        out.print(f"  {line}", markup=False, soft_wrap=True)
    if req.dry_run:
        out.print("(dry run: nothing applied)")
        return exitcodes.OK
    if req.yes:
        return None
    if not sys.stdin.isatty():
        out.print("[red]refusing to apply without --yes: stdin is not a terminal[/red]")
        return exitcodes.ERROR
    answer = input("Apply and start? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        out.print("nothing applied")
        return exitcodes.OK
    return None


def _run(out: Any, req: LaunchRequest, plan: dict[str, Any], rp: Any) -> int:
    """The rollout's launch session on a worker thread; this thread draws and turns Ctrl-C
    into stop()."""
    from epdoctor.launch.guard import signal_name
    from epdoctor.launch.kube_down import sleep_until
    from epdoctor.launch.kube_launch import launch_of
    from epdoctor.launch.session import Session
    from epdoctor.logwatch import log_watch_factory

    board, plain = out.board, out.plain
    sinks = _Sinks(out, board, plain)
    session = Session(
        launch_of(req, plan, rp),
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
        sleep_until(done)
    outcome = result[0] if result else None
    if outcome is None or outcome.result is None:
        why = outcome.error if outcome else ""
        out.print(f"the rollout ended without a result {why}", markup=False, style="red")
        return exitcodes.ERROR
    _report(out, rp, outcome.result, outcome, board)
    if outcome.left:
        _stderr(
            f"epdoctor: take-down incomplete: still there: {', '.join(outcome.left[:12])} in "
            f"namespace {rp.ns}; `epdoctor run down --plan {rp.plan_path or 'PLAN'} -n {rp.ns}` "
            "deletes what is epdoctor's"
            + (f" (the run ended on: {outcome.error})" if outcome.error else "")
        )
        return exitcodes.TAKEDOWN_INCOMPLETE
    if interrupted is not None or outcome.status == "interrupted":
        if interrupted is not None:
            out.interrupted(
                signal_name(interrupted), "what epdoctor applied is handled as said above"
            )
        return exitcodes.INTERRUPTED
    if outcome.status == "error":
        if not _applied(outcome):
            left = "nothing was applied"
        elif rp.options.keep:
            left = f"left applied (--keep): {', '.join(_labels(rp))}"
        else:
            left = "what epdoctor applied is deleted"
        _stderr(f"epdoctor: error: {outcome.error}; {left}")
        return exitcodes.ERROR
    return exitcodes.FINDINGS if outcome.status in ("fail", "unknown") else exitcodes.OK


def _stderr(line: str) -> None:
    from epdoctor.safeio import plain

    print(plain(line).replace("\n", " "), file=sys.stderr, flush=True)


def _labels(rp: Any) -> list[str]:
    from epdoctor.targets.kube_apply import kind_of

    return [f"{kind_of(p).lower()}/{n}" for p, n in rp.objects.refs()]


def _applied(outcome: Any) -> bool:
    return not any(line == "nothing was applied" for line in outcome.stopped)


def _draw(out: Any, board: Any, plain: bool, done: threading.Event) -> None:
    from epdoctor.launch.kube_down import sleep_until

    if plain or out.json:
        sleep_until(done)
        return
    from rich.live import Live

    with Live(board, console=out.console, refresh_per_second=4, transient=False):
        sleep_until(done)


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
    from epdoctor.safeio import markup

    if out.json:
        doc = {
            **outcome.to_json(),
            "namespace": rp.ns,
            "objects": [f"{k}/{n}" for k, n in rp.objects.refs()],
            "findings": [{"source": s, **f.to_json()} for s, f in rollout.findings],
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
            out.print(f"  {f.status.value.upper()} {f.code} {markup(f.title)} "
                      f"[dim]({markup(source)})[/dim]")  # fmt: skip
    out.stopped(outcome.stopped)
    label = "unverifiable" if outcome.status == "unknown" else outcome.status
    out.print(f"{outcome.what} on Kubernetes: {label}")


# --------------------------------------------------------------------------- run down
def run_down(args: argparse.Namespace) -> int:
    """Delete what epdoctor applied for a plan. Exit 0 when nothing of epdoctor's is left, 2
    when the API could not be read (nothing deleted), 3 when something is left (the take-down
    is incomplete). A signal while the deletion runs is held until it ends."""
    from epdoctor.launch.config import load_plan
    from epdoctor.launch.kube_down import down_plan, take_down_held
    from epdoctor.launch.kube_launch import connect, is_kube_plan, namespace
    from epdoctor.launch.kube_objects import load_objects
    from epdoctor.reports.launch_text import LaunchView
    from epdoctor.targets.base import TargetError
    from epdoctor.targets.kube_apply import KubeApply

    out = LaunchView(args.json, False)
    plan = load_plan(args.plan)
    if not is_kube_plan(plan):
        raise EpdoctorError(f"{args.plan} is not a Kubernetes plan: there is nothing to take down")
    session = connect(args.context, args.kubeconfig, args.request_timeout, args.plan)
    try:
        api = KubeApply(session)
        ns = namespace(args.namespace, plan, session)
        objects = load_objects(plan, args.plan, ns, lint=False)
        try:
            plan_lines = down_plan(api, objects, ns)
        except TargetError as exc:
            raise api_failed(exc, "nothing was deleted") from None
        except (KeyError, TypeError, AttributeError, IndexError, ValueError) as exc:
            raise EpdoctorError(
                f"Kubernetes API: an answer of an unexpected shape ({type(exc).__name__}); "
                "nothing was deleted"
            ) from None
        if not out.json:
            out.print(f"epdoctor run down: {objects.name} in namespace {ns}", markup=False,
                      style="bold")  # fmt: skip
            for line in plan_lines:
                out.print(f"  {line}", markup=False)
        if args.dry_run:
            if out.json:
                print(json.dumps({"namespace": ns, "name": objects.name, "dry_run": True,
                                  "plan": plan_lines, "done": [], "left": []}, indent=2))  # fmt: skip
            else:
                out.print("(dry run: nothing deleted)")
            return exitcodes.OK
        if any(line.startswith("delete") for line in plan_lines) and not args.yes:
            if not sys.stdin.isatty():
                out.print("[red]refusing to delete without --yes: stdin is not a terminal[/red]")
                return exitcodes.ERROR
            if input("Delete them? [y/N] ").strip().lower() not in ("y", "yes"):
                out.print("nothing deleted")
                return exitcodes.OK
        t0 = time.monotonic()
        done, signals = take_down_held(api, objects, args.timeout)
        if out.json:
            print(json.dumps({"namespace": ns, "name": objects.name, "dry_run": False,
                              "plan": plan_lines, "done": list(done), "left": done.left,
                              "seconds": round(time.monotonic() - t0, 1)}, indent=2))  # fmt: skip
        else:
            for line in done:
                out.print(line, markup=False)
        if signals:
            _stderr(f"epdoctor: {signals[0]} arrived during the take-down; it was finished first")
        if not done.complete:
            raise TakeDownIncomplete(
                f"take-down incomplete: still there: {', '.join(done.left[:12])} in namespace "
                f"{ns}; run `epdoctor run down` again, or delete them with kubectl"
            )
        # after a signal: its own exit code (130, 143, 129; run.py's guard maps it)
        return exitcodes.INTERRUPTED if signals else exitcodes.OK
    finally:
        session.close()
