#!/usr/bin/env python3
"""Score `epdoctor logs` on the corpus of real logs (tests/fixtures/logs/corpus/).

Each excerpt has its source, the maintainers' diagnosis, the trap code of the root cause
(`expect_code`) and the verdict the whole log should get (`expect_status`). For each set
(dev: what development was tested on; device: failing runs captured on a GPU node; held: the
third kept out of development) this prints how often the verdict is right, how often the root
cause is the first finding, and how often it is among the findings at all.

    python tests/corpus_score.py            # the development sets (dev, device)
    python tests/corpus_score.py --set held # the held-out third, only at the end
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

CORPUS = Path(__file__).resolve().parent / "fixtures" / "logs" / "corpus"
sys.path.insert(0, str(CORPUS.parents[3]))

from epdoctor.checks.base import Context  # noqa: E402
from epdoctor.logwatch import LogAnalysis, analyze_paths  # noqa: E402
from epdoctor.reports.logs_report import by_severity  # noqa: E402


@dataclass(frozen=True)
class Case:
    file: str
    kind: str
    source: str
    diagnosis: str
    expect_code: str
    expect_status: str
    also_codes: tuple[str, ...]
    no_expect_efa: bool
    held_out: bool
    blind: bool = False
    accept_codes: tuple[str, ...] = ()

    @property
    def set(self) -> str:
        if self.blind:
            return self.file.split("/", 1)[0]  # blind, blind2: each scored once
        if self.held_out:
            return "held"
        return "device" if self.kind == "device" else "dev"

    @property
    def path(self) -> Path:
        return CORPUS / self.file


def cases(blind: bool = False) -> list[Case]:
    """The corpus' cases; the blind set (corpus-blind.toml) only when asked: it is scored once,
    never developed against."""
    out = []
    for manifest in sorted(CORPUS.glob("corpus*.toml")):
        if manifest.name.startswith("corpus-blind") and not blind:
            continue
        for t in tomllib.loads(manifest.read_text(encoding="utf-8")).get("log", []):
            out.append(
                Case(
                    file=t["file"],
                    kind=t.get("kind", "real"),
                    source=t.get("source", ""),
                    diagnosis=t.get("diagnosis", ""),
                    expect_code=t.get("expect_code", ""),
                    expect_status=t["expect_status"],
                    also_codes=tuple(t.get("also_codes", ())),
                    no_expect_efa=bool(t.get("no_expect_efa", False)),
                    held_out=bool(t.get("held_out", False)),
                    blind=bool(t.get("blind", False)),
                    accept_codes=tuple(t.get("accept_codes", ())),
                )
            )
    return out


def analyze(c: Case) -> LogAnalysis:
    ctx = Context(options={"expect_efa": False} if c.no_expect_efa else {})
    return analyze_paths([str(c.path)], ctx, parallel=False)


@dataclass(frozen=True)
class Score:
    verdict_ok: bool
    cause_first: bool
    cause_found: bool
    verdict: str
    first: str
    cause_top2: bool = True  # the root cause among the first two findings of that severity
    healthy_fails: int = 0  # fail findings on a log expected to pass

    @property
    def ok(self) -> bool:
        if not self.verdict_ok:
            return False
        return self.cause_first or not self.first


def score(c: Case, a: LogAnalysis | None = None) -> Score:
    a = a or analyze(c)
    verdict = a.worst().value
    ordered = by_severity(a.findings)
    top = [f for f in ordered if f.status.value == c.expect_status]
    first = top[0].code if top else ""
    codes = {f.code for f in a.findings if f.status.value == c.expect_status}
    if c.expect_status in ("pass", "unknown"):
        fails = sum(f.status.value == "fail" for f in a.findings)
        return Score(verdict == c.expect_status, True, True, verdict, "", True, fails)
    want = {c.expect_code, *c.accept_codes}
    return Score(
        verdict == c.expect_status,
        first in want,
        bool(want & codes),
        verdict,
        first,
        bool(want & {f.code for f in top[:2]}),
    )


SETS = ("dev", "device", "held")


def _set_name(text: str) -> str:
    """dev, device, held, or a blind set (blind, blind2, blind3, ...)."""
    if text in SETS or re.fullmatch(r"blind\d*", text):
        return text
    raise argparse.ArgumentTypeError(f"not a set: {text!r} (dev, device, held, blindN)")


def _set_order(name: str) -> tuple[int, str]:
    return (SETS.index(name), "") if name in SETS else (len(SETS), name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--set",
        type=_set_name,
        action="append",
        help="which sets to score (default: dev and device); blind only once, at the end",
    )
    ap.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    args = ap.parse_args()
    by_set: dict[str, list[tuple[Case, Score]]] = {}
    for c in cases(blind=any(s.startswith("blind") for s in (args.set or ()))):
        if c.set not in (args.set or ("dev", "device")):
            continue
        by_set.setdefault(c.set, []).append((c, score(c)))
    for name in sorted(by_set, key=_set_order):
        rows = by_set.get(name)
        if not rows:
            continue
        n = len(rows)
        v = sum(s.verdict_ok for _, s in rows)
        first = sum(s.verdict_ok and s.cause_first for _, s in rows)
        found = sum(s.verdict_ok and s.cause_found for _, s in rows)
        failing = [(c, s) for c, s in rows if c.expect_status == "fail"]
        false_ok = sum(s.verdict in ("pass", "unknown") for _, s in failing)
        top2 = sum(s.verdict_ok and s.cause_top2 for c, s in failing)
        healthy = [(c, s) for c, s in rows if c.expect_status == "pass"]
        healthy_fail = sum(s.healthy_fails > 0 for _, s in healthy)
        print(
            f"{name:6s} {n:3d} logs: verdict {v}/{n}, root cause first {first}/{n}, "
            f"root cause found {found}/{n}; failing logs not failed: {false_ok}/{len(failing)}; "
            f"cause in the first two fail findings {top2}/{len(failing)}; "
            f"healthy logs with a fail finding {healthy_fail}/{len(healthy)}"
        )
        if args.verbose:
            for c, s in rows:
                if not (s.verdict_ok and s.cause_first):
                    print(
                        f"  MISS {c.file}: want {c.expect_status} {c.expect_code}, got "
                        f"{s.verdict} (first {s.first or '-'}); {c.diagnosis[:100]}"
                    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
