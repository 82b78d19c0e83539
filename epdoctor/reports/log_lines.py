"""`epdoctor logs -f`: the lines themselves, as stern prints them, with findings inline.

Each source (a pod, a pod's container, a file, an SSH file) gets a prefix and a colour of its
own; a line the analyzer would flag is styled by its verdict (reports.launch_panes.style_of,
the same table the launch panes use); a finding prints under the line that proved it. Colour
only on a terminal and never with NO_COLOR set (https://no-color.org). Every line is cleaned of
escape codes (safeio.plain) and redacted before it reaches the terminal.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO

from epdoctor.redact import redact_text
from epdoctor.safeio import plain

# stern's palette: one colour per source, in the order sources speak first
PALETTE = ("cyan", "green", "magenta", "blue", "yellow", "bright_cyan", "bright_green")
MAX_LINE = 4096  # a runaway line is cut on screen, not in the analysis


def use_colour(stream: TextIO) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    return bool(getattr(stream, "isatty", lambda: False)())


class LinePrinter:
    """Splits each source's bytes into lines and prints them with the source's prefix."""

    def __init__(self, out: TextIO | None = None, colour: bool | None = None) -> None:
        self.out = out or sys.stdout
        self.colour = use_colour(self.out) if colour is None else colour
        self._rest: dict[str, bytes] = {}
        self._colour_of: dict[str, str] = {}
        self._width = 0

    def _paint(self, text: str, style: str | None) -> str:
        if not (self.colour and style):
            return text
        from rich.color import ColorSystem
        from rich.style import Style

        return Style.parse(style).render(text, color_system=ColorSystem.STANDARD)

    def prefix(self, source: str) -> str:
        if source not in self._colour_of:
            self._colour_of[source] = PALETTE[len(self._colour_of) % len(PALETTE)]
        label = source if source.startswith("pod/") else os.path.basename(source) or source
        label = redact_text(plain(label))  # a file or pod name can hold a token
        self._width = min(max(self._width, len(label)), 48)
        return self._paint(label.ljust(self._width), self._colour_of[source])

    def split(self, source: str, data: bytes) -> list[bytes]:
        """The whole lines of `data` (with their newline); a partial last one waits."""
        buf = self._rest.pop(source, b"") + data
        *lines, rest = buf.split(b"\n")
        if rest:
            self._rest[source] = rest
        return [ln + b"\n" for ln in lines]

    def rest(self) -> list[tuple[str, bytes]]:
        """Each source's last unterminated line, once the sources ended."""
        out = list(self._rest.items())
        self._rest.clear()
        return out

    def line(self, source: str, raw: bytes) -> None:
        from epdoctor.reports.launch_panes import style_of

        text = raw.decode("utf-8", "replace").rstrip("\r\n")
        text = redact_text(plain(text))[:MAX_LINE]
        self.out.write(f"{self.prefix(source)} {self._paint(text, style_of(text))}\n")
        self.out.flush()

    def finding(self, source: str | None, f: Any, evidence: int = 3) -> None:
        """A finding, under the line that proved it: `  ^ FAIL T701 title (source)`."""
        from epdoctor.reports.logs_report import STYLE

        head = f"  ^ {f.status.value.upper()} {f.code} {plain(f.title)}"
        if source:
            head += f" ({plain(source)})"
        self.out.write(self._paint(redact_text(head), STYLE.get(f.status.value)) + "\n")
        for e in f.evidence[:evidence]:
            self.out.write(self._paint(redact_text(f"      {plain(e)}"), "dim") + "\n")
        self.out.flush()
