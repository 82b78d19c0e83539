"""`epdoctor logs FILE...`: which network each rank's NCCL used, and the traps in the log.

Sources: files ('-' is stdin, .gz is read), pod containers (``--pod``, ``-l SELECTOR``,
``--all-containers``, with kubectl's ``--since`` and ``--tail``) and files on SSH hosts
(``--ssh host:/path``). ``--follow`` reads them all at once as they grow, each in its own reader
thread (epdoctor.targets.logstream), into ONE LogAnalyzer fed per source, and prints the lines
as stern does (a prefix and colour per source, reports.log_lines) with each finding under the
line that proved it, then the rank summary; ``--findings-only`` prints the findings alone.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import zlib
from collections.abc import Iterator
from typing import Any

from epdoctor import exitcodes
from epdoctor.model import EpdoctorError, Status
from epdoctor.options import add_expect_efa_argument
from epdoctor.redact import redact_text
from epdoctor.requests import LogSources
from epdoctor.safeio import check_source, plain

NAME = "logs"
HELP = "analyze NCCL / aws-ofi-nccl / DeepEP / engine logs per rank (files, '-', .gz, pods, SSH)"
TRANSPORTS = ("gin-proxy", "efa-gda")
FOLLOW_EVIDENCE = 3  # evidence lines printed under a finding as it arrives


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
        help="keep reading every source as it grows (files, --pod, -l, --ssh) and print its "
        "lines, prefixed by source, each finding under the line that proved it; Ctrl-C ends "
        "it (exit 130) after the rank summary",
    )
    p.add_argument(
        "--findings-only",
        action="store_true",
        help="with --follow: print the findings as they arrive, not the lines",
    )
    p.add_argument(
        "--timeout",
        type=float,
        metavar="S",
        help="with --follow: stop following after S seconds (as Ctrl-C would)",
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
    add_expect_efa_argument(g)
    k = p.add_argument_group("remote logs (read-only)")
    k.add_argument(
        "--pod", action="append", default=[], metavar="NAME", help="a pod's log (repeatable)"
    )
    k.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="every pod matching these labels, as kubectl logs -l (e.g. app=vllm)",
    )
    k.add_argument(
        "-n", "--namespace", metavar="NS", help="namespace of the pods (default: the context's)"
    )
    k.add_argument(
        "--since",
        metavar="DURATION",
        help="pod logs: only lines newer than this (10s, 5m, 2h, 1h30m), as kubectl",
    )
    k.add_argument(
        "--tail", type=int, metavar="N", help="pod logs: only the last N lines of each, as kubectl"
    )
    k.add_argument("-c", "--container", metavar="NAME", help="container (default: the first)")
    k.add_argument(
        "--all-containers",
        action="store_true",
        help="every container of each --pod (init, app and ephemeral, as kubectl), "
        "each its own source",
    )
    k.add_argument("--previous", action="store_true", help="the previous (crashed) container's log")
    k.add_argument("--context", metavar="NAME", help="kubeconfig context")
    k.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG)")
    k.add_argument(
        "--request-timeout",
        type=float,
        metavar="S",
        help="seconds to wait for each API call of --pod (default 20; a --follow waits "
        "for new lines as long as it runs)",
    )
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
    from epdoctor.model import Context

    opts: dict[str, Any] = {"expect_nics": args.expect_nics} if args.expect_nics else {}
    if args.expect_efa is not None:
        opts["expect_efa"] = args.expect_efa
    return Context(transport=args.transport, instance=args.instance, options=opts)


def _check_args(args: argparse.Namespace) -> None:
    """Refuse what cannot work before anything is opened or connected."""
    pods = bool(args.pod or args.selector)
    if not (args.files or pods or args.ssh):
        raise EpdoctorError("give log files, '-', --pod NAME, -l SELECTOR or --ssh HOST:/PATH")
    if (args.since or args.tail is not None) and not pods:
        raise EpdoctorError("--since and --tail go with --pod or -l (pod logs)")
    if args.tail is not None and args.tail < 0:
        raise EpdoctorError("--tail N needs N >= 0")
    if args.since:
        since_seconds(args.since)
    if args.findings_only and not args.follow:
        raise EpdoctorError("--findings-only goes with --follow (without it only findings print)")
    if args.all_containers and args.container:
        raise EpdoctorError("--all-containers reads every container: leave out -c/--container")
    if (args.all_containers or args.previous) and not pods:
        raise EpdoctorError("--all-containers and --previous go with --pod or -l")
    if args.timeout is not None and (not args.follow or args.timeout <= 0):
        raise EpdoctorError("--timeout S (S > 0) goes with --follow")
    rt = getattr(args, "request_timeout", None)
    if rt is not None and (rt <= 0 or not pods):
        raise EpdoctorError("--request-timeout S (S > 0) goes with --pod or -l")
    for path in args.files:
        if path != "-":
            check_source(path, "log file")  # a FIFO, device or folder would never end a read


def since_seconds(text: str) -> int:
    """kubectl's --since: 10s, 5m, 2h, 1h30m (a bare number is seconds)."""
    import re

    m = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?|(\d+)", text.strip())
    if not m or not any(m.groups()):
        raise EpdoctorError(f"--since {plain(text)!r}: give a duration such as 30s, 10m, 2h, 1h30m")
    h, mi, sec, bare = (int(g) if g else 0 for g in m.groups())
    total = bare or h * 3600 + mi * 60 + sec
    if total <= 0:
        raise EpdoctorError("--since needs a duration above zero")
    return total


