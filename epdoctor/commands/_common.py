"""Helpers shared by the commands that diagnose targets (their flags: epdoctor.options)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any


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
