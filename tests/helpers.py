"""Small helpers for tests that drive a live `epdoctor` process (follow modes)."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable


def wait_until(pred: Callable[[], object], timeout: float = 20.0, poll_s: float = 0.05) -> bool:
    """True as soon as pred() is, False when `timeout` seconds pass first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(poll_s)
    return bool(pred())


def line_within(p: subprocess.Popen, timeout: float = 30.0) -> str:
    """The process's next stdout line; fails the test instead of hanging when none comes."""
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(p.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert got, f"no output line within {timeout:g}s"
    return got[0].decode()
