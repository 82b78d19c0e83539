"""The plan wizard: the plan's questions as a form, the verdict updating as answers change.

The questions, their order, choices, defaults and checks are
epdoctor.plan.questions (shared with `epdoctor plan`'s prompts); the verdict,
reasons and files are make_plan() and Plan.render(). Each reason's trap code is
one key (Enter or e) from its explanation.
"""

from __future__ import annotations

from typing import Any

from epdoctor.screens.keyhelp import KeyHelp
from epdoctor.screens.messages import PlanComputed, PlanWritten
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Label, Select, Static

from epdoctor.plan import questions as Q

LEVEL_STYLE = {"blocker": "bold red", "caveat": "yellow", "unknown": "magenta", "info": "dim"}
VERDICT_STYLE = {"supported": "bold green", "supported with caveats": "bold yellow"}


class WizardScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+w", "write", "Write plan + manifests"),
        Binding("e", "explain", "Explain code"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.raw: dict[str, str] = {}  # question key -> the text/choice in its widget
        self.keys: tuple[str, ...] = ()
        self.generation = 0
        self.shown_plan: Any | None = None  # the plan whose reasons the table lists
        self._reason_width = 0

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            yield VerticalScroll(id="wizard-form")
            with Vertical(id="wizard-side"):
                yield Static("", id="wizard-verdict")
                yield DataTable(id="wizard-reasons", cursor_type="row")
                yield Input(
                    value="epdoctor-plan", placeholder="write to directory", id="wizard-out"
                )
        yield KeyHelp()

    async def on_mount(self) -> None:
        await self.build_form()
        self.recompute()

    # --- the form -----------------------------------------------------------
    def _answers(self) -> tuple[dict[str, Any], dict[str, str]]:
        """Parsed answers of the current form, and the error of each bad one."""
        answers: dict[str, Any] = {}
        errors: dict[str, str] = {}
        for q in self._questions():
            raw = self.raw.get(q.key, q.default)
            err = Q.check(q, raw)
            if err:
                errors[q.key] = err
                continue
            answers[q.key] = Q.parse(q, raw)
        return answers, errors

    def _questions(self) -> list[Q.Question]:
        """Questions for the current raw answers (earlier answers decide later questions)."""
        partial: dict[str, Any] = {}
        for q in Q.all_questions(partial):
            raw = self.raw.get(q.key, q.default)
            if Q.check(q, raw) is None:
                partial[q.key] = Q.parse(q, raw)
        return Q.all_questions(partial)

    async def build_form(self) -> None:
        form = self.query_one("#wizard-form", VerticalScroll)
        await form.remove_children()
        qs = self._questions()
        self.keys = tuple(q.key for q in qs)
        widgets: list[Any] = []
        for q in qs:
            widgets.append(Label(q.prompt))
            value = self.raw.get(q.key, q.default)
            if q.kind == "select":
                choices = [(label, v) for v, label in q.choices]
                if value not in {v for v, _ in q.choices}:
                    value = q.default
                widgets.append(
                    Select(choices, value=value, allow_blank=False, id=f"q-{q.key}", compact=True)
                )
            else:
                widgets.append(Input(value=value, id=f"q-{q.key}", compact=True))
            widgets.append(Static("", id=f"err-{q.key}", classes="error", markup=False))
        await form.mount_all(widgets)

    @on(Select.Changed)
    async def _select_changed(self, event: Select.Changed) -> None:
        wid = event.select.id or ""
        if wid.startswith("q-") and event.value is not Select.NULL:
            await self._changed(wid[2:], str(event.value))

    @on(Input.Changed)
    async def _input_changed(self, event: Input.Changed) -> None:
        wid = event.input.id or ""
        if wid.startswith("q-"):
            await self._changed(wid[2:], event.value)

    async def _changed(self, key: str, raw: str) -> None:
        if self.raw.get(key) == raw:
            return
        self.raw[key] = raw
        if key == "engine":
            self._follow_engine()
        if tuple(q.key for q in self._questions()) != self.keys:
            await self.build_form()
        self.recompute()

    def _follow_engine(self) -> None:
        """An engine change resets the answers it voids to the new engine's defaults."""
        answers, _ = self._answers()
        for q in self._questions():
            if q.key in self.raw and not Q.still_holds(q.key, self.raw[q.key], answers):
                del self.raw[q.key]
                for widget in self.query(f"#q-{q.key}"):
                    widget.value = q.default  # type: ignore[attr-defined]

    # --- the verdict --------------------------------------------------------
    def recompute(self) -> None:
        self.generation += 1
        answers, errors = self._answers()
        for key in self.keys:
            for err in self.query(f"#err-{key}"):
                err.update(errors.get(key, ""))  # type: ignore[attr-defined]
        if errors:
            self._verdict(Text(f"{len(errors)} answer(s) to fix before there is a verdict", "bold"))
            return
        self._plan(answers, self.generation)

    @work(thread=True, exclusive=True, group="plan")
    def _plan(self, answers: dict[str, Any], generation: int) -> None:
        from epdoctor.model import EpdoctorError
        from epdoctor.plan import PlanInput, make_plan

        try:
            plan = make_plan(PlanInput(**Q.answered(answers)))
        except EpdoctorError as exc:
            self.post_message(PlanComputed(None, str(exc), generation))
            return
        self.post_message(PlanComputed(plan, "", generation))

    def _verdict(self, text: Text) -> None:
        self.query_one("#wizard-verdict", Static).update(text)

    def on_plan_computed(self, msg: PlanComputed) -> None:
        if msg.generation != self.generation:
            return  # the answers changed since this plan was asked for
        table = self.query_one("#wizard-reasons", DataTable)
        table.clear()
        if msg.plan is None:
            self._verdict(Text(f"cannot plan: {msg.error}", "bold red"))
            return
        p = msg.plan
        head = Text.assemble(
            ("VERDICT: ", "bold"),
            (p.verdict.value.upper(), VERDICT_STYLE.get(p.verdict.value, "bold red")),
            f"  world {p.world} · serve EP {p.serve_ep} · mode {p.mode}",
            f" · NCCL {p.nccl or 'n/a'} · GIN type {p.gin_type if p.gin_type is not None else 'n/a'}",
        )
        self._verdict(head)
        self.shown_plan = p
        self._reason_width = 0  # new rows: fill the table whatever its width
        self.fill_reasons()
        self.call_after_refresh(self.fill_reasons)  # again once the table has its real width
        self.app.set_plan(p)  # type: ignore[attr-defined]

    def on_resize(self) -> None:
        self.call_after_refresh(self.fill_reasons)

    def fill_reasons(self) -> None:
        """The reasons, wrapped between words to the table's width (none is cut).

        Wide: level, code and reason columns. Narrow (an 80-column terminal leaves the table
        about 35): one column, the level and code on a line, the reason indented below.
        """
        from rich.console import Group
        from rich.padding import Padding

        from epdoctor.reports.layout import Words

        table = self.query_one("#wizard-reasons", DataTable)
        p = self.shown_plan
        width = max(20, table.size.width - 2 or 36)  # less a vertical scrollbar
        if p is None or width == self._reason_width:
            return
        self._reason_width = width
        row = table.cursor_row
        table.clear(columns=True)
        wide = width >= 60
        if wide:
            table.add_column("level", key="level")
            table.add_column("code", key="code")
            table.add_column("reason", key="reason", width=width - 7 - 5 - 6)
        else:
            table.add_column("reasons", key="reason", width=width - 2)
        for i, r in enumerate(p.reasons):
            level = Text(r.level.value, LEVEL_STYLE.get(r.level.value, ""))
            message = Text(r.message)
            if wide:
                cells: list[Any] = [level, r.code, message]
            else:
                head = level + Text(f" {r.code}", style="bold")
                cells = [Group(head, Padding(Words(message, min_width=8), (0, 0, 0, 2)))]
            table.add_row(*cells, key=f"{i}:{r.code}", height=None)
        if p.reasons:
            table.move_cursor(row=min(row, len(p.reasons) - 1))

    # --- actions ------------------------------------------------------------
    def _code(self) -> str | None:
        table = self.query_one("#wizard-reasons", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value or ""
        return key.split(":", 1)[1] if ":" in key else None

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        key = event.row_key.value or ""
        if ":" in key:
            self.app.explain(key.split(":", 1)[1])  # type: ignore[attr-defined]

    def action_explain(self) -> None:
        code = self._code()
        if code:
            self.app.explain(code)  # type: ignore[attr-defined]

    def action_write(self) -> None:
        plan = self.app.shared.plan  # type: ignore[attr-defined]
        if plan is None:
            self.notify("no plan to write yet", severity="warning")
            return
        directory = self.query_one("#wizard-out", Input).value.strip() or "epdoctor-plan"
        self._write(plan, directory)

    @work(thread=True, exclusive=True, group="plan-write")
    def _write(self, plan: Any, directory: str) -> None:
        try:
            files = plan.render(directory)
        except OSError as exc:
            self.post_message(PlanWritten(directory, [], str(exc)))
            return
        self.post_message(PlanWritten(directory, list(files)))

    def on_plan_written(self, msg: PlanWritten) -> None:
        if msg.error:
            self.notify(f"cannot write {msg.directory}: {msg.error}", severity="error")
            return
        import os

        self.app.set_plan(self.app.shared.plan, os.path.join(msg.directory, "plan.json"))  # type: ignore[attr-defined]
        self.notify(f"wrote {len(msg.files)} files to {msg.directory}: {', '.join(msg.files)}")
