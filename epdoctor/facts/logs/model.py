"""Per-rank log facts and the events the signatures found, built line by line.

``LogFacts.add(source, line_no, raw)`` takes one candidate line (bytes) and
updates the rank it belongs to. A rank is an NCCL process (``host:pid``);
launcher labels (``rank3``, ``Worker_DP3_EP3``, ``pod/...``) are joined to it
when a line carries both, so a label-only line (a traceback under torchrun's
``[rank3]:``) lands on the same rank. Lines with neither are kept per source.

``LogFacts(transports=True)`` also reads NCCL's channel lines into
``RankFacts.transports`` (which transport joins the rank to its peers). Only a
scanner given ``signatures.TRANSPORT_ANCHORS`` returns those lines; without the
flag ``transports`` stays ``None``: not read, which is not "no peer".
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from epdoctor.facts.logs import signatures as sig
from epdoctor.facts.logs import triage
from epdoctor.facts.logs.prefix import Parsed, parse_line
from epdoctor.redact import redact_text

MAX_TEXT = 400  # evidence text per line
MAX_PER_RANK = 12  # evidence lines kept per list
BANNER_GAP = 40  # lines after a rank's own NCCL line within which an unprefixed banner is its
MAX_EVENTS_PER_KIND = 64
MAX_TROUBLES_PER_RANK = 400  # trouble lines kept per rank from its start ...
MAX_LATEST_PER_RANK = 100  # ... and its latest ones: the rest is counted, never silently lost
MAX_TROUBLES = 20_000
MAX_SEEN = 400_000  # distinct lines remembered to count repeats (beyond: judged again)
CONTEXT_KINDS = ("deepep_v2_context", "vllm_engine_config", "torchrun_exitcode", "nccl_tests_ok")
# NCCL's "comm %p rank %d nRanks %d nNodes %d ..." line (init.cc), read without decoding it
_COMM_FAST = re.compile(
    rb"(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):\d+ \[\d+\] NCCL INFO comm \S+ rank \d+ "
    rb"nRanks (?P<n>\d+) nNodes (?P<nn>\d+) "
)


@dataclass(frozen=True)
class Event:
    kind: str
    rank_key: str  # the rank, or "source:<name>" when the line has no rank
    source: str
    line_no: int
    text: str
    groups: tuple[tuple[str, str], ...] = ()

    def evidence(self) -> str:
        where = f"{self.source}:{self.line_no}" if self.source else f"line {self.line_no}"
        return f"{where}: {self.text}"

    def group(self, name: str) -> str | None:
        return dict(self.groups).get(name)


@dataclass
class Trouble:
    """One line that signals trouble, with the triage verdict and the events it raised.

    The same line (same source, same bytes) seen again is not judged again: ``repeats`` counts
    it and ``last_line`` says where it was last, so a storm of one warning costs one line.
    """

    rank_key: str
    source: str
    line_no: int
    text: str
    verdict: triage.Verdict
    events: tuple[str, ...] = ()  # signature event kinds of the same line
    repeats: int = 0
    last_line: int = 0

    def evidence(self) -> str:
        where = f"{self.source}:{self.line_no}" if self.source else f"line {self.line_no}"
        again = (
            f" [the same line {self.repeats} more time{'s' if self.repeats != 1 else ''}, "
            f"last at line {self.last_line}]"
            if self.repeats
            else ""
        )
        return f"{where}: {self.text}{again}"


@dataclass
class RankFacts:
    """What one NCCL process (or one labelled stream) said about itself."""

    key: str
    host: str | None = None
    pid: int | None = None
    devs: set[int] = field(default_factory=set)
    labels: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    first_line: int | None = None
    nccl_version: str | None = None
    cuda_version: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    net_plugins_loaded: list[str] = field(default_factory=list)
    net_plugin_not_found: list[str] = field(default_factory=list)
    net_plugin_failed: list[str] = field(default_factory=list)
    net_initialized: list[str] = field(default_factory=list)
    net_failures: list[str] = field(default_factory=list)  # why a NET plugin is not in use
    networks: list[str] = field(default_factory=list)
    socket_ifs: list[str] = field(default_factory=list)  # "NET/Socket : Using [0]eth0:10.0.0.1<0>"
    bootstrap_ifs: list[str] = field(default_factory=list)  # "Bootstrap : Using [0]eth0:..."
    # P2P, SHM, NET/Libfabric, NET/Socket ... from the channel lines; None: not read
    transports: set[str] | None = None
    # the network of the first NET channel line not over the OFI plugin ("[send] via
    # NET/Socket/0"): the network where a log holds no "Using network" line (an excerpt, a
    # NCCL_DEBUG_SUBSYS without INIT); a channel line can show a rank off EFA, never on it
    channel_net: str | None = None
    ofi_init_failed: bool = False
    providers: list[tuple[str, str, int]] = field(default_factory=list)
    ofi_nccl_version: str | None = None
    libfabric_version: str | None = None
    gin_plugin: str | None = None
    gin_plugin_type: int | None = None
    gin_loaded: list[str] = field(default_factory=list)
    gdaki_context: bool = False
    gdrcopy: list[str] = field(default_factory=list)
    comm_nranks: int | None = None  # the largest communicator this rank joined
    comm_nnodes: int | None = None  # its nNodes, where NCCL printed it (2.19+)
    init_complete: bool = False  # NCCL said "Init COMPLETE" for a communicator of this rank
    warn_count: int = 0
    warns: list[str] = field(default_factory=list)
    evidence: dict[str, str] = field(default_factory=dict)  # fact name -> "src:line: text"

    nccl: bool = False  # NCCL wrote lines for it (with or without the host:pid:tid prefix)

    @property
    def is_nccl(self) -> bool:
        return self.nccl

    @property
    def network(self) -> str | None:
        return self.networks[-1] if self.networks else self.channel_net

    @property
    def provider(self) -> tuple[str, str, int] | None:
        return self.providers[-1] if self.providers else None

    @property
    def provider_text(self) -> str:
        """'efa / efa-direct', or the provider alone where the log named no fabric."""
        p = self.provider
        if p is None:
            return ""
        return f"{p[0]} / {p[1]}" if p[1] else p[0]

    @property
    def gin_type(self) -> int | None:
        v = self.env.get("NCCL_GIN_TYPE")
        try:
            return int(v) if v is not None else None
        except ValueError:
            return None

    def on_efa(self) -> bool | None:
        """True: efa/efa-direct selected and the network is the OFI plugin. None: not logged."""
        p = self.provider
        net = self.network
        if p is None:
            if net is not None and net not in sig.NET_NAMES_OFI:
                return False
            return None
        # aws-ofi-nccl 1.x printed no fabric: its efa provider is EFA
        if p[0] != "efa" or p[1] not in ("efa-direct", ""):
            return False
        return net is None or net in sig.NET_NAMES_OFI

    def name(self) -> str:
        extra = [lb for lb in self.labels if lb != self.key][:2]
        return f"{self.key} ({', '.join(extra)})" if extra else self.key

    def to_json(self) -> dict[str, Any]:
        p = self.provider
        return {
            "rank_key": self.key,
            "host": self.host,
            "pid": self.pid,
            "devices": sorted(self.devs),
            "labels": list(self.labels),
            "sources": list(self.sources),
            "nccl_version": self.nccl_version,
            "cuda_version": self.cuda_version,
            "network": self.network,
            "ofi_provider": p[0] if p else None,
            "ofi_fabric": p[1] if p else None,
            "ofi_nics": p[2] if p else None,
            "on_efa": self.on_efa(),
            "aws_ofi_nccl_version": self.ofi_nccl_version,
            "libfabric_version": self.libfabric_version,
            "net_plugins_loaded": list(self.net_plugins_loaded),
            "net_plugin_not_found": list(self.net_plugin_not_found),
            "net_plugin_failed": list(self.net_plugin_failed),
            "net_failures": list(self.net_failures),
            "net_socket": list(self.socket_ifs),
            "bootstrap": list(self.bootstrap_ifs),
            "transports": sorted(self.transports) if self.transports is not None else None,
            "gin_type": self.gin_type,
            "gin_plugin": self.gin_plugin,
            "gin_plugin_type": self.gin_plugin_type,
            "gdaki_context": self.gdaki_context,
            "gdrcopy": list(self.gdrcopy),
            "comm_nranks": self.comm_nranks,
            "comm_nnodes": self.comm_nnodes,
            "env": dict(self.env),
            "warn_count": self.warn_count,
            "warns": list(self.warns),
        }


@dataclass
class LogFacts:
    transports: bool = False  # read the channel lines (the scanner must return them too)
    ranks: dict[str, RankFacts] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    troubles: list[Trouble] = field(default_factory=list)
    trouble_count: int = 0  # all trouble lines, kept or not
    benign_count: int = 0
    sources: dict[str, int] = field(default_factory=dict)  # source -> lines seen
    candidates: int = 0
    bytes_scanned: int = 0
    _labels: dict[str, set[str]] = field(default_factory=dict)  # label -> nccl keys
    _pids: dict[int, set[str]] = field(default_factory=dict)  # pid -> nccl keys
    _last_nccl: dict[str, tuple[str, int]] = field(default_factory=dict)  # source -> (key, line)
    _kind_count: dict[str, int] = field(default_factory=dict)
    _rank_troubles: dict[str, int] = field(default_factory=dict)
    _latest: dict[str, deque[Trouble]] = field(default_factory=dict)  # rank -> its last lines
    summarised: int = 0  # trouble lines counted but kept neither as earliest nor latest
    repeats: int = 0  # candidate lines that repeated an earlier line byte for byte
    _seen: dict[int, Trouble | None] = field(default_factory=dict)
    # trap code -> lines of the log that hold its discriminator's patterns (a few each)
    hints: dict[str, list[str]] = field(default_factory=dict)

    # -- building -------------------------------------------------------------------------
    def add(self, source: str, line_no: int, raw: bytes) -> list[Event]:
        """One candidate line; returns the events it raised. Never raises on odd bytes."""
        self.candidates += 1
        seen_key = hash((source, raw))
        if seen_key in self._seen:
            self.repeats += 1
            t = self._seen[seen_key]
            if t is not None:
                t.repeats += 1
                t.last_line = line_no
            return []
        remember = len(self._seen) < MAX_SEEN
        if remember:
            self._seen[seen_key] = None
        if b" nNodes " in raw and self._known_comm(raw):
            return []
        # the one place a log line enters the facts: secrets never get further than this
        text = redact_text(raw[:65536].decode("utf-8", "replace"))
        p = parse_line(text)
        if not p.text.strip():
            return []
        ofi = p.nccl and "via NET/" in p.msg and (m := sig.CHANNEL_NET.match(p.msg))
        if ofi and m["net"] in sig.NET_NAMES_OFI and not self.transports:
            # a channel over the OFI plugin proves nothing its provider line does not say (which
            # provider, which fabric): it makes no rank and no network of its own (the launch
            # gates, which read every channel, take it as a transport)
            return []
        rank = self._rank_for(p, source, line_no)
        shown = p.text if len(p.text) <= MAX_TEXT else p.text[:MAX_TEXT] + "..."
        fact = False
        if rank is not None and p.nccl:
            rank.nccl = True
            fact = self._nccl_facts(rank, p, source, line_no, shown)
        elif rank is not None and rank.nccl and sig.NCCL_VERSION.match(p.msg):
            fact = self._nccl_facts(rank, p, source, line_no, shown)  # its printf'd banner
        key = rank.key if rank is not None else f"source:{source}"
        if fact:  # an NCCL INFO line that only states a fact (a communicator's size)
            return []
        for code in triage.hints_in(p.text):
            seen = self.hints.setdefault(code, [])
            if len(seen) < 3:
                seen.append(
                    f"{source}:{line_no}: {shown}" if source else f"line {line_no}: {shown}"
                )
        v = triage.classify(p)
        events = self._events(p, key, source, line_no, shown, v)
        t = self._triage(key, source, line_no, shown, events, v)
        if remember and not events:
            # a repeat of an event line is counted by the event table itself; of a trouble
            # line, on the trouble; of anything else, nowhere (its facts are already read)
            self._seen[seen_key] = t
        elif remember:
            del self._seen[seen_key]
        return events

    def _known_comm(self, raw: bytes) -> bool:
        """A communicator line of a rank whose size is already known: nothing new (a job that
        creates communicators by the thousand prints one per communicator and rank)."""
        m = _COMM_FAST.search(raw)
        if m is None:
            return False
        r = self.ranks.get(f"{m['host'].decode('ascii', 'replace')}:{int(m['pid'])}")
        if r is None or r.comm_nranks is None or r.comm_nnodes is None:
            return False
        return r.comm_nranks >= int(m["n"]) and r.comm_nnodes >= int(m["nn"])

    def _triage(
        self,
        key: str,
        source: str,
        line_no: int,
        shown: str,
        events: list[Event],
        v: triage.Verdict | None,
    ) -> Trouble | None:
        kinds = tuple(e.kind for e in events if e.kind not in CONTEXT_KINDS)
        if v is None and not kinds:
            return None
        if v is not None and v.role == triage.BENIGN and not kinds:
            self.benign_count += 1
            return None
        if v is None:
            v = triage.Verdict(triage.SYMPTOM, triage.ERROR, "event")
        self.trouble_count += 1
        t = Trouble(key, source, line_no, shown, v, kinds)
        n = self._rank_troubles.get(key, 0)
        if n >= MAX_TROUBLES_PER_RANK or len(self.troubles) >= MAX_TROUBLES:
            # past a rank's first lines its latest are kept, the ones between are counted
            tail = self._latest.setdefault(key, deque(maxlen=MAX_LATEST_PER_RANK))
            if len(tail) == tail.maxlen:
                self.summarised += 1
            tail.append(t)
            return t
        self._rank_troubles[key] = n + 1
        self.troubles.append(t)
        return t

    def all_troubles(self) -> list[Trouble]:
        """Every kept trouble line: each rank's first ones, then its latest ones."""
        if not self._latest:
            return self.troubles
        return self.troubles + [t for k in sorted(self._latest) for t in self._latest[k]]

    def _rank_for(self, p: Parsed, source: str, line_no: int) -> RankFacts | None:
        if p.nccl_key is not None:
            key = p.nccl_key
            r = self.ranks.get(key)
            if r is None:
                r = self.ranks[key] = RankFacts(key=key, host=p.host, pid=p.pid, first_line=line_no)
                if self.transports:
                    r.transports = set()
                self._pids.setdefault(p.pid or 0, set()).add(key)
            if p.dev is not None:
                r.devs.add(p.dev)
            for lb in p.labels:
                if lb not in r.labels:
                    r.labels.append(lb)
                self._labels.setdefault(lb, set()).add(key)
            self._last_nccl[source] = (key, line_no)
        else:
            r = self._rank_by_label(p, line_no)
            last = self._last_nccl.get(source)
            if (
                r is None
                and last
                and line_no - last[1] <= BANNER_GAP
                and sig.NCCL_VERSION.match(p.msg)
            ):
                # NCCL prints its "NCCL version X" banner with printf, no host:pid prefix, among
                # the INFO lines of the process that printed it: that process's version
                r = self.ranks[last[0]]
            if r is None and p.nccl:
                # NCCL's words without its prefix: one rank per source, named for it
                key = f"nccl@{source or 'log'}"
                r = self.ranks.get(key)
                if r is None:
                    r = self.ranks[key] = RankFacts(key=key, first_line=line_no)
                    if self.transports:
                        r.transports = set()
            if r is None:
                return None
        if source and source not in r.sources:
            r.sources.append(source)
        return r

    def _rank_by_label(self, p: Parsed, line_no: int) -> RankFacts | None:
        # vLLM's "(Worker_DP3_EP3 pid=N)" pid is the NCCL process's pid
        if p.label_pid is not None and len(self._pids.get(p.label_pid, ())) == 1:
            r = self.ranks[next(iter(self._pids[p.label_pid]))]
            for lb in p.labels:
                if lb not in r.labels:
                    r.labels.append(lb)
                self._labels.setdefault(lb, set()).add(r.key)
            return r
        for lb in reversed(p.labels):  # innermost label first
            keys = self._labels.get(lb)
            if keys and len(keys) == 1:
                return self.ranks[next(iter(keys))]
        if p.labels:
            lb = p.labels[-1]
            r = self.ranks.get(lb)
            if r is None:
                r = self.ranks[lb] = RankFacts(key=lb, labels=[lb], first_line=line_no)
            return r
        return None

    def _nccl_facts(self, r: RankFacts, p: Parsed, source: str, line_no: int, shown: str) -> bool:
        """Read the line's facts into the rank; True when the line says nothing else (it need
        not be judged for trouble: NCCL's communicator lines, the bulk of a long INFO log)."""
        msg = p.msg
        ev = f"{source}:{line_no}: {shown}" if source else f"line {line_no}: {shown}"
        if p.level == "WARN":
            r.warn_count += 1
            if len(r.warns) < MAX_PER_RANK:
                r.warns.append(ev)
        if r.transports is not None and (m := sig.CHANNEL_VIA.match(msg)):
            kind = sig.transport_kind(m["via"])
            r.transports.add(kind)
            r.evidence.setdefault(f"transport:{kind}", ev)
            return True  # a channel line says nothing else
        if "via NET/" in msg and (m := sig.CHANNEL_NET.match(msg)):
            if r.channel_net is None and not r.networks:
                r.channel_net = m["net"]
                r.evidence.setdefault("network", ev)
            return True
        if "Init COMPLETE" in msg:
            r.init_complete = True
            r.evidence.setdefault("init_complete", ev)
        if "anks " in msg and (m := sig.COMM_RANKS.search(msg)):
            n = int(m["n"])
            if r.comm_nranks is None or n > r.comm_nranks:
                r.comm_nranks = n
                r.evidence["comm"] = ev
            if mn := sig.COMM_NODES.search(msg):
                r.comm_nnodes = max(r.comm_nnodes or 0, int(mn["n"]))
                r.evidence["comm"] = ev
            return p.level == "INFO" and "ailed" not in msg and "rror" not in msg
        if m := sig.NCCL_VERSION.match(msg):
            if r.nccl_version is None:
                r.nccl_version = m["v"]
                r.cuda_version = m["cuda"]
                r.evidence["nccl_version"] = ev
        elif m := sig.ENV_SET.match(msg):
            r.env[m["k"]] = m["v"].strip()
            r.evidence[f"env:{m['k']}"] = ev
        elif m := sig.OFI_PROVIDER.search(msg):
            # -1: an aws-ofi-nccl too old to print the NIC count
            r.providers.append((m["prov"].strip(), m["fab"] or "", int(m["n"]) if m["n"] else -1))
            r.evidence["provider"] = ev
        elif m := sig.USING_NETWORK.match(msg):
            r.networks.append(m["net"])
            r.evidence["network"] = ev
        elif m := sig.OFI_VERSION.match(msg):
            r.ofi_nccl_version = m["v"]
            r.evidence["aws_ofi_nccl_version"] = ev
        elif m := sig.LIBFABRIC_VERSION.match(msg):
            r.libfabric_version = m["v"]
        elif m := sig.NET_LOADED.match(msg):
            r.net_plugins_loaded.append(m["name"])
            r.evidence["net_loaded"] = ev
        elif m := sig.NET_EXTERNAL_OK.match(msg):
            r.net_plugins_loaded.append(m["path"])
        elif (m := sig.NET_NOT_FOUND.match(msg)) and (
            m["p3"] is None or m["obj"] == m["p3"]  # a missing dependency is not a missing plugin
        ):
            r.net_plugin_not_found.append(m["p1"] or m["p2"] or m["p3"])
            r.evidence["net_not_found"] = ev
        elif m := sig.NET_INIT_FAILED.match(msg):
            r.net_plugin_failed.append(m["name"])
            r.evidence[f"net_failed:{m['name']}"] = ev
        elif m := sig.NET_INITIALIZED.match(msg):
            r.net_initialized.append(m["name"])
        elif m := sig.GIN_ASSIGNED.match(msg):
            r.gin_plugin = m["a"] or m["b"]
            r.gin_plugin_type = int(m["t"]) if m["t"] else None
            r.evidence["gin_plugin"] = ev
        elif m := sig.GIN_LOADED.match(msg):
            r.gin_loaded.append(m["name"])
        elif m := sig.SOCKET_USING.match(msg):
            r.socket_ifs.append(m["ifs"])
            r.evidence["net_socket"] = ev
        elif m := sig.BOOTSTRAP_USING.match(msg):
            r.bootstrap_ifs.append(m["ifs"])
            r.evidence["bootstrap"] = ev
        # every failure wording holds "ailed": the regexes run only on those few lines
        if (
            "ailed" in msg
            and len(r.net_failures) < MAX_PER_RANK
            and (
                sig.OFI_INIT_FAILED.search(msg)
                or sig.NET_INIT_FAILED.match(msg)
                or sig.NET_ANY_FAILED.search(msg)
            )
        ):
            r.net_failures.append(msg[:MAX_TEXT])
        if sig.OFI_INIT_FAILED.search(msg):
            r.ofi_init_failed = True
            r.evidence.setdefault("ofi_init_failed", ev)
        if sig.GDAKI_CONTEXT_DONE.search(msg):
            r.gdaki_context = True
            r.evidence["gdaki_context"] = ev
        if sig.GDRCOPY_MSG.search(msg) and len(r.gdrcopy) < MAX_PER_RANK:
            r.gdrcopy.append(msg[:MAX_TEXT])
        return False

    def _events(
        self, p: Parsed, key: str, source: str, line_no: int, shown: str, v: triage.Verdict | None
    ) -> list[Event]:
        """The line's event (the event-table rule its verdict names) and its context kinds."""
        out: list[Event] = []
        hay = p.msg if p.nccl else p.text
        found: list[tuple[str, tuple[tuple[str, str], ...]]] = []
        if v is not None and v.event is not None:
            found.append((v.event, ()))
        for kind, rx in sig.CONTEXT:
            if m := rx.search(hay):
                found.append(
                    (kind, tuple((k, x) for k, x in m.groupdict().items() if x is not None))
                )
        for kind, groups in found:
            n = self._kind_count.get(kind, 0)
            self._kind_count[kind] = n + 1
            if n >= MAX_EVENTS_PER_KIND:
                continue
            e = Event(kind, key, source, line_no, shown, groups)
            self.events.append(e)
            out.append(e)
        return out

    # -- reading --------------------------------------------------------------------------
    def kind_count(self, kind: str) -> int:
        return self._kind_count.get(kind, 0)

    def events_of(self, *kinds: str) -> list[Event]:
        return [e for e in self.events if e.kind in kinds]

    def nccl_ranks(self) -> list[RankFacts]:
        return [r for k, r in sorted(self.ranks.items()) if r.is_nccl]

    def all_ranks(self) -> list[RankFacts]:
        return [self.ranks[k] for k in sorted(self.ranks)]

    def hosts(self) -> int | None:
        """How many hosts the job spans, as far as the log says; None: it cannot be told.

        NCCL's own nNodes (2.19+) decides. Without it, one host is told only when every rank of
        the communicator (its nranks) printed lines from that host: a log of one node of a
        two-node job shows one host too, and must not pass for a single-host run.
        """
        ranks = self.nccl_ranks()
        nodes = {r.comm_nnodes for r in ranks if r.comm_nnodes}
        if nodes:
            return max(nodes)
        hosts = {r.host for r in ranks if r.host}
        if len(hosts) > 1:
            return len(hosts)
        size = max((r.comm_nranks or 0 for r in ranks), default=0)
        seen = [r for r in ranks if r.host]
        if len(hosts) == 1 and size and len(seen) >= size:
            return 1
        return None
