"""Findings from logs (domain "logs"), incrementally or over a whole log.

API (no I/O here; the readers live in epdoctor.facts.logs.read):

    an = LogAnalyzer(ctx)                 # ctx: checks.base.Context (instance, transport,
                                          #      options["expect_nics"])
    new = an.feed(chunk: bytes, source)   # -> findings first raised by this chunk, the moment
                                          #    their line arrives (one per code and rank)
    new += an.finish()                    # end of input: pending lines, whole-log verdicts
    an.ranks() -> list[RankFacts]         # per-rank facts so far
    an.findings() -> list[Finding]        # one finding per code, aggregated over ranks

    analysis = analyze_stream(chunks: Iterable[bytes], ctx, source="-")
    analysis = analyze_paths(["a.log", "b.log.gz"], ctx, workers=2)
    analysis.ranks, analysis.findings, analysis.lines_parsed

A log that proves nothing gives UNKNOWN (T206), never PASS. Provider ``tcp`` or
``tcp;ofi_rxm`` never counts as EFA. The NIC count is compared with the instance's EFA
interface count when the instance (or --expect-nics) is known.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from epdoctor.checks.base import Context, check, finding
from epdoctor.facts.logs.model import Event, LogLine, RankFacts, is_ofi_network
from epdoctor.facts.logs.parse import LogParser
from epdoctor.knowledge.instances import instance_spec
from epdoctor.model import Finding, Status

MAX_LINES = 8

# event kind -> (code, status) raised as soon as the line arrives
_DIRECT: dict[str, tuple[str, Status]] = {
    "no_net_plugin": ("N203", Status.FAIL),
    "ofi_init_failed": ("N202", Status.FAIL),
    "gin_off": ("T207", Status.FAIL),
    "gin_plugin_error": ("N204", Status.FAIL),
    "gin_ring_overflow": ("T208", Status.FAIL),
    "gdaki_cqe_9": ("T209", Status.FAIL),
    "deepep_gin_unavailable": ("D201", Status.FAIL),
    "deepep_duplicate_nccl": ("D202", Status.FAIL),
    "deepep_nccl_mismatch": ("D203", Status.FAIL),
    "deepep_qp_cap": ("D204", Status.PASS),
    "deepep_jit_error": ("D205", Status.FAIL),
    "trtllm_nccl_ep_missing": ("E203", Status.FAIL),
    "hf_429": ("E204", Status.WARN),
    "cuda_fault": ("E205", Status.FAIL),
    "child_failed": ("E206", Status.FAIL),
    "segfault": ("E207", Status.FAIL),
    "nccl_warn": ("N205", Status.WARN),
}

TITLES = {
    "T201": "network {what} instead of the OFI plugin (EFA)",
    "T202": "aws-ofi-nccl selected provider {what}: TCP, not EFA",
    "T203": "fabric {what}, not efa-direct",
    "T204": "NCCL found {what} EFA NICs, the instance has {want}",
    "T205": "ranks disagree: some on EFA, some not",
    "L201": "ranks run different NCCL versions: {what}",
    "N201": "NET plugin not found and NCCL fell back to {what}",
    "N202": "aws-ofi-nccl failed to initialize",
    "N203": "Failed to initialize any NET plugin",
    "N204": "GIN plugin error",
    "N205": "NCCL WARN lines",
    "T207": "GIN not initialised",
    "T208": "GIN ring overflow: Next sequence number is in use",
    "T209": "GDAKI-CQE ... status 9",
    "D201": "DeepEP: NCCL GIN is unavailable",
    "D202": "DeepEP: Duplicate NCCL runtime found",
    "D203": "DeepEP: NCCL compile-time and runtime versions differ",
    "D204": "DeepEP capped num_allocated_qps on EFA ({what})",
    "D205": "DeepEP JIT could not build a kernel for this GPU",
    "D206": "segfault during ElasticBuffer init (EP_REUSE_NCCL_COMM)",
    "E201": "vLLM all2all manager: {what}",
    "E202": "CUDA fault in DeepEP-V2 combine on the CUDA-graph path",
    "E203": "TensorRT-LLM: nccl-ep is not installed.",
    "E204": "HTTP 429 Too Many Requests during download",
    "E205": "CUDA fault: {what}",
    "E206": "torchrun reports a failed child process",
    "E207": "a process died with SIGSEGV",
}


@dataclass
class _Hit:
    code: str
    status: Status
    ranks: dict[str, LogLine] = field(default_factory=dict)
    lines: list[LogLine] = field(default_factory=list)
    what: list[str] = field(default_factory=list)
    want: str = ""

    def add(self, rank: str, line: LogLine, what: str = "", status: Status | None = None) -> bool:
        new = rank not in self.ranks
        if new:
            self.ranks[rank] = line
        if len(self.lines) < MAX_LINES and line not in self.lines:
            self.lines.append(line)
        if what and what not in self.what:
            self.what.append(what)
        if status is not None and status.rank > self.status.rank:
            self.status = status
        return new


@dataclass
class LogAnalysis:
    ranks: list[RankFacts]
    findings: list[Finding]
    lines_parsed: int = 0
    sources: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {
            "ranks": [r.to_json() for r in self.ranks],
            "findings": [f.to_json() for f in self.findings],
        }


class LogAnalyzer:
    """Incremental log analysis: free of any UI toolkit, reused by launch and the TUI."""

    def __init__(self, ctx: Context | None = None) -> None:
        self.ctx = ctx or Context()
        self.parser = LogParser()
        self._hits: dict[str, _Hit] = {}
        self._flags: dict[str, set[str]] = {}
        self._finished = False
        self._summary_seen: set[str] = set()
        self.sources: list[str] = []
        spec = instance_spec(self.ctx.instance)
        want = self.ctx.options.get("expect_nics")
        self.expect_nics: int | None = int(want) if want else (spec.efa_count if spec else None)

    # ---- input ----------------------------------------------------------------------
    def feed(self, data: bytes, source: str = "-") -> list[Finding]:
        self._source(source)
        return self._on(self.parser.feed(data, source))

    def feed_candidates(self, source: str, lines: Iterable[tuple[int, bytes]]) -> list[Finding]:
        self._source(source)
        return self._on(self.parser.feed_candidates(source, lines))

    def finish(self) -> list[Finding]:
        new = self._on(self.parser.flush())
        self._finished = True
        return new + [f for f in self._summary(final=True) if f.code == "T206"]

    def ranks(self) -> list[RankFacts]:
        return self.parser.ranks()

    def findings(self) -> list[Finding]:
        out = [self._finding(h) for h in self._hits.values()]
        return out + self._summary(final=self._finished)

    def analysis(self) -> LogAnalysis:
        return LogAnalysis(self.ranks(), self.findings(), self.parser.lines_parsed, self.sources)

    def _source(self, source: str) -> None:
        if source not in self.sources:
            self.sources.append(source)

    # ---- rules --------------------------------------------------------------------------
    def _on(self, events: list[Event]) -> list[Finding]:
        new: list[Finding] = []
        summary = False
        for e in events:
            for code, status, what in self._rules(e):
                hit = self._hits.get(code)
                if hit is None:
                    hit = self._hits[code] = _Hit(code, status)
                    if code == "T204":
                        hit.want = str(self.expect_nics)
                if hit.add(e.rank, e.line, what, status):
                    new.append(self._finding(hit, only=e.rank))
            summary = summary or e.kind in ("network", "ofi_provider", "nccl_version")
        if summary:
            for f in self._summary(final=False):
                if f.code not in self._summary_seen:
                    self._summary_seen.add(f.code)
                    new.append(f)
        return new

    def _rules(self, e: Event) -> list[tuple[str, Status, str]]:
        r = self._rank(e.rank)
        out: list[tuple[str, Status, str]] = []
        if e.kind in _DIRECT:
            code, status = _DIRECT[e.kind]
            what = ""
            if e.kind == "deepep_qp_cap":
                what = f"{e.data['before']} -> {e.data['after']}"
            elif e.kind == "cuda_fault":
                what = _fault_words(e.line.text)
            out.append((code, status, what))
        flags = self._flags.setdefault(e.rank, set())
        if e.kind in ("cuda_fault", "segfault"):
            flags.add(e.kind)
        if e.kind == "frame":
            f = e.data["file"].replace("\\", "/")
            if f.endswith("deep_ep/buffers/elastic.py") or "ElasticBuffer" in e.data["fn"]:
                flags.add("elastic")
            if f.endswith("deepep_v2.py"):
                flags.add("deepep_v2")
        if e.kind in ("cuda_fault", "segfault", "frame"):
            if {"segfault", "elastic"} <= flags:
                out.append(("D206", Status.FAIL, ""))
            if "cuda_fault" in flags and ("deepep_v2" in flags or "elastic" in flags):
                out.append(("E202", Status.FAIL, ""))
        if e.kind == "network":
            net = e.data["network"]
            if net in ("Socket", "IB"):
                out.append(("T201", Status.FAIL, net))
                if r is not None and r.net_plugin_not_found:
                    out.append(("N201", Status.FAIL, net))
        if e.kind == "net_plugin_failed" and e.data["name"] not in ("IB", "Socket"):
            out.append(("N202", Status.FAIL, ""))
        if e.kind == "ofi_provider":
            out += self._provider_rules(e)
        if e.kind == "all2all_manager":
            m = e.data["manager"]
            status = Status.PASS if m == "DeepEPV2All2AllManager" else Status.WARN
            out.append(("E201", status, m))
        return out

    def _provider_rules(self, e: Event) -> list[tuple[str, Status, str]]:
        prov, fab, nics = e.data["provider"], e.data["fabric"], e.data["nics"]
        out: list[tuple[str, Status, str]] = []
        if not prov.startswith("efa"):
            out.append(("T202", Status.FAIL, prov))
            return out
        if fab != "efa-direct":
            out.append(("T203", Status.FAIL if self.ctx.transport else Status.WARN, fab))
        if nics is not None and self.expect_nics and nics < self.expect_nics:
            out.append(("T204", Status.FAIL, str(nics)))
        return out

    def _rank(self, key: str) -> RankFacts | None:
        return self.parser._ranks.get(key)

    # ---- whole-log verdicts -------------------------------------------------------------
    def _summary(self, final: bool) -> list[Finding]:
        ranks = [r for r in self.parser.ranks() if r.host is not None]
        out: list[Finding] = []
        states = {r.rank_key: r.on_efa for r in ranks}
        on = [k for k, v in states.items() if v is True]
        off = [k for k, v in states.items() if v is False]
        if on and off:
            ev = [f"on EFA: {_list(on)}", f"not on EFA: {_list(off)}"]
            ev += [self._net_line(k) for k in off[:4]]
            out.append(finding("T205", Status.FAIL, evidence=ev))
        versions: dict[str, list[str]] = {}
        for r in ranks:
            if r.nccl_version:
                versions.setdefault(r.nccl_version, []).append(r.rank_key)
        if len(versions) > 1:
            ev = [f"NCCL {v}: {_list(ks)}" for v, ks in sorted(versions.items())]
            what = ", ".join(sorted(versions))
            out.append(finding("L201", Status.FAIL, TITLES["L201"].format(what=what), ev))
        if final:
            out.append(self._proof(ranks, states))
            if any(r.net_plugin_not_found for r in ranks) and "N201" not in self._hits:
                pending = [
                    r
                    for r in ranks
                    if r.net_plugin_not_found and not r.net_plugin and r.network is None
                ]
                if pending:
                    ev = [f"{r.rank_key}: Could not find {', '.join(r.net_plugin_not_found)}" for r in pending[:8]]
                    out.append(
                        finding(
                            "N201",
                            Status.UNKNOWN,
                            "NET plugin not found; the log ends before NCCL chose a network",
                            ev,
                        )
                    )
        return out

    def _proof(self, ranks: list[RankFacts], states: dict[str, bool | None]) -> Finding:
        if not ranks:
            return finding(
                "T206",
                Status.UNKNOWN,
                "no NCCL rank lines in this log: nothing proves EFA (run with NCCL_DEBUG=INFO)",
                [f"{self.parser.lines_parsed} candidate lines parsed"],
            )
        unknown = [k for k, v in states.items() if v is None]
        on = [k for k, v in states.items() if v is True]
        if unknown:
            ev = [f"no EFA provider banner or network line: {_list(unknown)}"]
            if on:
                ev.append(f"on EFA: {_list(on)}")
            return finding(
                "T206",
                Status.UNKNOWN,
                f"{len(unknown)} of {len(ranks)} NCCL ranks show no network evidence",
                ev,
            )
        if len(on) == len(ranks):
            fabrics = sorted({self._rank(k).ofi_fabric or "?" for k in on})
            nics = sorted({str(self._rank(k).ofi_nics) for k in on})
            ev = [f"{k}: {self._net_line(k)}" for k in on[:4]]
            return finding(
                "T206",
                Status.PASS,
                f"all {len(on)} NCCL ranks on EFA (fabric {', '.join(fabrics)}, nics {', '.join(nics)})",
                ev,
            )
        return finding(
            "T206",
            Status.UNKNOWN,
            f"{len(on)} of {len(ranks)} NCCL ranks on EFA; the others are judged by T201/T202",
        )

    def _net_line(self, key: str) -> str:
        r = self._rank(key)
        if r is None:
            return key
        line = r.evidence.get("ofi_provider") or r.evidence.get("network")
        return line.cite() if line else key

    # ---- rendering one hit ----------------------------------------------------------------
    def _finding(self, hit: _Hit, only: str | None = None) -> Finding:
        total = len([r for r in self.parser.ranks() if r.host is not None]) or len(hit.ranks)
        what = ", ".join(hit.what) if hit.what else ""
        title = TITLES.get(hit.code, "").format(what=what or "?", want=hit.want or "?")
        keys = [only] if only else list(hit.ranks)
        if not only and len(hit.ranks) > 1:
            title = f"{title} ({len(hit.ranks)} of {max(total, len(hit.ranks))} ranks)"
        ev = [f"ranks: {_list(keys)}"]
        lines = [hit.ranks[only]] if only else hit.lines
        ev += [ln.cite() for ln in lines]
        return finding(hit.code, hit.status, title, ev)


def _list(keys: list[str], limit: int = 8) -> str:
    shown = ", ".join(keys[:limit])
    return shown + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def _fault_words(text: str) -> str:
    for w in (
        "an illegal memory access was encountered",
        "unspecified launch failure",
        "CUDA_ERROR_LAUNCH_FAILED",
        "CUDA_ERROR_ILLEGAL_ADDRESS",
    ):
        if w in text:
            return w
    return "CUDA error"


def analyze_stream(
    chunks: Iterable[bytes], ctx: Context | None = None, source: str = "-"
) -> LogAnalysis:
    an = LogAnalyzer(ctx)
    for chunk in chunks:
        an.feed(chunk, source)
    an.finish()
    return an.analysis()


def analyze_paths(paths: Iterable[str], ctx: Context | None = None, workers: int = 2) -> LogAnalysis:
    from epdoctor.facts.logs.read import iter_path

    an = LogAnalyzer(ctx)
    for path in paths:
        for batch in iter_path(path, workers=workers):
            an.feed_candidates(path, batch)
    an.finish()
    return an.analysis()


@check(*sorted({c for c, _ in _DIRECT.values()} | {"T201", "T202", "T203", "T204", "T205", "T206", "L201", "N201", "D206", "E201", "E202"}), domain="logs")
def log_findings(facts: LogAnalysis, ctx: Context) -> Iterable[Finding]:
    """For run_checks(analysis, ctx, "logs"): the findings an analysis already holds."""
    return list(facts.findings)
