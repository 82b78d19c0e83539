"""The trap catalogue as data: every file parses, codes are well-formed and unique,
required sections are present, references are URLs, and every code that a check or a
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


REFERENCE_RECIPES = {  # the public review threads the catalogue's knowledge comes from
    "https://github.com/awslabs/awsome-distributed-ai/pull/1230",
    "https://github.com/awslabs/awsome-distributed-ai/pull/1231",
    "https://github.com/awslabs/awsome-distributed-ai/pull/1240",
    "https://github.com/awslabs/awsome-distributed-ai/pull/1256",
}
URL = re.compile(r"https?://[^\s/]+\.[^\s/]+(/\S*)?")


def test_every_reference_is_a_url_users_can_open():
    bad = [
        f"{t.code}: {r!r}"
        for t in knowledge.all_traps()
        for r in t.references
        if not URL.fullmatch(r)
    ]
    assert not bad, "references are http(s) URLs:\n" + "\n".join(bad)
    cited = {r for t in knowledge.all_traps() for r in t.references}
    assert cited >= REFERENCE_RECIPES, "the catalogue cites the reference recipes' pull requests"


def test_no_trap_keeps_a_seeds_list():
    has = [p.stem for p in FILES if "seeds" in tomllib.loads(p.read_text(encoding="utf-8"))]
    assert not has, f"cite the pull request's URL in references instead: {has}"


def test_every_code_a_registered_check_emits_exists():
    from epdoctor.checks import load_all
    from epdoctor.checks.registry import DETECTORS as REGISTRY

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


# The packages whose modules register detectors (epdoctor/checks/registry.py).
DETECTOR_PACKAGES = ("epdoctor.checks", "epdoctor.lint", "epdoctor.plan", "epdoctor.launch")


def _registry():
    import importlib
    import pkgutil

    from epdoctor.checks.registry import DETECTORS

    for name in DETECTOR_PACKAGES:
        pkg = importlib.import_module(name)
        for mod in pkgutil.iter_modules(pkg.__path__):
            importlib.import_module(f"{name}.{mod.name}")
    return DETECTORS


def _function(ref: str):
    import importlib

    module, _, qualname = ref.partition(":")
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def test_every_detected_trap_has_a_detector():
    """A trap whose `detect` is not explain-only names the functions that detect it (a check,
    log rule, lint rule, plan rule or launch gate) in its `detectors` list."""
    missing = [t.code for t in knowledge.all_traps() if not t.explain_only and not t.detectors]
    assert not missing, f"detect names a detector, but the TOML lists none: {missing}"


def test_every_listed_detector_exists_and_registers_its_code():
    registry = _registry()
    bad = []
    for t in knowledge.all_traps():
        for ref in t.detectors:
            try:
                fn = _function(ref)
            except (ImportError, AttributeError) as exc:
                bad.append(f"{t.code}: {ref} does not exist ({exc})")
                continue
            if not any(d.fn is fn and t.code in d.codes for d in registry):
                bad.append(f"{t.code}: {ref} is not registered as a detector of {t.code}")
    assert not bad, "\n".join(bad)


def test_every_registered_code_lists_its_detector():
    registry = _registry()
    assert {d.domain for d in registry} >= {
        "node",
        "kube",
        "logs",
        "fleet",
        "recipe",
        "plan",
        "launch",
    }
    unlisted = [
        f"{code}: {d.ref} ({d.domain})"
        for d in registry
        for code in d.codes
        if d.ref not in knowledge.get(code).detectors
    ]
    assert not unlisted, "add these to the trap's `detectors` list:\n" + "\n".join(unlisted)


def test_log_rules_are_one_table():
    """Every log rule lives in a trap's [[log]]: ids unique, patterns compile, in one order."""
    from epdoctor.facts.logs import triage

    rules = knowledge.log_rules()
    ids = [r.id for r in rules]
    assert len(ids) == len(set(ids)), "a rule id names one rule"
    assert [r.id for r in triage.ALL_RULES] == ids, "the analyzer reads the catalogue's rules"
    for r in rules:
        assert r.file.endswith(f"{r.code}.toml") and r.patterns and r.subsystem, r
        for p in r.patterns:
            re.compile(p)
        assert set(r.candidates) <= {t.code for t in knowledge.all_traps()}, r
    for t in knowledge.all_traps():
        for p in t.discriminator.log if t.discriminator else ():
            re.compile(p)
    # the scanner's stored anchors are those of this catalogue (python -m
    # epdoctor.facts.logs.triage refreshes knowledge/log_anchors.txt)
    from epdoctor.facts.logs.signatures import ANCHORS

    assert triage.stored_anchors(ANCHORS) == triage.rule_anchors(ANCHORS), (
        "stale knowledge/log_anchors.txt: run `python -m epdoctor.facts.logs.triage`"
    )
    # the event table is what the rules judged one per rule say, and no module of
    # facts/logs/ carries a wording of its own beyond the extraction of facts
    assert {e.id for e in knowledge.log_events()} == {r.id for r in rules if r.per == "rule"}


