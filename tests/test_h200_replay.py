"""Replay the bundle `epdoctor collect` wrote on a real single-H200 node (tests/fixtures/h200-run).

The current checks must find on it what a correct diagnosis of that node includes (see
tests/fixtures/h200-node/README.md).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BUNDLE = Path(__file__).parent / "fixtures" / "h200-run" / "h200-bundle.tar.gz"


def test_real_h200_bundle_diagnosis():
    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "diagnose", "--bundle", str(BUNDLE), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    got = {(f["code"], f["severity"]) for f in doc["findings"]}
    titles = " ".join(f["title"] for f in doc["findings"])
    for expected in [
        ("L101", "fail"),
        ("L102", "warn"),
        ("L103", "warn"),
        ("H121", "fail"),
        ("H111", "fail"),
        ("N101", "fail"),
        ("H101", "pass"),
    ]:
        assert expected in got, expected
    assert "2.28.9" in titles and "2.28.3" in titles
    assert doc["facts"]["gpus"] == ["0: NVIDIA H200 (sm 9.0)"]


def test_real_h200_kernel_test_result():
    doc = json.loads((BUNDLE.parent / "run-kernel.json").read_text())
    assert doc["status"] == "pass"
    gates = {g["gate"]: g["status"] for g in doc["gates"]}
    assert gates["numerics"] == "pass" and gates["efa counters"] == "skip"
    assert doc["ranks"][0]["network"] == "Socket"
