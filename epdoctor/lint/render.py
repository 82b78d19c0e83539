"""One renderer per output format for lint reports: text, JSON, SARIF 2.1.0, JUnit XML."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from typing import TextIO

from epdoctor import __version__, knowledge
from epdoctor.lint.base import LintFinding, LintReport
from epdoctor.model import Status
from epdoctor.safeio import plain  # file names and lines are foreign text: no escape codes

# A lint finding's level is its Status: lowest to highest.
LEVELS = tuple(s.value for s in (Status.INFO, Status.UNKNOWN, Status.WARN, Status.FAIL))
SARIF_LEVEL = {"fail": "error", "warn": "warning", "unknown": "note", "info": "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def rank(level: str) -> int:
    return Status(level).rank if level in LEVELS else Status.WARN.rank


def _color(stream: TextIO) -> bool:
    return stream.isatty() and not os.environ.get("NO_COLOR")


_ANSI = {"fail": "\033[31m", "warn": "\033[33m", "unknown": "\033[36m", "info": "\033[2m"}


def text(report: LintReport, stream: TextIO | None = None, show_suppressed: bool = False) -> None:
    stream = stream or sys.stdout
    color = _color(stream)
    shown = report.findings if show_suppressed else report.active
    for f in shown:
        level = f.level()
        tag = f"{_ANSI[level]}{level}\033[0m" if color and level in _ANSI else level
        note = f" (suppressed: {f.suppressed})" if f.suppressed is not None else ""
        line = f"{plain(f.path)}:{f.line}:{f.column}: {f.code} [{tag}] {plain(f.message)}"
        stream.write(f"{line}{plain(note)}\n")
    for err in report.errors:
        stream.write(f"error: {plain(err)}\n")
    for skip in report.skipped:
        stream.write(f"skipped: {plain(skip)}\n")
    for skip in report.not_linted:
        stream.write(f"not linted: {plain(skip)}\n")
    counts = Counter(f.level() for f in report.active)
    parts = [f"{counts[lv]} {lv}" for lv in reversed(LEVELS) if counts[lv]]
    summary = f"{len(report.active)} finding(s)" + (f" ({', '.join(parts)})" if parts else "")
    checked = report.checked if report.checked >= 0 else sum(1 for f in report.files if f.kinds)
    summary += f" in {checked} recipe file(s)"
    if report.suppressed:
        summary += f"; {len(report.suppressed)} suppressed"
    if report.skipped:
        summary += f"; {len(report.skipped)} skipped"
    if report.not_linted:
        summary += f"; {len(report.not_linted)} not linted"
    stream.write(summary + ". `epdoctor explain CODE` explains a code.\n")


def to_json(report: LintReport) -> dict[str, object]:
    counts = Counter(f.level() for f in report.active)
    return {
        "tool": "epdoctor",
        "version": __version__,
        "root": str(report.root),
        "files": [{"path": f.rel, "kinds": list(f.kinds)} for f in report.files if f.kinds],
        "findings": [f.to_json() for f in report.findings],
        "summary": {
            "active": len(report.active),
            "suppressed": len(report.suppressed),
            "by_severity": {lv: counts[lv] for lv in LEVELS},
        },
        "errors": list(report.errors),
        "skipped": list(report.skipped),
        "not_linted": list(report.not_linted),
        "config": report.config,
    }


def _rule(code: str) -> dict[str, object]:
    try:
        trap = knowledge.get(code)
    except KeyError:
        return {"id": code, "shortDescription": {"text": code}}
    fix = trap.fix_text()
    return {
        "id": trap.code,
        "name": trap.name,
        "shortDescription": {"text": trap.title},
        "fullDescription": {"text": trap.why},
        "help": {
            "text": fix,
            "markdown": f"**{trap.title}**\n\n{trap.why}\n\n**Fix:** {fix}\n\n"
            f"`epdoctor explain {trap.code}`; docs/traps/{trap.layer}.md#{trap.code.lower()}",
        },
        "defaultConfiguration": {"level": SARIF_LEVEL.get(trap.default_status.value, "warning")},
        "properties": {"tags": [trap.layer], "severity": trap.default_status.value},
    }


def _result(f: LintFinding, index: dict[str, int]) -> dict[str, object]:
    out: dict[str, object] = {
        "ruleId": f.code,
        "ruleIndex": index[f.code],
        "level": SARIF_LEVEL.get(f.level(), "warning"),
        "message": {"text": f.message},
        "locations": [
            {
                "physicalLocation": {
                    "artifactLocation": {"uri": f.path, "uriBaseId": "SRCROOT"},
                    "region": {"startLine": f.line, "startColumn": f.column},
                }
            }
        ],
    }
    if f.suppressed is not None:
        out["suppressions"] = [{"kind": "inSource", "justification": f.suppressed}]
    return out


def to_sarif(report: LintReport) -> dict[str, object]:
    codes = sorted({f.code for f in report.findings})
    index = {c: i for i, c in enumerate(codes)}
    notifications = [{"level": "error", "message": {"text": err}} for err in report.errors]
    notifications += [{"level": "note", "message": {"text": s}} for s in report.skipped]
    run: dict[str, object] = {
        "tool": {
            "driver": {
                "name": "epdoctor",
                "version": __version__,
                "rules": [_rule(c) for c in codes],
            }
        },
        "originalUriBaseIds": {"SRCROOT": {"uri": report.root.as_uri() + "/"}},
        "results": [_result(f, index) for f in report.findings],
        "invocations": [
            {"executionSuccessful": not report.errors, "toolExecutionNotifications": notifications}
        ],
    }
    return {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}


def dump(doc: dict[str, object], stream: TextIO | None = None) -> None:
    stream = stream or sys.stdout
    json.dump(doc, stream, indent=2)
    stream.write("\n")


def to_junit(report: LintReport, fail_on: str = "warn") -> str:
    """JUnit XML: a suite per recipe file, a case per finding (a file without findings passes
    as one case); at or above --fail-on is a failure, a suppressed finding is skipped."""
    from epdoctor.reports.junit import Case, Suite, document

    threshold = rank(fail_on)
    suites: dict[str, Suite] = {
        f.rel: Suite(f.rel, properties={"kinds": ",".join(f.kinds)})
        for f in report.files
        if f.kinds
    }
    for f in report.findings:
        level = f.level()
        title = _title(f.code)
        case = Case(
            name=f"{f.code} {title}",
            classname=f"epdoctor.lint.{f.path}",
            message=f"{f.code} [{level}] {f.message}",
            body=f"{f.path}:{f.line}:{f.column}: {f.message}\nepdoctor explain {f.code}",
            kind=level,
            attrs={"file": f.path, "line": str(f.line)},
        )
        if f.suppressed is not None:
            case.outcome, case.message = "skipped", f"suppressed: {f.suppressed}"
        elif rank(level) >= threshold:
            case.outcome = "failure"
        elif level == "unknown":
            case.outcome = "skipped"
        suites.setdefault(f.path, Suite(f.path)).cases.append(case)
    for s in suites.values():
        if not s.cases:
            s.cases.append(Case("no findings", f"epdoctor.lint.{s.name}"))
    out = list(suites.values())
    if report.errors or report.skipped:
        other = Suite("not checked")
        other.cases += [Case("lint", "epdoctor.lint", "error", e) for e in report.errors]
        other.cases += [Case("read", "epdoctor.lint", "skipped", s) for s in report.skipped]
        out.append(other)
    return document("epdoctor lint", out)


def _title(code: str) -> str:
    try:
        return knowledge.get(code).title
    except KeyError:
        return code
