"""One target in full (Enter on a row of the targets table, as k9s describes a resource): what
the API server says of a pod, the probe's facts as the text report shows them, and the
target's findings with their evidence. Escape goes back."""

from __future__ import annotations

from typing import Any

from epdoctor.screens.keyhelp import KeyHelp
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Header, Static

from epdoctor.model import Status
from epdoctor.reports.common import headline, sort_findings
from epdoctor.reports.facts_table import fact_rows
from epdoctor.reports.fleet import age
from epdoctor.safeio import plain

STYLE = {"fail": "bold red", "warn": "bold yellow", "unknown": "bold magenta", "pass": "green"}
POD_FACTS = (
    ("status", "status"), ("restarts", "restarts"), ("node", "node"),
    ("instance type (label)", "instance_type"), ("zone", "zone"), ("qos", "qos"),
)  # fmt: skip


def detail_text(result: Any) -> Text:
    """The target's detail as one rich Text (everything escaped: it is what targets said)."""
    out = Text()
    out.append(f"{plain(result.target.name)} ({result.target.kind})\n", style="bold")
    out.append(plain(headline(result)) + "\n\n")
    kube = result.facts.get("kube") if isinstance(result.facts.get("kube"), dict) else None
    if kube:
        out.append("Kubernetes\n", style="bold underline")
        for label, key in POD_FACTS:
            if kube.get(key) is not None:
                out.append(f"  {label:<22} {plain(str(kube[key]))}\n")
        out.append(f"  {'age':<22} {age(kube.get('created'))}\n")
        for what in ("capacity", "allocatable"):
            res = {k: v for k, v in (kube.get(what) or {}).items() if v is not None}
            if res:
                cells = ", ".join(f"{k} {v}" for k, v in res.items())
                out.append(f"  {what:<22} {plain(cells)}\n")
        out.append("\n")
    rows = fact_rows(result.facts) if "hostname" in result.facts else []
    if rows:
        out.append("Node facts (the probe)\n", style="bold underline")
        for k, v in rows:
            out.append(f"  {plain(k):<22} {plain(v)}\n")
        out.append("\n")
    elif kube:
        out.append("The node probe did not run in this pod (not probed).\n\n", style="dim")
    shown = [f for f in sort_findings(result.findings) if f.status is not Status.SKIP]
    out.append(f"Findings ({len(shown)})\n", style="bold underline")
    for f in shown:
        out.append(f"  {f.status.value.upper():<8}", style=STYLE.get(f.status.value, ""))
        out.append(f"{f.code} ", style="bold")
        out.append(plain(f.title) + "\n")
        for e in f.evidence[:4]:
            out.append(f"            {plain(e)}\n", style="dim")
    return out


class TargetDetailScreen(Screen[None]):
    BINDINGS = [Binding("escape,q", "app.pop_screen", "Back")]

    def __init__(self, result: Any) -> None:
        super().__init__()
        self.result = result

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="target-detail"):
            yield Static(detail_text(self.result), markup=False)
        yield KeyHelp()
