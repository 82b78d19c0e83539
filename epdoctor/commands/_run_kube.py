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

DOWN_HELP = "delete what `run kernel-test|serve --plan` applied for a Kubernetes plan (only that)"


def add_arguments(p: argparse.ArgumentParser, what: str) -> None:
    """The flags of a rollout, on the kernel-test and serve parsers."""
    g = p.add_argument_group("Kubernetes plan (--plan of a Kubernetes plan, no target flags)")
    g.add_argument(
        "--keep",
        action="store_true",
        help="delete nothing of what is applied, whatever happens (default: a failed gate, "
        "Ctrl-C, SIGTERM and the end of the run delete it)",
    )
    g.add_argument(
        "--attach",
        action="store_true",
        help="apply nothing: run in the plan's pods as they are (NAME-0 .. NAME-N-1)",
    )
    g.add_argument(
        "--schedule-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="fail when a pod is still Pending (unschedulable) after S seconds (default 600)",
    )
    g.add_argument(
        "--start-timeout",
        type=float,
        default=1800.0,
        metavar="S",
        help="fail when the pods are not running S seconds after the apply (default 1800: "
        "image pulls)",
    )
    if what == "serve":
        g.add_argument(
            "--no-kernel-test",
            action="store_true",
            help="serve at once, without the kernel test in idle pods first",
        )
        g.add_argument(
            "--kernel-timeout", type=float, default=900.0, metavar="S",
            help="seconds the kernel test may run (default 900)",
        )  # fmt: skip
        g.add_argument(
            "--bench",
            metavar="LEVELS",
            help="after the smoke request, benchmark at these concurrency levels (e.g. 1,4,16)",
        )
        g.add_argument("--smoke-max-tokens", type=int, default=64, metavar="N")


def register_down(sub: Any) -> None:
    dn = sub.add_parser(
        "down",
        help=DOWN_HELP,
        description="Delete the Services and StatefulSet that `epdoctor run kernel-test|serve "
        "--plan` applied for this Kubernetes plan: only objects epdoctor's field manager applied "
        "and that carry its label; anything else of the same name is left alone and named.",
    )
    dn.add_argument("--plan", metavar="FILE", required=True, help="plan.json from `epdoctor plan`")
    g = dn.add_argument_group("Kubernetes")
    g.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: the plan's)")
    g.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    g.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG)")
    g.add_argument("--request-timeout", type=float, metavar="S", help="seconds per API call")
    dn.add_argument("-y", "--yes", action="store_true", help="do not ask before deleting")
    dn.add_argument("--dry-run", action="store_true", help="say what would be deleted and exit")
    dn.add_argument("--timeout", type=float, default=300.0, metavar="S",
                    help="how long to wait for the pods to go (default 300)")  # fmt: skip
    dn.add_argument("--json", action="store_true", help="print the result as JSON")


def maybe_rollout(args: argparse.Namespace, plan: dict[str, Any], what: str) -> int | None:
    """The exit code of a rollout of ``plan``, or None when the launch runs in existing pods."""
    from epdoctor.commands.run import TARGET_FLAGS, Out
    from epdoctor.launch.kube_launch import Attach, from_flags

    named = any(getattr(args, k, None) for k in TARGET_FLAGS)
    rp = from_flags(args, plan, what, named)
    if rp is None:
        return None
    out = Out(args)
    if isinstance(rp, Attach):
        out.print(rp.note, markup=False, soft_wrap=True)
        return None
    try:
        code = _confirm(args, out, rp)
        if code is not None:
            return code
        return _run(args, out, rp, rp.api)
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


def _run(args: argparse.Namespace, out: Any, rp: Any, api: Any) -> int:
    """The rollout on a worker thread; this thread draws and turns Ctrl-C into stop()."""
    from epdoctor import exitcodes
    from epdoctor.commands.run import interrupted_note, log_watch_factory
    from epdoctor.launch.kube_rollout import KubeRollout
    from epdoctor.launch.panes import PaneBoard

    board = PaneBoard()
    plain = not out.json and (args.no_live or not out.console.is_terminal)
    sinks = _Sinks(out, board, plain)
    rollout = KubeRollout(rp, api, sinks.line, sinks.gate, sinks.finding, log_watch_factory(None))
    result: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            result.append(rollout.run())
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
        rollout.stop()
        _wait(done)
    outcome = result[0] if result else None
    if outcome is None:
        out.print("[red]the rollout ended without a result[/red]")
        return exitcodes.ERROR
    _report(out, rp, rollout, outcome, board)
    if interrupted is not None or outcome.status == "interrupted":
        if interrupted is not None:
            interrupted_note(out, interrupted, "what epdoctor applied is handled as said above")
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
        from epdoctor.launch.panes import style_of

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
    from epdoctor.commands.run import print_gates, stopped_note

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
            print_gates(out, outcome.gates)
        for source, f in rollout.findings:
            out.print(f"  {f.status.value.upper()} {f.code} {f.title} [dim]({source})[/dim]")
    if outcome.error:
        out.print(f"[red]error: {outcome.error}[/red]", markup=True)
    stopped_note(out, outcome.stopped)
    label = "unverifiable" if outcome.status == "unknown" else outcome.status
    out.print(f"{outcome.what} on Kubernetes: {label}")


# --------------------------------------------------------------------------- run down
def run_down(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes
    from epdoctor.commands.run import Out, load_plan
    from epdoctor.launch.kube_launch import connect, is_kube_plan, namespace
    from epdoctor.launch.kube_objects import load_objects, managers, owned
    from epdoctor.launch.kube_rollout import take_down
    from epdoctor.model import EpdoctorError
    from epdoctor.targets.kube_apply import KubeApply, kind_of

    out = Out(args)
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
