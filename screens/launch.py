"""Launch: kernel test, serve, smoke and bench, with a grid of live log panes.

What runs and how it is gated is epdoctor.launch, configured exactly as
`epdoctor run WHAT FLAGS` configures it (the flags field is parsed by the same
parser, and the configs are built by the same functions), so the commands in
the confirmation dialog are the commands `epdoctor run` would show. Nothing
starts before that dialog's yes. `s` or Ctrl-C stops everything started.

Lines come from the launch's worker thread into one buffer; a timer moves them
into the panes a few times a second (one refresh per pane per flush), and each
pane keeps a capped window, so a flood of output neither blocks keys nor grows
memory.
"""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import threading
import time
from collections import deque
from typing import Any

from epdoctor.screens.explain import ConfirmScreen
from epdoctor.screens.keyhelp import KeyHelp
from epdoctor.screens.logpane import LogPane
from epdoctor.screens.messages import GateUpdate, LaunchDone, LaunchFinding, LaunchStarted
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Select

WHATS = ("kernel-test", "serve", "smoke", "bench")
FLUSH_S = 0.25  # panes redraw 4 times a second, as `epdoctor run` does
STATE_STYLE = {
    "pass": "bold green",
    "fail": "bold red",
    "warn": "bold yellow",
    "unknown": "bold magenta",
    "skip": "dim",
    "running": "bold cyan",
    "waiting": "dim",
    "interrupted": "bold yellow",
    "error": "bold red",
}


EVIDENCE_STYLE = {"fail": "bold reverse red", "warn": "bold reverse yellow"}
_EVIDENCE = re.compile(r"^\S+:\d+: (?P<text>.+)$")


def evidence_text(evidence: str) -> str:
    """The log line inside a log finding's evidence (`source:line: text`), else the whole."""
    m = _EVIDENCE.match(evidence)
    return (m.group("text") if m else evidence).strip()


def parse_run_flags(what: str, flags: str) -> Any:
    """`epdoctor run WHAT FLAGS`, parsed by the command's own parser (errors as ValueError)."""
    from epdoctor.cli import build_parser

    err = io.StringIO()
    try:
        argv = ["run", what, *shlex.split(flags)]
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            return build_parser().parse_args(argv)
    except SystemExit as exc:
        lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
        raise ValueError(lines[-1] if lines else f"bad flags for {what}") from exc
    except ValueError as exc:
        raise ValueError(f"cannot read the flags: {exc}") from exc


def styler() -> Any:
    """The launch layer's signature highlighter (known banners, warnings, failures)."""
    from epdoctor.launch.panes import style_of

    return style_of


class Prepared:
    """A launch ready to confirm: what, the parsed args, its config and the exact commands."""

    def __init__(self, what: str, args: Any, plan: dict[str, Any], cfg: Any, lines: list[str]):
        self.what, self.args, self.plan, self.cfg, self.lines = what, args, plan, cfg, lines


def prepare(what: str, flags: str, plan: Any | None) -> Prepared:
    """Build the config `epdoctor run` would build, and the commands it would show."""
    from epdoctor.commands import run as runcmd

    args = parse_run_flags(what, flags)
    doc = runcmd.load_plan(args.plan) if args.plan else (plan.to_json() if plan else {})
    nodes = runcmd.nodes_from_args(args)
    if what == "kernel-test":
        from epdoctor.launch.kernel_test import describe

        cfg = runcmd.kernel_config(args, doc, nodes)
        return Prepared(what, args, doc, cfg, describe(cfg))
    if what == "serve":
        from epdoctor.launch.serve import describe as sdescribe

        cfg = runcmd.serve_config(args, doc, nodes)
        return Prepared(what, args, doc, cfg, sdescribe(cfg))
    model = args.model or "the first model of /v1/models"
    if what == "smoke":
        line = f"POST {args.url}/v1/chat/completions (model {model}, max_tokens {args.max_tokens})"
        return Prepared(what, args, doc, None, [line])
    levels = args.concurrency
    line = (
        f"warm-up {args.warmup}, then per level {levels}: "
        f"{args.requests_per_level or '5 x level'} requests to {args.url} (model {model}, "
        f"max_tokens {args.max_tokens}, ignore_eos, unique prefixes)"
    )
    return Prepared(what, args, doc, None, [line])


class LaunchScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+l", "launch", "Launch…"),
        Binding("ctrl+c", "stop", "Stop all", priority=True),
        Binding("s", "stop", "Stop all", show=False),
        Binding("slash", "search", "Search panes"),
        Binding("n", "next_match", "Next match", show=False),
        Binding("e", "explain", "Explain"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.buffer: deque[tuple[str, tuple[str, str | None]]] = deque()
        self.panes: dict[str, LogPane] = {}
        self.gates: dict[str, tuple[str, str, str | None]] = {}
        self.findings: list[tuple[str, Any]] = []
        self.stopping = threading.Event()
        self.running = False
        self._styler = styler()

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="launch-controls"):
            yield Select(
                [(w, w) for w in WHATS], value="kernel-test", allow_blank=False, id="launch-what"
            )
            yield Input(
                placeholder="flags of `epdoctor run WHAT`, e.g. --gpus 2 --backend gloo",
                id="launch-flags",
            )
        yield DataTable(id="launch-status", cursor_type="row")
        yield Input(
            placeholder="search every pane (Enter; n: next match)",
            id="pane-search",
            classes="hidden",
        )
        with VerticalScroll(id="pane-scroll"):
            yield Grid(id="pane-grid")
        yield KeyHelp()

    def on_mount(self) -> None:
        self.query_one("#launch-status", DataTable).add_columns("step", "state", "summary", "code")
        self._status_rows()
        self.set_interval(FLUSH_S, self.flush)

    def on_resize(self) -> None:
        cols = max(1, min(4, self.size.width // 40))
        self.query_one("#pane-grid", Grid).styles.grid_size_columns = cols

    # --- launching ----------------------------------------------------------
    def action_launch(self) -> None:
        if self.running:
            self.notify("a launch is running: stop it first (s)", severity="warning")
            return
        what = str(self.query_one("#launch-what", Select).value)
        flags = self.query_one("#launch-flags", Input).value
        try:
            prep = prepare(what, flags, self.app.shared.plan)  # type: ignore[attr-defined]
        except Exception as exc:  # bad flags, no command in the plan: said, nothing starts
            self.notify(str(exc), severity="error", title=f"cannot prepare {what}")
            return
        self.app.push_screen(
            ConfirmScreen(
                f"epdoctor will run {len(prep.lines)} command(s) for {what}:",
                prep.lines,
                "Nothing starts unless you answer yes. s or Ctrl-C stops everything started.",
            ),
            lambda yes: self._confirmed(prep, yes),
        )

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "launch-flags":
            self.action_launch()
        elif event.input.id == "pane-search":
            term = event.value
            hits = sum(p.set_search(term) for p in self.panes.values())
            self.notify(f"{hits} line(s) contain {term!r}" if term else "search cleared")
            for p in self.panes.values():
                if p.next_match():
                    p.focus()
                    break
            event.input.add_class("hidden")

    def _confirmed(self, prep: Prepared, yes: bool | None) -> None:
        if not yes:
            self.notify("nothing started")
            return
        self._reset()
        self.running = True
        self.stopping.clear()
        self.post_message(LaunchStarted(prep.what, prep.lines))
        self._run(prep)

    def _reset(self) -> None:
        self.gates.clear()
        self.findings.clear()
        self.buffer.clear()
        for p in self.panes.values():
            p.remove()
        self.panes.clear()
        self._status_rows()

    def _sink(self, pane: str, line: str) -> None:
        # Runs on the launch's worker thread: the signature lookup is done here, not in the UI.
        line = line.expandtabs(4)
        self.buffer.append((pane, (line, self._styler(line))))  # deque.append is atomic

    def _finding(self, source: str, f: Any) -> None:
        self.post_message(LaunchFinding(source, f))

    @work(thread=True, exclusive=True, group="launch")
    def _run(self, prep: Prepared) -> None:
        try:
            runner = {
                "kernel-test": self._kernel_test,
                "serve": self._serve,
                "smoke": self._smoke,
                "bench": self._bench,
            }[prep.what]
            runner(prep)
        except Exception as exc:  # the launch could not start or be followed
            stopped = self.app.stop_all()  # type: ignore[attr-defined]
            self.post_message(
                LaunchDone(prep.what, "error", [], stopped, f"{type(exc).__name__}: {exc}")
            )
        finally:
            self.app.shared.launches.clear()  # type: ignore[attr-defined]

    def _gate(self, name: str, state: str, summary: str, code: str | None = None) -> None:
        self.post_message(GateUpdate(name, state, summary, code))

    def _kernel_test(self, prep: Prepared) -> None:
        from epdoctor.commands.run import log_watch_factory
        from epdoctor.launch.kernel_test import KernelTestRun

        cfg = prep.cfg
        krun = KernelTestRun(cfg, self._sink, log_watch_factory(), self._finding)
        self.app.shared.launches.append(krun)  # type: ignore[attr-defined]
        self._gate("kernel test", "running", f"{cfg.world} rank(s) on {len(cfg.nodes)} node(s)")
        t0 = time.monotonic()
        krun.start()
        while not self.stopping.is_set() and krun.step():
            self._gate("kernel test", "running", f"{time.monotonic() - t0:.0f}s")
            time.sleep(0.2)
        if self.stopping.is_set():
            self.post_message(LaunchDone(prep.what, "interrupted", [], krun.stop()))
            return
        report = krun.finish()
        self.post_message(LaunchDone(prep.what, report.status.value, report.gates, report.stopped))

    def _serve(self, prep: Prepared) -> None:
        from epdoctor.commands.run import log_watch_factory
        from epdoctor.launch.serve import ServeRun
        from epdoctor.model import Status

        srun = ServeRun(prep.cfg, self._sink, log_watch_factory(), self._finding)
        self.app.shared.launches.append(srun)  # type: ignore[attr-defined]
        srun.start()
        why = None
        while not self.stopping.is_set() and why is None:
            why = srun.step()
            p = srun.waiter.last
            self._gate(
                "ready",
                "waiting",
                f"{srun.waiter.elapsed:.0f}s of {srun.cfg.budget_s:.0f}s: "
                f"{p.detail if p else 'starting'}",
            )
            time.sleep(0.3)
        if why is None:
            self.post_message(LaunchDone(prep.what, "interrupted", [], srun.stop()))
            return
        gate = srun.gate(why)
        self._gate(gate.name, gate.status.value, gate.summary, gate.code)
        if gate.status is not Status.PASS:
            self.post_message(LaunchDone(prep.what, gate.status.value, [gate], srun.stop()))
            return
        self._gate("following", "running", "ready: following the logs; s stops the engine")
        while not self.stopping.is_set() and srun.group.running():
            srun.follow()
            time.sleep(0.3)
        state = "interrupted" if self.stopping.is_set() else "fail"
        if state == "fail":
            self._gate("following", "fail", "the engine exited", "E702")
        self.post_message(LaunchDone(prep.what, state, [gate], srun.stop()))

    def _smoke(self, prep: Prepared) -> None:
        from epdoctor.launch import smoke

        a = prep.args
        model = (
            a.model
            or smoke.first_model(a.url)
            or str((prep.plan.get("input") or {}).get("model") or "")
        )
        if not model:
            self.post_message(
                LaunchDone("smoke", "error", [], [], f"no model at {a.url}/v1/models")
            )
            return
        self._gate("smoke", "running", f"POST {a.url}/v1/chat/completions ({model})")
        res = smoke.smoke(a.url, model, a.max_tokens)
        self._sink("smoke", f"reply ({res.latency_s:.2f}s): {res.reply!r}")
        self.post_message(LaunchDone("smoke", res.gate.status.value, [res.gate], []))

    def _bench(self, prep: Prepared) -> None:
        from epdoctor.launch import bench, smoke

        a = prep.args
        model = a.model or smoke.first_model(a.url)
        if not model:
            self.post_message(
                LaunchDone("bench", "error", [], [], f"no model at {a.url}/v1/models")
            )
            return
        levels = [int(c) for c in a.concurrency.split(",") if c.strip()]
        send = bench.http_sender(a.url, model, a.max_tokens, a.request_timeout)
        self._gate("bench", "running", f"levels {levels}")
        res = bench.run_bench(
            send,
            levels,
            a.max_tokens,
            a.requests_per_level,
            a.warmup,
            label="current",
            model=model,
            on_level=lambda lv: self._sink("bench", f"c={lv.concurrency}: {lv.ok}/{lv.n} ok"),
        )
        gate = res.gate()
        self.post_message(LaunchDone("bench", gate.status.value, [gate], []))

    # --- stopping -----------------------------------------------------------
    def action_stop(self) -> None:
        if not self.running:
            self.notify("nothing is running")
            return
        self.stopping.set()
        self._gate("stop", "running", "stopping everything started…")
        self._stop_all()

    @work(thread=True, group="stop")
    def _stop_all(self) -> None:
        lines = self.app.stop_all()  # type: ignore[attr-defined]
        for line in lines:
            self._sink("epdoctor", f"stopped: {line}")

    # --- messages -----------------------------------------------------------
    def on_launch_started(self, msg: LaunchStarted) -> None:
        for line in msg.commands:
            self._sink("epdoctor", f"started: {line}")

    def on_gate_update(self, msg: GateUpdate) -> None:
        self.gates[msg.gate] = (msg.state, msg.summary, msg.code)
        self._status_rows()

    def on_launch_finding(self, msg: LaunchFinding) -> None:
        self.findings.append((msg.source, msg.finding))
        self._status_rows()
        self.flush()  # the evidence lines must be in the panes before they are marked
        style = EVIDENCE_STYLE.get(msg.finding.status.value, "reverse")
        for ev in msg.finding.evidence[:12]:
            text = evidence_text(ev)
            for pane in self.panes.values():
                pane.mark(text, style)

    def on_launch_done(self, msg: LaunchDone) -> None:
        self.running = False
        for g in msg.gates:
            self.gates[g.name] = (g.status.value, g.summary, g.code)
        if msg.error:
            self.gates["launch"] = ("error", msg.error, None)
        verdict = {"unknown": "unverifiable"}.get(msg.status, msg.status)
        self.gates[f"{msg.what} verdict"] = (msg.status, verdict, None)
        self.gates.pop("stop", None)
        for line in msg.stopped:
            self._sink("epdoctor", f"stopped: {line}")
        if msg.status == "interrupted":
            self._sink("epdoctor", "interrupted: everything epdoctor started is stopped")
        self.flush()
        self._status_rows()

    def _status_rows(self) -> None:
        table = self.query_one("#launch-status", DataTable)
        table.clear()
        if not self.gates and not self.findings:
            table.add_row("-", "idle", "choose what, give flags, Ctrl-L shows the commands", "")
            return
        for name, (state, summary, code) in self.gates.items():
            table.add_row(
                name,
                Text(state, STATE_STYLE.get(state, "")),
                summary,
                code or "",
                key=f"g:{name}:{code or ''}",
            )
        for i, (source, f) in enumerate(self.findings):
            table.add_row(
                f"log {source}",
                Text(f.status.value, STATE_STYLE.get(f.status.value, "")),
                f.title,
                f.code,
                key=f"f:{i}:{f.code}",
            )

    def flush(self) -> None:
        """Move buffered lines into their panes: one batch and one refresh per pane."""
        if not self.buffer:
            return
        batch: dict[str, list[tuple[str, str | None]]] = {}
        for _ in range(len(self.buffer)):
            pane, line = self.buffer.popleft()
            batch.setdefault(pane, []).append(line)
        grid = self.query_one("#pane-grid", Grid)
        for name, lines in batch.items():
            pane = self.panes.get(name)
            if pane is None:
                pane = self.panes[name] = LogPane(name, self._styler)
                grid.mount(pane)
            pane.add_lines(lines)

    # --- search / explain ---------------------------------------------------
    def action_search(self) -> None:
        box = self.query_one("#pane-search", Input)
        box.remove_class("hidden")
        box.focus()

    def action_next_match(self) -> None:
        focused = self.focused
        if isinstance(focused, LogPane):
            focused.next_match()

    def _code(self) -> str | None:
        table = self.query_one("#launch-status", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or ""
        code = key.rsplit(":", 1)[-1] if key.count(":") >= 2 else ""
        return code or None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.action_explain()

    def action_explain(self) -> None:
        code = self._code()
        if code:
            self.app.explain(code)  # type: ignore[attr-defined]
