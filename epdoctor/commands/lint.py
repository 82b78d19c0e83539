"""`epdoctor lint PATH...`: read a recipe folder the way the reference recipes' reviewers did."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
    # `-o json` as kubectl users type it; -o yaml and -o wide have no lint meaning
    p.add_argument(
        "-o",
        "--output",
        dest="old_o",
        metavar="FORMAT",
        help="same as --format (-o json, -o sarif, -o junit, -o text)",
    )
    fmt.add_argument("--json", dest="format", action="store_const", const="json", help="JSON")
    fmt.add_argument(
        "--sarif", dest="format", action="store_const", const="sarif", help="SARIF 2.1.0"
    )
    p.add_argument(
        "--fail-on",
        choices=("fail", "warn", "unknown", "info"),
        default=None,
        help="exit 1 when a finding at or above this severity remains (default: warn, or the "
        "settings file's fail-on)",
    )
    p.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="CODES",
        help="only these codes or prefixes, comma-separated (e.g. B4,S401)",
    )
    p.add_argument(
        "--ignore",
        action="append",
        default=[],
        metavar="CODES",
        help="never these codes or prefixes, comma-separated (e.g. K209,C1); adds to the "
        "settings file's ignore",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="do not lint files matching GLOB (path under the folder, or file name: "
        "'vendor/**', '*.example'); repeatable; listed as not linted",
    )
    p.add_argument(
        "--isolated",
        action="store_true",
        help="read no settings file (.epdoctor.toml [lint], pyproject.toml [tool.epdoctor.lint])",
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
    from epdoctor.lint.config import LintConfig, load
    from epdoctor.model import EpdoctorError
    from epdoctor.safeio import plain

    if args.old_o is not None:
        if args.old_o not in FORMATS:
            raise EpdoctorError(
                f"lint -o {plain(args.old_o)}: lint writes {', '.join(FORMATS)} "
                "(-o json, --format sarif, > FILE to save it)"
            )
        args.format = args.old_o
    conf = LintConfig() if args.isolated else load(Path(args.paths[0]).resolve())
    split = lambda vals: [c.strip() for v in vals for c in v.split(",") if c.strip()]  # noqa: E731
    select = split(args.select) or list(conf.select)
    ignore = [*conf.ignore, *split(args.ignore)]
    _check_select(select)
    _check_select(ignore, flag="--ignore")
    fail_on = args.fail_on or conf.fail_on or "warn"
    _check_folders(args.paths)
    try:
        report = lint_paths(args.paths, select, ignore, [*conf.exclude, *args.exclude])
    except FileNotFoundError as exc:
        raise EpdoctorError(f"no such file or folder: {exc}") from exc
    report.config = conf.path
    if report.checked == 0 and not report.errors:
        reasons = report.skipped + report.not_linted
        why = "; ".join(reasons[:5]) + (f" (+{len(reasons) - 5} more)" if len(reasons) > 5 else "")
        raise EpdoctorError(
            f"nothing to lint in {plain(' '.join(args.paths))}: "
            + (plain(why) if why else "no file")
            + ". lint reads Dockerfiles, shell scripts, env files and Kubernetes manifests"
        )
    if args.format == "json":
        render.dump(render.to_json(report))
    elif args.format == "sarif":
        render.dump(render.to_sarif(report))
    elif args.format == "junit":
        sys.stdout.write(render.to_junit(report, fail_on) + "\n")
    else:
        render.text(report, sys.stdout, args.show_suppressed)
    threshold = render.rank(fail_on)
    if any(render.rank(f.level()) >= threshold for f in report.active):
        return exitcodes.FINDINGS
    if report.errors:
        return exitcodes.ERROR
    if args.strict and report.skipped:
        print(
            f"epdoctor: error: --strict: {len(report.skipped)} file(s) skipped, not checked "
            "(listed above)",
            file=sys.stderr,
        )
        return exitcodes.ERROR
    return exitcodes.OK


def _check_folders(paths: list[str]) -> None:
    """An empty folder is one clear error, before anything is printed."""
    import os

    from epdoctor.model import EpdoctorError
    from epdoctor.safeio import plain

    for p in paths:
        if os.path.isdir(p) and not any(os.scandir(p)):
            raise EpdoctorError(
                f"{plain(p)} is an empty folder: nothing to lint. Give the recipe folder "
                "(`epdoctor plan` writes one) or its files"
            )


def _check_select(select: list[str], flag: str = "--select") -> None:
    """An unknown code or prefix is an error, not a filter that quietly matches nothing."""
    from epdoctor import knowledge
    from epdoctor.model import EpdoctorError
    from epdoctor.safeio import plain

    codes = [t.code for t in knowledge.all_traps()]
    unknown = [s for s in select if not any(c.startswith(s.upper()) for c in codes)]
    if unknown:
        raise EpdoctorError(
            f"{flag} {plain(','.join(unknown))}: no such code or prefix "
            "(`epdoctor traps` lists the codes)"
        )
