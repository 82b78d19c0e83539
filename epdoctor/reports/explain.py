"""Render one trap for `epdoctor explain` (rich)."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from epdoctor.knowledge import Trap
from epdoctor.knowledge.detectors import locate


def _ref(url: str) -> RenderableType:
    """A URL whole, never cut: a long one folds under itself, its dash stays on its line."""
    grid = Table.grid(padding=0)
    grid.add_column(width=4, no_wrap=True)
    grid.add_column(overflow="fold")
    grid.add_row("  - ", Text(url, overflow="fold"))
    return grid


def render_trap(console: Console, t: Trap) -> None:
    parts: list[RenderableType] = [
        Text(t.title, style="bold"),
        Text(f"layer {t.layer} · severity {t.default_status.value}", style="dim"),
        Text(""),
    ]

    def section(name: str, body: str) -> None:
        if body:
            parts.append(Text(name, style="bold cyan"))
            parts.append(Text(body))
            parts.append(Text(""))

    section("Symptom", t.symptom)
    section("Why", t.why)
    section("Fix", t.fix)
    if t.fix_safe:
        parts.append(Text("Safe to run (read-only, confirms the diagnosis)", style="bold green"))
        parts += [Text(f"  $ {c}") for c in t.fix_safe]
        parts.append(Text(""))
    if t.fix_change:
        parts.append(
            Text(
                "Changes a node or an image (copy; epdoctor never runs these)", style="bold yellow"
            )
        )
        parts += [Text(f"  {c}") for c in t.fix_change]
        parts.append(Text(""))
    section("How epdoctor detects it", t.detect)
    if t.detectors:
        parts.append(Text("Where its detectors live", style="bold cyan"))
        for d in map(locate, t.detectors):
            name = d.ref.split(":", 1)[1]
            parts.append(Text(f"  {d.where()}  {name} ({d.domain})", overflow="fold"))
        parts.append(Text(""))
    section("Versions", t.versions)
    if t.transports or t.engines:
        section("Applies to", ", ".join([*t.transports, *t.engines]))
    refs = list(t.references)
    if refs:
        parts.append(Text("References", style="bold cyan"))
        # A URL longer than the line folds under itself, never leaving its dash alone.
        parts += [_ref(r) for r in refs]
    console.print(Panel(Group(*parts), title=f"{t.code} {t.name}", title_align="left"))
