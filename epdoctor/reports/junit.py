"""JUnit XML, as CI systems read it (Jenkins, GitLab, GitHub test reporters).

One `<testsuite>` per target (diagnose) or per file (lint); one `<testcase>` per check. A finding
at or above the run's `--fail-on` level is a `<failure>` (message: the title; body: evidence and
fix), so the CI view agrees with the exit code; an unknown or not-applicable check is `<skipped>`
(an unknown is never shown as a pass); a warning under the gate passes with its text in
`<system-out>`; a target that could not be diagnosed is an `<error>`. The shape follows popeye's
junit writer (derailed/popeye internal/report/junit.go) and ruff's (one case per code,
crates/ruff_db/src/diagnostic/render/junit.rs).

Results arrive redacted (epdoctor.diagnose); each text still goes through the one redactor,
epdoctor.redact, before it is escaped, so the XML document is no new carrier.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

from epdoctor.model import Finding, Status, TargetResult
from epdoctor.redact import redact_text
from epdoctor.reports.common import layer_name, sort_findings

# Characters XML 1.0 cannot carry at all, even escaped (C0 controls but tab, LF, CR; surrogates).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def clean(text: object) -> str:
    return _NOT_XML.sub("\ufffd", redact_text(str(text)))


@dataclass
class Case:
    name: str
    classname: str
    outcome: str = "pass"  # pass | failure | skipped | error
    message: str = ""
    body: str = ""
    kind: str = ""  # the failure's type attribute: the severity (fail, warn, ...)
    attrs: dict[str, str] = field(default_factory=dict)


@dataclass
class Suite:
    name: str
    cases: list[Case] = field(default_factory=list)
    properties: dict[str, str] = field(default_factory=dict)


def document(name: str, suites: list[Suite]) -> str:
    """The XML text; names, messages and bodies are escaped by ElementTree."""
    root = ET.Element("testsuites", name=clean(name))
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for s in suites:
        el = ET.SubElement(root, "testsuite", name=clean(s.name))
        n = {
            "tests": len(s.cases),
            "failures": sum(c.outcome == "failure" for c in s.cases),
            "errors": sum(c.outcome == "error" for c in s.cases),
            "skipped": sum(c.outcome == "skipped" for c in s.cases),
        }
        for k, v in n.items():
            el.set(k, str(v))
            totals[k] += v
        if s.properties:
            props = ET.SubElement(el, "properties")
            for k, v in s.properties.items():
                ET.SubElement(props, "property", name=clean(k), value=clean(v))
        for c in s.cases:
            case = ET.SubElement(el, "testcase", name=clean(c.name), classname=clean(c.classname))
            for k, v in c.attrs.items():
                case.set(k, clean(v))
            if c.outcome in ("failure", "error"):
                kind = c.kind or c.outcome
                child = ET.SubElement(case, c.outcome, message=clean(c.message), type=kind)
                child.text = clean(c.body) if c.body else None
            elif c.outcome == "skipped":
                ET.SubElement(case, "skipped", message=clean(c.message))
            elif c.body:
                ET.SubElement(case, "system-out").text = clean(c.body)
    for k, v in totals.items():
        root.set(k, str(v))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode")


def _body(f: Finding) -> str:
    lines = list(f.evidence)
    if f.fix:
        lines.append(f"fix: {f.fix}")
    lines.append(f"epdoctor explain {f.code}")
    return "\n".join(lines)


def finding_case(f: Finding, target: str, threshold: int) -> Case:
    case = Case(
        name=f"{f.code} {f.title}",
        classname=f"epdoctor.{target}.{layer_name(f.code)}",
        message=f.title,
        body=_body(f),
        kind=f.status.value,
    )
    if f.status.rank >= threshold and f.status not in (Status.PASS, Status.SKIP):
        case.outcome = "failure"
        case.message = f"{f.code} [{f.status.value}] {f.title}"
    elif f.status is Status.UNKNOWN:
        case.outcome, case.message = "skipped", f"unknown: {f.title}"
    elif f.status is Status.SKIP:
        case.outcome, case.message = "skipped", f"not applicable: {f.title}"
    elif f.status is Status.PASS:
        case.body = ""
    else:  # under the gate: passes, and says what it saw
        case.body = f"{f.code} [{f.status.value}] {f.title}\n{case.body}"
    return case


def render(
    results: list[TargetResult], fleet: list[Finding] | None = None, fail_on: str = "fail"
) -> str:
    threshold = Status(fail_on).rank
    suites = []
    for r in results:
        name = r.target.name
        suite = Suite(name, properties={"kind": r.target.kind})
        if r.error:
            suite.cases.append(
                Case("diagnose", f"epdoctor.{name}", "error", f"could not diagnose: {r.error}")
            )
        suite.cases += [finding_case(f, name, threshold) for f in sort_findings(r.findings)]
        suites.append(suite)
    if fleet:
        suites.append(Suite("fleet", [finding_case(f, "fleet", threshold) for f in fleet]))
    return document("epdoctor diagnose", suites)
