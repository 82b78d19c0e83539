"""Render one trap's sections (knowledge/sections.py): rich for `epdoctor explain`, Markdown for
docs/traps/ and the TUI's explain screen."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from epdoctor.knowledge import Trap
from epdoctor.knowledge.detectors import locate
from epdoctor.knowledge.sections import Section, trap_sections

_STYLE = {"safe": "bold green", "change": "bold yellow", "tell": "bold green"}


def _ref(url: str) -> RenderableType:
    """A URL whole, never cut: a long one folds under itself, its dash stays on its line."""
    grid = Table.grid(padding=0)
    grid.add_column(width=4, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("  - ", Text(url, overflow="fold"))
    return grid


def _rich_items(s: Section) -> list[RenderableType]:
    if s.key in ("safe", "tell"):
        return [Text(f"  $ {c}") for c in s.items]
    if s.key == "detectors":
        located = map(locate, s.items)
        return [Text(f"  {d.where()}  {d.ref.split(':', 1)[1]} ({d.domain})") for d in located]
    if s.key == "references":
        return [_ref(r) for r in s.items]  # a URL longer than the line folds under itself
    return [Text(f"  {c}") for c in s.items]


def render_trap(console: Console, t: Trap) -> None:
    parts: list[RenderableType] = [
        Text(t.title, style="bold"),
        Text(f"layer {t.layer} · severity {t.default_status.value}", style="dim"),
        Text(""),
    ]
    for s in trap_sections(t):
        parts.append(Text(s.title, style=_STYLE.get(s.key, "bold cyan")))
        parts += [Text(s.text)] if s.text else _rich_items(s)
        if s.key != "references":
            parts.append(Text(""))
    console.print(Panel(Group(*parts), title=f"{t.code} {t.name}", title_align="left"))


def _md_items(s: Section) -> list[str]:
    if s.key in ("safe", "tell"):
        return [f"    $ {c}" for c in s.items]
    if s.key == "change":
        return [f"    {c}" for c in s.items]
    if s.key == "detectors":
        return [f"- `{d.ref}` ({d.domain})" for d in map(locate, s.items)]
    if s.key == "logrules":
        return [f"- `{r}`" for r in s.items]
    return [f"- {r}" for r in s.items]


def sections_markdown(
    sections: Iterable[Section], titles: Mapping[str, str] | None = None
) -> list[str]:
    """The one Markdown rendering of a trap's sections (`titles` renames a section by key)."""
    out: list[str] = []
    for s in sections:
        out += [f"### {(titles or {}).get(s.key, s.title)}", ""]
        out += [s.text] if s.text else _md_items(s)
        out.append("")
    return out
