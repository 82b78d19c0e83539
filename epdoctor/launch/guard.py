"""Signals that end epdoctor while a launch runs: SIGTERM and SIGHUP stop what it started.

A dropped SSH session sends SIGHUP to epdoctor; systemd, ``timeout(1)``, a container
runtime and ``kill`` send SIGTERM. The processes epdoctor started are in their own
sessions (``start_new_session`` here, ``setsid`` on the far side), so they get neither
signal and keep their GPUs; Python's default for both is to die at once, without the
cleanup Ctrl-C runs. Inside ``stop_on_signals()``, SIGTERM and SIGHUP raise
``Terminated`` in the main thread: a ``KeyboardInterrupt``, so every path that stops
what it started on Ctrl-C stops it on these too. The first signal of the three
(SIGINT included) starts the stop; any that comes while it runs is noted and
ignored, so a stop in progress (TERM, the grace period, KILL, on every node) is not
cut short by an impatient second Ctrl-C or a supervisor's repeated TERM.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: stop what was started, as on Ctrl-C."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def signal_name(exc: BaseException) -> str:
    """How the operator reads what ended the run: 'SIGTERM', 'SIGHUP', or 'Ctrl-C'."""
    return signal.Signals(exc.signum).name if isinstance(exc, Terminated) else "Ctrl-C"


@dataclass
class Guard:
    received: int | None = None  # the signal that started the stop
    later: list[int] = field(default_factory=list)  # the ones ignored while it ran

    def exit_code(self, code: int) -> int:
        """128 + the signal for SIGTERM/SIGHUP (as a shell reports it); else ``code``."""
        if self.received in (signal.SIGTERM, signal.SIGHUP):
            return 128 + int(self.received)
        return code


@contextmanager
def stop_on_signals() -> Iterator[Guard]:
    """Hold SIGINT, SIGTERM and SIGHUP for the block (main thread only; elsewhere a no-op)."""
    guard = Guard()
    if threading.current_thread() is not threading.main_thread():
        yield guard
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        if guard.received is not None:  # already stopping: let that finish
            guard.later.append(signum)
            return
        guard.received = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)

    old = {}
    for s in SIGNALS:
        if signal.getsignal(s) is signal.SIG_IGN and s != signal.SIGINT:
            continue  # nohup: the operator asked for this one to be ignored
        old[s] = signal.signal(s, handler)
    try:
        yield guard
    finally:
        for s, h in old.items():
            signal.signal(s, h)
