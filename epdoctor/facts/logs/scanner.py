"""Find the lines that can matter in a byte stream, without decoding the rest.

For each chunk (2 MiB by default) cut at its last newline, every anchor in
``signatures.ANCHORS`` is searched for, through its rarest byte (memchr) where
the data has one, else whole with ``bytes.find`` (see ``make_plan``); a hit expands to its
line, the search resumes after that line, and only those lines are returned
with their 1-based line numbers (newlines are counted with ``bytes.count``
between hits). A line longer than ``MAX_CARRY`` is scanned in fragments that
share its line number, so memory stays bounded whatever the input.

Pure over bytes: reading files, stdin and .gz, and the two-process scan of a large
file, are in epdoctor.targets.logstream.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from epdoctor.facts.logs import triage
from epdoctor.facts.logs.signatures import ANCHORS as _STATIC

# the signatures' and the lexicon's anchors, and one for each [[log]] rule whose lines hold none
ANCHORS: tuple[bytes, ...] = _STATIC + triage.stored_anchors(_STATIC)

try:  # RE2's DFA finds any of the anchors in one pass (~0.6 GB/s a core for 45 anchors)
    import re2 as _re2
except ImportError:  # a checkout on a node without it: the memchr / find plan below
    _re2 = None

CHUNK = 2 << 20  # 2 MiB: a block and its passes stay in cache (16 MiB measured 30% slower)
SEEN_LINES = 150_000  # line hashes remembered to skip blocks that only repeat them (~13 MB)
SEEN_GIVE_UP = 4  # blocks past a full memory with nothing repeated: stop looking
MAX_CARRY = 1 << 20  # a partial line longer than this is scanned as a fragment

MAX_LINE = 64 << 10  # a longer line is returned as a window around the hit
WINDOW = 4096
ANCHOR_OVERLAP = max(len(a) for a in ANCHORS) - 1  # kept when a fragment is flushed

Candidate = tuple[int, bytes]  # (line number, raw line without the newline)
FOLLOWED = b"Last error"  # an anchor whose next line is returned too


# A plan says how each anchor is looked for in a block: through the rarest of its bytes
# (one memchr pass, ~12 GB/s, shared by every anchor that picked that byte, each hit
# checked with startswith) or, when all its bytes are common, with bytes.find on the
# whole anchor (~2-3 GB/s). Rarity is measured on a sample of the data itself, not
# assumed, and a byte that turns out common within a block (more than RARE_BUDGET
# hits per byte scanned) hands its anchors back to bytes.find for the rest of it.
Member = tuple[bytes, tuple[int, ...]]  # (anchor, offsets of the byte within it)
Plan = tuple[tuple[tuple[bytes, tuple[Member, ...]], ...], tuple[bytes, ...]]

SAMPLE = 64 << 10
RARE_DENSITY = 1 / 8192  # a byte rarer than this in the sample is scanned for with memchr
RARE_BUDGET = 4096  # within a block, more hits than len/RARE_BUDGET: fall back to find
REPLAN = 64 << 20  # bytes after which a stream measures rarity again
_ANCHOR_BYTES = tuple(sorted({b for a in ANCHORS for b in a}))


_MATCHERS: dict[tuple[bytes, ...], object] = {}


def _matcher(anchors: tuple[bytes, ...]) -> object | None:
    """One RE2 alternation of the anchors (cached), or None without RE2."""
    if _re2 is None or os.environ.get("EPDOCTOR_SCANNER") == "find":
        return None
    m = _MATCHERS.get(anchors)
    if m is None:
        m = _MATCHERS[anchors] = _re2.compile(b"|".join(_re2.escape(a) for a in anchors))
    return m


def make_plan(sample: bytes, anchors: tuple[bytes, ...] = ANCHORS) -> Plan:
    """Group the anchors by their rarest byte in sample; common-only anchors go whole."""
    n = max(len(sample), 1)
    used = _ANCHOR_BYTES if anchors is ANCHORS else sorted({b for a in anchors for b in a})
    density = {b: sample.count(bytes((b,))) / n for b in used}
    groups: dict[int, list[Member]] = {}
    whole: list[bytes] = []
    for a in anchors:
        b = min(sorted(set(a)), key=density.__getitem__)
        if density[b] > RARE_DENSITY:
            whole.append(a)
        else:
            groups.setdefault(b, []).append((a, tuple(k for k, x in enumerate(a) if x == b)))
    return tuple((bytes((b,)), tuple(m)) for b, m in groups.items()), tuple(whole)


def scan_block(
    buf: bytes, cut: int, base_line: int, plan: Plan | None = None
) -> tuple[list[Candidate], int]:
    """Candidate lines of buf[:cut] (cut just after a newline, or len for a fragment).

    Returns the candidates and the number of newlines in buf[:cut].
    """
    out, newlines, _ = _scan(buf, cut, base_line, plan or make_plan(buf[:SAMPLE]))
    return out, newlines


def _scan(buf: bytes, cut: int, base_line: int, plan: Plan) -> tuple[list[Candidate], int, bool]:
    """scan_block's work; the flag says a rare byte was not rare here (time to re-plan)."""
    spans: dict[int, int] = {}
    windows: dict[int, int] = {}  # start of a huge line -> position of its first hit
    find = buf.find
    rfind = buf.rfind
    startswith = buf.startswith

    def line_end(i: int) -> int:
        """Record the line holding position i; returns where that line ends."""
        s = rfind(b"\n", 0, i) + 1
        e = spans.get(s)
        if e is None:
            e = find(b"\n", i, cut)
            if e == -1:
                e = cut
            spans[s] = e
            if e - s > MAX_LINE:
                windows[s] = i
        return e

    def find_whole(anchor: bytes, start: int) -> None:
        i = find(anchor, start, cut)
        while i != -1:
            i = find(anchor, line_end(i) + 1, cut)

    rx = _matcher(_plan_anchors(plan))
    if rx is not None:
        search = rx.search
        pos = 0
        while pos < cut:
            m = search(buf, pos, cut)
            if m is None:
                break
            pos = line_end(m.start()) + 1
        return (*_collect(buf, cut, base_line, spans, windows), False)

    groups, whole = plan
    budget = max(64, cut // RARE_BUDGET)
    replan = False
    for byte, members in groups:
        hits = 0
        i = find(byte, 0, cut)
        while i != -1:
            hits += 1
            if hits > budget:  # not rare here after all: the rest of the block, whole
                replan = True
                for a, _ in members:
                    find_whole(a, max(0, i - len(a)))
                break
            nxt = i + 1
            for a, offsets in members:
                for k in offsets:
                    s = i - k
                    if s >= 0 and s + len(a) <= cut and startswith(a, s):
                        nxt = line_end(i) + 1
                        break
                else:
                    continue
                break
            i = find(byte, nxt, cut)
    for a in whole:
        find_whole(a, 0)
    return (*_collect(buf, cut, base_line, spans, windows), replan)


def _plan_anchors(plan: Plan) -> tuple[bytes, ...]:
    groups, whole = plan
    return tuple(sorted({a for _, members in groups for a, _ in members} | set(whole)))


def _collect(
    buf: bytes, cut: int, base_line: int, spans: dict[int, int], windows: dict[int, int]
) -> tuple[list[Candidate], int]:
    """The recorded lines in order, numbered, and the newlines in buf[:cut]."""
    # torch prints the NCCL error's cause on the line after "Last error:", which may hold no
    # anchor of its own ("Last error:\nCuda failure 'invalid device function'"): take it too
    for s, e in list(spans.items()):
        if e + 1 < cut and e - s < MAX_LINE and buf.find(FOLLOWED, s, e) != -1:
            n = buf.find(b"\n", e + 1, cut)
            spans.setdefault(e + 1, cut if n == -1 else n)
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


def has_anchor(line: bytes) -> bool:
    """One line holds an anchor: the analyzer would read it (a pane's colour asks first)."""
    rx = _matcher(ANCHORS)
    if rx is not None:
        return rx.search(line) is not None  # type: ignore[attr-defined]
    return any(a in line for a in ANCHORS)


class Feeder:
    """Incremental: bytes in, candidate lines out, partial lines carried over.

    ``anchors`` replaces ``signatures.ANCHORS`` (the launch gates add
    ``signatures.TRANSPORT_ANCHORS`` to read the channel lines of their small logs).
    """

    def __init__(self, anchors: tuple[bytes, ...] = ANCHORS, dedupe: bool = True) -> None:
        self.anchors = anchors
        self._overlap = max(len(a) for a in anchors) - 1
        self._carry = b""
        self.lines = 0  # complete lines seen
        self.bytes = 0
        self.repeated = 0  # lines of blocks made only of lines seen before: not read again
        self._plan: Plan | None = None
        self._planned_at = 0
        # every line of the blocks read so far, while they fit SEEN_BYTES: a block made only of
        # lines seen before (a log that repeats itself: a warning storm, a restarted job's same
        # output) holds nothing new to judge, which a set difference in C tells at once
        self._seen: set[int] | None = set() if dedupe else None  # hashes of those lines
        self._misses = 0

    def _block(self, buf: bytes, cut: int) -> tuple[list[Candidate], int]:
        if self._seen is not None and cut > 0 and buf[cut - 1] == 10:  # whole lines (b"\n")
            lines = buf[:cut].split(b"\n")
            lines.pop()  # after the last newline: empty
            fresh = set(map(hash, lines))
            if self._seen and fresh <= self._seen:
                self.repeated += len(lines)
                return [], len(lines)
            if len(self._seen) < SEEN_LINES:
                self._seen |= fresh
            else:
                self._misses += 1
                if self._misses >= SEEN_GIVE_UP:  # a log that does not repeat itself
                    self._seen = None
        return self._scan_block(buf, cut)

    def _scan_block(self, buf: bytes, cut: int) -> tuple[list[Candidate], int]:
        if self._plan is None or self.bytes - self._planned_at >= REPLAN:
            self._plan = make_plan(buf[:SAMPLE], self.anchors)
            self._planned_at = self.bytes
        out, n, replan = _scan(buf, cut, self.lines, self._plan)
        if replan:
            self._plan = None
        return out, n

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
            self._carry = buf[-self._overlap :]
            out, _ = self._block(buf, len(buf))
            return out
        out, n = self._block(buf, cut)
        self.lines += n
        self._carry = buf[cut:]
        return out

    def close(self) -> list[Candidate]:
        """The last line when the stream did not end with a newline."""
        buf, self._carry = self._carry, b""
        if not buf:
            return []
        out, _ = self._block(buf, len(buf))
        self.lines += 1
        return out


class ScanStats:
    def __init__(self) -> None:
        self.bytes = 0
        self.lines = 0
        self.dropped = 0  # kept for the JSON schema: nothing is dropped any more
        self.repeated = 0  # lines of blocks that only repeated lines read before
        self.workers = 1


def feed_all(facts: object, source: str, chunks: Iterable[bytes]) -> Feeder:
    """Every candidate line of a stream of chunks into ``facts`` (a LogFacts) under
    ``source``; the Feeder, for its counts."""
    feeder = Feeder()
    for c in chunks:
        for n, raw in feeder.feed(c):
            facts.add(source, n, raw)  # type: ignore[attr-defined]
    for n, raw in feeder.close():
        facts.add(source, n, raw)  # type: ignore[attr-defined]
    return feeder
