"""`epdoctor run {kernel-test,serve,smoke,bench}`: launch and verify, with live per-rank panes.

Nothing starts before the exact commands are shown and the operator said yes
(`--yes` for scripts, `--dry-run` to print and exit). A read-only diagnose of
every node runs first (`--no-preflight` skips it); a failing preflight stops
the launch unless `--force`. Ctrl-C, SIGTERM and SIGHUP (a dropped SSH session)
stop everything epdoctor started and say so, and so does an error or the end of
the run; nothing is left running unless `--detach`, which prints how to stop it.

Flags -> LaunchRequest (epdoctor.options) -> the launch prepared and confirmed
(epdoctor.launch.config) -> epdoctor.launch.session.Session, whose events
epdoctor.reports.launch_text draws.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from epdoctor import exitcodes
from epdoctor.launch import config
from epdoctor.options import to_launch_request, to_target_spec
from epdoctor.requests import LaunchRequest

NAME = "run"
HELP = (
    "launch and verify: kernel test, serve, smoke request, benchmark (shows commands, asks first)"
)


def register(parser: argparse.ArgumentParser) -> None:
    from epdoctor.options import add_run_arguments

    add_run_arguments(parser)


_OPEN: list[Any] = []  # nodes this invocation opened: their connections close at the end


def nodes_from_args(args: argparse.Namespace, plan: dict[str, Any] | None = None) -> list[Any]:
    """Where the launch runs (epdoctor.launch.nodes.launch_nodes); closed at the end."""
    from epdoctor.launch.nodes import launch_nodes

    nodes = launch_nodes(to_target_spec(args), plan or {}, args.plan)
    _OPEN.extend(nodes)
    return nodes


def run(args: argparse.Namespace) -> int:
    what = getattr(args, "what", None)
    if what is None:
        print("epdoctor run: choose one of kernel-test, serve, smoke, bench, down", file=sys.stderr)
        return exitcodes.ERROR
    from epdoctor.launch.guard import stop_on_signals
    from epdoctor.launch.launcher import LaunchError
    from epdoctor.launch.nodes import close_nodes

    # SIGTERM and SIGHUP end the run as Ctrl-C does: what it started is stopped first
    with stop_on_signals() as guard:
        try:
            if what == "down":  # delete what a Kubernetes plan's rollout applied
                from epdoctor.commands._run_kube import run_down

                return guard.exit_code(run_down(args))
            return guard.exit_code(launch(args))
        except LaunchError as exc:  # what was started is stopped by then
            print(f"epdoctor run {what}: {exc}", file=sys.stderr)
            return exitcodes.ERROR
        except KeyboardInterrupt as exc:
            if what != "down":
                raise
            from epdoctor.launch.guard import signal_name

            # before the deletion began (it holds signals until it ends): nothing was deleted
            print(f"epdoctor run down: {signal_name(exc)}: nothing was deleted", file=sys.stderr)
            return guard.exit_code(exitcodes.INTERRUPTED)
        finally:
            close_nodes(_OPEN)
            _OPEN.clear()


def launch(args: argparse.Namespace) -> int:
    from epdoctor.reports.launch_text import LaunchView

    req = to_launch_request(args)
    view = LaunchView(req.json, req.live)
    o = req.options
    if req.what == "kernel-test" and o.regate:
        return regate(view, o.regate)
    plan = config.plan_of(req)
    if req.what in ("kernel-test", "serve"):  # a Kubernetes plan is applied, gated, taken down
        from epdoctor.commands._run_kube import maybe_rollout

        if (code := maybe_rollout(req, plan)) is not None:
            return code
    if req.what == "bench":
        config.bench_levels(o)  # refused before anything connects
    nodes = nodes_from_args(args, plan)
    if req.what == "smoke":  # a dry run contacts nothing: the model is the flag's or the plan's
        prepared = config.prepare_smoke(req, plan, nodes, resolve=not req.dry_run)
        code = confirm(prepared.request or req, view, prepared.lines, "the smoke request")
        return code if code is not None else finish(view, prepared)
    prepared = config.prepare(req, plan, nodes)
    cfg = prepared.cfg
    isolate = prepared.isolate
    what = {"serve": f"serving ({getattr(cfg, 'engine', '')})", "bench": "the benchmark"}.get(
        req.what, "isolation" if isolate else f"the {getattr(cfg, 'kind', '')} kernel test"
    )
    code = confirm(req, view, prepared.lines, what)
    if req.dry_run and req.what == "kernel-test":
        _local_readiness(view, nodes, getattr(cfg, "python", "python3"))
    if code is not None:
        return code
    return finish(view, prepared)  # the session diagnoses every node first (the preflight)


def _local_readiness(view: Any, nodes: list[Any], python: str) -> None:
    """A dry run on this host says what would stop the kernel test here (no torch, no GPU)."""
    import shutil
    import subprocess

    if not any(type(n).__name__ == "LocalNode" for n in nodes):
        return
    notes = []
    if shutil.which("nvidia-smi") is None and not os.path.exists("/dev/nvidia0"):
        notes.append("no NVIDIA GPU on this host (no nvidia-smi, no /dev/nvidia0)")
    probe = "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is None)"
    try:
        ok = subprocess.run([python, "-c", probe], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        ok = False
    if not ok:
        notes.append(f"{python} has no torch (pass --python PATH to a Python that has it)")
    for n in notes:
        view.print(f"[yellow]note: on this host the kernel test would not start: {n}[/yellow]")


def confirm(req: LaunchRequest, view: Any, lines: list[str], what: str) -> int | None:
    """Show the commands; None to go on, else the exit code."""
    view.print(f"[bold]epdoctor will run {len(lines)} command(s) for {what}:[/bold]")
    for line in lines:
        view.print(f"  {line}", markup=False, soft_wrap=True)
    if req.dry_run:
        view.print("(dry run: nothing started)")
        return exitcodes.OK
    if req.yes:
        return None
    if not sys.stdin.isatty():
        view.print("[red]refusing to start without --yes: stdin is not a terminal[/red]")
        return exitcodes.ERROR
    answer = input("Start them? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        view.print("nothing started")
        return exitcodes.OK
    return None


def finish(view: Any, launch: Any) -> int:
    """Run the confirmed launch, its events drawn by `view`; the exit code of its outcome."""
    from epdoctor.launch.guard import signal_name
    from epdoctor.launch.session import Session
    from epdoctor.logwatch import log_watch_factory

    kernel = launch.what == "kernel-test" and not launch.isolate
    view.show_readiness = launch.what == "serve"
    watch = log_watch_factory(launch.cfg.expect.efa is True) if kernel else log_watch_factory()
    session = Session(launch, watch_factory=watch, **view.events())
    out = session.run()
    if out.status == "error" and out.exc is not None:
        if out.what in ("kernel-test", "serve"):  # what the error left running is stopped
            view.stopped(out.stopped)
        raise out.exc
    if out.status == "interrupted":
        if out.what == "smoke":
            raise out.exc or KeyboardInterrupt()
        view.stopped(out.stopped)
        what = {"isolate": "the running pair was stopped"}.get(out.what, "")
        if out.what == "bench" and not any(c is not None for _, c in launch.cfg or []):
            what = "nothing of epdoctor's was running"
        view.interrupted(signal_name(out.exc) if out.exc else "Ctrl-C", what)
        return exitcodes.INTERRUPTED
    if out.reason == "preflight":  # nothing started: the failing findings, one line each
        if view.json:
            print(json.dumps(out.to_json(), indent=2))
        else:
            gate = out.gate("preflight")
            for line in gate.result.evidence if gate is not None else ():
                view.print(f"  FAIL {line}", markup=False)
            view.print("preflight failed: nothing started (`epdoctor diagnose` explains; --force "
                       "launches anyway)")  # fmt: skip
        return exitcodes.FINDINGS
    if out.status == "detached":
        if view.json and out.result is not None:
            print(json.dumps({"gate": _ready_gate(out), **out.result}, indent=2))
        view.detached(session.procs, launch.cfg.run_dir)
        return exitcodes.OK
    shown = {"kernel-test": _kernel_test, "isolate": _isolate, "serve": _serve, "smoke": _smoke}
    return shown.get(out.what, _bench)(view, launch, out)


def _ready_gate(out: Any) -> dict[str, Any] | None:
    """The readiness gate of a serve, found by name (not by its position among the gates)."""
    gate = out.gate("ready") or (out.gates[-1] if out.gates else None)
    return gate.to_json() if gate is not None else None


def exit_for(status: str) -> int:
    return exitcodes.FINDINGS if status in ("fail", "unknown") else exitcodes.OK


def regate(view: Any, run_dir: str) -> int:
    from epdoctor.launch.kernel_test import regate as gate_again

    try:
        report = gate_again(run_dir)
    except (OSError, ValueError, KeyError) as exc:
        view.print(f"[red]cannot re-gate {run_dir}: {exc}[/red]")
        return exitcodes.ERROR
    view.kernel_report(report, False)
    return exit_for(report.status.value)


def _kernel_test(view: Any, launch: Any, out: Any) -> int:
    view.kernel_report(out.result, out.failed_early)
    return exit_for(out.status)


def _isolate(view: Any, launch: Any, out: Any) -> int:
    from epdoctor.launch import isolate as iso

    results, outliers = out.result
    if view.json:
        print(json.dumps(iso.to_json(results, outliers), indent=2))
    else:
        view.isolation(results, outliers)
    return exitcodes.OK if out.status == "pass" else exitcodes.FINDINGS


def _serve(view: Any, launch: Any, out: Any) -> int:
    view.stopped(out.stopped)  # a gate that failed, or an engine that exited
    if out.reason == "not ready" and view.json:
        print(json.dumps({"gate": _ready_gate(out), **out.result}, indent=2))
    return exitcodes.FINDINGS


def _smoke(view: Any, launch: Any, out: Any) -> int:
    if out.status == "error":
        view.print(f"[red]{out.error}[/red]")
        return exitcodes.ERROR
    if view.json:
        print(json.dumps({**out.result.to_json(), "counters": out.gates[1].to_json()}, indent=2))
    else:
        view.gates(out.gates)
    return exit_for(out.status)


def _bench(view: Any, launch: Any, out: Any) -> int:
    from epdoctor.launch import bench

    if out.status == "error":  # said as it happened
        return exitcodes.ERROR
    if out.reason == "not ready":
        view.stopped(out.stopped)
        view.gates(out.gates)
        return exitcodes.FINDINGS
    o, results = launch.options, out.result
    doc = {
        "results": [r.to_json() for r in results],
        "baseline": o.ab,
        "transport_ab": bool(o.ab_transport),
    }
    if o.output:
        bench.write_results(o.output, doc, results)
    if view.json:
        print(json.dumps(doc, indent=2))
    else:
        view.bench(results)
        view.gates(out.gates)
        if not o.ab and not o.ab_transport:
            view.print(
                "[dim]M702: no baseline backend measured; --ab allgather_reducescatter runs "
                "one the same way[/dim]"
            )
    return exitcodes.OK if all(r.all_ok for r in results) else exitcodes.FINDINGS
