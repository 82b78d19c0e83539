"""`epdoctor diagnose`: read-only diagnosis of the local host, remote hosts, pods or bundles."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from epdoctor import exitcodes
from epdoctor.commands._common import console, progress
from epdoctor.model import EpdoctorError
from epdoctor.options import (
    add_context_arguments,
    add_probe_arguments,
    add_target_arguments,
    context_from,
    probe_options_from,
    to_target_spec,
)
from epdoctor.redact import redact_obj, redact_text

if TYPE_CHECKING:
    from epdoctor.diagnose import Report

NAME = "diagnose"
FORMATS = ("text", "json", "markdown", "junit")
HELP = "diagnose this host (default), SSH hosts, Kubernetes pods or a saved bundle (read-only)"


def register(p: argparse.ArgumentParser) -> None:
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), json (schema in docs/json-schema.md), markdown (for a GitHub "
        "issue) or junit (JUnit XML for CI: one test case per check and target)",
    )
    out.add_argument(
        "--json", dest="format", action="store_const", const="json", help="same as --format json"
    )
    out.add_argument(
        "--markdown",
        dest="format",
        action="store_const",
        const="markdown",
        help="same as --format markdown",
    )
    p.add_argument(
        "-v", "--verbose", action="store_true", help="also show passed and not-applicable checks"
    )
    p.add_argument(
        "--fail-on",
        choices=("fail", "warn", "unknown"),
        default="fail",
        help="exit 1 when a finding at or above this level exists (default: fail)",
    )
    add_context_arguments(p)
    add_probe_arguments(p)
    add_target_arguments(p)
    p.add_argument(
        "--show-manifests",
        action="store_true",
        help="with --nodes: print each Job's YAML before asking (default: a one-line summary)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="with --nodes: print the Jobs' YAML on stdout and exit 0; nothing is created",
    )
    p.add_argument(
        "--parallel", type=int, default=32, metavar="N", help="targets probed at once (default 32)"
    )
    p.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="FILE",
        help="also analyze this NCCL/engine log (repeatable; '-' stdin, .gz); see epdoctor logs",
    )


def run(args: argparse.Namespace) -> int:
    from epdoctor.diagnose import diagnose
    from epdoctor.requests import DiagnoseRequest
    from epdoctor.safeio import check_source
    from epdoctor.targets.base import TargetError
    from epdoctor.targets.selection import open_targets

    for path in args.log:
        if path != "-":
            check_source(path, "log file")  # before any probe: a FIFO or device never ends
    spec = to_target_spec(args)
    from epdoctor.targets.base import DryRun

    try:
        targets = open_targets(spec)
    except DryRun as done:
        print(f"epdoctor: {done}", file=sys.stderr)
        return exitcodes.OK
    except TargetError as exc:
        raise EpdoctorError(str(exc)) from exc
    request = DiagnoseRequest(
        targets=spec,
        context=context_from(args),
        probe=probe_options_from(args, targets),
        parallel=args.parallel,
        logs=tuple(args.log),
    )
    with progress(args.format == "text", len(targets)) as cb:
        report = diagnose(request, targets, progress=cb)
    results, fleet, logs = report.results, report.fleet, report.logs
    if logs:
        from epdoctor.reports import logs_report
    context = {"transport": args.transport, "engine": args.engine, "instance": args.instance}
    if args.format == "junit":
        from epdoctor.reports import junit

        sys.stdout.write(junit.render(results, fleet, args.fail_on) + "\n")
    elif args.format == "json":
        from epdoctor.reports import json_report

        out = json_report.render(results, context, fleet)
        if logs:  # the per-rank part joins the report: redacted with it, not after it
            out = _redacted_json(logs_report.extend_report("json", out, logs))
        sys.stdout.write(out + "\n")
    elif args.format == "markdown":
        from epdoctor.reports import markdown

        out = markdown.render(results, context, fleet, verbose=args.verbose)
        if logs:
            out = redact_text(logs_report.extend_report("markdown", out, logs))
        sys.stdout.write(out + "\n")
    else:
        from epdoctor.reports import text

        if logs:
            logs_report.extend_report("text", None, logs, console())
        code = _exit_code(report, args.fail_on)
        text.render(console(), results, fleet, args.verbose, exit_code=code, fail_on=args.fail_on)
        return code
    return _exit_code(report, args.fail_on)


def _exit_code(report: Report, fail_on: str) -> int:
    code = exitcodes.for_results(report.gated(), fail_on)
    if _probes_not_run(report.diagnoses) and code == exitcodes.OK:
        code = exitcodes.ERROR  # a target whose probe never ran was not diagnosed
    return code


def _probes_not_run(diagnoses: list) -> bool:
    """One stderr line for each target whose probe never ran although its other facts were
    read (a pod whose exec was forbidden or failed: the report shows it as K115)."""
    from epdoctor.safeio import plain

    missed = False
    for d in diagnoses:
        why = next((f.get("probe_error") for f in d.extra.values() if isinstance(f, dict)), None)
        if d.node is None and why:
            name = d.result.target.name
            print(
                f"epdoctor: {plain(name)}: {plain(why)}; the node probe did not run",
                file=sys.stderr,
            )
            missed = True
    return missed


def _redacted_json(text: str) -> str:
    return json.dumps(redact_obj(json.loads(text)), indent=2, default=str)
