"""`epdoctor lint`: formats, exit codes, selection, and the real console entry point."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from epdoctor import cli

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
BAD = str(FIXTURES / "recipe-bad")
GOOD = str(FIXTURES / "recipe-good")


def run(capsys, *argv: str) -> tuple[int, str]:
    rc = cli.main(["lint", *argv])
    return rc, capsys.readouterr().out


def test_text_output_and_exit_codes(capsys):
    rc, out = run(capsys, BAD)
    assert rc == 1
    assert "recipe/verify-image.sh:4:1: S402 [fail]" in out
    assert out.rstrip().endswith("`epdoctor explain CODE` explains a code.")
    rc, out = run(capsys, GOOD)
    assert rc == 0 and "0 finding(s)" in out and "1 suppressed" in out
    assert "B403" not in out
    rc, out = run(capsys, GOOD, "--show-suppressed")
    assert "(suppressed: the seed pins" in out


def test_fail_on_and_select(capsys):
    rc, out = run(capsys, BAD, "--select", "B403")
    assert rc == 0  # info is below the default --fail-on warn
    assert "B403" in out and "S402" not in out
    rc, _ = run(capsys, BAD, "--select", "B403", "--fail-on", "info")
    assert rc == 1
    rc, out = run(capsys, BAD, "--select", "S40,B401", "--fail-on", "fail")
    assert rc == 1 and "B405" not in out and "S401" in out and "B401" in out


def test_json(capsys):
    rc, out = run(capsys, BAD, "--json")
    doc = json.loads(out)
    assert rc == 1
    assert doc["summary"]["active"] == len([f for f in doc["findings"] if "suppressed" not in f])
    first = doc["findings"][0]
    assert set(first) >= {"path", "line", "column", "code", "severity", "message"}
    assert {"path": "Dockerfile", "kinds": ["dockerfile"]} in doc["files"]


def test_sarif_shape(capsys):
    rc, out = run(capsys, GOOD, "--sarif")
    doc = json.loads(out)
    assert rc == 0
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    run0 = doc["runs"][0]
    rules = run0["tool"]["driver"]["rules"]
    (res,) = run0["results"]
    assert rules[res["ruleIndex"]]["id"] == res["ruleId"] == "B403"
    assert res["level"] == "note"
    assert res["suppressions"] == [
        {
            "kind": "inSource",
            "justification": "the seed pins the NGC base by exact tag; every layer above is SHA-pinned",
        }
    ]
    loc = res["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "Dockerfile", "uriBaseId": "SRCROOT"}
    assert loc["region"]["startLine"] == 4
    assert run0["originalUriBaseIds"]["SRCROOT"]["uri"].startswith("file:///")


def test_sarif_levels_for_failures(capsys):
    _, out = run(capsys, BAD, "--format", "sarif")
    run0 = json.loads(out)["runs"][0]
    levels = {r["ruleId"]: r["level"] for r in run0["results"]}
    assert levels["S402"] == "error" and levels["B404"] == "warning" and levels["B403"] == "note"
    ids = [r["id"] for r in run0["tool"]["driver"]["rules"]]
    assert len(ids) == len(set(ids))


def test_missing_path_is_exit_2(capsys, tmp_path):
    rc = cli.main(["lint", str(tmp_path / "nope")])
    assert rc == 2
    assert "no such file or folder" in capsys.readouterr().err


def test_console_entry_point_real_process():
    proc = subprocess.run(
        [sys.executable, "-m", "epdoctor", "lint", "--json", BAD],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    codes = {f["code"] for f in json.loads(proc.stdout)["findings"]}
    assert {"B401", "S401", "S402", "S403", "S404"} <= codes


class _Tty:
    def __init__(self):
        self.parts: list[str] = []

    def isatty(self) -> bool:
        return True

    def write(self, s: str) -> None:
        self.parts.append(s)


def test_text_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    from epdoctor.lint import lint_paths, render

    report = lint_paths([BAD])
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty = _Tty()
    render.text(report, tty)
    assert "\033[31mfail\033[0m" in "".join(tty.parts)
    monkeypatch.setenv("NO_COLOR", "1")
    tty = _Tty()
    render.text(report, tty)
    assert "\033[" not in "".join(tty.parts)


def test_single_files_and_several_paths(capsys):
    rc, out = run(capsys, f"{BAD}/recipe/probe-worker.sh", "--json")
    doc = json.loads(out)
    assert rc == 1 and [f["code"] for f in doc["findings"]] == ["S401"]
    assert doc["findings"][0]["path"] == "probe-worker.sh"
    rc, out = run(capsys, f"{BAD}/recipe", f"{GOOD}/recipe", "--json")
    paths = {f["path"] for f in json.loads(out)["findings"]}
    assert paths and all(p.startswith("recipe-bad/recipe/") for p in paths)
