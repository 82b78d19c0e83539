"""`epdoctor logs FILE...`: which network each rank's NCCL used, and the traps in the log."""

from __future__ import annotations

import argparse
import os
import sys
import time

from epdoctor import exitcodes
from epdoctor.model import EpdoctorError, Status

NAME = "logs"
HELP = "analyze NCCL / aws-ofi-nccl / DeepEP / engine logs per rank (files, '-', .gz)"
TRANSPORTS = ("gin-proxy", "efa-gda")


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "files", nargs="*", metavar="FILE", help="log files; '-' reads stdin; .gz is read"
    )
    out = p.add_mutually_exclusive_group()
    out.add_argument(
        "--json", action="store_true", help="print ranks and findings as JSON (docs/logs.md)"
    )
    out.add_argument("--markdown", action="store_true", help="print the report as Markdown")
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep reading as the file grows; findings print as they appear",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="also show passed checks")
    g = p.add_argument_group("what the run should have used")
    g.add_argument(
        "--instance",
        metavar="TYPE",
        help="instance type (sets the EFA NIC count, e.g. p5en.48xlarge)",
    )
    g.add_argument("--expect-nics", type=int, metavar="N", help="EFA NICs each rank should find")
    g.add_argument("--transport", choices=TRANSPORTS, help="the GIN transport the run meant to use")
    k = p.add_argument_group("remote logs (read-only)")
    k.add_argument(
        "--pod", action="append", default=[], metavar="NAME", help="a pod's log (repeatable)"
    )
    k.add_argument(
        "-n", "--namespace", metavar="NS", help="namespace of --pod (default: the context's)"
    )
    k.add_argument("-c", "--container", metavar="NAME", help="container (default: the first)")
    k.add_argument("--previous", action="store_true", help="the previous (crashed) container's log")
    k.add_argument("--context", metavar="NAME", help="kubeconfig context")
    k.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG)")
    k.add_argument(
        "--ssh",
        action="append",
        default=[],
        metavar="HOST:/PATH",
        help="a log file on an SSH host, [user@]host[:port]:/path (repeatable; known_hosts checked)",
    )
    k.add_argument(
        "--known-hosts", metavar="FILE", help="known_hosts for --ssh (default ~/.ssh/known_hosts)"
    )
    k.add_argument(
        "-i", "--identity", action="append", default=[], metavar="FILE", help="SSH key for --ssh"
    )
    p.add_argument(
        "--fail-on",
        choices=("fail", "warn", "unknown"),
        default="fail",
        help="exit 1 when a finding at or above this level exists (default: fail)",
    )


def context_of(args: argparse.Namespace):
    from epdoctor.checks.base import Context

    opts = {"expect_nics": args.expect_nics} if args.expect_nics else {}
    return Context(transport=args.transport, instance=args.instance, options=opts)


def remote_streams(args: argparse.Namespace) -> list:
    """(name, chunk iterator) for each --pod and --ssh source; heavy clients imported here."""
    from epdoctor.targets.base import TargetError

    out = []
    try:
        if args.pod:
            from epdoctor.targets import kube

            if args.namespace:
                kube.valid_namespace(args.namespace)
            if args.container:
                kube.valid_container_name(args.container)
            session = kube.KubeSession.connect(args.context, args.kubeconfig, None)
            for name in args.pod:
                for pod in kube.select_pods(
                    session, namespace=args.namespace, pod=name, selector=None, all_namespaces=False
                ):
                    t = kube.KubePodTarget(session, pod, args.container)
                    out.append((f"pod/{t.info.name}", t.read_logs(previous=args.previous)))
        for spec in args.ssh:
            from epdoctor.targets.ssh_cli import remote_log

            out.append(
                (
                    spec,
                    remote_log(
                        spec,
                        follow=False,
                        identity=tuple(args.identity),
                        known_hosts=args.known_hosts,
                    ),
                )
            )
    except TargetError as exc:
        raise EpdoctorError(str(exc)) from exc
    return out


def run(args: argparse.Namespace) -> int:
    if not (args.files or args.pod or args.ssh):
        raise EpdoctorError("give log files, '-', --pod NAME or --ssh HOST:/PATH")
    if args.follow and (args.pod or args.ssh):
        raise EpdoctorError(
            "--follow reads files and stdin; pipe `kubectl logs -f` into `epdoctor logs -f -`"
        )
    for path in args.files:
        if path != "-" and not os.path.isfile(path):
            raise EpdoctorError(f"no such log file: {path}")
    if args.follow:
        return _follow(args)
    from epdoctor.checks.logs import analyze_paths
    from epdoctor.targets.base import TargetError

    try:
        a = analyze_paths(args.files, context_of(args), streams=remote_streams(args))
    except (OSError, TargetError) as exc:
        raise EpdoctorError(f"cannot read log: {exc}") from exc
    _render(args, a)
    return _exit(a.findings, args.fail_on)


def _render(args: argparse.Namespace, a) -> None:
    from epdoctor.reports import logs_report

    if args.json:
        ctx = {
            "transport": args.transport,
            "instance": args.instance,
            "expect_nics": args.expect_nics,
        }
        sys.stdout.write(logs_report.render_json(a, ctx) + "\n")
    elif args.markdown:
        sys.stdout.write(logs_report.render_markdown(a) + "\n")
    else:
        from epdoctor.commands._common import console

        logs_report.render_text(console(), a, verbose=args.verbose)


def _exit(findings, fail_on: str) -> int:
    threshold = Status(fail_on).rank
    return exitcodes.FINDINGS if any(f.status.rank >= threshold for f in findings) else exitcodes.OK


def _follow(args: argparse.Namespace) -> int:
    """tail -f every file (or stdin); print each finding the moment its line arrives."""
    from epdoctor.checks.logs import LogAnalyzer
    from epdoctor.reports.logs_report import finding_line

    ctx = context_of(args)
    streams = []
    analyzers = []
    for path in args.files:
        f = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115
        an = LogAnalyzer(ctx, "stdin" if path == "-" else path)
        analyzers.append(an)
        streams.append((path, f, an))
    seen: list = []
    try:
        while streams:
            idle = True
            for item in list(streams):
                path, f, an = item
                data = os.read(f.fileno(), 1 << 20) if path == "-" else f.read(1 << 20)
                if path == "-" and not data:
                    streams.remove(item)
                    continue
                if data:
                    idle = False
                    for fd in an.feed(data):
                        seen.append(fd)
                        if not args.json:
                            print(f"{finding_line(fd)} ({an.source})", flush=True)
            if idle:
                time.sleep(0.25)
    except KeyboardInterrupt:
        pass
    findings = []
    for an in analyzers:
        findings.extend(an.finish())
    if args.json:
        import json

        print(json.dumps({"findings": [x.to_json() for x in seen + findings]}, indent=2))
    else:
        for fd in findings:
            print(finding_line(fd))
    return _exit(seen + findings, args.fail_on)
