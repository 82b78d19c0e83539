"""Terminal habits in the TUI at 80x24 (k9s, posting): `?`/F1 key help, `q` back or quit,
reasons that wrap in the plan wizard, launch panes that wrap with `w`.

Driven with Textual's pilot on the real app (the plan is the real make_plan() with its defaults;
pane lines go through the launch screen's own sink, as a launch's output does).
"""

from __future__ import annotations

import re
import time

import pytest
from epdoctor.screens.app import EpdoctorApp
from epdoctor.screens.explain import ExplainScreen
from epdoctor.screens.help import KeysScreen
from textual.widgets import DataTable, Input

SIZE = (80, 24)


async def _until(pilot, pred, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not pred():
        await pilot.pause(0.05)
    assert pred()


def _keys_text(screen: KeysScreen) -> str:
    return " ".join(f"{k} {w}" for k, w in screen.rows)


@pytest.mark.parametrize(
    ("mode", "expect"),
    [
        ("traps", ["/ Search", "esc Clear"]),
        ("wizard", ["^w Write plan + manifests", "e Explain code"]),
        ("launch", ["^l Launch…", "w Wrap lines", "← → in a pane: scroll sideways"]),
        ("tour", ["n → Next", "p ← Previous"]),
    ],
)
async def test_question_mark_lists_the_screens_keys(mode, expect):
    app = EpdoctorApp(start=mode, diagnose_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        app.set_focus(None)  # keys typed into a field are text, not commands
        await pilot.press("question_mark")
        await pilot.pause(0.1)
        assert isinstance(app.screen, KeysScreen)
        text = _keys_text(app.screen)
        for e in expect:
            assert e in text, (e, text)
        assert "Ctrl-Q quit" not in text  # the app-wide keys are listed once, apart
        await pilot.press("q")  # closes the key help, does not quit
        await pilot.pause(0.1)
        assert not isinstance(app.screen, KeysScreen) and app.is_running


async def test_f1_opens_and_closes_key_help():
    app = EpdoctorApp(start="traps", diagnose_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f1")
        await pilot.pause(0.1)
        assert isinstance(app.screen, KeysScreen)
        await pilot.press("f1")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, KeysScreen)
        await pilot.press("f1", "escape")
        await pilot.pause(0.1)
        assert not isinstance(app.screen, KeysScreen)


async def test_q_goes_back_then_quits():
    app = EpdoctorApp(start="traps", diagnose_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        app.explain("H111")
        await pilot.pause(0.2)
        assert isinstance(app.screen, ExplainScreen)
        await pilot.press("q")
        await pilot.pause(0.1)
        assert app.screen.__class__.__name__ == "TrapsScreen" and app.is_running
        await pilot.press("q")
        await pilot.pause(0.2)
    assert app.return_code == 0 and not app.is_running


async def test_q_in_a_field_is_text():
    app = EpdoctorApp(start="traps", diagnose_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", "q", "question_mark")
        await pilot.pause(0.1)
        assert app.screen.query_one("#trap-search", Input).value == "q?"
        assert app.is_running and not isinstance(app.screen, KeysScreen)


def _table_text(table: DataTable) -> str:
    lines = [table.render_line(y).text for y in range(table.size.height)]
    return re.sub(r"\s+", " ", " ".join(lines))


async def test_wizard_reasons_wrap_at_80_columns():
    app = EpdoctorApp(start="wizard", diagnose_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        await _until(pilot, lambda: app.shared.plan is not None)
        await pilot.pause(0.5)
        table = app.screen.query_one("#wizard-reasons", DataTable)
        first = app.shared.plan.reasons[0]
        shown = _table_text(table)
        assert f"{first.level.value} {first.code}" in shown
        assert re.sub(r"\s+", " ", first.message) in shown  # whole, not cut at ~20 characters
        assert "…" not in shown


async def test_wizard_reasons_keep_three_columns_when_wide():
    app = EpdoctorApp(start="wizard", diagnose_on_start=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await _until(pilot, lambda: app.shared.plan is not None)
        await pilot.pause(0.5)
        table = app.screen.query_one("#wizard-reasons", DataTable)
        assert [str(c.label) for c in table.columns.values()] == ["level", "code", "reason"]
        assert app.shared.plan.reasons[0].message.split()[-1] in _table_text(table)


async def test_launch_panes_wrap_with_w():
    app = EpdoctorApp(start="launch", diagnose_on_start=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        for i in range(12):
            screen._sink("rank0", f"step {i} " + "x" * 90 + f" END{i}")
        screen.flush()
        await pilot.pause(0.3)
        pane = screen.panes["rank0"]
        width = pane.scrollable_content_region.width
        assert width < 60 and pane.virtual_size.width > width  # 2 panes a row: lines too long

        def rows() -> str:
            return " ".join(pane.render_line(y).text for y in range(pane.size.height))

        assert "END11" not in rows()  # clipped at the pane's edge
        pane.focus()
        await pilot.press("w")
        await pilot.pause(0.3)
        assert pane.wrap and pane.virtual_size.width == width
        assert "END11" in rows()  # the tail of the last line, wrapped into view
        screen._sink("rank1", "a new pane wraps too " + "y" * 90)
        screen.flush()
        await pilot.pause(0.3)
        assert screen.panes["rank1"].wrap
        await pilot.press("w")
        await pilot.pause(0.3)
        assert not pane.wrap and pane.virtual_size.width > width
