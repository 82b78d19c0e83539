"""At 80x24 every screen shows its header, its summary line and its key help whole: nothing
cut at the right edge, the footer's keys all there (app-wide ones are under `?`), a drop-down
option never wrapped mid-word, and focus shown by a shape (a bar), not by colour alone."""

from __future__ import annotations

import html
import re
import time

import pytest

pytest.importorskip("textual")

from epdoctor.screens.app import EpdoctorApp
from test_tui_snapshots import BUNDLE


def _lines(app) -> list[str]:
    svg = app.export_screenshot()
    text = html.unescape(re.sub(r"<[^>]+>", "", svg)).replace("\xa0", " ")
    return [ln.rstrip() for ln in text.splitlines()]


async def _until(pilot, ok, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline
        await pilot.pause(0.1)


@pytest.mark.parametrize(
    "key,keys",
    [
        ("f2", ["Diagnose", "Targets", "Explain", "SSH hosts", "Keys"]),
        ("f3", ["Search", "Keys"]),
        ("f4", ["Write plan", "Explain code", "Keys"]),
        ("f5", ["Stop all", "Launch", "Search panes", "Wrap lines", "Keys"]),
        ("f6", ["Next", "Previous", "Explain trap", "Keys"]),
    ],
)
async def test_header_summary_and_footer_whole_at_80x24(key, keys):
    app = EpdoctorApp(target_argv=["--bundle", BUNDLE])
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: len(app.shared.diagnoses) == 3)
        await pilot.press(key)
        await pilot.pause(0.8)
        lines = _lines(app)
        header = next(ln for ln in lines if "⭘" in ln)
        assert header.rstrip().endswith(("plan: none", "…")) or "plan:" in header
        footer = next(ln for ln in reversed(lines) if ln.strip())
        for k in keys:
            assert k in footer, (key, footer)
        assert len(footer) <= 81, footer
        if key == "f2":
            summary = app.screen.query_one("#target-summary")
            text = str(summary.render())
            assert "3 nodes: 2 failing finding(s)" in text
            assert text.strip() in " ".join(ln.strip() for ln in lines)  # all of it on screen


async def test_drop_down_options_are_not_wrapped_and_focus_has_a_bar():
    from textual.widgets import Select

    app = EpdoctorApp(target_argv=["--bundle", BUNDLE])
    async with app.run_test(size=(80, 24)) as pilot:
        await _until(pilot, lambda: len(app.shared.diagnoses) == 3)
        await pilot.pause(0.5)
        table_lines = [ln for ln in _lines(app) if "p5en-a" in ln]
        assert table_lines and table_lines[0].lstrip().startswith("█"), table_lines
        await pilot.press("f3")
        await pilot.pause(0.5)
        app.screen.query(Select).first().focus()
        await pilot.pause(0.2)
        await pilot.press("enter")
        await pilot.pause(0.5)
        text = "\n".join(_lines(app))
        assert "packaging" in text and "packagin\n" not in text
