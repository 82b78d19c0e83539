"""Per-rank facts and the events that findings are raised from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MAX_EVIDENCE = 8


@dataclass(frozen=True)
class LogLine:
    source: str  # file name, "-" for stdin, or a pod/stream name
    lineno: int
    text: str  # the cleaned line (colour and CR removed), cut to a bounded length

    def cite(self) -> str:
        return f"{self.source}:{self.lineno}: {self.text[:400]}"


@dataclass(frozen=True)
class Event:
    """One recognised upstream message on one rank."""

    kind: str
    rank: str
    line: LogLine
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RankFacts:
    """What one process (rank) said about itself. None = the log did not say."""

    rank_key: str
    labels: list[str] = field(default_factory=list)
    host: str | None = None
    pid: int | None = None
    devs: set[int] = field(default_factory=set)
    nccl_version: str | None = None
    cuda: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    net_plugin: str | None = None  # "Loaded net plugin X" / "Initialized NET plugin X"
    net_plugin_not_found: list[str] = field(default_factory=list)
    net_plugin_failed: list[str] = field(default_factory=list)
    network: str | None = None  # last "Using network X"
    networks: list[str] = field(default_factory=list)
    ofi_version: str | None = None  # aws-ofi-nccl
    libfabric_version: str | None = None
    ofi_platform: str | None = None
    ofi_protocol: str | None = None
    ofi_provider: str | None = None
    ofi_fabric: str | None = None
    ofi_nics: int | None = None
    gin_plugin: str | None = None  # "Assigned GIN plugin X" / "Assigned plugin X type N"
    gin_type: int | None = None
    gdrcopy: list[str] = field(default_factory=list)
    all2all_manager: str | None = None
    warn_count: int = 0
    warns: list[str] = field(default_factory=list)
    first_line: int | None = None
    last_line: int | None = None
    source: str = ""
    evidence: dict[str, LogLine] = field(default_factory=dict)  # fact name -> line that set it

    @property
    def on_efa(self) -> bool | None:
        """True: EFA banner and an OFI network; False: another network; None: cannot tell."""
        if self.ofi_provider is not None and not self.ofi_provider.startswith("efa"):
            return False
        if self.network is not None and not is_ofi_network(self.network):
            return False
        if self.ofi_provider is not None and self.ofi_provider.startswith("efa"):
            return True if self.network is None or is_ofi_network(self.network) else False
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "rank_key": self.rank_key,
            "labels": list(self.labels),
            "host": self.host,
            "pid": self.pid,
            "devs": sorted(self.devs),
            "source": self.source,
            "nccl_version": self.nccl_version,
            "cuda": self.cuda,
            "env": dict(self.env),
            "net_plugin": self.net_plugin,
            "net_plugin_not_found": list(self.net_plugin_not_found),
            "net_plugin_failed": list(self.net_plugin_failed),
            "network": self.network,
            "ofi_version": self.ofi_version,
            "libfabric_version": self.libfabric_version,
            "ofi_platform": self.ofi_platform,
            "ofi_protocol": self.ofi_protocol,
            "ofi_provider": self.ofi_provider,
            "ofi_fabric": self.ofi_fabric,
            "ofi_nics": self.ofi_nics,
            "gin_plugin": self.gin_plugin,
            "gin_type": self.gin_type,
            "gdrcopy": list(self.gdrcopy),
            "all2all_manager": self.all2all_manager,
            "on_efa": self.on_efa,
            "warn_count": self.warn_count,
            "first_line": self.first_line,
            "last_line": self.last_line,
        }


# NCCL names the aws-ofi-nccl plugin "Libfabric" ("AWS Libfabric"/"OFI" when NCCL_NET says so).
OFI_NETWORKS = ("Libfabric", "AWS Libfabric", "OFI")


def is_ofi_network(name: str) -> bool:
    return name in OFI_NETWORKS
