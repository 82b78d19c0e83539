"""Live per-rank log panes for a plain terminal (rich Live): headless-core friendly.

Panes hold the last lines of each rank/node stream with known signatures
highlighted; a status line per gate sits under them, the events of the launch
session. The board is `epdoctor run`'s; the terminal app draws the same streams in its
own widgets and colours their lines with the same ``style_of``.
"""

from __future__ import annotations

import functools
import re
from collections import deque
from dataclasses import dataclass, field

from epdoctor.checks.logs import line_network
from epdoctor.facts.logs import triage
from epdoctor.facts.logs.prefix import parse_line
from epdoctor.facts.logs.scanner import has_anchor
from epdoctor.model import Status

# A line's colour is the log analyzer's verdict on it: the network banner by the one network
# verdict (checks/logs.line_network), any other line by the one log table (facts/logs/triage:
# the catalogue's [[log]] rules and the lexicon), so a pane shows red exactly what `epdoctor
# logs` would call a failure. The kernel test's own result lines keep their colours.
_KERNEL = (
    (re.compile(r"EPDOCTOR_KERNEL_TEST .*\"numerics\": \"pass\""), "green"),
    (re.compile(r"EPDOCTOR_KERNEL_TEST .*\"numerics\": \"fail\""), "bold red"),
)
_NETWORK = {Status.PASS: "bold green", Status.FAIL: "bold yellow"}
_LEVEL = {triage.ERROR: "bold red", triage.WARNING: "bold yellow", triage.NOTE: "dim"}


@functools.lru_cache(maxsize=4096)
def style_of(line: str) -> str | None:
    """The style of one pane line, None for a plain one (most lines: no anchor, no verdict)."""
    if "EPDOCTOR_KERNEL_TEST" in line:
        for pat, style in _KERNEL:
            if pat.search(line):
                return style
    net = line_network(line)
    if net is not None:
        return _NETWORK.get(net)
    if not has_anchor(line.encode("utf-8", "replace")):
        return None
    v = triage.classify(parse_line(line))
    if v is None or not v.is_trouble:
        return None
    return _LEVEL.get(v.level)


@dataclass
class Pane:
    name: str
    lines: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    count: int = 0

    def add(self, line: str) -> None:
        self.lines.append(line)
        self.count += 1


class PaneBoard:
    """The model behind the Live view: panes by name plus status lines."""

    def __init__(self, height: int = 8, max_panes: int = 16) -> None:
        self.panes: dict[str, Pane] = {}
        self.status: dict[str, tuple[str, str]] = {}  # gate -> (state, text)
        self.height = height
        self.max_panes = max_panes
        self.notes: deque[str] = deque(maxlen=6)

    def add(self, pane: str, line: str) -> None:
        if pane not in self.panes and len(self.panes) >= self.max_panes:
            pane = "other"
        self.panes.setdefault(pane, Pane(pane)).add(line)

    def set_status(self, gate: str, state: str, text: str) -> None:
        self.status[gate] = (state, text)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def __rich__(self):  # rendered by rich.live.Live
        from rich.columns import Columns
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        panels = []
        for pane in sorted(self.panes.values(), key=lambda p: _order(p.name)):
            body = Text()
            for line in list(pane.lines)[-self.height :]:
                body.append(line[:160] + "\n", style=style_of(line) or "")
            panels.append(
                Panel(
                    body,
                    title=f"{pane.name} ({pane.count} lines)",
                    width=82,
                    height=self.height + 2,
                )
            )
        status = Table.grid(padding=(0, 1))
        for gate, (state, text) in self.status.items():
            status.add_row(Text(f"{state:>8}", style=_STATE_STYLE.get(state, "")), gate, text)
        notes = Text("\n".join(self.notes), style="dim")
        return Group(Columns(panels), status, notes)


_STATE_STYLE = {
    "pass": "green",
    "fail": "bold red",
    "warn": "yellow",
    "unknown": "magenta",
    "skip": "dim",
    "running": "cyan",
    "waiting": "dim",
}


def _order(name: str) -> tuple[int, str]:
    m = re.match(r"^(rank|node)(\d+)", name)
    return (
        (int(m.group(2)) + (0 if m.group(1) == "rank" else 10_000), name) if m else (99_999, name)
    )
