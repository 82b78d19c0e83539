"""docs/plan.md's worked plan is the command's real output, not a copy that drifts."""

from __future__ import annotations

import re
from pathlib import Path

from epdoctor.cli import main

DOC = Path(__file__).resolve().parent.parent / "docs" / "plan.md"
ARGS = [
    "plan", "--no-input", "--engine", "vllm", "--transport", "gin-proxy",
    "--instance", "p5en.48xlarge", "--nodes", "2", "--model", "Qwen/Qwen3-30B-A3B-FP8",
    "--num-experts", "128",
]  # fmt: skip


def test_worked_plan_matches_the_command(tmp_path, capsys):
    doc = DOC.read_text(encoding="utf-8")
    m = re.search(r"<!-- worked-plan:begin -->\n(.*?)\n<!-- worked-plan:end -->", doc, re.S)
    assert m, "worked-plan markers missing"
    assert main([*ARGS, "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out.replace(str(tmp_path), "out/").rstrip()
    assert m.group(1) == out
    manifest = (tmp_path / "kubernetes" / "vllm-deepep.yaml").read_text().rstrip()
    assert f"```yaml\n{manifest}\n```" in doc
