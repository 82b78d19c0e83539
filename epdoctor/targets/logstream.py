"""Log sources: byte streams that another thread can stop, a reader that follows many, and the
fast scan of whole files.

A ``LogStream`` is one source (a file, stdin, a pod container's log, a file on an SSH host):
iterate it once for its chunks; ``stop()`` ends the iteration soon, from any thread, and releases
what the source holds (a socket, a remote ``tail``). ``follow(streams)`` reads every stream in
its own thread and hands the chunks to the caller's thread in arrival order, so a single
analyzer sees each line the moment it arrives; when the caller stops (Ctrl-C, a deadline, every
stream ended) every stream is stopped before ``follow`` returns.

``iter_path(path)`` reads a whole file, ``-`` (stdin) or a ``.gz`` for its candidate lines
(epdoctor.facts.logs.scanner): a regular file large enough is split into two newline-aligned
byte ranges scanned by this process and one forked worker at once; the worker's lines come
back after this process's, renumbered, so the merge keeps file order. stdin and .gz stay in
one process.

No rich and no transport client at import: the pod and SSH streams are the targets' own
(``KubePodTarget.log_stream``, ``SshTarget.log_stream``), opened by ``remote_streams``.
"""

from __future__ import annotations

import gzip
import os
import queue
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

from epdoctor.facts.logs.scanner import CHUNK, Candidate, Feeder, ScanStats
from epdoctor.requests import LogSources
from epdoctor.targets.base import TargetError

READ_CHUNK = 1 << 20
POLL_S = 0.25  # how often an idle file is re-read, and how soon a stop is noticed
STOP_WAIT_S = 10.0  # how long follow() waits for the streams to finish stopping
QUEUE_CHUNKS = 64  # chunks in flight between the readers and the caller (back-pressure)
PARALLEL_MIN = 32 << 20  # below this a second process costs more than it saves


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


# ---- remote sources ---------------------------------------------------------------------------


def remote_streams(src: LogSources, follow: bool = False) -> tuple[list[LogStream], list[str]]:
    """A LogStream for each pod container and SSH file of ``src``, and notes on the containers
    that have no log to read. Names are checked before anything connects (TargetError)."""
    ssh = _ssh_streams(src, follow) if src.ssh else []  # checked first: connects later
    pods, notes = _pod_streams(src, follow) if (src.pod or src.selector) else ([], [])
    return pods + ssh, notes


def _ssh_streams(src: LogSources, follow: bool) -> list[LogStream]:
    from epdoctor.targets.ssh_cli import remote_log_stream

    ids = tuple(src.identity)
    return [
        remote_log_stream(spec, follow=follow, identity=ids, known_hosts=src.known_hosts)
        for spec in src.ssh
    ]


def _pod_streams(src: LogSources, follow: bool) -> tuple[list[LogStream], list[str]]:
    from epdoctor.targets import kube

    for name in src.pod:
        kube.valid_pod_name(name)
    if src.namespace:
        kube.valid_namespace(src.namespace)
    if src.container:
        kube.valid_container_name(src.container)
    if src.selector:
        kube.valid_selector(src.selector)
    session = kube.KubeSession.connect(src.context, src.kubeconfig, src.request_timeout)
    streams: list[LogStream] = []
    notes: list[str] = []
    pods = [p for name in src.pod for p in kube.select_pods(session, src.namespace, pod=name)]
    if src.selector:
        pods += kube.select_pods(session, src.namespace, selector=src.selector)
    window = {"since_s": src.since_s, "tail": src.tail}
    for pod in pods:
        t = kube.KubePodTarget(session, pod, src.container)
        if not src.all_containers:
            name = f"pod/{t.info.name}"
            streams.append(t.log_stream(name, None, src.previous, follow, **window))
            continue
        for c in kube.pod_containers(pod):
            why = kube.log_absent(pod, c, src.previous)
            if why:
                notes.append(f"pod/{t.info.name}/{c}: not read, {why}")
                continue
            name = f"pod/{t.info.name}/{c}"
            streams.append(t.log_stream(name, c, src.previous, follow, **window))
    return streams, notes


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


# ---- whole files, scanned for candidate lines ------------------------------------------------


def iter_path(
    path: str, stats: ScanStats | None = None, parallel: bool = True
) -> Iterator[Candidate]:
    """Candidates of a file, '-' (stdin) or a .gz, in line order."""
    stats = stats or ScanStats()
    if path == "-":
        yield from iter_stream(sys.stdin.buffer, stats=stats)
        return
    if path.endswith(".gz"):
        with open(path, "rb") as raw:
            yield from _iter_gzip(raw, stats)
        return
    size = os.path.getsize(path)
    if not (parallel and size >= PARALLEL_MIN and _can_fork()):
        with open(path, "rb") as f:
            feeder = Feeder()
            while data := f.read(CHUNK):
                yield from feeder.feed(data)
            yield from feeder.close()
            stats.bytes += feeder.bytes
            stats.lines += feeder.lines
            stats.repeated += feeder.repeated
        return
    mid = _split_point(path, size)
    yield from _parallel(path, size, mid, stats)


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and (os.cpu_count() or 1) > 1