def test_every_detected_trap_is_tested():
    src = _corpus(REPO / "tests", skip=("test_catalogue.py", "test_docs.py"))
    missing = [
        t.code
        for t in knowledge.all_traps()
        if not t.explain_only and not re.search(rf"\b{t.code}\b", src)
    ]
    assert not missing, f"no test names these detected codes: {missing}"


# Words that mean nothing outside this repository: a source-folder file name, "seed(s)" as the
# name of a reference (random seeds and "seeded" routing are fine), its "Layer 5b".
FOREIGN = re.compile(
    r"\b\d{3}_[0-9a-f]{16}\.txt\b|\bseeds?\b(?!\s*[=:(,)]|\s*\*)|\bseed's|\bLayer 5b\b", re.I
)
USER_FACING = [  # what users read: explain, docs, reports, plans, CLI help, the TUI
    REPO / "README.md",
    *sorted((REPO / "docs").rglob("*.md")),
    *sorted(p for p in TRAPS.glob("*.toml")),
    *sorted((REPO / "epdoctor" / "knowledge" / "stack").glob("*.toml")),
    REPO / "epdoctor" / "knowledge" / "tour.toml",
]
USER_STRINGS = [  # Python whose string literals users read (help, reasons, report lines)
    *sorted((REPO / "epdoctor" / "reports").glob("*.py")),
    *sorted((REPO / "epdoctor" / "commands").glob("*.py")),
    REPO / "epdoctor" / "cli.py",
    REPO / "epdoctor" / "plan" / "rules.py",
    *sorted((REPO / "screens").glob("*.py")),
]


def _string_literals(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            out.append((node.lineno, node.value))
    return out


def test_user_facing_text_cites_nothing_users_cannot_open():
    hits = []
    for path in USER_FACING:
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if FOREIGN.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()[:120]}")
    for path in USER_STRINGS:
        for n, text in _string_literals(path):
            if FOREIGN.search(text):
                hits.append(f"{path.relative_to(REPO)}:{n}: {text.strip()[:120]}")
    assert not hits, "say 'the reference recipe' and cite its pull request's URL:\n" + "\n".join(
        hits
    )


def test_explain_lists_urls_as_references():
    import subprocess

    r = subprocess.run(
        [sys.executable, "-m", "epdoctor", "explain", "L103"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    refs = r.stdout.split("References", 1)[1]
    assert "https://github.com/awslabs/awsome-distributed-ai/pull/1230" in refs
    assert not FOREIGN.search(r.stdout)


def test_explain_shows_where_each_detector_lives():
    import json
    import subprocess

    def explain(*argv: str) -> str:
        r = subprocess.run(
            [sys.executable, "-m", "epdoctor", "explain", *argv],
            capture_output=True,
            text=True,
            cwd=REPO,
            env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"},
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    found = json.loads(explain("L101", "--json"))["detectors"]
    assert [d["function"] for d in found] == list(knowledge.get("L101").detectors)
    assert {d["domain"] for d in found} == {"node", "logs", "plan", "image"}
    for d in found:
        line = (REPO / d["path"]).read_text(encoding="utf-8").splitlines()[d["line"] - 1]
        name = d["function"].rsplit(":", 1)[1].rsplit(".", 1)[-1]
        assert line.lstrip().startswith(f"def {name}("), (d, line)
    text = explain("L101")
    assert f"{found[0]['path']}:{found[0]['line']}  nccl_gin_floor (node)" in text
    method = json.loads(explain("M701", "--json"))["detectors"]
    assert method and all(d["line"] and d["domain"] == "launch" for d in method)
