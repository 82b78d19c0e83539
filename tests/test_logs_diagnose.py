"""`epdoctor diagnose --log FILE`: the log findings join the local target's, the per-rank table the report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

LOGS = Path(__file__).parent / "fixtures" / "logs"
REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", "PYTHONPATH": str(REPO)}


def test_diagnose_with_a_log_json_and_markdown():
    log = str(LOGS / "real-p4d-socket-fallback.log")
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "diagnose", "--json", "--log", log],
        capture_output=True,
        env=ENV,
        timeout=180,
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["logs"]["ranks"][0]["network"] == "Socket"
    codes = {f["code"] for f in doc["findings"]}
    assert {"T701", "N201"} <= codes
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "diagnose", "--markdown", "--log", log],
        capture_output=True,
        env=ENV,
        timeout=180,
    )
    assert "### epdoctor logs: FAIL" in r.stdout.decode()
