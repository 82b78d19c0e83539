"""`epdoctor explain CODE`: one trap from the catalogue."""

from __future__ import annotations

import argparse
import json
import sys

from epdoctor import exitcodes
from epdoctor.safeio import plain

NAME = "explain"
HELP = "explain a trap code: symptom, why, fix, how and where epdoctor detects it, references"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", help="trap code, e.g. H111")
    p.add_argument(
        "--json", action="store_true", help="print the trap as JSON, with its detectors' file:line"
    )


def run(args: argparse.Namespace) -> int:
    from epdoctor import knowledge

    try:
        trap = knowledge.get(args.code)
    except KeyError:
        print(
            f"epdoctor: unknown trap code {plain(args.code)!r}{_nearby(args.code)}", file=sys.stderr
        )
        return exitcodes.ERROR
    if args.json:
        from epdoctor.knowledge.detectors import locate

        doc = {**trap.to_json(), "detectors": [locate(d).to_json() for d in trap.detectors]}
        print(json.dumps(doc, indent=2))
        return exitcodes.OK
    from epdoctor.commands._common import console
    from epdoctor.reports.explain import render_trap

    render_trap(console(), trap)
    return exitcodes.OK


def _nearby(code: str) -> str:
    """Every code that starts with what was typed (H11: H111, H112, ...), else every code
    of its letter; all of them, never a cut list."""
    from epdoctor import knowledge

    codes = [t.code for t in knowledge.all_traps()]
    typed = code.strip().upper()
    starts = [c for c in codes if typed and c.startswith(typed)]
    if starts:
        return f"; codes starting {typed}: {' '.join(starts)}"
    letter = [c for c in codes if typed and c[:1] == typed[:1]]
    if letter:
        return f"; {typed[:1]}-codes: {' '.join(letter)} (epdoctor traps lists all)"
    return " (epdoctor traps lists all)"
