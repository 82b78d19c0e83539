"""Flags and helpers shared by the commands that diagnose targets."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

from epdoctor.checks.base import TRANSPORTS
from epdoctor.model import Context
from epdoctor.targets.base import ProbeOptions

ENGINES = ("vllm", "dynamo", "tensorrt-llm", "sglang")


def add_context_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("intended stack")
    g.add_argument(
        "--transport",
        choices=TRANSPORTS,
        help="judge floors for this transport (default: NCCL_GIN_TYPE of the workload, "
        "else report what each transport would need)",
    )
    g.add_argument(
        "--engine", choices=ENGINES, help="the serving engine, when not evident from the node"
    )
    g.add_argument(
        "--instance",
        metavar="TYPE",
        help="instance type when the node cannot tell (e.g. p5en.48xlarge)",
    )
    add_expect_efa_argument(g)


def add_expect_efa_argument(g: Any) -> None:
    """EFA is the goal: a rank off EFA fails unless the operator says the run never meant it."""
    g.add_argument(
        "--no-expect-efa",
        dest="expect_efa",
        action="store_false",
        default=True,
        help="the run was not meant to use EFA (one node, another fabric): a rank on Socket, "
        "IB or a non-EFA provider is then a warning, not a failure",
    )


def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("probe")
    g.add_argument(
        "--pid",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="also read what process N really loaded (/proc/N/maps) and its environment",
    )
    g.add_argument(
        "--all-pids", action="store_true", help="every process that has a libnccl mapped"
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="probe deadline per target (default 60)",
    )
    g.add_argument(
        "--root",
        metavar="DIR",
        help="read the node's files under DIR (a mounted host root or an unpacked image)",
    )


def context_from(args: argparse.Namespace) -> Context:
    opts = {} if getattr(args, "expect_efa", True) else {"expect_efa": False}
    return Context(
        transport=args.transport, engine=args.engine, instance=args.instance, options=opts
    )


def probe_options_from(args: argparse.Namespace, targets: Sequence[Any] = ()) -> ProbeOptions:
    """The probe's flags; a --root that this host is to read must be a folder here (for SSH
    hosts and pods it names a folder over there, which only the probe can judge)."""
    root = args.root
    if root and any(t.info.kind == "local" for t in targets) and not os.path.isdir(root):
        from epdoctor.model import EpdoctorError
        from epdoctor.safeio import plain

        why = "is not a folder" if os.path.exists(root) else "no such folder"
        raise EpdoctorError(f"--root {plain(root)}: {why} (a mounted host root or unpacked image)")
    return ProbeOptions(
        pids=tuple(args.pid), all_pids=args.all_pids, timeout_s=args.timeout, root=args.root
    )


def console(stderr: bool = False) -> Any:
    from rich.console import Console

    # rich honours NO_COLOR itself; force no colour when not a terminal.
    return Console(stderr=stderr, no_color="NO_COLOR" in os.environ or None, highlight=False)


@contextmanager
def progress(enabled: bool, total: int) -> Any:
    """A progress display on stderr (only on a terminal); yields a (target, state) callback."""
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
    ) as prog:
        task = prog.add_task("probing", total=total)
        states: dict[str, str] = {}

        def cb(target: Any, state: str) -> None:
            states[target.info.name] = state
            if state in ("done", "error"):
                prog.advance(task)
            running = [n for n, s in states.items() if s == "start"]
            prog.update(
                task,
                description="probing " + ", ".join(running[:3]) + ("…" if len(running) > 3 else ""),
            )

        yield cb


Renderer = Callable[..., None]
