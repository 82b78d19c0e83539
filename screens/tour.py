"""The guided tour: the stack layer by layer, with that layer's traps and live facts.

The steps are epdoctor/knowledge/tour.toml (the same source as docs/tour.md).
When a target has been diagnosed, each step also shows the layer's facts from
the first diagnosed node and the findings of the layer's traps on every node.
"""

from __future__ import annotations

from typing import Any

from epdoctor.screens.keyhelp import KeyHelp
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, ListItem, ListView, Markdown, Static

from epdoctor.knowledge import tour as tour_data
from epdoctor.reports.facts_table import fact_text, label


def step_markdown(i: int, step: tour_data.TourStep, total: int) -> str:
    return f"## {i + 1}/{total} · {step.title}\n\n{step.text}\n"


def live_lines(step: tour_data.TourStep, diagnoses: list[Any]) -> list[str]:
    """What the connected node(s) say about this layer (facts, then this layer's findings)."""
    if not diagnoses:
        return ["No target diagnosed yet: F2 diagnoses one, and this step shows its facts."]
    first = diagnoses[0].result
    out = [f"On {first.target.name} ({first.target.kind}):"]
    if first.error:
        out.append(f"  could not be diagnosed: {first.error}")
    for name, value in step.live_facts(first.facts or {}):
        out.append(f"  {label(name)}: {fact_text(value, name)}")
    codes = {t.code for t in step.traps()}
    seen = [
        f
        for d in diagnoses
        for f in d.result.findings
        if f.code in codes and f.status.value in ("fail", "warn", "unknown")
    ]
    for f in seen:
        out.append(
            f"  {f.status.value.upper()} {f.code} on {f.target or first.target.name}: {f.title}"
        )
        out += [f"      {e}" for e in f.evidence[:3]]
    if not seen:
        out.append("  no failing, warning or unverifiable finding of this layer's traps")
    return out


class TourScreen(Screen[None]):
    BINDINGS = [
        Binding("n,right", "step(1)", "Next"),
        Binding("p,left", "step(-1)", "Previous"),
        Binding("e", "explain", "Explain trap"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.tour = tour_data.load()
        self.index = 0

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield ListView(
                *(ListItem(Static(f"{i + 1}. {s.title}")) for i, s in enumerate(self.tour.steps)),
                id="tour-steps",
            )
            with VerticalScroll(id="tour-body"):
                yield Markdown("", id="tour-text")
                yield Static("", id="tour-live", markup=False)
                yield DataTable(id="tour-traps", cursor_type="row")
        yield KeyHelp()

    def on_mount(self) -> None:
        self.query_one("#tour-traps", DataTable).add_columns("code", "severity", "trap")
        self.show_step(0)

    def on_screen_resume(self) -> None:
        self.show_step(self.index)  # a diagnosis may have landed meanwhile

    def diagnosis_changed(self) -> None:
        self.show_step(self.index)

    def show_step(self, i: int) -> None:
        steps = self.tour.steps
        self.index = max(0, min(i, len(steps) - 1))
        step = steps[self.index]
        self.query_one("#tour-text", Markdown).update(step_markdown(self.index, step, len(steps)))
        diagnoses = self.app.shared.diagnoses  # type: ignore[attr-defined]
        self.query_one("#tour-live", Static).update("\n".join(live_lines(step, diagnoses)))
        table = self.query_one("#tour-traps", DataTable)
        table.clear()
        for t in step.traps():
            table.add_row(t.code, t.default_status.value, t.title, key=t.code)
        lv = self.query_one("#tour-steps", ListView)
        if lv.index != self.index:
            lv.index = self.index

    def action_step(self, delta: int) -> None:
        self.show_step(self.index + delta)

    def on_list_view_highlighted(self, event: ListView.Highlighted) -> None:
        lv = self.query_one("#tour-steps", ListView)
        if lv.index is not None and lv.index != self.index:
            self.show_step(lv.index)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.explain(event.row_key.value)  # type: ignore[attr-defined]

    def action_explain(self) -> None:
        table = self.query_one("#tour-traps", DataTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            if key:
                self.app.explain(key)  # type: ignore[attr-defined]
