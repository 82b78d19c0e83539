"""`epdoctor lint PATH...`: read a recipe folder the way the seeds' reviewers did."""

from __future__ import annotations

import argparse
import sys

from epdoctor import exitcodes

NAME = "lint"
HELP = "lint a recipe folder (Dockerfiles, scripts, env files, manifests) for known traps"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe folders or files")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--format", "-o", choices=("text", "json", "sarif"), default="text", help="output format"
    )
    fmt.add_argument("--json", dest="format", action="store_const", const="json", help="JSON")
    fmt.add_argument(
        "--sarif", dest="format", action="store_const", const="sarif", help="SARIF 2.1.0"
    )
    p.add_argument(
        "--fail-on",
        choices=("fail", "warn", "unknown", "info"),
        default="warn",
        help="exit 1 when a finding at or above this severity remains (default: warn)",
    )
    p.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="CODES",
        help="only these codes or prefixes, comma-separated (e.g. B4,S401)",
    )
    p.add_argument(
        "--show-suppressed", action="store_true", help="list suppressed findings in text output"
    )


def run(args: argparse.Namespace) -> int:
    from epdoctor.lint import lint_paths, render
    from epdoctor.model import EpdoctorError

    select = [c.strip() for s in args.select for c in s.split(",") if c.strip()]
    try:
        report = lint_paths(args.paths, select)
    except FileNotFoundError as exc:
        raise EpdoctorError(f"no such file or folder: {exc}") from exc
    if args.format == "json":
        render.dump(render.to_json(report))
    elif args.format == "sarif":
        render.dump(render.to_sarif(report))
    else:
        render.text(report, sys.stdout, args.show_suppressed)
    threshold = render.rank(args.fail_on)
    if any(render.rank(f.level()) >= threshold for f in report.active):
        return exitcodes.FINDINGS
    if report.errors:
        return exitcodes.ERROR
    if report.checked == 0:
        why = f"{len(report.skipped)} file(s) skipped" if report.skipped else "no recipe file"
        print(
            f"epdoctor: error: nothing was checked in {' '.join(args.paths)} ({why})",
            file=sys.stderr,
        )
        return exitcodes.ERROR
    return exitcodes.OK
