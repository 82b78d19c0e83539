"""Per-rank evidence from NCCL INFO/WARN lines: which network carried the bytes.

NCCL prefixes every debug line with ``host:pid:tid [cudaDev]`` (src/debug.cc),
so lines group into ranks by (host, pid) whether they come from one stream
(torchrun, kubectl logs) or from one NCCL_DEBUG_FILE per rank. Launchers may
add their own prefix in front (``[default0]:``, ``1: ``, ``[1,0]<stdout>:``);
the pattern is searched, not anchored. Only exact upstream wordings are
matched (aws-ofi-nccl and NCCL source, see docs/launch.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_LINE = re.compile(
    r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:.*? )?NCCL "
    r"(?P<level>INFO|WARN) (?P<msg>.*)$"
)
# aws-ofi-nccl: "Selected provider is %s, fabric is %s (found %d nics)"
_PROVIDER = re.compile(
    r"Selected provider is (?P<prov>[^,]+), fabric is (?P<fab>\S+) "
    r"\(found (?P<n>\d+) nics\)"
)
_NETWORK = re.compile(r"^Using network (?P<net>.+?)\s*$")
_VERSION = re.compile(r"^NCCL version (?P<v>\S+)")
# "Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read" (also "[send] via NET/Libfabric/0/GDRDMA")
_CHANNEL = re.compile(r"^Channel \d+/\d+ : \d+\[\w+\] -> \d+\[\w+\](?: \[\w+\])? via (?P<via>\S+)")
_NET_FAIL = re.compile(
    r"Failed to initialize (?:NET plugin|any NET plugin)|"
    r"aws-ofi-nccl initialization failed|NET/OFI Initializing plugin failed"
)
_SOCKET = re.compile(r"^NET/Socket : Using ")


@dataclass
class RankNet:
    """What one NCCL process said about its network."""

    host: str
    pid: int
    devs: set[int] = field(default_factory=set)
    nccl_version: str | None = None
    providers: list[tuple[str, str, int]] = field(default_factory=list)  # (provider, fabric, nics)
    networks: list[str] = field(default_factory=list)  # "Using network X"
    transports: set[str] = field(default_factory=set)  # P2P, SHM, NET/Libfabric, NET/Socket ...
    net_failures: list[str] = field(default_factory=list)
    socket_lines: list[str] = field(default_factory=list)
    warns: list[str] = field(default_factory=list)
    evidence: list[str] = field(default_factory=list)  # the raw lines behind the verdict
    sources: set[str] = field(default_factory=set)  # streams/files the lines came from

    @property
    def key(self) -> str:
        return f"{self.host}:{self.pid}"

    @property
    def network(self) -> str | None:
        return self.networks[-1] if self.networks else None


class NcclEvidence:
    """Incremental: feed lines as they arrive, read ranks() at any time."""

    MAX_EVIDENCE = 12

    def __init__(self) -> None:
        self._ranks: dict[tuple[str, int], RankNet] = {}

    def feed_line(self, line: str, source: str = "") -> RankNet | None:
        m = _LINE.search(line)
        if not m:
            return None
        key = (m.group("host"), int(m.group("pid")))
        r = self._ranks.get(key)
        if r is None:
            r = self._ranks[key] = RankNet(host=key[0], pid=key[1])
        r.devs.add(int(m.group("dev")))
        if source:
            r.sources.add(source)
        msg = m.group("msg").strip()
        if m.group("level") == "WARN":
            if len(r.warns) < self.MAX_EVIDENCE:
                r.warns.append(msg)
            if _NET_FAIL.search(msg):
                r.net_failures.append(msg)
                self._keep(r, line)
            return r
        if (v := _VERSION.match(msg)) and not r.nccl_version:
            r.nccl_version = v.group("v")
        elif p := _PROVIDER.search(msg):
            r.providers.append((p.group("prov").strip(), p.group("fab"), int(p.group("n"))))
            self._keep(r, line)
        elif n := _NETWORK.match(msg):
            r.networks.append(n.group("net"))
            self._keep(r, line)
        elif c := _CHANNEL.match(msg):
            r.transports.add(transport_kind(c.group("via")))
        elif _NET_FAIL.search(msg):
            r.net_failures.append(msg)
            self._keep(r, line)
        elif _SOCKET.match(msg):
            r.socket_lines.append(msg)
            self._keep(r, line)
        return r

    def _keep(self, r: RankNet, line: str) -> None:
        if len(r.evidence) < self.MAX_EVIDENCE:
            r.evidence.append(line.strip())

    def feed_text(self, text: str) -> None:
        for line in text.splitlines():
            self.feed_line(line)

    def ranks(self) -> list[RankNet]:
        return [self._ranks[k] for k in sorted(self._ranks)]


def transport_kind(via: str) -> str:
    """P2P/CUMEM/read -> P2P; NET/Libfabric/0/GDRDMA -> NET/Libfabric; SHM/direct -> SHM."""
    parts = via.split("/")
    if parts[0] == "NET" and len(parts) > 1:
        return f"NET/{parts[1]}"
    return parts[0]
