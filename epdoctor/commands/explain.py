"""`epdoctor explain CODE`: one trap from the catalogue."""

from __future__ import annotations

import argparse
import json
import sys

from epdoctor import exitcodes

NAME = "explain"
HELP = "explain a trap code: symptom, why, fix, how and where epdoctor detects it, references"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("code", help="trap code, e.g. H111")
    p.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> int:
    from epdoctor import knowledge

    try:
        trap = knowledge.get(args.code)
    except KeyError:
        close = [t.code for t in knowledge.all_traps() if t.code[:1] == args.code[:1].upper()][:12]
        print(
            f"epdoctor: unknown trap code {args.code!r}"
            + (f"; {args.code[:1].upper()}-codes: {' '.join(close)}" if close else "")
            + " (epdoctor traps lists all)",
            file=sys.stderr,
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
