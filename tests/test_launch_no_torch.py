"""`run kernel-test` on a python without PyTorch: the missing module is the finding, first.

The python is a fresh venv made here (`python -m venv --without-pip`: no torch whatever this
interpreter has), passed with `--python` as an operator would on a host without PyTorch. The
command runs for real (`python -m epdoctor run kernel-test`): torchrun cannot even be found,
the node's log says `No module named 'torch'`, and that (not NCCL_DEBUG, not a missing result
line) is what the CLI and the terminal app report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    d = tmp_path_factory.mktemp("venv-no-torch")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(d)], check=True)
    py = str(d / "bin" / "python")
    assert subprocess.run([py, "-c", "import torch"], capture_output=True).returncode != 0
    return py


def _kernel_test(python: str, run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "epdoctor",
            "run",
            "kernel-test",
            "--python",
            python,
            "--yes",
            "--no-preflight",
            "--run-dir",
            str(run_dir),
            *extra,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "80"},
        cwd=ROOT,
        timeout=120,
    )


def test_cli_names_the_missing_torch_as_the_cause(bare_python, tmp_path):
    p = _kernel_test(bare_python, tmp_path)
    out = p.stdout
    assert p.returncode == 1, out + p.stderr
    # the last lines: the cause, then the verdict
    tail = " ".join(out.split())  # the gates table wraps at 80 columns
    assert (
        "cause: node0: " in tail
        and "No module named 'torch' (" in tail
        and "has no PyTorch)" in tail
    )
    assert "--python names a python with PyTorch" in tail
    assert out.rstrip().splitlines()[-1] == "kernel test: fail"
    assert "NCCL_DEBUG=INFO reaching" not in out  # the old, wrong blame
    assert "printed no result line" not in out


def test_cli_json_puts_the_start_gate_first(bare_python, tmp_path):
    p = _kernel_test(bare_python, tmp_path, "--json")
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["status"] == "fail"
    first = doc["gates"][0]
    assert first["gate"] == "start" and first["status"] == "fail" and first["code"] == "D702"
    assert "No module named 'torch'" in first["summary"]
    assert any("No module named 'torch'" in e for e in first["evidence"])
    by_name = {g["gate"]: g for g in doc["gates"]}
    assert by_name["exit codes"]["status"] == "fail"
    for name in ("results", "numerics", "network"):  # consequences, not causes
        assert by_name[name]["status"] == "skip", by_name[name]
        assert by_name[name]["summary"].startswith("not reached")
    # regating the same run from its logs says the same
    p2 = subprocess.run(
        [
            sys.executable,
            "-m",
            "epdoctor",
            "run",
            "kernel-test",
            "--regate",
            str(tmp_path),
            "--json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        timeout=60,
    )
    assert json.loads(p2.stdout)["gates"][0]["gate"] == "start"


def test_start_failure_lines_and_the_start_gate():
    """The lines that say a test could not start, and the gate over the nodes that exited."""
    from epdoctor.launch.gates import start_failure, start_gate

    assert start_failure("ModuleNotFoundError: No module named 'deep_ep'") == ("module", "deep_ep")
    assert start_failure("python3: can't open file '/x/tests/elastic/test_ep.py': [Errno 2]") == (
        "file",
        "/x/tests/elastic/test_ep.py",
    )
    assert start_failure("env: 'python3': No such file or directory") == ("program", "python3")
    assert start_failure("NCCL INFO NET/OFI Selected provider is efa") is None
    line = "ModuleNotFoundError: No module named 'deep_ep'"
    g = start_gate({"node1": ("module", "deep_ep", line)}, {"node0": -1, "node1": 1}, "python3")
    assert g is not None and g.summary.startswith(
        "node1: No module named 'deep_ep' (python3 has no DeepEP)"
    )
    # a node that exited 0 did start, whatever it printed
    assert (
        start_gate({"node0": ("module", "triton", "No module named 'triton'")}, {"node0": 0})
        is None
    )


def _screen_text(app) -> str:
    """The screen as the user sees it: the SVG screenshot's text, row by row."""
    import html
    import re

    rows: dict[float, list[tuple[float, str]]] = {}
    pat = r'<text[^>]*x="([\d.]+)" y="([\d.]+)"[^>]*>(.*?)</text>'
    for m in re.finditer(pat, app.export_screenshot()):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), m.group(3)))
    return "\n".join(
        html.unescape("".join(t for _, t in sorted(parts))).replace("\xa0", " ")
        for _, parts in sorted(rows.items())
    )


async def test_tui_shows_the_missing_torch_as_the_first_gate(bare_python, tmp_path):
    from epdoctor.screens.app import EpdoctorApp
    from epdoctor.screens.explain import ConfirmScreen, ExplainScreen

    app = EpdoctorApp(start="launch", diagnose_on_start=False)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        screen.query_one("#launch-what").value = "kernel-test"
        screen.query_one(
            "#launch-flags"
        ).value = f"--python {bare_python} --run-dir {tmp_path} --no-preflight"
        await pilot.press("ctrl+l")
        deadline = time.monotonic() + 20
        while not isinstance(app.screen, ConfirmScreen) and time.monotonic() < deadline:
            await pilot.pause(0.05)
        await pilot.press("y")
        deadline = time.monotonic() + 60
        while "kernel-test verdict" not in screen.gates and time.monotonic() < deadline:
            await pilot.pause(0.1)
        state, summary, code = screen.gates["start"]
        assert state == "fail" and code == "D702"
        assert "No module named 'torch'" in summary and "has no PyTorch" in summary
        assert not any("NCCL_DEBUG" in s for _, s, _ in screen.gates.values())
        assert screen.gates["network"][0] == "skip"
        # the run's own row ends with the cause, readable at 80 columns
        assert screen.gates["kernel test"][0] == "fail"
        assert screen.gates["kernel test"][1].startswith("node0: No module named 'torch'")
        await pilot.pause(0.3)
        shown = _screen_text(app)
        assert "node0: No module named 'torch'" in shown, shown
        # in the status table the cause is the first gate row under the run's own row
        table = screen.query_one("#launch-status")
        rows = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert rows.index("start") <= 1, rows
        # and Enter on it explains the code
        table.move_cursor(row=rows.index("start"))
        table.focus()
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert isinstance(app.screen, ExplainScreen)
