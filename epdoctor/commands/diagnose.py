"""`epdoctor diagnose`: read-only diagnosis of the local host, remote hosts, pods or bundles."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import zlib

from epdoctor import exitcodes
from epdoctor.commands._common import console, progress
from epdoctor.model import EpdoctorError, Finding
from epdoctor.options import (
    add_context_arguments,
    add_probe_arguments,
    add_target_arguments,
    context_from,
    probe_options_from,
    to_target_spec,
)
from epdoctor.redact import redact_obj, redact_text

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
        "--parallel", type=int, default=32, metavar="N", help="targets probed at once (default 32)"
    )
    p.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="FILE",
        help="also analyze this NCCL/engine log (repeatable; '-' stdin, .gz); see epdoctor logs",
    )


def _fleet_findings(diagnoses: list) -> list[Finding]:
    if len(diagnoses) < 2:
        return []
    try:
        drift = importlib.import_module("epdoctor.checks.drift")
    except ModuleNotFoundError:
        return []
    return list(drift.drift_findings(diagnoses))


def run(args: argparse.Namespace) -> int:
    from epdoctor.diagnose import diagnose_many
    from epdoctor.safeio import check_source
    from epdoctor.targets.base import TargetError
    from epdoctor.targets.selection import open_targets

    for path in args.log:
        if path != "-":
            check_source(path, "log file")  # before any probe: a FIFO or device never ends
    try:
        targets = open_targets(to_target_spec(args))
    except TargetError as exc:
        raise EpdoctorError(str(exc)) from exc
    ctx = context_from(args)
    with progress(args.format == "text", len(targets)) as cb:
        diagnoses = diagnose_many(
            targets, ctx, probe_options_from(args, targets), parallel=args.parallel, progress=cb
        )
    results = [d.result for d in diagnoses]
    fleet = _fleet_findings(diagnoses)
    logs = None
    if args.log:
        from epdoctor.logwatch import analyze_paths
        from epdoctor.reports import logs_report

        try:
            logs = analyze_paths(args.log, ctx)
        except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: a cut .gz
            raise EpdoctorError(f"cannot read log: {exc} (truncated or corrupt?)") from exc
        logs_report.attach(results, logs)
        for r in results:  # log lines are redacted as they enter the log facts; again here
            r.findings = [_redacted(f) for f in r.findings]
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
        code = _exit_code(results, fleet, diagnoses, args.fail_on)
        text.render(console(), results, fleet, args.verbose, exit_code=code, fail_on=args.fail_on)
        return code
    return _exit_code(results, fleet, diagnoses, args.fail_on)


def _exit_code(results: list, fleet: list[Finding], diagnoses: list, fail_on: str) -> int:
    code = exitcodes.for_results(results + ([_fleet_result(fleet)] if fleet else []), fail_on)
    if _probes_not_run(diagnoses) and code == exitcodes.OK:
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


def _redacted(f: Finding) -> Finding:
    from dataclasses import replace

    ev = tuple(redact_text(e) for e in f.evidence)
    return replace(f, title=redact_text(f.title), evidence=ev, fix=redact_text(f.fix))


def _redacted_json(text: str) -> str:
    return json.dumps(redact_obj(json.loads(text)), indent=2, default=str)


def _fleet_result(fleet: list[Finding]):
    from epdoctor.model import TargetInfo, TargetResult

    return TargetResult(TargetInfo("fleet", "fleet"), findings=fleet)
