"""The log analysis as a per-rank table and findings: rich, JSON and Markdown."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from epdoctor.facts.logs.model import RankFacts
from epdoctor.model import Finding, Status
from epdoctor.redact import redact_text
from epdoctor.reports.common import counts
from epdoctor.reports.layout import hang

if TYPE_CHECKING:  # the analysis is made one layer up (epdoctor.logwatch); only read here
    from epdoctor.logwatch import LogAnalysis

STYLE = {"fail": "bold red", "warn": "yellow", "unknown": "magenta", "pass": "green", "skip": "dim"}
COLUMNS = (
    "rank",
    "labels",
    "NCCL",
    "network",
    "provider / fabric",
    "NICs",
    "GIN",
    "on EFA",
    "WARN",
)


def by_severity(findings: list[Finding]) -> list[Finding]:
    """Worst first; within a severity the analysis's own order, root cause before symptom."""
    return sorted(findings, key=lambda f: -f.status.rank)


def verdict(a: LogAnalysis) -> str:
    """The summary verdict: the worst finding; nothing conclusive is unknown, never pass."""
    return a.worst().value


def rank_row(r: RankFacts) -> tuple[str, ...]:
    p = r.provider
    gin = r.gin_plugin or (f"type {r.gin_type}" if r.gin_type is not None else "")
    efa = {True: "yes", False: "NO", None: "?"}[r.on_efa()]
    return (
        r.key,
        ", ".join(lb for lb in r.labels if lb != r.key)[:40],
        r.nccl_version or "",
        r.network or "",
        r.provider_text,
        (str(p[2]) if p[2] >= 0 else "?") if p else "",
        gin,
        efa if r.is_nccl else "",
        str(r.warn_count) if r.warn_count else "",
    )


# One word per header for the terminal table (it fits 80 columns); Markdown keeps COLUMNS.
SHORT = ("rank", "labels", "NCCL", "net", "provider", "NICs", "GIN", "EFA", "WARN")


def rank_table(a: LogAnalysis) -> Any:
    """The per-rank table, fitted to the console (epdoctor.reports.layout.FitTable)."""
    from epdoctor.reports.layout import FitTable, split_domain

    rows = [list(rank_row(r)) for r in a.ranks]
    keys, domain = split_domain([row[0] for row in rows])
    for row, key in zip(rows, keys, strict=True):
        row[0] = key
    styles = ["bold red" if row[7] == "NO" else None for row in rows]
    title = "ranks" + (f" (hosts *.{domain})" if domain else "")
    return FitTable(title, SHORT, rows, noun="rank", row_styles=styles)


def render_text(console: Any, a: LogAnalysis, verbose: bool = False) -> None:
    from rich.text import Text

    if a.ranks:
        console.print(rank_table(a))
    shown = [f for f in by_severity(a.findings) if verbose or f.status is not Status.PASS]
    for f in shown:
        # wrapped lines start under their own text, not at column 1 (reports.layout.hang)
        label = Text()
        label.append(f"{f.status.value.upper():<8}", style=STYLE[f.status.value])
        label.append(f"{f.code} ", style="bold")
        console.print(hang(label, Text(redact_text(f.title))))
        for e in f.evidence[:6]:
            console.print(hang(" " * 10, Text(redact_text(e), style="dim")))
        if f.fix and f.status in (Status.FAIL, Status.WARN):
            console.print(
                hang(Text("          fix: ", style="cyan"), Text(redact_text(f.fix), style="cyan"))
            )
    c = counts(a.findings)
    summary = ", ".join(f"{n} {k}" for k, n in c.items() if n)
    console.print(
        Text(
            f"logs: {verdict(a).upper()} ({summary or 'no findings'}); {len(a.ranks)} ranks, "
            f"{a.stats.lines} lines, {a.facts.candidates} read closely",
            style=STYLE[verdict(a)],
        )
    )


def finding_line(f: Finding) -> str:
    return f"{f.status.value.upper()} {f.code} {f.title}"


def render_json(a: LogAnalysis, context: dict[str, Any] | None = None) -> str:
    doc = {"verdict": verdict(a), "context": context or {}, **a.to_json()}
    return redact_text(json.dumps(doc, indent=2))


def _md(s: str) -> str:
    return s.replace("|", "\\|")


def render_markdown(a: LogAnalysis) -> str:
    out = [f"### epdoctor logs: {verdict(a).upper()}", ""]
    if a.ranks:
        out.append("| " + " | ".join(COLUMNS) + " |")
        out.append("|" + "---|" * len(COLUMNS))
        for r in a.ranks:
            out.append("| " + " | ".join(_md(c) for c in rank_row(r)) + " |")
        out.append("")
    for f in by_severity(a.findings):
        out.append(f"- **{f.status.value.upper()} {f.code}** {_md(f.title)}")
        if f.evidence:
            out.append("  ```")
            out.extend(f"  {e}" for e in f.evidence[:6])
            out.append("  ```")
    return redact_text("\n".join(out))


# --- the hook `epdoctor diagnose --log FILE` uses ------------------------------------------
def extend_report(kind: str, rendered: str | None, a: LogAnalysis, console: Any = None) -> str:
    """The per-rank table added to a diagnose report: json / markdown text, or printed (text)."""
    if kind == "json" and rendered is not None:
        doc = json.loads(rendered)
        doc["logs"] = {"ranks": [r.to_json() for r in a.ranks], "lines": a.stats.lines}
        return json.dumps(doc, indent=2)
    if kind == "markdown" and rendered is not None:
        return rendered + "\n\n" + render_markdown(a)
    if console is not None and a.ranks:
        console.print(rank_table(a))
    return rendered or ""
