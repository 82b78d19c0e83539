"""The whole trap catalogue: searchable, filterable by layer, severity and engine."""

from __future__ import annotations

from epdoctor.screens.keyhelp import KeyHelp
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Select, Static

from epdoctor import knowledge
from epdoctor.knowledge import LAYERS, Trap
from epdoctor.knowledge.catalogue import SEVERITIES

ENGINES = ("vllm", "dynamo", "tensorrt-llm", "sglang")


def matches(
    t: Trap, query: str, layer: str | None, severity: str | None, engine: str | None
) -> bool:
    if layer and t.layer != layer:
        return False
    if severity and t.default_status.value != severity:
        return False
    if engine and t.engines and engine not in t.engines:
        return False  # traps that name no engine hold for every engine
    if not query:
        return True
    hay = " ".join((t.code, t.name, t.title, t.symptom, t.why, t.fix, t.detect)).lower()
    return all(word in hay for word in query.lower().split())


class TrapsScreen(Screen[None]):
    BINDINGS = [
        Binding("slash", "focus_search", "Search"),
        Binding("enter", "explain", "Explain", show=True),
        Binding("escape", "clear", "Clear"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="trap-filters"):
            yield Input(placeholder="search code or text  (/)", id="trap-search")
            yield Select(
                [(name, name) for name in LAYERS.values()], prompt="layer", id="trap-layer"
            )
            yield Select([(s, s) for s in SEVERITIES], prompt="severity", id="trap-severity")
            yield Select([(e, e) for e in ENGINES], prompt="engine", id="trap-engine")
        yield Static("", id="trap-count")
        yield DataTable(id="trap-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="trap-detail", markup=False)
        yield KeyHelp()

    def on_mount(self) -> None:
        table = self.query_one("#trap-table", DataTable)
        table.add_columns("code", "severity", "layer", "title")
        self.refilter()
        table.focus()

    def _value(self, sel_id: str) -> str | None:
        v = self.query_one(sel_id, Select).value
        return None if v is Select.NULL else str(v)

    def refilter(self) -> None:
        query = self.query_one("#trap-search", Input).value
        layer, sev, eng = (
            self._value(i) for i in ("#trap-layer", "#trap-severity", "#trap-engine")
        )
        table = self.query_one("#trap-table", DataTable)
        table.clear()
        shown = [t for t in knowledge.all_traps() if matches(t, query, layer, sev, eng)]
        for t in shown:
            table.add_row(t.code, t.default_status.value, t.layer, t.title, key=t.code)
        filtered = query or layer or sev or eng
        count = f"{len(shown)} matching traps" if filtered else f"{len(shown)} traps"
        self.query_one("#trap-count", Static).update(f"{count} · Enter explains · / searches")
        self._detail(shown[0] if shown else None)

    def _detail(self, t: Trap | None) -> None:
        text = "" if t is None else f"{t.code}: {t.symptom}"
        self.query_one("#trap-detail", Static).update(text)

    def on_input_changed(self, event: Input.Changed) -> None:
        self.refilter()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#trap-table", DataTable).focus()

    def on_select_changed(self, event: Select.Changed) -> None:
        self.refilter()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value:
            self._detail(knowledge.get(event.row_key.value))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value:
            self.app.explain(event.row_key.value)  # type: ignore[attr-defined]

    def action_explain(self) -> None:
        table = self.query_one("#trap-table", DataTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            if key:
                self.app.explain(key)  # type: ignore[attr-defined]

    def action_focus_search(self) -> None:
        self.query_one("#trap-search", Input).focus()

    def action_clear(self) -> None:
        self.query_one("#trap-search", Input).value = ""
        self.query_one("#trap-table", DataTable).focus()
