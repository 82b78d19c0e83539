"""The log analyzer: log facts and their findings as the bytes arrive, from any source.

``LogAnalyzer`` feeds bytes (per source, interleaved as they come), re-evaluates
(``epdoctor.checks.logs.evaluate``), and returns only findings whose key is new, so a
trap is raised the moment its line arrives; PASS and "could not see" (UNKNOWN)
verdicts wait for ``finish()``, because a later line can still change them.
``analyze_paths`` reads whole files (epdoctor.targets.logstream: '-', .gz, two
processes for a large file) and streams; ``log_watch_factory`` makes one watch per
launch stream, which goes quiet on an error of its own instead of stopping the launch.

Used by `epdoctor logs`, `epdoctor diagnose --log`, the launch gates and panes
(`epdoctor run` and the terminal app). No rich, no textual.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from epdoctor.checks.logs import evaluate
from epdoctor.facts.logs import signatures as sig
from epdoctor.facts.logs.model import LogFacts, RankFacts
from epdoctor.facts.logs.scanner import ANCHORS, Feeder, ScanStats, feed_all
from epdoctor.model import Context, Finding, Status
from epdoctor.targets.logstream import iter_path


@dataclass
class LogAnalysis:
    facts: LogFacts
    findings: list[Finding]
    stats: ScanStats = field(default_factory=ScanStats)

    @property
    def ranks(self) -> list[RankFacts]:
        return self.facts.all_ranks()

    def worst(self) -> Status:
        # a pass outweighs a skip of the same rank: a healthy log with a not-applicable check
        # passes
        return max(
            (f.status for f in self.findings),
            key=lambda s: (s.rank, s is Status.PASS),
            default=Status.UNKNOWN,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ranks": [r.to_json() for r in self.ranks],
            "findings": [f.to_json() for f in self.findings],
            "lines": self.stats.lines,
            "bytes": self.stats.bytes,
            "candidate_lines": self.facts.candidates,
            "dropped_lines": self.stats.dropped,
            # judged once: lines that repeat a line read before, and trouble lines between a
            # rank's first and latest ones, counted (their first occurrence is the evidence)
            "repeated_lines": self.stats.repeated + self.facts.repeats,
            "summarised_lines": self.facts.summarised,
        }


class LogAnalyzer:
    """Incremental: ``feed(bytes)`` returns the findings that just became true.

    Each source (stream) has its own scanner, so chunks of several streams may be fed in
    any interleaving: a partial line of one never joins a line of another, and line
    numbers count per source. ``transports=True`` also reads NCCL's channel lines into
    ``RankFacts.transports`` (``signatures.TRANSPORT_ANCHORS``): for the launch gates,
    whose logs are small; ``epdoctor logs`` leaves it off, channel lines being the bulk
    of a large NCCL INFO log.
    """

    def __init__(
        self, ctx: Context | None = None, source: str = "", transports: bool = False
    ) -> None:
        self.ctx = ctx or Context()
        self.source = source
        self.facts = LogFacts(transports=transports)
        self._anchors = ANCHORS + sig.TRANSPORT_ANCHORS if transports else ANCHORS
        self._feeder = Feeder(self._anchors)  # the default source's
        self._feeders: dict[str, Feeder] = {source: self._feeder}
        self._seen: set[str] = set()

    def feed(self, data: bytes, source: str | None = None) -> list[Finding]:
        """New findings; ``source`` names the stream (default: the analyzer's)."""
        self.feed_facts(data, source)
        return self._new(final=False)

    def feed_facts(self, data: bytes, source: str | None = None) -> None:
        """Only the facts (no findings evaluated): for a reader that gates on the facts."""
        src = self.source if source is None else source
        feeder = self._feeders.get(src)
        if feeder is None:
            feeder = self._feeders[src] = Feeder(self._anchors)
        for n, raw in feeder.feed(data):
            self.facts.add(src, n, raw)

    def feed_candidates(
        self, cands: Iterable[tuple[int, bytes]], source: str | None = None
    ) -> None:
        src = self.source if source is None else source
        for n, raw in cands:
            self.facts.add(src, n, raw)

    def _new(self, final: bool) -> list[Finding]:
        out = []
        for key, f in evaluate(self.facts, self.ctx, final=final):
            if key in self._seen or (not final and f.status in (Status.PASS, Status.UNKNOWN)):
                continue
            self._seen.add(key)
            out.append(f)
        return out

    def close(self) -> None:
        """Flush each source's last unterminated line into the facts."""
        for src, feeder in self._feeders.items():
            for n, raw in feeder.close():
                self.facts.add(src, n, raw)

    def finish(self) -> list[Finding]:
        """Flush a last unterminated line; returns what became true, PASS/UNKNOWN included."""
        self.close()
        return self._new(final=True)

    def ranks(self) -> list[RankFacts]:
        return self.facts.all_ranks()

    def findings(self) -> list[Finding]:
        return [f for _, f in evaluate(self.facts, self.ctx, final=True)]

    def analysis(self) -> LogAnalysis:
        st = ScanStats()
        st.lines = sum(f.lines for f in self._feeders.values())
        st.bytes = sum(f.bytes for f in self._feeders.values())
        return LogAnalysis(self.facts, self.findings(), st)


def analyze_stream(
    chunks: Iterable[bytes], ctx: Context | None = None, source: str = ""
) -> LogAnalysis:
    a = LogAnalyzer(ctx, source)
    for c in chunks:
        for n, raw in a._feeder.feed(c):
            a.facts.add(source, n, raw)
    for n, raw in a._feeder.close():
        a.facts.add(source, n, raw)
    return a.analysis()


def analyze_paths(
    paths: Iterable[str],
    ctx: Context | None = None,
    parallel: bool = True,
    streams: Iterable[tuple[str, Iterable[bytes]]] = (),
) -> LogAnalysis:
    """Files, '-' and .gz; regular files are scanned with two processes when large."""
    facts = LogFacts()
    stats = ScanStats()
    for path in paths:
        src = "stdin" if path == "-" else path
        st = ScanStats()
        for n, raw in iter_path(path, st, parallel=parallel):
            facts.add(src, n, raw)
        facts.sources[src] = st.lines
        stats.bytes += st.bytes
        stats.lines += st.lines
        stats.dropped += st.dropped
        stats.repeated += st.repeated
        stats.workers = max(stats.workers, st.workers)
    for name, chunks in streams:  # pod logs, SSH files: one process, streamed
        feeder = feed_all(facts, name, chunks)
        facts.sources[name] = feeder.lines
        stats.bytes += feeder.bytes
        stats.lines += feeder.lines
    findings = [f for _, f in evaluate(facts, ctx or Context(), final=True)]
    return LogAnalysis(facts, findings, stats)


def log_watch_factory(expect_efa: bool | None = None) -> Callable[[str], _SourceWatch]:
    """The log analyzer, one per stream: it explains traps the moment their lines appear.

    ``expect_efa`` False (``--no-expect-efa``, a one-node kernel test): a rank on Socket or
    P2P is not judged a failure in the panes; None or True: EFA is the goal.
    """
    opts = {"expect_efa": False} if expect_efa is False else {}
    return lambda source: _SourceWatch(LogAnalyzer(Context(options=opts)), source)


class _SourceWatch:
    """One stream's analyzer, told which stream its bytes come from (ranks are named by it)."""

    def __init__(self, analyzer: Any, source: str) -> None:
        self.analyzer = analyzer
        self.source = source
        self.error: str | None = None

    def feed(self, data: bytes) -> list[Any]:
        # a bug in the analysis must not stop the launch it explains: it goes quiet instead
        if self.error:
            return []
        try:
            return list(self.analyzer.feed(data, source=self.source))
        except Exception as exc:
            self.error = f"{type(exc).__name__}: {exc}"
            print(
                f"epdoctor: log analysis of {self.source} stopped ({self.error})", file=sys.stderr
            )
            return []
