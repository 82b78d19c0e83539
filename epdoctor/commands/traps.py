"""`epdoctor traps`: list the catalogue."""

from __future__ import annotations

import argparse
import json
import sys

from epdoctor import exitcodes

NAME = "traps"
HELP = "list every known trap (filter by --layer, --severity, or a search word)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", nargs="?", help="only traps whose code, title or text contains this")
    p.add_argument(
        "--layer", help="host, packaging, plugin, transport, deepep, engine, kubernetes, ..."
    )
    p.add_argument(
        "--severity",
        choices=("fail", "warn", "unknown", "info"),
        help="only traps whose default severity is this",
    )
    p.add_argument("--json", action="store_true", help="print the list as JSON")


def run(args: argparse.Namespace) -> int:
    from epdoctor import knowledge

    every = sorted(knowledge.all_traps(), key=lambda t: t.code)
    traps = every
    if args.layer:
        traps = [
            t
            for t in traps
            if t.layer == args.layer or t.code[:1] == args.layer.upper()[:1] == args.layer
        ]
    if args.severity:
        traps = [t for t in traps if t.default_status.value == args.severity]
    if args.query:
        q = args.query.lower()
        traps = [
            t for t in traps if q in " ".join((t.code, t.title, t.symptom, t.why, t.name)).lower()
        ]
    if not traps:  # a filter that matched nothing is wrong input, not an empty catalogue
        return _nothing_matched(args, every)
    if args.json:
        print(json.dumps([t.to_json() for t in traps], indent=2))
        return exitcodes.OK
    from rich.table import Table

    from epdoctor.commands._common import console

    table = Table(box=None)
    table.add_column("code", style="bold", no_wrap=True)
    table.add_column("layer", style="dim", no_wrap=True)
    table.add_column("severity", no_wrap=True)
    table.add_column("title")
    for t in traps:
        table.add_row(t.code, t.layer, t.default_status.value, t.title)
    console().print(table)
    return exitcodes.OK


def _nothing_matched(args: argparse.Namespace, every: list) -> int:
    from epdoctor.safeio import plain

    asked = [f"--layer {args.layer}"] if args.layer else []
    asked += [f"--severity {args.severity}"] if args.severity else []
    asked += [repr(args.query)] if args.query else []
    layers = ", ".join(sorted({t.layer for t in every}))
    print(
        f"epdoctor traps: no trap matches {plain(' '.join(asked))} (layers: {layers})",
        file=sys.stderr,
    )
    return exitcodes.ERROR
