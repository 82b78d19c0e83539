"""Launch: kernel test, serve, smoke and bench, with a grid of live log panes.

What runs and how it is gated is epdoctor.launch, configured exactly as
`epdoctor run WHAT TARGET-FLAGS FLAGS` configures it: the target flags are the
app's current target (the Targets screen sets them, the header names them:
this host, SSH hosts or pods), the flags field is parsed by the same flags
module (epdoctor.options) into the same LaunchRequest, and the configs are built
by the same functions (epdoctor.launch.config), so the commands in the
confirmation dialog are the commands `epdoctor run` would show. Nothing starts
before that dialog's yes. The one launch orchestrator, epdoctor.launch.session,
runs the launch on a worker thread and reports its events here; `s` or Ctrl-C
stops everything started, on every node.

Lines come from the launch's worker thread (cleaned and styled there) into one
buffer of per-pane batches; a timer takes the whole buffer at once a few times a
second and gives each pane its batch (one refresh per pane per flush), and each
pane keeps a capped window, so a flood of output neither blocks keys nor grows
memory.
"""

from __future__ import annotations

import re
import shlex
import threading
from collections import deque
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from epdoctor.screens.explain import ConfirmScreen
from epdoctor.screens.keyhelp import KeyHelp
from epdoctor.screens.logpane import MAX_LINES, LogPane, clean
from epdoctor.screens.messages import GateUpdate, LaunchDone, LaunchFinding, LaunchStarted
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Select

from epdoctor.safeio import plain

if TYPE_CHECKING:
    from epdoctor.launch.session import Launch, Session

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


def styler() -> Any:
    """The launch layer's signature highlighter (known banners, warnings, failures)."""
    from epdoctor.reports.launch_panes import style_of

    return style_of


def prepare(
    what: str, flags: str, plan: Any | None, target_argv: list[str] | None = None
) -> Launch:
    """The launch `epdoctor run` would make on the app's target: config, nodes, commands."""
    from epdoctor.launch import config
    from epdoctor.launch.nodes import open_nodes
    from epdoctor.launch.session import Launch
    from epdoctor.options import parse_run_flags, to_launch_request

    args = parse_run_flags(what, flags, target_argv or [])
    req = to_launch_request(args, plan.to_json() if plan else None)
    # The app follows what it starts until it is stopped: --detach, --isolate and --regate
    # are the command line's.
    req = replace(req, detach=False)
    if what == "kernel-test":
        req = replace(req, options=replace(req.options, isolate=False, regate=None))
    doc, o = config.plan_of(req), req.options
    if what in ("kernel-test", "serve"):  # a Kubernetes plan: epdoctor/launch/kube_launch.py
        from epdoctor.launch.kube_launch import RolloutPlan, from_request, launch_of

        rp = from_request(req, doc)
        if isinstance(rp, RolloutPlan):
            return launch_of(req, doc, rp)
    if what == "bench":
        config.bench_levels(o)  # refused before anything connects
    nodes = open_nodes(req.targets)
    try:
        if what == "smoke":  # the app's thread contacts nothing: the model is found at run time
            return config.prepare_smoke(req, doc, nodes, resolve=False)
        return config.prepare(req, doc, nodes)
    except BaseException:
        Launch(what, [], req, doc, None, nodes).close()  # the connections made for nothing
        raise


class Batch:
    """Lines for one pane since the last flush: the newest window's worth, and a count."""

    __slots__ = ("arrived", "lines")

    def __init__(self) -> None:
        self.lines: deque[tuple[str, str | None]] = deque(maxlen=MAX_LINES)
        self.arrived = 0


class LaunchScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+l", "launch", "Launch…"),
        Binding("ctrl+c", "stop", "Stop all", priority=True),
        Binding("s", "stop", "Stop all", show=False),
        Binding("slash", "search", "Search panes"),
        Binding("n", "next_match", "Next match", show=False),
        Binding("e", "explain", "Explain"),
        Binding("w", "wrap", "Wrap lines"),
    ]

    def __init__(self) -> None:
        super().__init__()
        # pane -> lines (with their signature style) not yet in the pane, at most a window's
        # worth however long the UI is away, and how many arrived; the lock is held only to
        # add one line or to swap the whole buffer out
        self.buffer: dict[str, Batch] = {}
        self._buffer_lock = threading.Lock()
        self.panes: dict[str, LogPane] = {}
        self.wrap = False  # `w`: new panes wrap too
        self.gates: dict[str, tuple[str, str, str | None]] = {}
        self.findings: list[tuple[str, Any]] = []
        self.running = False
        self.launch: Launch | None = None  # once confirmed
        self._said_stopped: set[str] = set()
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
        shared = self.app.shared  # type: ignore[attr-defined]
        try:
            # the plan given with --plan or written from the Plan screen: never its draft
            launch = prepare(what, flags, shared.launch_plan, shared.target_argv)
        except Exception as exc:  # bad flags, a target that cannot run anything: said
            why = str(exc) or type(exc).__name__
            if shared.target_argv:
                why += (
                    f"\n(the target is the app's: {shlex.join(shared.target_argv)}; F2 changes it)"
                )
            self.notify(why, severity="error", title=f"cannot prepare {what}")
            return
        self.app.push_screen(
            ConfirmScreen(
                f"epdoctor will run {len(launch.lines)} command(s) for {what} on {launch.where}:",
                launch.lines,
                "Nothing starts unless you answer yes. s or Ctrl-C stops everything started"
                + (", on every node." if launch.remote else "."),
            ),
            lambda yes: self._confirmed(launch, yes),
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

    def _confirmed(self, launch: Launch, yes: bool | None) -> None:
        if not yes:
            launch.close()
            self.notify("nothing started")
            return
        from epdoctor.launch.session import Session
        from epdoctor.logwatch import log_watch_factory

        self._reset()
        self.running = True
        self.launch = launch
        session = Session(launch, self._sink, self._gate, self._finding, log_watch_factory())
        self.app.shared.launches.append(session)  # type: ignore[attr-defined]
        self.post_message(LaunchStarted(launch.what, launch.lines))
        # out of the flags field: the keys the screen advertises (s stop, w wrap, / search)
        # act at once instead of typing letters while the engine runs
        self.query_one("#launch-status", DataTable).focus()
        self._run(session)

    def _reset(self) -> None:
        self.gates.clear()
        self.findings.clear()
        with self._buffer_lock:
            self.buffer = {}
        self._said_stopped.clear()
        for p in self.panes.values():
            p.remove()
        self.panes.clear()
        self._status_rows()

    def _sink(self, pane: str, line: str) -> None:
        # Runs on the launch's worker thread: cleaning and the signature lookup are done here,
        # not in the UI.
        line = clean(line)
        item = (line, self._styler(line))
        with self._buffer_lock:
            batch = self.buffer.get(pane)
            if batch is None:
                batch = self.buffer[pane] = Batch()
            batch.lines.append(item)
            batch.arrived += 1

    def _finding(self, source: str, f: Any) -> None:
        self.post_message(LaunchFinding(source, f))

    def _gate(self, name: str, state: str, summary: str, code: str | None = None) -> None:
        self.post_message(GateUpdate(name, state, summary, code))

    @work(thread=True, exclusive=True, group="launch")
    def _run(self, session: Session) -> None:
        try:
            out = session.run()
        finally:
            launches = self.app.shared.launches  # type: ignore[attr-defined]
            if session in launches:
                launches.remove(session)
        self.post_message(LaunchDone(out.what, out.status, out.gates, out.stopped, out.error))

    # --- stopping -----------------------------------------------------------
    def action_stop(self) -> None:
        if not self.running:
            self.notify("nothing is running")
            return
        where = self.launch.where if self.launch is not None else "this host"
        self._gate("stop", "running", f"stopping everything started on {where}…")
        self._stop_all()

    @work(thread=True, group="stop")
    def _stop_all(self) -> None:
        lines = self.app.stop_all()  # type: ignore[attr-defined]
        self.app.call_from_thread(self._say_stopped, lines)

    def _say_stopped(self, lines: list[str]) -> None:
        """Each process's stop once in the epdoctor pane (the stop key and the run both tell)."""
        for line in lines:
            if line not in self._said_stopped:
                self._said_stopped.add(line)
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
        self._say_stopped(msg.stopped)
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
                Text(plain(name)),
                Text(state, STATE_STYLE.get(state, "")),
                Text(plain(summary)),
                code or "",
                key=f"g:{name}:{code or ''}",
            )
        for i, (source, f) in enumerate(self.findings):
            table.add_row(
                Text(plain(f"log {source}")),
                Text(f.status.value, STATE_STYLE.get(f.status.value, "")),
                Text(plain(f.title)),
                f.code,
                key=f"f:{i}:{f.code}",
            )

    def flush(self) -> None:
        """Move buffered lines into their panes: one batch and one refresh per pane."""
        with self._buffer_lock:
            batches, self.buffer = self.buffer, {}
        if not batches:
            return
        grid = self.query_one("#pane-grid", Grid)
        if not grid.is_attached:  # the app is closing: nowhere to show them
            return
        for name, batch in batches.items():
            pane = self.panes.get(name)
            if pane is None:
                node = self.launch.node_of(name) if self.launch is not None else None
                pane = self.panes[name] = LogPane(
                    name, self._styler, title=node and f"{name} · {node}"
                )
                pane.wrap = self.wrap
                grid.mount(pane)
            pane.add_lines(list(batch.lines), arrived=batch.arrived)

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

    HELP_EXTRA = (
        ("↑ ↓ PgUp PgDn Home", "in a pane: scroll (it stops following)"),
        ("End", "in a pane: follow the tail again"),
        ("← →", "in a pane: scroll sideways (when lines do not wrap)"),
    )

    def action_wrap(self) -> None:
        """`w` (as in k9s's log view): every pane wraps long lines, or stops wrapping."""
        self.wrap = not self.wrap
        for pane in self.panes.values():
            pane.set_wrap(self.wrap)
        self.notify("long lines wrap" if self.wrap else "long lines scroll sideways (← →)")

    def action_explain(self) -> None:
        code = self._code()
        if code:
            self.app.explain(code)  # type: ignore[attr-defined]
