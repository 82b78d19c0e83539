"""Log sources as byte streams that another thread can stop, and a reader that follows many.

A ``LogStream`` is one source (a file, stdin, a pod container's log, a file on an SSH host):
iterate it once for its chunks; ``stop()`` ends the iteration soon, from any thread, and releases
what the source holds (a socket, a remote ``tail``). ``follow(streams)`` reads every stream in
its own thread and hands the chunks to the caller's thread in arrival order, so a single
analyzer sees each line the moment it arrives; when the caller stops (Ctrl-C, a deadline, every
stream ended) every stream is stopped before ``follow`` returns.

Only bytes cross this module: no parsing, no rich, no transport client.
"""

from __future__ import annotations

import gzip
import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from epdoctor.targets.base import TargetError

READ_CHUNK = 1 << 20
POLL_S = 0.25  # how often an idle file is re-read, and how soon a stop is noticed
STOP_WAIT_S = 10.0  # how long follow() waits for the streams to finish stopping
QUEUE_CHUNKS = 64  # chunks in flight between the readers and the caller (back-pressure)


class LogStream:
    """One log's chunks as they arrive; ``stop()`` may come from another thread, twice."""

    def __init__(
        self,
        name: str,
        chunks: Callable[[], Iterable[bytes]],
        stop: Callable[[], None] | None = None,
    ) -> None:
        self.name = name
        self._chunks = chunks
        self._stop = stop
        self.stopping = threading.Event()
        self._stop_lock = threading.Lock()
        self._stopped = False

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._chunks())

    def stop(self) -> None:
        """End the iteration and release the source; returns once it is released."""
        self.stopping.set()
        with self._stop_lock:  # a second caller waits for the first one's release
            if self._stopped:
                return
            self._stopped = True
            if self._stop is not None:
                self._stop()


# ---- local sources ---------------------------------------------------------------------------


def file_stream(path: str, follow: bool = False) -> LogStream:
    """A local file (``.gz`` decompressed) or ``-`` for stdin; ``follow`` keeps reading as a
    plain file grows (stdin and ``.gz`` end at their end)."""
    if path == "-":
        return _stdin_stream()
    stopping = threading.Event()
    plain = not path.endswith(".gz")

    def chunks() -> Iterator[bytes]:
        try:
            with open(path, "rb") if plain else gzip.open(path, "rb") as f:
                while not stopping.is_set():
                    data = f.read(READ_CHUNK)
                    if data:
                        yield data
                    elif not (follow and plain):
                        return
                    else:
                        stopping.wait(POLL_S)  # tail -f: look again soon
        except (OSError, EOFError) as exc:  # EOFError: a cut .gz
            raise TargetError(f"cannot read {path}: {exc}") from exc

    return LogStream(path, chunks, stop=stopping.set)


def _stdin_stream() -> LogStream:
    """stdin, read unbuffered so a line piped in is seen at once. A read blocked on a quiet
    pipe cannot be interrupted; the reader thread is a daemon, so it never holds the exit."""

    def chunks() -> Iterator[bytes]:
        fd = sys.stdin.fileno()
        while data := os.read(fd, READ_CHUNK):
            yield data

    return LogStream("stdin", chunks)


# ---- following many streams ------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """What happened on one stream: data arrived, it ended, or it failed (``error``)."""

    stream: LogStream
    data: bytes = b""
    ended: bool = False
    error: str | None = None


def follow(streams: list[LogStream], seconds: float | None = None) -> Iterator[Event]:
    """Every stream's events, in arrival order, until all ended or ``seconds`` passed.

    Each stream is read in its own daemon thread. However this generator ends (exhausted,
    closed, or an exception such as KeyboardInterrupt raised while it waits), every stream is
    stopped first, in parallel, and the readers are given STOP_WAIT_S to finish. Use it under
    ``contextlib.closing`` so a consumer that stops iterating stops the streams too.
    """
    q: queue.Queue[Event] = queue.Queue(QUEUE_CHUNKS)
    closing = threading.Event()  # set when we stop reading: a reader's puts give up
    readers = [
        threading.Thread(target=_pump, args=(s, q, closing), name=f"log {s.name}", daemon=True)
        for s in streams
    ]
    for t in readers:
        t.start()
    live = len(streams)
    end = None if seconds is None else time.monotonic() + seconds
    try:
        while live:
            wait = POLL_S if end is None else min(POLL_S, end - time.monotonic())
            if wait <= 0:
                return
            try:
                ev = q.get(timeout=wait)
            except queue.Empty:
                continue
            if ev.ended:
                live -= 1
            yield ev
    finally:
        closing.set()
        stop_all(streams)
        deadline = time.monotonic() + STOP_WAIT_S
        for t in readers:
            t.join(max(0.0, deadline - time.monotonic()))


def stop_all(streams: list[LogStream]) -> None:
    """Stop every stream at once (each may wait on a remote side), bounded by STOP_WAIT_S."""
    stoppers = [threading.Thread(target=s.stop, daemon=True) for s in streams]
    for t in stoppers:
        t.start()
    deadline = time.monotonic() + STOP_WAIT_S
    for t in stoppers:
        t.join(max(0.0, deadline - time.monotonic()))


def _pump(s: LogStream, q: queue.Queue[Event], closing: threading.Event) -> None:
    """Reader thread: the stream's chunks into the queue, then its end (or its error).

    A stream ends its own iteration by stopping itself (releasing its socket); only an error
    after ``closing`` (our own stop woke the read) goes unreported."""
    last = Event(s, ended=True)
    try:
        for data in s:
            if not _put(q, Event(s, data), closing):
                return
    except TargetError as exc:
        if not closing.is_set():
            last = Event(s, ended=True, error=str(exc))
    except Exception as exc:  # a transport's own exception type: this stream is lost
        if not closing.is_set():
            last = Event(s, ended=True, error=f"{type(exc).__name__}: {exc}")
    _put(q, last, closing)


def _put(q: queue.Queue[Event], ev: Event, closing: threading.Event) -> bool:
    """Put, waiting for room, unless the reading side has stopped (nobody will take it)."""
    while not closing.is_set():
        try:
            q.put(ev, timeout=POLL_S)
            return True
        except queue.Full:
            continue
    return False
