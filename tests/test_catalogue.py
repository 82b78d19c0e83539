"""The trap catalogue as data: every file parses, codes are well-formed and unique,
required sections are present, cited seeds exist, and every code that a check or a
lint rule can emit is defined."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

from epdoctor import knowledge
from epdoctor.knowledge.catalogue import CODE_RE, LAYERS, _redirects, parse_trap

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent
TRAPS = REPO / "epdoctor" / "knowledge" / "traps"
SEED_DIRS = [REPO.parent / "shared" / "seeds", Path("/work/shared/seeds")]
SEED_NAME = re.compile(r"^\d{3}_[0-9a-f]{16}\.txt$")
FILES = sorted(TRAPS.glob("*.toml"))


def test_there_is_a_catalogue():
    assert len(FILES) >= 50


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_trap_file_parses_and_has_required_sections(path: Path):
    code = path.stem
    assert CODE_RE.match(code), f"{path.name}: code must be one capital letter and three digits"
    assert code[0] in LAYERS
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    trap = parse_trap(code, data)  # raises on missing title/severity/symptom/why/detect
    assert trap.name and trap.name != code.lower(), "every trap has a kebab-case name"
    assert re.fullmatch(r"[a-z0-9.]+(-[a-z0-9.]+)*", trap.name), trap.name
    assert isinstance(data.get("fix"), dict), "fix is a table with text/safe/change"
    assert trap.fix or trap.fix_safe or trap.fix_change, "a fix says what to do"
    unknown = set(data["fix"]) - {"text", "safe", "change"}
    assert not unknown, f"fix keys are text, safe (read-only) and change (edits): {unknown}"
    if trap.explain_only:
        reason = trap.detect.split(":", 1)[1].strip() if ":" in trap.detect else ""
        assert len(reason.split()) >= 6, "an explain-only entry says why it cannot be detected"


def test_codes_and_names_unique():
    traps = knowledge.all_traps()
    codes = [t.code for t in traps]
    assert len(codes) == len(set(codes))
    names = [t.name for t in traps]
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f"names used twice: {dup}"


def test_redirects_point_at_live_codes_and_are_not_reused():
    live = {t.code for t in knowledge.all_traps()}
    for old, new in _redirects().items():
        assert CODE_RE.match(old) and CODE_RE.match(new)
        assert old not in live, f"{old} is redirected, so its code may not be reused"
        assert new in live, f"{old} redirects to {new}, which does not exist"


def _seed_dir() -> Path | None:
    return next((d for d in SEED_DIRS if d.is_dir()), None)


def test_cited_seeds_exist():
    seeds_dir = _seed_dir()
    cited = {s for t in knowledge.all_traps() for s in t.seeds}
    assert cited, "the catalogue cites its seeds"
    for s in cited:
        assert SEED_NAME.match(s), f"seed {s!r} is not a seed file name"
    if seeds_dir is None:
        pytest.skip("no seeds folder next to the repository")
    missing = sorted(s for s in cited if not (seeds_dir / s).is_file())
    assert not missing, f"cited seeds not in {seeds_dir}: {missing}"


def test_every_code_a_registered_check_emits_exists():
    from epdoctor.checks import load_all
    from epdoctor.checks.base import REGISTRY

    load_all()
    assert REGISTRY, "checks register themselves"
    live = {t.code for t in knowledge.all_traps()}
    missing = sorted({c for reg in REGISTRY for c in reg.codes} - live)
    assert not missing, f"checks emit codes the catalogue lacks: {missing}"


def _literal_codes(folder: Path) -> set[str]:
    """Trap codes written as string literals in a package's source (what its rules emit)."""
    found: set[str] = set()
    for py in folder.glob("*.py"):
        for node in ast.walk(ast.parse(py.read_text(encoding="utf-8"))):
            is_str = isinstance(node, ast.Constant) and isinstance(node.value, str)
            if is_str and CODE_RE.match(node.value) and node.value[0] in LAYERS:
                found.add(node.value)
    return found


def test_every_code_a_lint_rule_emits_exists():
    codes = _literal_codes(REPO / "epdoctor" / "lint")
    assert {"B401", "S401", "S400"} <= codes
    live = {t.code for t in knowledge.all_traps()}
    assert not sorted(codes - live), f"lint rules emit undefined codes: {sorted(codes - live)}"


def test_lint_detected_traps_have_a_lint_rule():
    """A trap whose detect line says `lint:` is emitted by some rule in epdoctor/lint/."""
    codes = _literal_codes(REPO / "epdoctor" / "lint")
    claimed = {t.code for t in knowledge.all_traps() if t.detect.lower().startswith("lint:")}
    from epdoctor.checks.env import DEAD_KNOBS  # the env contract lint reuses from checks

    missing = sorted(claimed - codes - set(DEAD_KNOBS.values()))
    assert not missing, f"catalogue says lint detects these, but no lint rule emits them: {missing}"


def _corpus(*folders: Path, skip: tuple[str, ...] = ()) -> str:
    out = []
    for folder in folders:
        for p in folder.rglob("*"):
            wanted = p.suffix in (".py", ".toml", ".json", ".yaml", ".txt", ".log")
            if wanted and p.is_file() and not any(s in p.as_posix() for s in skip):
                out.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(out)


def test_every_detected_trap_has_a_detector():
    """A trap whose `detect` is not explain-only is emitted by some code (check, log rule,
    lint rule, plan or launch verdict, or their data tables)."""
    src = _corpus(REPO / "epdoctor", REPO / "probes", skip=("knowledge/traps/", "redirects.toml"))
    missing = [
        t.code
        for t in knowledge.all_traps()
        if not t.explain_only and not re.search(rf"\b{t.code}\b", src)
    ]
    assert not missing, f"detect names a detector, but no source emits these codes: {missing}"


def test_every_detected_trap_is_tested():
    src = _corpus(REPO / "tests", skip=("test_catalogue.py", "test_docs.py"))
    missing = [
        t.code
        for t in knowledge.all_traps()
        if not t.explain_only and not re.search(rf"\b{t.code}\b", src)
    ]
    assert not missing, f"no test names these detected codes: {missing}"
