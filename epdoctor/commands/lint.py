"""`epdoctor lint PATH...`: read a recipe folder the way the reference recipes' reviewers did."""

from __future__ import annotations

import argparse
import sys

from epdoctor import exitcodes

NAME = "lint"
FORMATS = ("text", "json", "sarif", "junit")
HELP = "lint a recipe folder (Dockerfiles, scripts, env files, manifests) for known traps"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH", help="recipe folders or files")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), json, sarif (SARIF 2.1.0) or junit (JUnit XML for CI)",
    )
    # `-o` names an output path in every other command; formats go through --format.
    p.add_argument("-o", dest="old_o", metavar="FORMAT", help=argparse.SUPPRESS)
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
    p.add_argument(
        "--strict",
        action="store_true",
        help="for CI gates: a file that was skipped (binary, oversized, unreadable, special) "
        "also exits 2, as a run that checked nothing always does",
    )


def run(args: argparse.Namespace) -> int:
    from epdoctor.lint import lint_paths, render
    from epdoctor.model import EpdoctorError

    if args.old_o is not None:
        hint = f"--format {args.old_o}" if args.old_o in FORMATS else "--format FORMAT"
        raise EpdoctorError(
            f"lint -o {args.old_o}: -o is not a format (in epdoctor -o names an output path); "
            f"use {hint}, and > FILE to save it"
        )
    select = [c.strip() for s in args.select for c in s.split(",") if c.strip()]
    _check_select(select)
    try:
        report = lint_paths(args.paths, select)
    except FileNotFoundError as exc:
        raise EpdoctorError(f"no such file or folder: {exc}") from exc
    if args.format == "json":
        render.dump(render.to_json(report))
    elif args.format == "sarif":
        render.dump(render.to_sarif(report))
    elif args.format == "junit":
        sys.stdout.write(render.to_junit(report, args.fail_on) + "\n")
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
    if args.strict and report.skipped:
        print(
            f"epdoctor: error: --strict: {len(report.skipped)} file(s) skipped, not checked "
            "(listed above)",
            file=sys.stderr,
        )
        return exitcodes.ERROR
    return exitcodes.OK


def _check_select(select: list[str]) -> None:
    """An unknown code or prefix is an error, not a filter that quietly matches nothing."""
    from epdoctor import knowledge
    from epdoctor.model import EpdoctorError
    from epdoctor.safeio import plain

    codes = [t.code for t in knowledge.all_traps()]
    unknown = [s for s in select if not any(c.startswith(s.upper()) for c in codes)]
    if unknown:
        raise EpdoctorError(
            f"--select {plain(','.join(unknown))}: no such code or prefix "
            "(`epdoctor traps` lists the codes)"
        )
