"""`epdoctor run down`: what taking a Kubernetes plan down would do, read from the API, and the
take-down itself, held against signals. The command only parses, confirms and prints."""

from __future__ import annotations

import threading
import time
from typing import Any


def sleep_until(done: threading.Event) -> None:
    """Sleep-and-look, not Thread.join(): a signal handler's KeyboardInterrupt inside join() can
    leave the thread marked as ended while it still runs (CPython 3.11)."""
    while not done.is_set():
        time.sleep(0.1)


def down_plan(api: Any, objects: Any, ns: str) -> list[str]:
    """What `run down` would do with each of the plan's objects, read from the API."""
    from epdoctor.launch.kube_objects import managers, owned
    from epdoctor.targets.kube_apply import kind_of

    lines = []
    for plural, name in objects.refs():
        live = api.read(plural, ns, name)
        label = f"{kind_of(plural).lower()}/{name}"
        if live is None:
            lines.append(f"not there: {label}")
        elif owned(live):
            lines.append(f"delete:    {label}")
        else:
            lines.append(
                f"leave:     {label} (epdoctor did not apply it; field managers: {managers(live)})"
            )
    return lines


def take_down_held(api: Any, objects: Any, timeout_s: float) -> tuple[Any, list[str]]:
    """take_down on a worker thread; Ctrl-C, SIGTERM or SIGHUP on this thread is noted and
    the deletion finishes (a half-done take-down is what a signal must not leave)."""
    from epdoctor.launch.guard import signal_name
    from epdoctor.launch.kube_rollout import TakeDown, take_down

    result: list[Any] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            result.append(take_down(api, objects, timeout_s, None))
        except BaseException as exc:  # reported below as what was left
            failed.append(exc)
        finally:
            done.set()

    signals: list[str] = []
    threading.Thread(target=work, name="take-down", daemon=True).start()
    while not done.is_set():
        try:
            sleep_until(done)
        except KeyboardInterrupt as exc:
            signals.append(signal_name(exc))
    if result:
        return result[0], signals
    td = TakeDown()
    td.append(f"the take-down stopped: {failed[0] if failed else 'no result'}")
    td.left.append("unknown (the take-down did not finish)")
    return td, signals
