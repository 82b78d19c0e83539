"""SVG snapshots of every screen at 80x24 (an SSH session) and 160x48.

Regenerate after an intended change with:
    .venv/bin/python -m pytest tests/test_tui_snapshots.py --snapshot-update
and look at the SVGs under tests/__snapshots__/ before committing them. Inputs are fixed:
the committed bundle tests/fixtures/tui/three-nodes.tar.gz and the plan's defaults.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest
from epdoctor.screens.app import EpdoctorApp

_SRC = Path(__file__).resolve().parent / "fixtures" / "tui" / "three-nodes.tar.gz"
# The screen shows the bundle's path: use one that is the same in every checkout.
_STABLE = Path(tempfile.gettempdir()) / "epdoctor-snapshots" / "three-nodes.tar.gz"
_STABLE.parent.mkdir(parents=True, exist_ok=True)
shutil.copyfile(_SRC, _STABLE)
BUNDLE = str(_STABLE)
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((160, 48), id="160x48")]


async def _until(pilot, pred, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not pred():
        await pilot.pause(0.05)
    assert pred(), "the screen did not reach the state to snapshot"
    await pilot.pause(0.3)


async def _diagnosed(pilot) -> None:
    app = pilot.app
    await _until(pilot, lambda: len(app.shared.diagnoses) == 3)
    screen = getattr(app, "targets_screen", None)
    if screen is not None and screen is app.screen:  # drawn, not only diagnosed
        summary = screen.query_one("#target-summary")
        await _until(pilot, lambda: "failing" in str(summary.render()))
        # every row in, then the columns sized to them: a loaded machine draws them late
        from textual.widgets import DataTable

        tables = list(screen.query(DataTable))
        await _until(pilot, lambda: all(t.row_count >= 3 for t in tables[:1]))
        await pilot.wait_for_scheduled_animations()
    await pilot.pause(0.5)


@pytest.mark.parametrize("size", SIZES)
class TestTargets:
    def test_bundle_with_drift_and_failures(self, snap_compare, size):
        app = EpdoctorApp(target_argv=["--bundle", BUNDLE])
        assert snap_compare(app, terminal_size=size, run_before=_diagnosed)


@pytest.mark.parametrize("size", SIZES)
class TestTraps:
    def test_search(self, snap_compare, size):
        async def run_before(pilot):
            await pilot.press("slash", *"gdrdrv", "enter")
            await pilot.pause(0.3)

        app = EpdoctorApp(start="traps", diagnose_on_start=False)
        assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
class TestExplain:
    def test_finding_explained(self, snap_compare, size):
        async def run_before(pilot):
            await _diagnosed(pilot)
            app = pilot.app
            finding = next(
                f for d in app.shared.diagnoses for f in d.result.findings if f.code == "H112"
            )
            app.explain("H112", finding)
            await pilot.pause(0.5)

        app = EpdoctorApp(target_argv=["--bundle", BUNDLE])
        assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
class TestWizard:
    def test_default_plan_verdict(self, snap_compare, size):
        async def run_before(pilot):
            await _until(pilot, lambda: pilot.app.shared.plan is not None)

        app = EpdoctorApp(start="wizard", diagnose_on_start=False)
        assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
class TestLaunch:
    def test_sixteen_panes(self, snap_compare, size):
        async def run_before(pilot):
            screen = pilot.app.screen
            for r in range(16):
                for i in range(30):
                    line = f"[default{r % 8}]:rank {r} step {i}"
                    if i == 29 and r == 5:
                        line = "vm:1:1 [0] NCCL INFO NET/OFI Selected provider is tcp;ofi_rxm"
                    screen._sink(f"rank{r}", line)
            screen.gates["kernel test"] = ("running", "16 rank(s) on 2 node(s)", None)
            screen._status_rows()
            screen.flush()
            await pilot.pause(0.5)

        app = EpdoctorApp(start="launch", diagnose_on_start=False)
        assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
class TestTour:
    def test_gdrcopy_step_with_live_facts(self, snap_compare, size):
        async def run_before(pilot):
            await _diagnosed(pilot)
            pilot.app.screen.show_step(1)
            await pilot.pause(0.3)

        app = EpdoctorApp(start="tour", target_argv=["--bundle", BUNDLE])
        assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
class TestKeys:
    def test_key_help_over_launch(self, snap_compare, size):
        async def run_before(pilot):
            pilot.app.set_focus(None)
            await pilot.press("question_mark")
            await pilot.pause(0.3)

        app = EpdoctorApp(start="launch", diagnose_on_start=False)
        assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES)
class TestLaunchWrapped:
    def test_long_lines_wrapped(self, snap_compare, size):
        async def run_before(pilot):
            screen = pilot.app.screen
            for r in range(4):
                for i in range(6):
                    screen._sink(
                        f"rank{r}",
                        f"vm:{r}:{r} [{r}] NCCL INFO step {i}: NET/OFI Selected provider is efa, "
                        "fabric is efa-direct (found 16 nics)",
                    )
            screen.flush()
            await pilot.press("w")
            await pilot.pause(0.5)

        app = EpdoctorApp(start="launch", diagnose_on_start=False)
        assert snap_compare(app, terminal_size=size, run_before=run_before)
