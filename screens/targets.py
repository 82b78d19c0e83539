"""Targets: diagnose the local host, SSH hosts, Kubernetes pods or bundles, concurrently.

The target field takes the same flags as `epdoctor diagnose` (`--bundle FILE`,
the SSH and Kubernetes flags), parsed by the same flags module (epdoctor.options)
into the same TargetSpec, so the TUI and the command select the same targets. One table row per target: its probe state, then the key facts
with values that differ between nodes marked; below, the findings grouped by
severity with their evidence. Pods also get kubectl's STATUS, RESTARTS, NODE and AGE columns;
Enter on a target opens its detail (as k9s describes a resource), Enter on a finding its
explanation. A trap that hits several targets is one entry, with the targets under it.
"""

from __future__ import annotations

import shlex
from collections import Counter
from typing import Any

from epdoctor.screens.keyhelp import KeyHelp
from epdoctor.screens.messages import (
    DiagnosisDone,
    DiagnosisFailed,
    SshHosts,
    TargetProgress,
    TargetsResolved,
)
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Header, Input, Static, Tree

from epdoctor.model import Finding, Status
from epdoctor.redact import redact_text
from epdoctor.reports.common import headline, layer_name, sort_findings
from epdoctor.reports.facts_table import fact_text
from epdoctor.reports.fleet import POD_COLUMNS, fleet_title, node_rows
from epdoctor.safeio import markup, plain

CELL_WIDTH = 24  # a fact cell's width; the explanation has the whole value
STATE_LABEL = {"waiting": "waiting", "start": "probing…", "done": "done", "error": "ERROR"}
SEVERITY_ORDER = (Status.FAIL, Status.WARN, Status.UNKNOWN, Status.PASS, Status.SKIP)
SEVERITY_LABEL = {
    Status.FAIL: "FAIL",
    Status.WARN: "WARN",
    Status.UNKNOWN: "UNKNOWN (could not be verified)",
    Status.PASS: "PASS",
    Status.SKIP: "not applicable",
}


def _plugin(facts: dict[str, Any]) -> Any:
    plugins = facts.get("plugins")
    if not isinstance(plugins, list):
        return plugins
    if not plugins:
        return "none"
    # ncclGinPlugin_v14 -> v14: the column is narrow, the explanation has the full names
    return "; ".join(
        "GIN " + (",".join(g.rsplit("_", 1)[-1] for g in p.get("gin") or []) or "none")
        for p in plugins
    )


def _nccl(facts: dict[str, Any]) -> Any:
    nccl = facts.get("nccl")
    if not isinstance(nccl, list):
        return nccl
    return ", ".join(str(n.get("version")) for n in nccl) or "none"


# (column, how to read it from NodeFacts.summary())
KEY_FACTS: tuple[tuple[str, Any], ...] = (
    ("driver", lambda f: f.get("driver")),
    ("NCCL", _nccl),
    ("efa.ko", lambda f: f.get("efa_ko")),
    ("gdrdrv", lambda f: f.get("gdrdrv")),
    ("installer", lambda f: f.get("efa_installer")),
    ("plugin", _plugin),
    ("EFA devs", lambda f: f.get("efa_devices")),
    ("hw_counters", lambda f: f.get("hw_counters")),
)


def fact_cells(facts: dict[str, Any]) -> list[str]:
    if not facts:
        return ["-"] * len(KEY_FACTS)
    keys = {"efa.ko": "efa_ko", "gdrdrv": "gdrdrv"}  # a module that is absent: "not loaded"
    return [fact_text(read(facts), keys.get(col, "")) for col, read in KEY_FACTS]


def drift_columns(rows: list[list[str]]) -> list[set[int]]:
    """Per row, the columns whose value differs from the most common one among the nodes."""
    marks: list[set[int]] = [set() for _ in rows]
    if len(rows) < 2:
        return marks
    for col in range(len(KEY_FACTS)):
        values = [r[col] for r in rows if r[col] != "-"]
        if len(set(values)) < 2:
            continue
        common, _ = Counter(values).most_common(1)[0]
        for i, r in enumerate(rows):
            if r[col] != "-" and r[col] != common:
                marks[i].add(col)
    return marks


def describe_targets(targets: list[Any]) -> str:
    if not targets:
        return "none"
    kinds = Counter(t.info.kind for t in targets)
    if len(targets) == 1:
        return f"{targets[0].info.name} ({targets[0].info.kind})"
    return f"{len(targets)} targets (" + ", ".join(f"{n} {k}" for k, n in kinds.items()) + ")"


