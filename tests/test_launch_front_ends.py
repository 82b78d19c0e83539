"""The command line and the terminal app are two views of one launch session.

The same request (`run serve` of an engine that exits before it is ready, the preflight on,
on this host) goes through `epdoctor run` and through the Launch screen; the steps each
reports (gate, state) come from the one session, in the same order. A step written in one
front end only (as the node preflight once was) makes the streams differ.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path

import pytest
from epdoctor.screens.app import EpdoctorApp
from epdoctor.screens.explain import ConfirmScreen
from launch_helpers import free_port

from epdoctor.cli import main
from epdoctor.launch import session as session_mod

ENGINE = str(Path(__file__).resolve().parent / "fake_engine.py")


@pytest.fixture
def recorded(monkeypatch):
    """Every (gate, state) a launch session reports, whichever front end runs it."""
    events: list[tuple[str, str]] = []
    real = session_mod.Session.__init__

    def init(self, launch, on_line=None, on_gate=None, *a, **kw):
        def gate(name, state, summary, code=None):
            events.append((name, state))
            if on_gate is not None:
                on_gate(name, state, summary, code)

        real(self, launch, on_line, gate, *a, **kw)

    monkeypatch.setattr(session_mod.Session, "__init__", init)
    return events


def _steps(events: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The stream without repeats (a readiness wait reports each poll)."""
    out: list[tuple[str, str]] = []
    for e in events:
        if not out or out[-1] != e:
            out.append(e)
    return out


def _flags(tmp: Path, port: int, preflight: bool) -> str:
    cmd = f"{sys.executable} {ENGINE} --port {port} --start-delay 30 --crash-after 1"
    flags = f"--cmd {shlex.quote(cmd)} --run-dir {tmp} --url http://127.0.0.1:{port} "
    flags += "--startup-budget 60"
    return flags if preflight else flags + " --no-preflight"


@pytest.mark.parametrize("preflight", [True, False], ids=["preflight", "no-preflight"])
async def test_the_cli_and_the_app_report_the_same_steps(tmp_path, recorded, capsys, preflight):
    cli_dir, app_dir = tmp_path / "cli", tmp_path / "app"
    main(["run", "serve", *shlex.split(_flags(cli_dir, free_port(), preflight)), "--yes"])
    capsys.readouterr()
    cli = _steps(recorded)
    recorded.clear()

    app = EpdoctorApp(start="launch", diagnose_on_start=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        screen.query_one("#launch-what").value = "serve"
        screen.query_one("#launch-flags").value = _flags(app_dir, free_port(), preflight)
        await pilot.press("ctrl+l")
        deadline = time.monotonic() + 30
        while not isinstance(app.screen, ConfirmScreen) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.press("y")
        deadline = time.monotonic() + 120
        while (screen.running or not recorded) and time.monotonic() < deadline:
            await pilot.pause(0.1)
        assert not screen.running, "the launch never ended"
    tui = _steps(recorded)

    assert cli, "the command line's session reported no step"
    assert cli == tui, (cli, tui)
    names = [g for g, _ in cli]
    assert ("preflight" in names) is preflight
