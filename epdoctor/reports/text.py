"""The rich terminal report (default output of `epdoctor diagnose`)."""

from __future__ import annotations

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text

from epdoctor.model import Finding, Status, TargetResult
from epdoctor.reports.common import (
    SHOWN_BY_DEFAULT,
    counts,
    headline,
    layer_name,
    sort_findings,
)
from epdoctor.reports.facts_table import fact_rows
from epdoctor.reports.layout import KeyValues, Units, hang
from epdoctor.safeio import plain  # what a target or a bundle says: no escape codes, no markup

STYLE = {"fail": "bold red", "warn": "yellow", "unknown": "magenta", "pass": "green", "skip": "dim"}
LABEL = {"fail": "FAIL", "warn": "WARN", "unknown": "UNKNOWN", "pass": "PASS", "skip": "SKIP"}


def _facts(r: TargetResult) -> KeyValues:
    """Key and value; a long key (a site-packages path) or a narrow line folds the row."""
    # Text: a "[/]" in a value is not markup
    return KeyValues((Text(plain(k)), Text(plain(v))) for k, v in fact_rows(r.facts))


def _finding(f: Finding, show_evidence: bool) -> list[RenderableType]:
    """Headline, evidence and fix; wrapped lines hang under their text, never at column 1."""
    label = Text(f"{LABEL[f.status.value]:<8}", style=STYLE[f.status.value])
    head = Text()
    head.append(f"{f.code} ", style="bold")
    head.append(f"[{layer_name(f.code)}] ", style="dim")
    head.append(plain(f.title))
    out: list[RenderableType] = [hang(label, head)]
    if show_evidence:
        out += [hang(" " * 10, Text(plain(e), style="dim")) for e in f.evidence[:6]]
        if f.fix and f.status in (Status.FAIL, Status.WARN):
            fix = plain(f.fix.split(" Change: ")[0])
            out.append(hang(Text("          fix: ", style="cyan"), Text(fix, style="cyan")))
    return out


def render_target(
    console: Console, r: TargetResult, verbose: bool = False, above: frozenset[str] = frozenset()
) -> None:
    """One target's panel; `above`: codes the fleet summary already lists for every node."""
    title = Text(plain(f"{r.target.name} ({r.target.kind})"))  # a str title would be markup
    if r.error and not r.findings:
        why = Text(f"could not diagnose: {plain(r.error)}", style="bold red")
        console.print(Panel(why, title=title))
        return
    shown = [f for f in sort_findings(r.findings) if verbose or f.status in SHOWN_BY_DEFAULT]
    lines: list[RenderableType] = []
    if above and not verbose:
        shown = [f for f in shown if f.code not in above]
        lines.append(
            Text(f"+ {len(above)} trap(s) on every node: see the fleet summary", style="dim")
        )
    for f in shown:
        lines += _finding(f, show_evidence=True)
    c = counts(r.findings)
    summary = Text(
        headline(r), style="bold red" if c["fail"] else ("yellow" if c["warn"] else "green")
    )
    foot = Units(
        [
            Text(
                f"{c['pass']} passed, {c['skip']} not applicable"
                + ("" if verbose else "  (-v shows them)"),
                style="dim",
            ),
            Text("epdoctor explain CODE for any trap", style="dim"),
        ],
        sep="   ",
    )
    body = Group(_facts(r), Text(""), summary, Text(""), *lines, Text(""), foot)
    console.print(Panel(body, title=title, title_align="left"))


def _own_failures(r: TargetResult, common: frozenset[str]) -> bool:
    return any(f.status is Status.FAIL and f.code not in common for f in r.findings)


def exit_note(code: int, fail_on: str = "fail") -> str:
    """The report's last line: what the exit status means (a newcomer reads 1 as a crash)."""
    found = "failures found" if fail_on == "fail" else f"findings at {fail_on} or worse"
    if code == 0:
        none = "no failures" if fail_on == "fail" else f"no findings at {fail_on} or worse"
        return f"exit 0: {none}; 1 = {found}, 2 = could not check"
    if code == 1:
        return f"exit 1: {found} (see above); 0 = none, 2 = could not check"
    if code == 2:
        return f"exit 2: could not check (see above); 0 = no failures, 1 = {found}"
    return f"exit {code}"


def render(
    console: Console,
    results: list[TargetResult],
    fleet: list[Finding] | None = None,
    verbose: bool = False,
    exit_code: int | None = None,
    fail_on: str = "fail",
) -> None:
    """One target: its panel. Several: the fleet summary first (table, drift, traps by node),
    then the detail of each node that fails (every node with -v)."""
    if len(results) <= 1:
        for r in results:
            render_target(console, r, verbose)
    else:
        from epdoctor.reports import fleet as fleet_report

        fleet_report.render_text(console, results, fleet or [], verbose)
        common = frozenset(t["code"] for t in fleet_report.trap_rows(results) if t["all"])
        diagnosed = [r for r in results if not r.error]
        detail = [r for r in diagnosed if verbose or _own_failures(r, common)]
        if detail:
            console.print(
                Text(
                    f"detail of {len(detail)} node(s)"
                    + ("" if verbose else " with failures of their own"),
                    style="bold",
                )
            )
        for r in detail:
            render_target(console, r, verbose, common)
        if len(detail) < len(diagnosed):
            console.print(
                Text(
                    f"{len(diagnosed) - len(detail)} node(s) with nothing beyond the fleet-wide"
                    " traps not detailed (-v shows every node)",
                    style="dim",
                )
            )
    if exit_code is not None:
        console.print(Text(exit_note(exit_code, fail_on), style="dim"))
