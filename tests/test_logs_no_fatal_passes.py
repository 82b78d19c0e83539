"""No fatal line passes: every failing log of the corpus, with the lines of its known cause cut
out, still ends fail where a fatal line is left, and never passes.

What is left is what a log looks like when its cause has a wording no rule knows yet: the
lexicon (knowledge/log_lexicon.toml) must still read it as a failure.
"""

from __future__ import annotations

import re

import pytest
from corpus_score import Case, analyze, cases

from epdoctor.checks.base import Context
from epdoctor.checks.log_incidents import FACT_CODES
from epdoctor.facts.logs import triage
from epdoctor.facts.logs.prefix import parse_line
from epdoctor.logwatch import analyze_stream

FAILING = [c for c in cases() if c.expect_status == "fail"]
_LINE = re.compile(r":(\d+): ")


def _cause_lines(c: Case) -> set[int]:
    """The lines that name the known cause: those a rule of its trap matches, and the facts its
    findings quote (a plugin line, a provider banner) where the cause is judged from facts."""
    want = {c.expect_code, *c.accept_codes}
    a = analyze(c)
    out = {t.line_no for t in a.facts.troubles if t.verdict.code in want}
    if not out:
        for f in a.findings:
            if f.code in want:
                out |= {int(m[1]) for e in f.evidence if (m := _LINE.search(e))}
    return out


def _left(lines: list[str], levels: tuple[str, ...]) -> bool:
    """A line is left that reads as trouble at one of these levels."""
    for text in lines:
        v = triage.classify(parse_line(text))
        # a plugin-load line is judged by the network facts, not by its own level
        if v is not None and v.is_trouble and v.level in levels and v.code not in FACT_CODES:
            return True
    return False


@pytest.mark.parametrize("case", FAILING, ids=[c.file for c in FAILING])
def test_without_its_known_cause_a_failing_log_still_fails(case: Case):
    if analyze(case).worst().value != "fail":
        pytest.skip("the whole log is not failed yet (a known miss of tests/test_logs_corpus.py)")
    cut = _cause_lines(case)
    lines = case.path.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = [t for n, t in enumerate(lines, 1) if n not in cut]
    ctx = Context(options={"expect_efa": False} if case.no_expect_efa else {})
    a = analyze_stream([("\n".join(kept) + "\n").encode()], ctx)
    verdict = a.worst().value
    if _left(kept, (triage.ERROR,)):
        assert verdict == "fail", (case.file, sorted(cut), [f.title[:80] for f in a.findings])
    elif _left(kept, (triage.WARNING,)):
        assert verdict != "pass", (case.file, sorted(cut))


def test_the_cut_is_real():
    # the test above means something only if most failing logs lose lines
    assert sum(bool(_cause_lines(c)) for c in FAILING) >= len(FAILING) * 3 // 4
