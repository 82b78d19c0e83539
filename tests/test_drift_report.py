"""The fleet section of the reports (epdoctor/reports/fleet.py) on real probe documents.

Nodes come from test_drift.py's fake node trees probed by the real probe; one node differs
in NCCL, one could not be reached.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from test_drift import diag, docs, fleet  # noqa: F401  (docs is the module fixture)

from epdoctor.checks.drift import drift_findings
from epdoctor.reports import fleet as fleet_report


@pytest.fixture
def run(docs):  # noqa: F811
    nodes = [
        *fleet(docs, "nccl_2289"),
        diag("node-9", None, "TCP connect to 10.0.0.9:22 timed out"),
    ]
    return [d.result for d in nodes], drift_findings(nodes)


def test_json_rows_drift_and_odd_nodes(run):
    results, found = run
    doc = fleet_report.render_json(results, found)
    rows = {r["node"]: r for r in doc["nodes"]}
    assert list(rows) == ["node-1", "node-2", "node-3", "node-4", "node-9"]
    assert rows["node-3"]["NCCL"] == "2.28.9, 2.30.4" and rows["node-1"]["NCCL"] == "2.30.4"
    assert rows["node-1"]["plugin GIN"] == "v11,v13,v14"
    assert rows["node-9"]["verdict"] == "error" and "timed out" in rows["node-9"]["error"]
    assert doc["odd_nodes"]["F601"] == ["node-3"]
    assert "F602" not in doc["odd_nodes"]  # the driver agrees
    assert doc["drift"][0]["code"] == "F601" and doc["drift"][0]["severity"] == "fail"


def test_text_table_and_drift_panel(run):
    results, found = run
    buf = io.StringIO()
    fleet_report.render_text(Console(file=buf, width=220, no_color=True), results, found)
    out = buf.getvalue()
    assert "fleet: 5 nodes" in out
    assert "node-3" in out and "2.28.9" in out
    assert "TCP connect to 10.0.0.9:22 timed out" in out
    assert "F601" in out and "F600" in out
    assert "same on every node: NVIDIA driver" in out
    assert "PASS" not in out  # passed drift checks are one summary line unless verbose


def test_text_marks_the_odd_cell(run):
    results, found = run
    console = Console(record=True, width=220, color_system="truecolor", force_terminal=True)
    fleet_report.render_text(console, results, found)
    html = console.export_html(inline_styles=True)
    odd = next(line for line in html.splitlines() if "2.28.9" in line)
    assert "font-weight: bold" in odd


def test_markdown_section(run):
    results, found = run
    md = "\n".join(fleet_report.render_markdown(results, found))
    assert "### Fleet: 5 nodes" in md
    assert "**2.28.9, 2.30.4**" in md and "| 2.30.4 |" in md
    assert "| ❌ | `F601` |" in md
    assert "#### Drift between nodes" in md
    verbose = "\n".join(fleet_report.render_markdown(results, found, verbose=True))
    assert "`F602`" in verbose