def log_sources(args: argparse.Namespace) -> LogSources:
    return LogSources(
        files=tuple(args.files),
        pod=tuple(args.pod),
        selector=args.selector,
        since_s=since_seconds(args.since) if args.since else None,
        tail=args.tail,
        namespace=args.namespace,
        container=args.container,
        all_containers=args.all_containers,
        previous=args.previous,
        context=args.context,
        kubeconfig=args.kubeconfig,
        request_timeout=getattr(args, "request_timeout", None),
        ssh=tuple(args.ssh),
        known_hosts=args.known_hosts,
        identity=tuple(args.identity),
    )


def remote_streams(args: argparse.Namespace, follow: bool = False) -> tuple[list, list[str]]:
    """A LogStream for each --pod container and --ssh file, and notes on the containers that
    have no log to read; names are checked before anything connects."""
    from epdoctor.targets import logstream
    from epdoctor.targets.base import TargetError

    try:
        return logstream.remote_streams(log_sources(args), follow)
    except TargetError as exc:
        raise EpdoctorError(redact_text(str(exc))) from exc


def _note(text: str) -> None:
    print(f"epdoctor: {plain(redact_text(text))}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    streams, notes = remote_streams(args, follow=args.follow)
    for n in notes:
        _note(n)
    if not (args.files or streams):
        raise EpdoctorError("no log to read: " + "; ".join(notes))
    if args.follow:
        return _follow(args, streams)
    from epdoctor.logwatch import analyze_paths
    from epdoctor.targets.base import TargetError

    try:
        a = analyze_paths(args.files, context_of(args), streams=[(s.name, s) for s in streams])
    except (OSError, EOFError, zlib.error, TargetError) as exc:  # EOFError: a cut .gz
        why = f"{exc} (truncated or corrupt)" if isinstance(exc, (EOFError, zlib.error)) else exc
        raise EpdoctorError(redact_text(plain(f"cannot read log: {why}"))) from exc
    finally:
        for s in streams:
            s.stop()
    _render(args, a)
    return _exit(a.findings, args.fail_on)


def _render(args: argparse.Namespace, a) -> None:
    from epdoctor.reports import logs_report

    if args.json:
        ctx = {
            "transport": args.transport,
            "instance": args.instance,
            "expect_nics": args.expect_nics,
            "expect_efa": args.expect_efa is not False,
        }
        sys.stdout.write(logs_report.render_json(a, ctx) + "\n")
    elif args.markdown:
        sys.stdout.write(logs_report.render_markdown(a) + "\n")
    else:
        from epdoctor.commands._common import console

        logs_report.render_text(console(), a, verbose=args.verbose)


def _exit(findings, fail_on: str, lost: bool = False) -> int:
    """Findings at the level first; else a source that could not be read is an error."""
    threshold = Status(fail_on).rank
    if any(f.status.rank >= threshold for f in findings):
        return exitcodes.FINDINGS
    return exitcodes.ERROR if lost else exitcodes.OK


# ---- --follow ---------------------------------------------------------------------------------


def _follow(args: argparse.Namespace, remote: list) -> int:
    """Every source at once; each finding printed the moment the line that proves it arrives.

    Ends at Ctrl-C (SIGTERM and SIGHUP too), at --timeout, or when every source ended (stdin
    at EOF, a pod's container finished); every remote reader is stopped before the verdicts
    that wait for the end of the log print. Ctrl-C exits 130, after the summary."""
    from epdoctor.logwatch import LogAnalyzer
    from epdoctor.reports.log_lines import LinePrinter
    from epdoctor.targets.logstream import file_stream, follow

    an = LogAnalyzer(context_of(args))
    streams = [file_stream(p, follow=True) for p in args.files] + remote
    lines = None if (args.json or args.findings_only) else LinePrinter()
    seen: list = []
    lost = interrupted = False
    try:
        with _signals_interrupt(), contextlib.closing(follow(streams, args.timeout)) as events:
            for ev in events:
                if ev.error:
                    lost = True
                    _note(f"{ev.stream.name}: {ev.error}")
                elif ev.data and lines is not None:  # line by line: a finding under its line
                    for line in lines.split(ev.stream.name, ev.data):
                        seen += _line(an, lines, ev.stream.name, line)
                elif ev.data:
                    found = an.feed(ev.data, source=ev.stream.name)
                    seen += found
                    if not args.json:
                        _print_found(found, ev.stream.name)
    except KeyboardInterrupt:
        interrupted = True  # the normal way to end a follow; the readers were stopped
    if lines is not None:
        for source, partial in lines.rest():
            seen += _line(an, lines, source, partial)
    rest = an.finish()
    if args.json:
        import json

        doc = {"findings": [x.to_json() for x in seen + rest]}
        print(redact_text(json.dumps(doc, indent=2)))
    elif lines is not None:
        _summary(args, an)
    else:
        _print_found(rest, None)
    if interrupted:
        return exitcodes.INTERRUPTED
    return _exit(seen + rest, args.fail_on, lost)


def _line(an, lines, source: str, line: bytes) -> list:
    lines.line(source, line)
    found = an.feed(line, source=source)
    for fd in found:
        lines.finding(source, fd)
    return found


def _summary(args: argparse.Namespace, an) -> None:
    """On exit: the rank table and every finding, as `epdoctor logs` prints for files."""
    from epdoctor.commands._common import console
    from epdoctor.reports import logs_report

    print("---", flush=True)
    logs_report.render_text(console(), an.analysis(), verbose=args.verbose)


def _print_found(found: list, source: str | None) -> None:
    from epdoctor.reports.logs_report import finding_line

    for fd in found:
        head = finding_line(fd) + (f" ({source})" if source else "")
        lines = [head] + [f"    {e}" for e in fd.evidence[:FOLLOW_EVIDENCE]]
        print(redact_text("\n".join(lines)), flush=True)


@contextlib.contextmanager
def _signals_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP end a follow like Ctrl-C, so its remote readers are stopped too."""

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread: leave them
            old[sig] = signal.signal(sig, interrupt)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