class TargetsScreen(Screen[None]):
    BINDINGS = [
        Binding("ctrl+r", "diagnose", "Diagnose"),
        Binding("slash", "focus_flags", "Targets"),
        Binding("e", "explain", "Explain"),
        Binding("ctrl+o", "ssh_hosts", "SSH hosts"),
    ]

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            placeholder="targets: empty = this host; --bundle FILE, SSH or -n NS -l SELECTOR flags",
            id="target-flags",
        )
        yield Static("", id="target-summary", markup=False)
        yield DataTable(id="target-table", cursor_type="row")
        yield Tree("findings", id="findings")
        yield KeyHelp()

    def on_mount(self) -> None:
        app = self.app
        shared = app.shared  # type: ignore[attr-defined]
        flags = self.query_one("#target-flags", Input)
        # The flags are shown masked (a bundle or host named by a token-shaped string); left
        # as shown, they still run as given.
        self._flags_shown = (redact_text(shlex.join(shared.target_argv)), list(shared.target_argv))
        flags.value = self._flags_shown[0]
        table = self.query_one("#target-table", DataTable)
        table.add_columns("target", "state", *(c for c, _ in KEY_FACTS))
        tree = self.query_one("#findings", Tree)
        tree.show_root = False
        tree.auto_expand = False  # Enter explains; Space opens the evidence
        app.targets_screen = self  # type: ignore[attr-defined]
        if shared.diagnoses:
            self._show(shared.diagnoses, shared.fleet)
        elif shared.target_names:
            self.on_targets_resolved(TargetsResolved(shared.target_names))
        table.focus()

    # --- diagnose -----------------------------------------------------------
    def action_diagnose(self) -> None:
        raw = self.query_one("#target-flags", Input).value
        shown, given = getattr(self, "_flags_shown", ("", []))
        try:
            argv = list(given) if given and raw == shown else shlex.split(raw)
        except ValueError as exc:
            self.notify(f"cannot read the target flags: {exc}", severity="error")
            return
        self.app.shared.target_argv = argv  # type: ignore[attr-defined]
        self.query_one("#target-summary", Static).update("resolving targets…")
        self.app.diagnose(argv)  # type: ignore[attr-defined]

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "target-flags":
            self.action_diagnose()
            self.query_one("#target-table", DataTable).focus()

    # --- messages -----------------------------------------------------------
    def on_targets_resolved(self, msg: TargetsResolved) -> None:
        table = self.query_one("#target-table", DataTable)
        table.clear()
        for i, name in enumerate(msg.names):
            cells = ["-"] * len(KEY_FACTS)
            table.add_row(markup(name), STATE_LABEL["waiting"], *cells, key=f"{i}")
        self._rows = {name: f"{i}" for i, name in enumerate(msg.names)}
        self.query_one("#target-summary", Static).update(f"probing {len(msg.names)} target(s)…")

    def on_target_progress(self, msg: TargetProgress) -> None:
        key = getattr(self, "_rows", {}).get(msg.name)
        if key is None:
            return
        table = self.query_one("#target-table", DataTable)
        label = STATE_LABEL.get(msg.state, msg.state)
        table.update_cell(key, table.ordered_columns[1].key, label)

    def on_diagnosis_failed(self, msg: DiagnosisFailed) -> None:
        self.query_one("#target-summary", Static).update(f"could not select targets: {msg.error}")
        self.notify(msg.error, severity="error", title="targets")

    def on_diagnosis_done(self, msg: DiagnosisDone) -> None:
        self._show(msg.diagnoses, msg.fleet)

    # --- drawing ------------------------------------------------------------
    def _show(self, diagnoses: list[Any], fleet: list[Finding]) -> None:
        if getattr(self, "_shown", None) is diagnoses:
            return  # already drawn (on mount, then the forwarded message)
        self._shown = diagnoses
        table = self.query_one("#target-table", DataTable)
        table.clear(columns=True)  # widths from the final cells, not from "probing…"
        results = [d.result for d in diagnoses]
        self._results = results
        pods = bool(results) and all(r.target.kind == "pod" for r in results)
        kube_cols = [h for h, _ in POD_COLUMNS] if pods else []
        table.add_columns("target", "state", *kube_cols, *(c for c, _ in KEY_FACTS))
        api = node_rows(results) if pods else [{} for _ in results]
        probed = ["hostname" in r.facts or not r.facts for r in results]
        rows = [
            fact_cells(r.facts) if ok else ["-"] * len(KEY_FACTS)
            for r, ok in zip(results, probed, strict=True)
        ]
        marks = drift_columns(rows)
        for i, (r, cells) in enumerate(zip(results, rows, strict=True)):
            state = "ERROR" if r.error else r.worst().value.upper()
            shown: list[Any] = (
                [markup(_api_cell(api[i].get(k))) for _, k in POD_COLUMNS] if pods else []
            )
            if not probed[i]:
                cells = ["not probed"] + [""] * (len(cells) - 1)
            for c, v in enumerate(cells):
                v = v if len(v) <= CELL_WIDTH else v[: CELL_WIDTH - 1] + "…"
                # a str cell is read as markup: what a target says goes in escaped
                if c in marks[i]:
                    shown.append(Text(f"≠{plain(v)}", style="bold reverse"))
                else:
                    shown.append(markup(v))
            table.add_row(markup(r.target.name), state, *shown, key=f"{i}")
        self._rows = {r.target.name: f"{i}" for i, r in enumerate(results)}
        drifted = sum(1 for m in marks if m)
        fails = sum(1 for r in results for f in r.findings if f.status is Status.FAIL)
        errors = sum(1 for r in results if r.error)
        what = fleet_title(node_rows(results)) if len(results) > 1 else "1 target"
        summary = f"{what}: {fails} failing finding(s)"
        if errors:
            summary += f", {errors} could not be diagnosed"
        if drifted:
            summary += " · ≠ differs from the other nodes"
        if len(results) == 1:
            summary = f"{results[0].target.name}: {headline(results[0])}"
        self.query_one("#target-summary", Static).update(summary)
        self._fill_findings(results, fleet)

    def _fill_findings(self, results: list[Any], fleet: list[Finding]) -> None:
        tree = self.query_one("#findings", Tree)
        tree.clear()
        for r in results:
            if r.error:
                why = plain(f"ERROR {r.target.name}: {r.error}")
                node = tree.root.add(Text(why, style="bold red"))
                node.allow_expand = False
        findings = [f for r in results for f in r.findings] + list(fleet)
        for status in SEVERITY_ORDER:
            group = sort_findings([f for f in findings if f.status is status])
            if not group:
                continue
            head = tree.root.add(
                Text(f"{SEVERITY_LABEL[status]} ({len(group)})", style=_style(status)),
                expand=status in (Status.FAIL, Status.WARN, Status.UNKNOWN),
            )
            by_code: dict[str, list[Finding]] = {}
            for f in group:
                by_code.setdefault(f.code, []).append(f)
            for code, hits in by_code.items():
                f = hits[0]
                many = len(hits) > 1 and len(results) > 1
                where = f" · {f.target}" if f.target and len(results) > 1 and not many else ""
                if many:
                    where = f" · {len(hits)} targets"
                item = head.add(
                    Text.assemble(
                        (f"{code} ", "bold"),
                        (f"[{layer_name(code)}] ", "dim"),
                        plain(f.title),
                        (plain(where), "dim"),
                    ),
                    data=f,
                )
                if not many:
                    for e in f.evidence[:8]:
                        item.add_leaf(Text(plain(e), style="dim"), data=f)
                    continue
                for hit in hits:  # the trap once, the targets it hits under it
                    node = item.add(Text(plain(hit.target or "fleet"), style="bold"), data=hit)
                    for e in hit.evidence[:4]:
                        node.add_leaf(Text(plain(e), style="dim"), data=hit)

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a target: its detail (facts, the API's view of a pod, its findings)."""
        from epdoctor.screens.target_detail import TargetDetailScreen

        results = getattr(self, "_results", None) or []
        key = event.row_key.value
        if key is not None and key.isdigit() and int(key) < len(results):
            self.app.push_screen(TargetDetailScreen(results[int(key)]))

    def on_tree_node_selected(self, event: Tree.NodeSelected) -> None:
        f = event.node.data
        if isinstance(f, Finding):
            self.app.explain(f.code, f)  # type: ignore[attr-defined]

    def action_explain(self) -> None:
        tree = self.query_one("#findings", Tree)
        node = tree.cursor_node
        if node is not None and isinstance(node.data, Finding):
            self.app.explain(node.data.code, node.data)  # type: ignore[attr-defined]

    def action_ssh_hosts(self) -> None:
        """Put the ssh config's Host entries into the target flags (Enter diagnoses them)."""
        argv = shlex.split(self.query_one("#target-flags", Input).value or "")
        config = argv[argv.index("--ssh-config") + 1] if "--ssh-config" in argv[:-1] else None
        self._ssh_hosts(config)

    @work(thread=True, exclusive=True, group="ssh-config")
    def _ssh_hosts(self, config: str | None) -> None:
        try:
            from epdoctor.targets import ssh, ssh_cli

            names = ssh_cli.config_hosts(ssh.load_ssh_config(config), "*")
        except Exception as exc:  # no paramiko, unreadable config: said, not fatal
            self.post_message(SshHosts([], str(exc) or type(exc).__name__))
            return
        self.post_message(SshHosts(names))

    def on_ssh_hosts(self, msg: SshHosts) -> None:
        # A Host whose name the redactor would mask is not put into the flags (the field would
        # show it, and a masked name selects nothing): it is counted, and still diagnosed by
        # --ssh-config-hosts, under its masked name.
        names = [n for n in msg.names if redact_text(n) == n]
        hidden = len(msg.names) - len(names)
        if msg.error or not names:
            why = msg.error or "no Host entries in the ssh config"
            if hidden and not msg.error:
                why = f"{hidden} Host name(s) look like secrets; use --ssh-config-hosts PATTERN"
            self.notify(redact_text(why), severity="warning")
            return
        flags = self.query_one("#target-flags", Input)
        flags.value = (flags.value + " " if flags.value else "") + "--ssh " + ",".join(names)
        flags.focus()
        note = f" ({hidden} that look like secrets left out)" if hidden else ""
        self.notify(f"{len(names)} host(s) from the ssh config{note}: Enter diagnoses them")

    def action_focus_flags(self) -> None:
        self.query_one("#target-flags", Input).focus()


def _api_cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _style(status: Status) -> str:
    return {
        Status.FAIL: "bold red",
        Status.WARN: "bold yellow",
        Status.UNKNOWN: "bold magenta",
        Status.PASS: "green",
        Status.SKIP: "dim",
    }[status]
