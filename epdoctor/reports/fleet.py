"""The fleet section of a multi-target report: one row per node, then drift.

Called by the text, JSON and Markdown renderers when more than one target was diagnosed:

* ``render_text(console, results, fleet, verbose=False)``: a rich table (a node's cell that
  differs from the fleet's most common value is highlighted), then the drift findings;
* ``render_json(results, fleet) -> dict``: ``{"nodes": [...], "drift": [...], "odd_nodes": {...}}``;
* ``render_markdown(results, fleet, verbose=False) -> list[str]``: the same as Markdown lines.

`results` are TargetResults (their ``facts`` are NodeFacts.summary()); `fleet` the findings of
checks.drift (target "fleet"). Passed drift checks are listed in one line unless verbose.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from epdoctor.model import Finding, Status, TargetResult
from epdoctor.reports.common import counts, sort_findings, verdict
from epdoctor.safeio import plain  # node names, values and errors come from the targets

# (column title, how to read it from a node's summary facts)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("instance", "instance_type"),
    ("driver", "driver"),
    ("NCCL", "nccl"),
    ("efa.ko", "efa_ko"),
    ("EFA", "efa_devices"),
    ("gdrdrv", "gdrdrv"),
    ("plugin GIN", "plugins"),
    ("libfabric", "libfabric"),
    ("installer", "efa_installer"),
)
STYLE = {"fail": "bold red", "warn": "yellow", "unknown": "magenta", "pass": "green"}
ICON = {"fail": "❌", "warn": "⚠️", "unknown": "❔", "pass": "✅", "skip": "➖", "error": "⛔"}


def _cell(key: str, facts: dict[str, Any]) -> str:
    v = facts.get(key)
    if isinstance(v, dict) and "unknown" in v:
        return "?"
    if key == "nccl":
        return ", ".join(sorted({str(n.get("version")) for n in v or []})) or "none"
    if key == "plugins":
        gins = sorted(
            {",".join(g.rpartition("_")[2] for g in p.get("gin") or []) or "-" for p in v or []}
        )
        return "; ".join(gins) or "none"
    if key in ("efa_ko", "gdrdrv") and v is None:
        return "not loaded"
    if v is None:
        return "-"
    return str(v)


NOT_PROBED = "not probed"
# kubectl get pods' columns, for pods: what the API server says, next to what the probe found
POD_COLUMNS = (("STATUS", "status"), ("RESTARTS", "restarts"), ("NODE", "k8s_node"), ("AGE", "age"))


def node_rows(results: list[TargetResult], now: float | None = None) -> list[dict[str, Any]]:
    rows = []
    for r in results:
        c = counts(r.findings)
        kube = r.facts.get("kube") if isinstance(r.facts.get("kube"), dict) else {}
        probed = "hostname" in r.facts
        row: dict[str, Any] = {
            "node": r.target.name,
            "kind": r.target.kind,
            "verdict": verdict(r),
            "fail": c["fail"],
            "warn": c["warn"],
            "unknown": c["unknown"],
            "error": r.error,
            "probed": probed,
            "elapsed_s": round(r.elapsed_s, 2) if r.elapsed_s is not None else None,
        }
        if r.target.kind == "pod":
            row.update(
                status=kube.get("status") or "-",
                restarts=kube.get("restarts"),
                k8s_node=kube.get("node") or "-",
                age=age(kube.get("created"), now),
                zone=kube.get("zone"),
                capacity=kube.get("capacity"),
            )
        if not r.error:
            if probed:
                row.update({title: _cell(key, r.facts) for title, key in COLUMNS})
            else:  # the probe never ran: nothing to compare, which is not a difference
                row.update({title: NOT_PROBED for title, _ in COLUMNS})
                row["probe_error"] = _probe_error(r)
            if row.get("instance") in ("?", NOT_PROBED) and kube.get("instance_type"):
                row["instance"] = str(kube["instance_type"])  # the node's label, from the API
        rows.append(row)
    return rows


def _probe_error(r: TargetResult) -> str | None:
    kube = r.facts.get("kube")
    return None if not isinstance(kube, dict) else (kube.get("unseen") or {}).get("probe")


def age(created: Any, now: float | None = None) -> str:
    """kubectl's AGE: 45s, 12m, 5h, 3d."""
    import datetime as dt
    import time

    if not isinstance(created, str):
        return "-"
    try:
        t = dt.datetime.fromisoformat(created.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return "-"
    secs = max(0, int((now if now is not None else time.time()) - t))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{secs // size}{unit}"
    return f"{secs}s"


def fleet_title(rows: list[dict[str, Any]]) -> str:
    """What was diagnosed, counted as what it is: "3 nodes", "2 pods on 1 node"."""
    pods = [r for r in rows if r["kind"] == "pod"]
    if pods and len(pods) == len(rows):
        nodes = {r["k8s_node"] for r in pods if r.get("k8s_node") not in (None, "-")}
        unscheduled = len([r for r in pods if r.get("k8s_node") in (None, "-")])
        title = f"{len(pods)} pod{'s' * (len(pods) != 1)} on {len(nodes)} node"
        title += "s" * (len(nodes) != 1)
        return title + (f", {unscheduled} not scheduled" if unscheduled else "")
    return f"{len(rows)} nodes"


def majority(rows: list[dict[str, Any]]) -> dict[str, str]:
    """Per column, the value most nodes have (only where there is a clear one); a target whose
    probe never ran has no value to compare."""
    out = {}
    for title, _ in COLUMNS:
        vals = Counter(
            r[title]
            for r in rows
            if not r["error"] and r.get("probed", True) and r.get(title) not in (None, "?")
        )
        top = vals.most_common(2)
        if top and (len(top) == 1 or top[0][1] > top[1][1]):
            out[title] = top[0][0]
    return out


def odd_nodes(fleet: list[Finding]) -> dict[str, list[str]]:
    """code -> the nodes a drift finding names as odd (from its evidence groups)."""
    out: dict[str, list[str]] = {}
    for f in fleet:
        if f.status in (Status.PASS, Status.SKIP) or f.code == "F600" or len(f.evidence) < 2:
            continue
        names: list[str] = []
        for line in f.evidence[1:]:
            if " unknown on " in line:
                names.append(line.split(" unknown on ", 1)[1].split(":", 1)[0])
            elif ": " in line:
                names += [n.strip() for n in line.rsplit(": ", 1)[1].rsplit(" (", 1)[0].split(",")]
        out[f.code] = [n for n in names if n and " more" not in n]
    return out


def trap_rows(results: list[TargetResult]) -> list[dict[str, Any]]:
    """One row per trap across the fleet: its worst status, a title and the nodes it hits.

    Only what is shown by default (fail, warn, unknown), worst first. ``all`` is True when it
    hits every node that was diagnosed (a fleet-wide trap, not one odd node).
    """
    diagnosed = [r for r in results if not r.error]
    hits: dict[str, list[Finding]] = {}
    where: dict[str, list[str]] = {}
    for r in diagnosed:
        for f in r.findings:
            if f.status in (Status.FAIL, Status.WARN, Status.UNKNOWN):
                hits.setdefault(f.code, []).append(f)
                where.setdefault(f.code, []).append(r.target.name)
    rows = []
    for f in sort_findings([max(fs, key=lambda x: x.status.rank) for fs in hits.values()]):
        nodes = where[f.code]
        rows.append(
            {
                "code": f.code,
                "status": f.status.value,
                "title": f.title,
                "nodes": nodes,
                "all": len(nodes) == len(diagnosed),
                "fix": f.fix,
            }
        )
    return rows


def _split(fleet: list[Finding], verbose: bool) -> tuple[list[Finding], list[Finding]]:
    shown = [f for f in sort_findings(fleet) if verbose or f.status is not Status.PASS]
    passed = [f for f in fleet if f.status is Status.PASS]
    return shown, passed


def _passed_line(passed: list[Finding]) -> str:
    labels = [f.title.split(" the same on all ")[0] for f in passed]
    return "same on every node: " + ", ".join(labels) if labels else ""


# --------------------------------------------------------------- text --


# Short headers for the terminal table (one word each: a header never wraps); the JSON and
# Markdown keep the full COLUMNS titles.
SHORT = {"instance": "type", "plugin GIN": "GIN", "installer": "installer"}


def _verdict_text(r: dict[str, Any]) -> str:
    v = r["verdict"]
    if v == "error":
        return v
    tally = " ".join(f"{r[k]}{k[0].upper()}" for k in ("fail", "warn", "unknown") if r[k])
    return f"{v} {tally}" if tally else v


def _findings_lines(shown: list[Finding], verbose: bool = False) -> list[Any]:
    from rich.text import Text

    from epdoctor.reports.layout import hang

    lines: list[Any] = []
    for f in shown:
        label = Text(f"{f.status.value.upper():<8}", style=STYLE.get(f.status.value, ""))
        title = Text(f"{f.code} ", style="bold")
        title.append(plain(f.title), style="")
        lines.append(hang(label, title))
        # its evidence is the error lines printed above; "unknown on every node" needs none
        if f.code != "F600" and (verbose or f.status in (Status.FAIL, Status.WARN)):
            lines += [hang(" " * 10, Text(plain(e), style="dim")) for e in f.evidence[:8]]
        if f.fix and f.status in (Status.FAIL, Status.WARN):
            fix = plain(f.fix.split(" Change: ")[0])
            lines.append(hang(Text("          fix: ", style="cyan"), Text(fix, style="cyan")))
    return lines


def render_text(
    console: Any, results: list[TargetResult], fleet: list[Finding], verbose: bool = False
) -> None:
    """The node table (fits the console: see reports.layout.FitTable), then the drift panel."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    from epdoctor.reports.layout import FitTable, hang, split_domain

    rows = node_rows(results)
    common = majority(rows)
    names, domain = split_domain([plain(r["node"]) for r in rows])
    pods = bool(rows) and all(r["kind"] == "pod" for r in rows)
    extra = POD_COLUMNS if pods else ()
    headers = [
        "pod" if pods else "node",
        *(h for h, _ in extra),
        "verdict",
        *(SHORT.get(t, t) for t, _ in COLUMNS),
        "time",
    ]
    cells: list[list[Any]] = []
    for name, r in zip(names, rows, strict=True):
        v = r["verdict"]
        row: list[Any] = [Text(name, style="bold")]
        for _, key in extra:
            val = r.get(key)
            bad = key == "status" and val not in ("Running", "Succeeded", "Completed")
            row.append(Text(plain("-" if val is None else str(val)), style="red" if bad else ""))
        row.append(Text(_verdict_text(r), style=STYLE.get(v, "bold red")))
        for title, _ in COLUMNS:
            if r["error"]:  # the reason goes under the table
                row.append(None)
                continue
            val = r[title]
            if val == NOT_PROBED:  # said once, in the row's first such cell
                said = any(isinstance(c, Text) and c.plain == NOT_PROBED for c in row)
                row.append(Text("" if said else NOT_PROBED, style="dim"))
                continue
            odd = title in common and val != common[title] and r.get("probed", True)
            style = "bold yellow" if odd else ("magenta" if val == "?" else "")
            row.append(Text(plain(val), style=style))
        row.append(_secs(r))
        cells.append(row)
    title = f"fleet: {fleet_title(rows)}" + (f" (*.{domain})" if domain else "")
    keep = (0, len(extra) + 1) if not pods else (0, 1, len(extra) + 1)
    console.print(
        FitTable(
            title,
            headers,
            cells,
            noun="pod" if pods else "node",
            keep=keep,
            justify={len(headers) - 1: "right"},
        )
    )
    for name, r in zip(names, rows, strict=True):
        if r["error"]:
            console.print(
                hang(Text(f"{name}: ", style="bold"), Text(plain(r["error"]), style="red"))
            )
    shown, passed = _split(fleet, verbose)
    lines = _findings_lines(shown, verbose)
    if passed and not verbose:
        lines.append(hang(Text(""), Text(_passed_line(passed), style="green")))
    if lines:
        console.print(Panel(Group(*lines), title="drift between nodes", title_align="left"))

    render_traps(console, results, names)


def render_traps(console: Any, results: list[TargetResult], names: list[str]) -> None:
    """One line per trap with the nodes it hits (popeye's summary): the fleet at a glance."""
    from rich.text import Text

    from epdoctor.reports.layout import hang

    short = {r.target.name: n for r, n in zip(results, names, strict=True)}
    rows = trap_rows(results)
    if not rows:
        return
    pods = all(r.target.kind == "pod" for r in results)
    console.print(Text(f"traps, by the {'pods' if pods else 'nodes'} they hit:", style="bold"))
    for t in rows:
        nodes = [plain(short.get(n, n)) for n in t["nodes"]]
        every = "all" if len(short) == len(nodes) else "all diagnosed"
        where = (
            f"{every} {len(nodes)} nodes" if t["all"] and len(nodes) > 1 else ", ".join(nodes[:6])
        )
        if len(nodes) > 6 and not t["all"]:
            where += f" (+{len(nodes) - 6} more)"
        label = Text(f"{t['status'].upper():<8}", style=STYLE.get(t["status"], ""))
        body = Text(f"{t['code']} ", style="bold")
        body.append(plain(t["title"]))
        body.append(f"  [{where}]", style="cyan")
        console.print(hang(label, body))
        if t["fix"] and t["status"] in ("fail", "warn"):
            fix = Text(plain(t["fix"].split(" Change: ")[0]), style="cyan")
            console.print(hang(Text("        fix: ", style="cyan"), fix))


def _secs(r: dict[str, Any]) -> str:
    return f"{r['elapsed_s']:.1f}s" if r["elapsed_s"] is not None else ""


# --------------------------------------------------------------- JSON --


def render_json(results: list[TargetResult], fleet: list[Finding]) -> dict[str, Any]:
    return {
        "nodes": node_rows(results),
        "traps": trap_rows(results),
        "drift": [f.to_json() for f in sort_findings(fleet)],
        "odd_nodes": odd_nodes(fleet),
    }


# --------------------------------------------------------------- Markdown --


def _md(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def render_markdown(
    results: list[TargetResult], fleet: list[Finding], verbose: bool = False
) -> list[str]:
    rows = node_rows(results)
    common = majority(rows)
    head = ["node", "verdict", *(t for t, _ in COLUMNS), "time (s)"]
    out = [f"### Fleet: {len(rows)} nodes", "", "| " + " | ".join(head) + " |"]
    out.append("|" + "---|" * len(head))
    for r in rows:
        v = r["verdict"]
        vcell = f"{ICON.get(v, '')} {v}" + (
            "" if r["error"] else f" {r['fail']}F {r['warn']}W {r['unknown']}U"
        )
        if r["error"]:
            cells = [_md(r["error"])] + [""] * (len(COLUMNS) - 1)
        else:
            cells = [
                f"**{_md(r[t])}**" if t in common and r[t] != common[t] else _md(r[t])
                for t, _ in COLUMNS
            ]
        out.append("| " + " | ".join([f"`{_md(r['node'])}`", vcell, *cells, _secs(r)]) + " |")
    out.append("")
    shown, passed = _split(fleet, verbose)
    if shown:
        out += ["#### Drift between nodes", "", "| | code | finding |", "|---|---|---|"]
        out += [f"| {ICON.get(f.status.value, '')} | `{f.code}` | {_md(f.title)} |" for f in shown]
        out.append("")
        for f in shown:
            if f.evidence:
                out += [f"<details><summary><code>{f.code}</code> evidence</summary>", "", "```"]
                out += list(f.evidence)
                out += ["```", "", "</details>", ""]
    if passed and not verbose:
        out += [f"_{_passed_line(passed)}._", ""]
    return out
