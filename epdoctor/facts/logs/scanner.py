"""Find the lines that can matter in a byte stream, without decoding the rest.

For each chunk (16 MiB by default) cut at its last newline, every anchor in
``signatures.ANCHORS`` is searched with ``bytes.find``; a hit expands to its
line, the search resumes after that line, and only those lines are returned
with their 1-based line numbers (newlines are counted with ``bytes.count``
between hits). A regular file large enough is split into two newline-aligned
byte ranges scanned by this process and one forked worker at once; the
worker's lines come back after this process's, renumbered, so the merge keeps
file order. stdin and .gz stay in one process. A line longer than
``MAX_CARRY`` is scanned in fragments that share its line number, so memory
stays bounded whatever the input.
"""

from __future__ import annotations

import gzip
import io
import os
import sys
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from epdoctor.facts.logs.signatures import ANCHORS

CHUNK = 16 << 20
MAX_CARRY = 1 << 20  # a partial line longer than this is scanned as a fragment
PARALLEL_MIN = 32 << 20  # below this a second process costs more than it saves
MAX_WORKER_CANDIDATES = 200_000  # lines a worker returns; beyond that they are counted only

MAX_LINE = 64 << 10  # a longer line is returned as a window around the hit
WINDOW = 4096
ANCHOR_OVERLAP = max(len(a) for a in ANCHORS) - 1  # kept when a fragment is flushed

Candidate = tuple[int, bytes]  # (line number, raw line without the newline)


def scan_block(buf: bytes, cut: int, base_line: int) -> tuple[list[Candidate], int]:
    """Candidate lines of buf[:cut] (cut just after a newline, or len for a fragment).

    Returns the candidates and the number of newlines in buf[:cut].
    """
    spans: dict[int, int] = {}
    windows: dict[int, int] = {}  # start of a huge line -> position of its first hit
    find = buf.find
    rfind = buf.rfind
    for anchor in ANCHORS:
        i = find(anchor, 0, cut)
        while i != -1:
            s = rfind(b"\n", 0, i) + 1
            e = spans.get(s)
            if e is None:
                e = find(b"\n", i, cut)
                if e == -1:
                    e = cut
                spans[s] = e
                if e - s > MAX_LINE:
                    windows[s] = i
            i = find(anchor, e + 1, cut)
    out: list[Candidate] = []
    line = base_line
    prev = 0
    count = buf.count
    for s in sorted(spans):
        line += count(b"\n", prev, s)
        prev = s
        w = windows.get(s)
        if w is None:
            out.append((line + 1, buf[s : spans[s]]))
        else:
            out.append((line + 1, buf[max(s, w - WINDOW) : min(spans[s], w + WINDOW)]))
    newlines = line - base_line + count(b"\n", prev, cut)
    return out, newlines


class Feeder:
    """Incremental: bytes in, candidate lines out, partial lines carried over."""

    def __init__(self) -> None:
        self._carry = b""
        self.lines = 0  # complete lines seen
        self.bytes = 0

    def feed(self, data: bytes) -> list[Candidate]:
        if not data:
            return []
        self.bytes += len(data)
        buf = self._carry + data if self._carry else bytes(data)
        cut = buf.rfind(b"\n") + 1
        if cut == 0:
            if len(buf) <= MAX_CARRY:
                self._carry = buf
                return []
            # a huge line: scan what we have as a fragment of line self.lines + 1, keeping
            # enough of its end that an anchor cut in two is found in the next fragment
            self._carry = buf[-ANCHOR_OVERLAP:]
            out, _ = scan_block(buf, len(buf), self.lines)
            return out
        out, n = scan_block(buf, cut, self.lines)
        self.lines += n
        self._carry = buf[cut:]
        return out

    def close(self) -> list[Candidate]:
        """The last line when the stream did not end with a newline."""
        buf, self._carry = self._carry, b""
        if not buf:
            return []
        out, _ = scan_block(buf, len(buf), self.lines)
        self.lines += 1
        return out


def iter_stream(f: BinaryIO, chunk: int = CHUNK) -> Iterator[Candidate]:
    feeder = Feeder()
    while True:
        data = f.read(chunk)
        if not data:
            break
        yield from feeder.feed(data)
    yield from feeder.close()


def scan_range(
    path: str, start: int, stop: int, chunk: int = CHUNK
) -> tuple[int, list[Candidate], int]:
    """Lines of path[start:stop] (start and stop on line boundaries); for the worker.

    Returns (newlines in the range, candidates numbered from 1 within it, dropped).
    """
    feeder = Feeder()
    out: list[Candidate] = []
    dropped = 0
    with open(path, "rb") as f:
        f.seek(start)
        left = stop - start
        while left > 0:
            data = f.read(min(chunk, left))
            if not data:
                break
            left -= len(data)
            got = feeder.feed(data)
            room = MAX_WORKER_CANDIDATES - len(out)
            if len(got) > room:
                dropped += len(got) - max(room, 0)
                got = got[: max(room, 0)]
            out.extend(got)
        tail = feeder.close()
        lines = feeder.lines
    out.extend(tail[: max(MAX_WORKER_CANDIDATES - len(out), 0)])
    return lines, out, dropped


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


class ScanStats:
    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0
        self.dropped = 0
        self.workers = 1


def iter_path(
    path: str, stats: ScanStats | None = None, parallel: bool = True
) -> Iterator[Candidate]:
    """Candidates of a file, '-' (stdin) or a .gz, in line order."""
    stats = stats or ScanStats()
    if path == "-":
        yield from _counted(iter_stream(sys.stdin.buffer), stats, None)
        return
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as g:
            yield from _counted(iter_stream(io.BufferedReader(g)), stats, None)
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
        return
    mid = _split_point(path, size)
    yield from _parallel(path, size, mid, stats)


def _counted(it: Iterable[Candidate], stats: ScanStats, _: None) -> Iterator[Candidate]:
    last = 0
    for c in it:
        last = c[0]
        yield c
    stats.lines += last


def _can_fork() -> bool:
    import multiprocessing

    return "fork" in multiprocessing.get_all_start_methods() and (os.cpu_count() or 1) > 1


def _parallel(path: str, size: int, mid: int, stats: ScanStats) -> Iterator[Candidate]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as pool:
        second = pool.submit(scan_range, path, mid, size)
        lines0, own, dropped0 = scan_range(path, 0, mid)
        yield from own
        del own
        lines1, theirs, dropped1 = second.result()
    for n, raw in theirs:
        yield n + lines0, raw
    stats.bytes += size
    stats.lines += lines0 + lines1
    stats.dropped += dropped0 + dropped1
    stats.workers = 2
