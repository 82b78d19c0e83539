"""Markdown report, pastable into a GitHub issue."""

from __future__ import annotations

from epdoctor import __version__
from epdoctor.model import Finding, Status, TargetResult
from epdoctor.redact import redact_text
from epdoctor.reports.common import SHOWN_BY_DEFAULT, headline, sort_findings
from epdoctor.reports.facts_table import fact_rows
from epdoctor.safeio import plain

ICON = {"fail": "❌", "warn": "⚠️", "unknown": "❔", "pass": "✅", "skip": "➖"}


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_target(r: TargetResult, verbose: bool = False) -> list[str]:
    out = [f"### `{r.target.name}` ({r.target.kind})", "", f"**{headline(r)}**", ""]
    if r.error and not r.findings:
        return out
    out += ["| fact | value |", "|---|---|"]
    out += [f"| {_cell(k)} | {_cell(v)} |" for k, v in fact_rows(r.facts)]
    out.append("")
    shown = [f for f in sort_findings(r.findings) if verbose or f.status in SHOWN_BY_DEFAULT]
    if shown:
        out += ["| | code | finding |", "|---|---|---|"]
        out += [f"| {ICON[f.status.value]} | `{f.code}` | {_cell(f.title)} |" for f in shown]
        out.append("")
        for f in shown:
            if f.status in (Status.FAIL, Status.WARN, Status.UNKNOWN):
                out += _detail(f)
    passed = sum(1 for f in r.findings if f.status is Status.PASS)
    out.append(f"_{passed} check(s) passed._")
    out.append("")
    return out


def _detail(f: Finding) -> list[str]:
    lines = [f"<details><summary><code>{f.code}</code> {_cell(f.title)}</summary>", ""]
    if f.evidence:
        lines.append("```")
        lines += list(f.evidence)
        lines.append("```")
    if f.fix:
        lines += ["", f"**Fix:** {_cell(f.fix)}", "", f"`epdoctor explain {f.code}`"]
    lines += ["", "</details>", ""]
    return lines


def render(
    results: list[TargetResult],
    context: dict[str, str],
    fleet: list[Finding] | None = None,
    verbose: bool = False,
) -> str:
    out = [f"## epdoctor diagnose ({__version__})", ""]
    ctx = ", ".join(f"{k}={v}" for k, v in context.items() if v)
    if ctx:
        out += [f"Context: {ctx}", ""]
    for r in results:
        out += render_target(r, verbose)
    if len(results) > 1:
        from epdoctor.reports import fleet as fleet_report

        out += fleet_report.render_markdown(results, fleet or [], verbose)
    # The results were redacted where they entered (epdoctor.diagnose); this one pass over
    # the finished document is the writer's safety net, not the boundary.
    return plain(redact_text("\n".join(out)))  # a pasted report carries no escape codes
