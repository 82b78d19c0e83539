"""docs/: the generated trap pages match the catalogue, and every code the docs name exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from epdoctor import cli, knowledge
from epdoctor.knowledge.catalogue import LAYERS, _redirects
from epdoctor.reports import docs as docsgen

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
TRAPS_DIR = DOCS / "traps"
CODE_TOKEN = re.compile(r"(?<![\w-])([HLNTDEKBSMCF]\d{3})(?![\w])")
# GPU and instance names that look like codes; they never name a trap.
NOT_CODES = {"H100", "H200", "B200", "B300", "A100"}


def test_generated_pages_are_current():
    stale = docsgen.stale(TRAPS_DIR)
    assert not stale, f"docs/traps/ is stale ({stale}); run `python -m epdoctor.reports.docs`"


def test_check_mode_detects_a_stale_page(tmp_path):
    docsgen.write(tmp_path)
    assert docsgen.main(["--check", "--out", str(tmp_path)]) == 0
    page = next(tmp_path.glob("host.md"))
    page.write_text(page.read_text().replace("## H101", "## H101 edited"))
    assert docsgen.main(["--check", "--out", str(tmp_path)]) == 1
    (tmp_path / "orphan.md").write_text("x")
    assert "orphan.md" in docsgen.stale(tmp_path)


def test_one_anchor_per_code_on_its_layer_page():
    for trap in knowledge.all_traps():
        page = (TRAPS_DIR / f"{trap.layer}.md").read_text(encoding="utf-8")
        assert page.count(f'<a id="{trap.code.lower()}"></a>') == 1, trap.code
        assert f"## {trap.code}: {trap.title}" in page


def test_index_counts_every_layer_and_detection():
    index = (TRAPS_DIR / "index.md").read_text(encoding="utf-8")
    traps = knowledge.all_traps()
    auto = sum(1 for t in traps if not t.explain_only)
    assert f"| **all** | **{len(traps)}** | **{auto}** | **{len(traps) - auto}** |" in index
    for layer in {t.layer for t in traps}:
        assert f"[{layer}]({layer}.md)" in index


@pytest.mark.parametrize("code", ["B401", "S402", "D101", "H111"])
def test_explain_and_docs_agree(code, capsys):
    """`epdoctor explain --json CODE` and the page render the same catalogue entry."""
    assert cli.main(["explain", code, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    page = (TRAPS_DIR / f"{doc['layer']}.md").read_text(encoding="utf-8")
    section = page.split(f'<a id="{code.lower()}"></a>', 1)[1].split('<a id="', 1)[0]
    for key in ("title", "symptom", "why", "detect"):
        assert " ".join(doc[key].split()) in section, key
    for cmd in doc["fix_safe"]:
        assert cmd in section


def _defined() -> set[str]:
    return {t.code for t in knowledge.all_traps()} | set(_redirects())


def _referenced(text: str) -> set[str]:
    return {c for c in CODE_TOKEN.findall(text) if c not in NOT_CODES and c[0] in LAYERS}


def test_codes_named_in_hand_written_docs_exist():
    defined = _defined()
    for md in DOCS.glob("*.md"):
        missing = _referenced(md.read_text(encoding="utf-8")) - defined
        assert not missing, f"{md.name} names undefined codes: {sorted(missing)}"


def test_codes_named_in_the_catalogue_exist():
    defined = _defined()
    for t in knowledge.all_traps():
        text = " ".join([t.symptom, t.why, t.detect, t.fix, t.versions, *t.fix_safe, *t.fix_change])
        missing = _referenced(text) - defined
        assert not missing, f"{t.code} names undefined codes: {sorted(missing)}"


def _literal_codes(folder: Path) -> set[str]:
    import ast

    found = set()
    for py in folder.glob("*.py"):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.update(c for c in [node.value] if re.fullmatch(r"[A-Z]\d{3}", c))
    return found


def test_lint_doc_lists_every_lint_rule():
    text = (DOCS / "lint.md").read_text(encoding="utf-8")
    own = {c for c in _literal_codes(REPO / "epdoctor" / "lint") if c[0] in "BSEC" and c[1] == "4"}
    missing = sorted(c for c in own if f"[{c}]" not in text)
    assert not missing, f"docs/lint.md does not list {missing}"


def _doc_commands(md: Path) -> list[list[str]]:
    """Every `epdoctor ...` command in a page's code blocks, as argv (shell parts removed)."""
    import shlex

    out = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", md.read_text(encoding="utf-8"), re.S):
        for line in block.splitlines():
            m = re.search(r"(?:^|&& |run: )epdoctor (.*)$", line.strip())
            if not m:
                continue
            cmd = re.sub(r"\$\([^)]*\)\)?", "1", m.group(1))  # $(pgrep ...) -> a pid
            cmd = re.split(r"\s(?:#|>|\|\|)", cmd)[0]
            out.append(shlex.split(cmd))
    return out


HAND_WRITTEN = ["getting-started.md", "lint.md", "adding-a-trap.md"]


@pytest.mark.parametrize("page", HAND_WRITTEN)
def test_commands_in_docs_parse(page, capsys):
    """A command the docs tell a user to type is accepted by the real parser."""
    commands = _doc_commands(DOCS / page)
    parser = cli.build_parser()
    for argv in commands:
        try:
            parser.parse_args(argv)
        except SystemExit as exc:
            pytest.fail(
                f"{page}: `epdoctor {' '.join(argv)}` is rejected: {capsys.readouterr().err}"
            )
            raise AssertionError from exc
    if page != "adding-a-trap.md":
        assert commands, f"{page} shows no epdoctor command"
