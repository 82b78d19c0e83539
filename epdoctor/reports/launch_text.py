"""`epdoctor run` for a person: the launch session's events and results, drawn with rich.

``LaunchView`` is a renderer of epdoctor.launch.session's events. Lines go to the live
panes (reports.launch_panes) and, outside a terminal or with ``--no-live``, only the
highlighted ones are printed; each step's state is a status row of the board; what the log
analyzer finds becomes a note the moment it is found. With ``--json`` the text goes to
stderr, so stdout holds nothing but the JSON. Printing never stops a cleanup: after SIGHUP
the terminal may be gone, and a line that cannot be written is dropped.
"""

from __future__ import annotations

import contextlib
import json
import time
from contextlib import AbstractContextManager
from typing import Any

from epdoctor.reports.launch_panes import PaneBoard, style_of

WAIT_SAID_S = 30.0  # outside a terminal, how often the readiness wait says where it is
VERDICT_STYLE = {"pass": "green", "fail": "bold red", "warn": "yellow", "unknown": "magenta",
                 "skip": "dim"}  # fmt: skip


class LaunchView:
    def __init__(self, as_json: bool = False, live: bool = True) -> None:
        from rich.console import Console

        self.json = as_json
        self.console = Console(stderr=as_json, highlight=False)
        self.gone = False
        terminal = self.console.is_terminal
        self.panes = not as_json and live and terminal  # the live board
        self.plain = not as_json and not self.panes  # lines worth reading are printed
        self.board = PaneBoard()
        self.show_readiness = False  # print a readiness gate the moment it is decided (serve)
        self._waiting: float | None = None  # when the readiness wait started
        self._said = 0.0

    def print(self, *a: Any, **kw: Any) -> None:
        # after SIGHUP the terminal may be gone: a line that cannot be written must not stop
        # the cleanup that follows it
        # every string passes the one terminal sanitizer (control sequences dropped: a command
        # in plan.json cannot erase `curl ... | sh` from the screen the operator approves);
        # foreign values inside markup strings are escaped by the caller (safeio.markup)
        from epdoctor.safeio import plain

        if self.gone:
            return
        a = tuple(plain(x) if isinstance(x, str) else x for x in a)
        try:
            self.console.print(*a, **kw)
        except OSError:
            self.gone = True

    # --- the session's events ----------------------------------------------------------
    def events(self) -> dict[str, Any]:
        """The keyword arguments that make a Session report here."""
        return {
            "on_line": self.line,
            "on_gate": self.gate,
            "on_finding": self.finding,
            "on_verdict": self.verdict,
            "on_stopped": self.stopped,
            "on_note": self.note,
            "live": self.live,
        }

    def line(self, pane: str, line: str) -> None:
        if pane == "smoke":  # the reply
            if not self.json:
                self.print(line, markup=False)
        elif pane == "bench":  # a level done
            self.print(f"[dim]{line}[/dim]")
        elif pane == "isolate":  # a pair run done
            self.print(line, markup=False)
        else:
            self.board.add(pane, line)
            if self.plain and style_of(line):
                self.print(f"[{pane}] {line[:300]}", markup=False, highlight=False)

    def gate(self, name: str, state: str, summary: str, code: str | None = None) -> None:
        self.board.set_status(name, state, summary)
        if name == "ready" and state == "waiting":
            now = time.monotonic()
            if self._waiting is None:
                self._waiting, self._said = now, 0.0
            if self.plain and now - self._waiting - self._said >= WAIT_SAID_S:
                self._said = now - self._waiting
                self.print(f"waiting for readiness: {summary}", markup=False)
        elif name == "ready":
            self._waiting = None
        elif name == "preflight" and state != "running":
            colour = {"pass": "green", "warn": "yellow"}.get(state, "red")
            self.print(f"[{colour}]preflight: {_esc(summary)}[/{colour}]")
        elif name == "preflight":
            self.print(f"[dim]preflight: {_esc(summary)}...[/dim]")
        elif (name, state) == ("following", "running"):
            self.print("ready: following the logs; Ctrl-C (or SIGTERM, SIGHUP) stops the engine")
        elif (name, state) == ("following", "fail"):
            self.print("[red]the engine exited[/red]")

    def finding(self, source: str, f: Any) -> None:
        """A trap the log analyzer found, the moment it shows up: a note on the board."""
        text = f"{f.status.value.upper()} {f.code} {f.title} ({source})"
        self.board.note(text)
        if self.plain:
            self.print(text, markup=False)

    def verdict(self, gate: Any) -> None:
        if self.show_readiness:
            self.gates([gate])

    def stopped(self, lines: list[str]) -> None:
        for line in lines:
            self.print(f"[yellow]stopped:[/yellow] {line}")

    def note(self, text: str) -> None:
        self.print(f"[red]{text}[/red]")

    def live(self) -> AbstractContextManager[Any]:
        """The board, redrawn 4 times a second while the session waits (in a terminal)."""
        if not self.panes:
            return contextlib.nullcontext()
        from rich.live import Live

        return Live(self.board, console=self.console, refresh_per_second=4, transient=False)

    # --- results ------------------------------------------------------------------------
    def gates(self, gates: list[Any]) -> None:
        from rich.table import Table

        t = Table(title="gates", show_lines=False)
        for col in ("gate", "verdict", "summary", "code"):
            t.add_column(col)
        for g in gates:
            t.add_row(g.name, verdict_text(g.status.value), g.summary, g.code or "")
            for e in g.evidence[:6]:
                t.add_row("", "", f"[dim]{_esc(e)}[/dim]", "")
        self.print(t)

    def interrupted(self, signal: str, what: str = "") -> None:
        """What ended the run (Ctrl-C, SIGTERM, SIGHUP) and that what it started is stopped."""
        self.print(f"interrupted ({signal}): {what or 'everything epdoctor started is stopped'}")

    def detached(self, procs: list[Any], run_dir: str) -> None:
        for p in procs:
            self.print(
                f"detached: {p.name} pid {p.pid} (process group {p.pid}) log "
                f"{p.node.name}:{p.spec.log_path}",
                markup=False,
                soft_wrap=True,
            )
        self.print(f"logs under {run_dir}", markup=False, soft_wrap=True)
        self.print("still running (--detach). Stop it later with:", markup=False)
        for p in procs:
            self.print(f"  {p.stop_command()}", markup=False, soft_wrap=True)

    def kernel_report(self, report: Any, failed_early: bool) -> None:
        if failed_early:
            self.print("[red]a node failed: the others were stopped[/red]")
        self.stopped(report.stopped)
        if self.json:
            print(json.dumps(report.to_json(), indent=2))
            return
        self.ranks(report.per_rank)
        self.gates(report.gates)
        for name, path in report.logs.items():
            self.print(f"[dim]log {name}: {path}[/dim]")
        start = next((g for g in report.gates if g.name == "start"), None)
        if start is not None:  # why it never ran: the finding, said last where it is read
            self.print(f"[bold red]cause:[/bold red] {_esc(start.summary)} ({start.code})")
        self.print(f"kernel test: {verdict_text(report.status.value)}")

    def isolation(self, results: list[Any], outliers: list[Any]) -> None:
        for o in outliers:
            self.print(f"[red]{o.code}[/red] {o.node}: {o.reason}")
            for e in o.evidence[:4]:
                self.print(f"    {e}", markup=False)
        if not outliers:
            self.print(
                "no outlier node"
                + ("" if all(r.ok for r in results) else " (failures are not pinned on one node)")
            )

    def ranks(self, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        from rich.table import Table

        t = Table(title="ranks")
        for col in ("rank", "host", "numerics", "network", "peers via", "tokens",
                    "dispatch GB/s", "combine GB/s", "EP/a2a"):  # fmt: skip
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
        self.print(t)

    def bench(self, results: list[Any]) -> None:
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
        self.print(t)


def verdict_text(v: str) -> str:
    style = VERDICT_STYLE.get(v, "")
    label = "unverifiable" if v == "unknown" else v
    return f"[{style}]{label}[/{style}]" if style else label


def _numerics(v: str) -> str:
    return {"pass": "[green]pass[/green]", "fail": "[bold red]fail[/bold red]"}.get(v, v)


def _f(x: Any) -> str:
    return f"{x:.2f}" if isinstance(x, (int, float)) else "-"


def _esc(s: str) -> str:
    from rich.markup import escape

    return escape(s)