def _parallel(path: str, size: int, mid: int, stats: ScanStats) -> Iterator[Candidate]:
    """The file's second half scanned by a forked worker while this process reads the first.

    The worker spools its candidate lines to a temporary file (any number of them, in bounded
    memory: nothing is dropped) and this process reads them back after its own half.
    """
    import multiprocessing
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")
    with tempfile.TemporaryFile(prefix="epdoctor-scan-") as spool:
        with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
            second = pool.submit(scan_range, path, mid, size, spool.fileno())
            lines0 = 0
            feeder = Feeder()
            with open(path, "rb") as f:
                left = mid
                while left > 0 and (data := f.read(min(CHUNK, left))):
                    left -= len(data)
                    yield from feeder.feed(data)
            yield from feeder.close()
            lines0 = feeder.lines
            lines1, count, repeated1 = second.result()
        spool.seek(0)
        for n, raw in _read_spool(spool, count):
            yield n + lines0, raw
    stats.bytes += size
    stats.lines += lines0 + lines1
    stats.repeated += feeder.repeated + repeated1
    stats.workers = 2


_REC = struct.Struct("<QI")  # a spooled candidate: its line number and its length


def _read_spool(spool: BinaryIO, count: int) -> Iterator[Candidate]:
    for _ in range(count):
        head = spool.read(_REC.size)
        if len(head) < _REC.size:
            return
        n, size = _REC.unpack(head)
        yield n, spool.read(size)


def iter_stream(
    f: BinaryIO, chunk: int = CHUNK, stats: ScanStats | None = None
) -> Iterator[Candidate]:
    feeder = Feeder()
    while True:
        data = f.read(chunk)
        if not data:
            break
        yield from feeder.feed(data)
    yield from feeder.close()
    if stats is not None:  # every line, not only the last candidate's number
        stats.bytes += feeder.bytes
        stats.lines += feeder.lines


def _gunzip(raw: BinaryIO, chunk: int = CHUNK) -> Iterator[bytes]:
    """The members of a gzip stream, decompressed a bounded piece at a time.

    zlib checks each member's trailer (CRC and length): a file cut anywhere, even after the
    last deflate block, raises EOFError instead of passing for a whole log (gzip.GzipFile
    ends quietly when only the trailer is missing).
    """
    d = zlib.decompressobj(wbits=31)
    started = False
    while True:
        data = raw.read(chunk)
        if not data:
            break
        while data:
            if d.eof:  # another member follows, or zero padding
                if not data.strip(b"\0"):
                    break
                d = zlib.decompressobj(wbits=31)
            started = True
            out = d.decompress(data, chunk)
            if out:
                yield out
            while d.unconsumed_tail and not d.eof:
                out = d.decompress(d.unconsumed_tail, chunk)
                if out:
                    yield out
            data = d.unused_data if d.eof else b""
    if started and not d.eof:
        raise EOFError("compressed file ended before the end-of-stream marker (truncated .gz)")


def _iter_gzip(raw: BinaryIO, stats: ScanStats) -> Iterator[Candidate]:
    feeder = Feeder()
    for data in _gunzip(raw):
        yield from feeder.feed(data)
    yield from feeder.close()
    stats.bytes += feeder.bytes
    stats.lines += feeder.lines


def scan_range(
    path: str, start: int, stop: int, spool_fd: int, chunk: int = CHUNK
) -> tuple[int, int, int]:
    """Scan path[start:stop] (start and stop on line boundaries) in the worker, writing every
    candidate, numbered from 1 within the range, to the spool file; (newlines, candidates,
    lines of blocks that only repeated earlier ones)."""
    feeder = Feeder()
    count = 0
    with open(path, "rb") as f, open(spool_fd, "wb", closefd=False) as out:
        f.seek(start)
        left = stop - start
        while left > 0:
            data = f.read(min(chunk, left))
            if not data:
                break
            left -= len(data)
            for n, raw in feeder.feed(data):
                out.write(_REC.pack(n, len(raw)))
                out.write(raw)
                count += 1
        for n, raw in feeder.close():
            out.write(_REC.pack(n, len(raw)))
            out.write(raw)
            count += 1
    return feeder.lines, count, feeder.repeated


def _split_point(path: str, size: int) -> int:
    """A byte offset near the middle just after a newline (0 when there is none)."""
    with open(path, "rb") as f:
        pos = size // 2
        while pos < size:
            f.seek(pos)
            block = f.read(1 << 16)
            if not block:
                break
            i = block.find(b"\n")
            if i != -1:
                return pos + i + 1
            pos += len(block)
    return size
