"""One trap, explained; its read-only confirmation commands run only after a yes.

Only the trap's fix.safe commands (read-only by the catalogue's contract) can
be run from here, on this host, each with a timeout; fix.change commands are
shown for copying and never run.
"""

from __future__ import annotations

import subprocess
from typing import Any

from epdoctor.screens.keyhelp import KeyHelp
from epdoctor.screens.messages import SafeOutput
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Header, Log, Markdown, Static

from epdoctor import knowledge
from epdoctor.knowledge import Trap
from epdoctor.knowledge.sections import trap_sections
from epdoctor.reports.explain import sections_markdown

SAFE_TIMEOUT_S = 15.0


# The TUI names the key that runs the read-only commands.
TITLES = {
    "safe": "Safe to run (read-only; `r` runs them after you confirm)",
    "change": "Changes a node or an image (copy them; epdoctor never runs these)",
}


def trap_markdown(t: Trap, finding: Any | None = None) -> str:
    """The trap's catalogue text as Markdown (the sections `epdoctor explain` prints)."""
    meta = f"*layer {t.layer} · severity {t.default_status.value}*"
    out = [f"## {t.code} · {t.title}", "", meta, ""]
    if finding is not None:
        where = f" on {finding.target}" if getattr(finding, "target", "") else ""
        out += [f"**Seen{where}: {finding.status.value.upper()}** {finding.title}", ""]
        out += [f"    {e}" for e in finding.evidence[:20]]
        out.append("")
    out += sections_markdown(trap_sections(t, detectors=False), TITLES)
    return "\n".join(out)


class ConfirmScreen(ModalScreen[bool]):
    """Shows the exact commands; answers True only on an explicit yes."""

    BINDINGS = [
        Binding("y", "answer(True)", "Yes, run them"),
        Binding("n,escape,q", "answer(False)", "No"),
    ]

    def __init__(self, title: str, commands: list[str], note: str = "") -> None:
        from epdoctor.safeio import plain

        super().__init__()
        # what the operator approves comes from plan.json and flags: shown as text (no markup,
        # no control sequences that could hide part of a command from this very screen)
        self.title_text = plain(title)
        self.commands = [plain(c) for c in commands]
        self.note = plain(note)

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm"):
            yield Static(self.title_text, id="confirm-title", markup=False)
            with VerticalScroll(id="confirm-commands"):
                for c in self.commands:
                    yield Static(c, classes="command", markup=False)
            if self.note:
                yield Static(self.note, id="confirm-note", markup=False)
            yield Static("y: yes, start them · n / Esc: no, nothing starts", id="confirm-keys")
            yield Button("Yes (y)", id="yes", variant="warning")
            yield Button("No (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ExplainScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,q", "app.pop_screen", "Back"),
        Binding("r", "run_safe", "Run read-only checks"),
    ]

    def __init__(self, code: str, finding: Any | None = None) -> None:
        super().__init__()
        self.trap = knowledge.get(code)
        self.finding = finding

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="explain-body"):
            yield Markdown(trap_markdown(self.trap, self.finding), id="explain-md")
        yield Log(id="safe-output", max_lines=2000, classes="hidden")
        yield KeyHelp()

    def action_run_safe(self) -> None:
        if not self.trap.fix_safe:
            self.notify(f"{self.trap.code} has no read-only commands to run")
            return
        import socket

        note = (
            f"They run on this host ({socket.gethostname()}), each with a "
            f"{SAFE_TIMEOUT_S:.0f} s timeout, not on a remote target or bundle."
        )
        self.app.push_screen(
            ConfirmScreen(
                f"Run {len(self.trap.fix_safe)} read-only command(s) of {self.trap.code}?",
                [f"$ {c}" for c in self.trap.fix_safe],
                note,
            ),
            self._confirmed,
        )

    def _confirmed(self, yes: bool | None) -> None:
        if not yes:
            self.notify("nothing was run")
            return
        log = self.query_one("#safe-output", Log)
        log.remove_class("hidden")
        log.clear()
        self._run_safe(list(self.trap.fix_safe))

    @work(thread=True, exclusive=True, group="safe")
    def _run_safe(self, commands: list[str]) -> None:
        for cmd in commands:
            try:
                p = subprocess.run(
                    ["bash", "-c", cmd],
                    capture_output=True,
                    text=True,
                    timeout=SAFE_TIMEOUT_S,
                    stdin=subprocess.DEVNULL,
                    check=False,
                )
                rc: int | None = p.returncode
                text = (p.stdout + p.stderr).rstrip()
            except subprocess.TimeoutExpired:
                rc, text = None, f"(did not finish within {SAFE_TIMEOUT_S:.0f} s: stopped)"
            except OSError as exc:
                rc, text = None, f"(cannot run: {exc})"
            self.post_message(SafeOutput(cmd, rc, text))

    def on_safe_output(self, msg: SafeOutput) -> None:
        log = self.query_one("#safe-output", Log)
        log.write_line(f"$ {msg.command}   [exit {msg.rc if msg.rc is not None else '?'}]")
        for line in (msg.output or "(no output)").splitlines()[:200]:
            log.write_line(f"  {line}")
