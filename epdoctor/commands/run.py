"""`epdoctor run {kernel-test,serve,smoke,bench}`: launch and verify, with live per-rank panes.

Nothing starts before the exact commands are shown and the operator said yes
(`--yes` for scripts, `--dry-run` to print and exit). A read-only diagnose of
every node runs first (`--no-preflight` skips it); a failing preflight stops
the launch unless `--force`. Ctrl-C, SIGTERM and SIGHUP (a dropped SSH session)
stop everything epdoctor started and say so, and so does an error or the end of
the run; nothing is left running unless `--detach`, which prints how to stop it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from epdoctor.launch import config
from epdoctor.options import to_launch_request, to_target_spec

NAME = "run"
HELP = (
    "launch and verify: kernel test, serve, smoke request, benchmark (shows commands, asks first)"
)

def register(parser: argparse.ArgumentParser) -> None:
    from epdoctor.options import add_run_arguments

    add_run_arguments(parser)


# --------------------------------------------------------------------------- helpers
class Out:
    """Where text goes: rich for humans, nothing but JSON with --json."""

    def __init__(self, args: argparse.Namespace) -> None:
        from rich.console import Console

        self.json = bool(args.json)
        self.console = Console(stderr=self.json, highlight=False)
        self.gone = False

    def print(self, *a: Any, **kw: Any) -> None:
        # after SIGHUP the terminal may be gone: a line that cannot be written must not stop
        # the cleanup that follows it
        if self.gone:
            return
        try:
            self.console.print(*a, **kw)
        except OSError:
            self.gone = True


def nodes_from_args(args: argparse.Namespace, plan: dict[str, Any] | None = None) -> list[Any]:
    """Where the launch runs (epdoctor.launch.nodes.launch_nodes); closed at the end."""
    from epdoctor.launch.nodes import launch_nodes

    nodes = launch_nodes(to_target_spec(args), plan or {}, args.plan)
    _OPEN.extend(nodes)
    return nodes


def _opts(args: argparse.Namespace) -> Any:
    """The typed options of `epdoctor run WHAT`."""
    return to_launch_request(args).options


_OPEN: list[Any] = []  # nodes this invocation opened: their connections close at the end


def close_nodes(nodes: list[Any]) -> None:
    from epdoctor.launch.nodes import close_nodes as close

    close(nodes)


def confirm(args: argparse.Namespace, out: Out, lines: list[str], what: str) -> int | None:
    """Show the commands; None to go on, else the exit code."""
    from epdoctor import exitcodes

    out.print(f"[bold]epdoctor will run {len(lines)} command(s) for {what}:[/bold]")
    for line in lines:
        out.print(f"  {line}", markup=False, soft_wrap=True)
    if args.dry_run:
        out.print("(dry run: nothing started)")
        return exitcodes.OK
    if args.yes:
        return None
    if not sys.stdin.isatty():
        out.print("[red]refusing to start without --yes: stdin is not a terminal[/red]")
        return exitcodes.ERROR
    answer = input("Start them? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        out.print("nothing started")
        return exitcodes.OK
    return None


def preflight(
    args: argparse.Namespace,
    out: Out,
    nodes: list[Any],
    advisory: bool,
    engine: str | None = None,
    plan: dict[str, Any] | None = None,
) -> int | None:
    """Read-only diagnose of every node first. None: go on; else the exit code."""
    from epdoctor import exitcodes
    from epdoctor.launch.preflight import preflight as diagnose_first
    from epdoctor.launch.preflight import preflight_targets

    if args.no_preflight:
        return None
    targets = preflight_targets(to_target_spec(args), plan or {}, args.plan, len(nodes))
    out.print("[dim]preflight: read-only diagnose of every node...[/dim]")
    pre = diagnose_first(targets, engine)
    failing, errors = pre.failing, pre.errors
    for e in errors:
        out.print(f"[red]preflight could not run: {e}[/red]")
    for name, f in failing:
        out.print(f"  [red]FAIL[/red] {f.code} {f.title} [dim]({name})[/dim]")
    if not failing and not errors:
        out.print("[green]preflight: no failing finding[/green]")
        return None
    if advisory and not errors:
        out.print(
            "[yellow]preflight: advisory for a one-node built-in test, which needs only "
            "PyTorch and the GPUs and crosses no NIC: it goes on, and its own gates say "
            "whether it ran (the findings still matter for serving)[/yellow]"
        )
        return None
    if args.force:
        out.print("[yellow]--force: launching despite the failing preflight[/yellow]")
        return None
    out.print(
        "preflight failed: nothing started (`epdoctor diagnose` explains; --force launches anyway)"
    )
    return exitcodes.FINDINGS


def live_loop(
    args: argparse.Namespace, out: Out, board: Any, step: Callable[[], bool], poll_s: float = 0.2
) -> None:
    """Call step() until it returns False, drawing the board when in a terminal."""
    if out.json or args.no_live or not out.console.is_terminal:
        while step():
            time.sleep(poll_s)
        return
    from rich.live import Live

    with Live(board, console=out.console, refresh_per_second=4, transient=False):
        while step():
            time.sleep(poll_s)


def line_sink(args: argparse.Namespace, out: Out, board: Any) -> Callable[[str, str], None]:
    """Lines go to the panes; outside a terminal only the highlighted ones are printed."""
    from epdoctor.reports.launch_panes import style_of

    plain = not out.json and (args.no_live or not out.console.is_terminal)

    def sink(pane: str, line: str) -> None:
        board.add(pane, line)
        if plain and style_of(line):
            out.print(f"[{pane}] {line[:300]}", markup=False, highlight=False)

    return sink


def finding_sink(args: argparse.Namespace, out: Out, board: Any) -> Callable[[str, Any], None]:
    """A trap the log analyzer found, the moment it shows up: a note on the board."""
    plain = not out.json and (args.no_live or not out.console.is_terminal)

    def sink(source: str, f: Any) -> None:
        text = f"{f.status.value.upper()} {f.code} {f.title} ({source})"
        board.note(text)
        if plain:
            out.print(text, markup=False)

    return sink


def print_gates(out: Out, gates: list[Any]) -> None:
    from rich.table import Table

    t = Table(title="gates", show_lines=False)
    for col in ("gate", "verdict", "summary", "code"):
        t.add_column(col)
    for g in gates:
        t.add_row(g.name, _verdict(g.status.value), g.summary, g.code or "")
        for e in g.evidence[:6]:
            t.add_row("", "", f"[dim]{_esc(e)}[/dim]", "")
    out.print(t)


def _verdict(v: str) -> str:
    style = {
        "pass": "green",
        "fail": "bold red",
        "warn": "yellow",
        "unknown": "magenta",
        "skip": "dim",
    }.get(v, "")
    label = "unverifiable" if v == "unknown" else v
    return f"[{style}]{label}[/{style}]" if style else label


def _esc(s: str) -> str:
    from rich.markup import escape

    return escape(s)


def exit_for(status: Any) -> int:
    from epdoctor import exitcodes
    from epdoctor.model import Status

    return exitcodes.FINDINGS if status in (Status.FAIL, Status.UNKNOWN) else exitcodes.OK


def stopped_note(out: Out, lines: list[str]) -> None:
    for line in lines:
        out.print(f"[yellow]stopped:[/yellow] {line}")


def interrupted_note(out: Out, exc: BaseException, what: str = "") -> None:
    """What ended the run (Ctrl-C, SIGTERM, SIGHUP) and that what it started is stopped."""
    from epdoctor.launch.guard import signal_name

    out.print(
        f"interrupted ({signal_name(exc)}): {what or 'everything epdoctor started is stopped'}"
    )


def stopping(
    out: Out, stop: Callable[[], list[str]], body: Callable[[Callable[[], None]], int]
) -> int:
    """Run `body`; however it ends, what it started is stopped, unless it called keep().

    Ctrl-C, SIGTERM and SIGHUP (epdoctor.launch.guard) arrive as KeyboardInterrupt: say what
    was stopped and exit INTERRUPTED. An error (a node that would not start, a lost connection)
    stops the others and propagates. `stop` may run more than once: it is idempotent.
    """
    from epdoctor import exitcodes

    kept = False

    def keep() -> None:  # --detach
        nonlocal kept
        kept = True

    try:
        return body(keep)
    except KeyboardInterrupt as exc:
        stopped_note(out, stop())
        interrupted_note(out, exc)
        return exitcodes.INTERRUPTED
    except Exception:
        stopped_note(out, stop())
        raise
    finally:
        if not kept:  # whatever else ends it: nothing it started outlives it
            stop()


# --------------------------------------------------------------------------- kernel test
def run(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes

    what = getattr(args, "what", None)
    if what is None:
        print("epdoctor run: choose one of kernel-test, serve, smoke, bench", file=sys.stderr)
        return exitcodes.ERROR
    fn = {
        "kernel-test": run_kernel_test,
        "serve": run_serve,
        "smoke": run_smoke,
        "bench": run_bench,
    }[what]
    from epdoctor.launch.guard import stop_on_signals
    from epdoctor.launch.launcher import LaunchError

    # SIGTERM and SIGHUP end the run as Ctrl-C does: what it started is stopped first
    with stop_on_signals() as guard:
        try:
            return guard.exit_code(fn(args))
        except LaunchError as exc:  # what was started is stopped by then
            print(f"epdoctor run {what}: {exc}", file=sys.stderr)
            return exitcodes.ERROR
        finally:
            close_nodes(_OPEN)
            _OPEN.clear()


def run_kernel_test(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes
    from epdoctor.launch.kernel_test import KernelTestRun, describe
    from epdoctor.logwatch import log_watch_factory
    from epdoctor.reports.launch_panes import PaneBoard

    out = Out(args)
    if args.regate:
        from epdoctor.launch.kernel_test import regate

        try:
            return _show_kernel_report(out, regate(args.regate), False)
        except (OSError, ValueError, KeyError) as exc:
            out.print(f"[red]cannot re-gate {args.regate}: {exc}[/red]")
            return exitcodes.ERROR
    plan = config.load_plan(args.plan)
    nodes = nodes_from_args(args, plan)
    if args.isolate:
        return run_isolate(args, out, plan, nodes)
    cfg = config.kernel_config(_opts(args), plan, nodes)
    code = confirm(args, out, describe(cfg), f"the {cfg.kind} kernel test")
    if code is not None:
        return code
    code = preflight(
        args, out, nodes, advisory=cfg.kind == "builtin" and len(nodes) == 1, plan=plan
    )
    if code is not None:
        return code
    board = PaneBoard()
    krun = KernelTestRun(
        cfg,
        on_line=line_sink(args, out, board),
        watch_factory=log_watch_factory(cfg.expect.efa is True),
        on_finding=finding_sink(args, out, board),
    )
    t0 = time.monotonic()

    def body(keep: Callable[[], None]) -> int:
        krun.start()
        if args.detach:  # the one way out that leaves the ranks running
            keep()
            return _detached(out, krun.group, cfg.run_dir)
        board.set_status("kernel test", "running", f"{cfg.world} ranks on {len(nodes)} node(s)")

        def step() -> bool:
            board.set_status("kernel test", "running", f"{time.monotonic() - t0:.0f}s")
            return krun.step()

        live_loop(args, out, board, step)
        report = krun.finish()
        return _show_kernel_report(out, report, krun.failed_early)

    return stopping(out, krun.stop, body)


def _show_kernel_report(out: Out, report: Any, failed_early: bool) -> int:
    if failed_early:
        out.print("[red]a node failed: the others were stopped[/red]")
    stopped_note(out, report.stopped)
    if out.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        _print_ranks(out, report.per_rank)
        print_gates(out, report.gates)
        for name, path in report.logs.items():
            out.print(f"[dim]log {name}: {path}[/dim]")
        start = next((g for g in report.gates if g.name == "start"), None)
        if start is not None:  # why it never ran: the finding, said last where it is read
            out.print(f"[bold red]cause:[/bold red] {_esc(start.summary)} ({start.code})")
        out.print(f"kernel test: {_verdict(report.status.value)}")
    return exit_for(report.status)


def run_isolate(args: argparse.Namespace, out: Out, plan: dict[str, Any], nodes: list[Any]) -> int:
    """The built-in test on node pairs (half-splits first on large fleets); outliers reported."""
    from epdoctor import exitcodes
    from epdoctor.launch import isolate as iso
    from epdoctor.launch.kernel_test import KernelTestRun, describe, run_to_end

    if len(nodes) < 2:
        out.print(
            "[red]--isolate needs several nodes (SSH hosts or Kubernetes pods); this launch "
            "has one[/red]"
        )
        return exitcodes.ERROR
    opts = config.isolate_options(_opts(args))
    by_name = {n.name: n for n in nodes}
    pairs = iso.pair_plan(list(by_name))
    sample = config.kernel_config(opts, plan, [by_name[p] for p in pairs[0]])
    lines = [
        f"{len(pairs)} pair runs (half-splits first from {iso.HALVES_FROM} nodes), each:",
        *describe(sample),
    ]
    code = confirm(args, out, lines, "isolation")
    if code is not None:
        return code
    code = preflight(args, out, nodes, advisory=False, plan=plan)
    if code is not None:
        return code

    def run_group(group: Any) -> Any:
        members = [by_name[n] for n in group]
        cfg = config.kernel_config(opts, plan, members)
        cfg.run_dir = f"{cfg.run_dir}/{'+'.join(group)}"
        report = run_to_end(KernelTestRun(cfg))
        return iso.from_report(report, list(group), cfg.gpus)

    try:
        results, outliers = iso.isolate(
            list(by_name),
            run_group,
            on_result=lambda r: out.print(
                f"{'+'.join(r.nodes)}: {'pass' if r.ok else r.summary}", markup=False
            ),
            expect_efa=args.expect_efa is not False and args.backend != "gloo",
        )
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP
        interrupted_note(out, exc, "the running pair was stopped")
        return exitcodes.INTERRUPTED
    if out.json:
        print(json.dumps(iso.to_json(results, outliers), indent=2))
    else:
        for o in outliers:
            out.print(f"[red]{o.code}[/red] {o.node}: {o.reason}")
            for e in o.evidence[:4]:
                out.print(f"    {e}", markup=False)
        if not outliers:
            out.print(
                "no outlier node"
                + ("" if all(r.ok for r in results) else " (failures are not pinned on one node)")
            )
    return exitcodes.FINDINGS if outliers or not all(r.ok for r in results) else exitcodes.OK


def _print_ranks(out: Out, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    from rich.table import Table

    t = Table(title="ranks")
    for col in (
        "rank",
        "host",
        "numerics",
        "network",
        "peers via",
        "tokens",
        "dispatch GB/s",
        "combine GB/s",
        "EP/a2a",
    ):
        t.add_column(col)
    for r in rows:
        t.add_row(
            str(r["rank"]),
            str(r["host"] or "?"),
            _numerics(r["numerics"]),
            str(r["network"] or "-"),
            ", ".join(r["peers_via"]) or "-",
            str(r["num_tokens"] or "-"),
            _f(r["dispatch_gbps"]),
            _f(r["combine_gbps"]),
            _f(r["overhead_ratio"]),
        )
    out.print(t)


def _numerics(v: str) -> str:
    return {"pass": "[green]pass[/green]", "fail": "[bold red]fail[/bold red]"}.get(v, v)


def _f(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else "-"


def _detached(out: Out, group: Any, rdir: str) -> int:
    from epdoctor import exitcodes

    for p in group.procs:
        out.print(
            f"detached: {p.name} pid {p.pid} (process group {p.pid}) log "
            f"{p.node.name}:{p.spec.log_path}",
            markup=False,
            soft_wrap=True,
        )
    out.print(f"logs under {rdir}", markup=False, soft_wrap=True)
    out.print("still running (--detach). Stop it later with:", markup=False)
    for p in group.procs:
        out.print(f"  {p.stop_command()}", markup=False, soft_wrap=True)
    return exitcodes.OK


# --------------------------------------------------------------------------- serve
def make_serve_run(args: argparse.Namespace, out: Out, cfg: Any, board: Any) -> Any:
    from epdoctor.launch.serve import ServeRun
    from epdoctor.logwatch import log_watch_factory

    return ServeRun(
        cfg,
        on_line=line_sink(args, out, board),
        watch_factory=log_watch_factory(getattr(args, "expect_efa", None)),
        on_finding=finding_sink(args, out, board),
    )


def start_serving(args: argparse.Namespace, out: Out, srun: Any, board: Any) -> Any:
    """Start and wait for readiness; returns the gate. Ctrl-C propagates (caller stops srun)."""
    srun.start()
    why: list[str] = []
    plain = not out.json and (args.no_live or not out.console.is_terminal)
    last = [0.0]

    def step() -> bool:
        r = srun.step()
        p = srun.waiter.last
        text = (
            f"{srun.waiter.elapsed:.0f}s of {srun.cfg.budget_s:.0f}s: "
            f"{p.detail if p else 'starting'}"
        )
        board.set_status("ready", "waiting", text)
        if plain and r is None and srun.waiter.elapsed - last[0] >= 30:
            last[0] = srun.waiter.elapsed
            out.print(f"waiting for readiness: {text}", markup=False)
        if r is None:
            return True
        why.append(r)
        return False

    live_loop(args, out, board, step, poll_s=0.3)
    return srun.gate(why[0] if why else "budget")


def run_serve(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes
    from epdoctor.launch.serve import describe
    from epdoctor.model import Status
    from epdoctor.reports.launch_panes import PaneBoard

    out = Out(args)
    plan = config.load_plan(args.plan)
    nodes = nodes_from_args(args, plan)
    cfg = config.serve_config(_opts(args), plan, nodes)
    code = confirm(args, out, describe(cfg), f"serving ({cfg.engine})")
    if code is not None:
        return code
    code = preflight(args, out, nodes, advisory=False, engine=cfg.engine, plan=plan)
    if code is not None:
        return code
    board = PaneBoard()
    srun = make_serve_run(args, out, cfg, board)

    def body(keep: Callable[[], None]) -> int:
        gate = start_serving(args, out, srun, board)
        print_gates(out, [gate])
        if gate.status is not Status.PASS:
            stopped_note(out, srun.stop())
            _serve_json(out, srun, gate)
            return exitcodes.FINDINGS
        if args.detach:  # after ready: the one way out that leaves the engine running
            keep()
            _serve_json(out, srun, gate)
            return _detached(out, srun.group, cfg.run_dir)
        out.print("ready: following the logs; Ctrl-C (or SIGTERM, SIGHUP) stops the engine")

        def follow() -> bool:
            srun.follow()
            return bool(srun.group.running())

        live_loop(args, out, board, follow, poll_s=0.5)
        out.print("[red]the engine exited[/red]")
        stopped_note(out, srun.stop())  # what is left of its process groups
        return exitcodes.FINDINGS

    return stopping(out, srun.stop, body)


def _serve_json(out: Out, srun: Any, gate: Any) -> None:
    if out.json:
        print(json.dumps({"gate": gate.to_json(), **srun.summary()}, indent=2))


# --------------------------------------------------------------------------- smoke
def run_smoke(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes
    from epdoctor.launch import smoke
    from epdoctor.launch.counters import gate_since, snapshots

    out = Out(args)
    plan = config.load_plan(args.plan)
    model = (
        args.model
        or smoke.first_model(args.url)
        or str((plan.get("input") or {}).get("model") or "")
    )
    if not model:
        out.print(f"[red]no model: {args.url}/v1/models answered nothing; pass --model[/red]")
        return exitcodes.ERROR
    body = json.dumps(smoke.payload(model, args.max_tokens))
    code = confirm(args, out, [f"POST {args.url}/v1/chat/completions {body}"], "the smoke request")
    if code is not None:
        return code
    nodes = nodes_from_args(args, plan)
    python = args.python or "python3"
    before = snapshots(nodes, python)
    res = smoke.smoke(args.url, model, args.max_tokens)
    cgate, _ = gate_since(before, nodes, python)
    if out.json:
        print(json.dumps({**res.to_json(), "counters": cgate.to_json()}, indent=2))
    else:
        out.print(f"reply ({res.latency_s:.2f}s): {res.reply!r}", markup=False)
        print_gates(out, [res.gate, cgate])
    return exit_for(res.gate.status)


# --------------------------------------------------------------------------- bench
def run_bench(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes
    from epdoctor.launch import bench, smoke
    from epdoctor.model import EpdoctorError, Status
    from epdoctor.reports.launch_panes import PaneBoard

    out = Out(args)
    plan = config.load_plan(args.plan)
    levels = [int(c) for c in args.concurrency.split(",") if c.strip()]
    if not levels or any(c < 1 for c in levels):
        raise EpdoctorError(f"--concurrency: positive integers expected, got {args.concurrency!r}")
    nodes = nodes_from_args(args, plan)
    arms: list[tuple[str, str | None]] = [("current", None)]
    lines = [
        f"warm-up {args.warmup}, then per level {levels}: "
        f"{args.requests_per_level or '5 x level'} requests to {args.url} "
        f"(max_tokens {args.max_tokens}, ignore_eos, unique prefixes)"
    ]
    cfgs: dict[str, Any] = {}
    if args.ab:
        base_cfg = config.serve_config(_opts(args).serve(), plan, nodes)
        cfgs["current"] = base_cfg
        alt = config.serve_config(
            _opts(args).serve(), plan, nodes, bench.with_backend(base_cfg.leader_cmd, args.ab)
        )
        cfgs[args.ab] = alt
        arms = [("current", base_cfg.leader_cmd), (args.ab, alt.leader_cmd)]
        lines = [f"serve: bash -c {c!r}, then the sweep, then stop" for _, c in arms] + lines
    code = confirm(args, out, lines, "the benchmark")
    if code is not None:
        return code
    results: list[bench.BenchResult] = []
    board = PaneBoard()
    current: list[Any] = []  # the serve run in progress, for Ctrl-C
    try:
        for label, _cmd in arms:
            srun = None
            if label in cfgs:
                srun = make_serve_run(args, out, cfgs[label], board)
                current[:] = [srun]
                gate = start_serving(args, out, srun, board)
                if gate.status is not Status.PASS:
                    stopped_note(out, srun.stop())
                    print_gates(out, [gate])
                    return exitcodes.FINDINGS
            try:
                model = args.model or smoke.first_model(args.url)
                if not model:
                    out.print(f"[red]no model at {args.url}/v1/models; pass --model[/red]")
                    return exitcodes.ERROR
                send = bench.http_sender(args.url, model, args.max_tokens, args.request_timeout)
                res = bench.run_bench(
                    send,
                    levels,
                    args.max_tokens,
                    args.requests_per_level,
                    args.warmup,
                    label=label,
                    model=model,
                    on_level=lambda lv: out.print(
                        f"[dim]c={lv.concurrency}: {lv.ok}/{lv.n} ok[/dim]"
                    ),
                )
                results.append(res)
            finally:
                if srun is not None:
                    stopped_note(out, srun.stop())
                    current.clear()
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP
        for srun in current:
            stopped_note(out, srun.stop())
        interrupted_note(
            out,
            exc,
            "everything epdoctor started is stopped"
            if cfgs
            else "nothing of epdoctor's was running",
        )
        return exitcodes.INTERRUPTED
    finally:
        for srun in current:  # an error while one arm was starting: it is stopped too
            srun.stop()
    doc = {"results": [r.to_json() for r in results], "baseline": args.ab}
    if args.output:
        os.makedirs(args.output, exist_ok=True)
        with open(os.path.join(args.output, "bench.json"), "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)
        with open(os.path.join(args.output, "bench.csv"), "w", encoding="utf-8") as f:
            f.write(bench.to_csv(results))
    if out.json:
        print(json.dumps(doc, indent=2))
    else:
        _print_bench(out, results)
        print_gates(out, [r.gate() for r in results])
        if not args.ab:
            out.print(
                "[dim]M702: no baseline backend measured; --ab allgather_reducescatter runs "
                "one the same way[/dim]"
            )
    return exitcodes.OK if all(r.all_ok for r in results) else exitcodes.FINDINGS


def _print_bench(out: Out, results: list[Any]) -> None:
    from rich.table import Table

    t = Table(title="bench (percentiles over successes only)")
    for col in ("arm", "conc", "ok/n", "tok/s", "p50 s", "p90 s", "p99 s", "failures"):
        t.add_column(col)
    for r in results:
        for lv in r.levels:
            s = lv.stats()
            t.add_row(
                r.label,
                str(s["concurrency"]),
                f"{s['ok']}/{s['n']}",
                _f(s["tok_s"]),
                _f(s["p50_s"]),
                _f(s["p90_s"]),
                _f(s["p99_s"]),
                ", ".join(f"{k} x{v}" for k, v in s["failures"].items()) or "-",
            )
    out.print(t)
