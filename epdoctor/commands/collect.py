"""`epdoctor collect`: save what the probe saw (redacted) for offline diagnosis elsewhere."""

from __future__ import annotations

import argparse
import socket
import sys
import time

from epdoctor import exitcodes
from epdoctor.commands._common import progress
from epdoctor.model import EpdoctorError
from epdoctor.options import (
    add_probe_arguments,
    add_target_arguments,
    probe_options_from,
    to_target_spec,
)

NAME = "collect"
HELP = "save a redacted bundle of what the probe saw (replay with `diagnose --bundle FILE`)"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o", "--output", metavar="FILE", help="bundle path (default epdoctor-HOST-DATE.tar.gz)"
    )
    p.add_argument(
        "--log",
        action="append",
        default=[],
        metavar="FILE",
        help="also store this log file (redacted) in the bundle",
    )
    p.add_argument(
        "--force", action="store_true", help="replace the bundle file when it exists already"
    )
    add_probe_arguments(p)
    add_target_arguments(p)
    p.add_argument(
        "--parallel",
        type=int,
        default=16,
        metavar="N",
        help="targets collected at once (default 16)",
    )


def run(args: argparse.Namespace) -> int:
    from epdoctor.bundle import write_bundle
    from epdoctor.diagnose import diagnose_many
    from epdoctor.model import Context
    from epdoctor.safeio import check_output, check_source
    from epdoctor.targets.base import TargetError
    from epdoctor.targets.selection import open_targets

    out = args.output or f"epdoctor-{socket.gethostname()}-{time.strftime('%Y%m%d-%H%M%S')}.tar.gz"
    # Everything that can be refused is refused before a target is probed.
    check_output(out, args.force, "bundle")
    for path in args.log:
        check_source(path, "log file")
    try:
        targets = open_targets(to_target_spec(args))
    except TargetError as exc:
        raise EpdoctorError(str(exc)) from exc
    logs: dict[str, bytes] = {}
    for path in args.log:
        try:
            with open(path, "rb") as f:
                logs[path.replace("/", "_").lstrip("_")] = f.read(64 << 20)
        except OSError as exc:
            raise EpdoctorError(f"cannot read log {path}: {exc.strerror or exc}") from exc
    with progress(True, len(targets)) as cb:
        diagnoses = diagnose_many(
            targets,
            Context(),
            probe_options_from(args, targets),
            parallel=args.parallel,
            progress=cb,
        )
    for d in diagnoses:
        if d.result.error:
            print(f"epdoctor: {d.result.target.name}: {d.result.error}", file=sys.stderr)
    n = write_bundle(out, diagnoses, sys.argv, logs, force=args.force)
    if n == 0:
        raise EpdoctorError("no target could be probed; nothing to save")
    print(f"wrote {out} ({n} target(s)); replay with: epdoctor diagnose --bundle {out}")
    return exitcodes.OK if n == len(diagnoses) else exitcodes.ERROR
