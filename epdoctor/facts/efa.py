"""EFA facts: installer manifest, fi_info, RDMA devices and their hw_counters."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from epdoctor.facts.versions import parse_version
from epdoctor.model import Fact


@dataclass(frozen=True)
class InstallerInfo:
    version: str
    packages: dict[str, str] = field(default_factory=dict)


_PKG_DEB = re.compile(r"^([a-z0-9][a-z0-9+.-]*?)_([0-9][^_]*)_(amd64|arm64|all)$")
_PKG_RPM = re.compile(r"^([A-Za-z0-9][\w+.-]*?)-(\d[\w.+~]*)-([\w.+~]+)\.(x86_64|aarch64|noarch)$")


def parse_installed_packages(text: str | None) -> Fact[InstallerInfo]:
    """/opt/amazon/efa_installed_packages: `# EFA installer version: X` then package names.

    Packages may be on one line separated by spaces (the real files) or one per line.
    """
    if text is None:
        return Fact.unknown(
            "/opt/amazon/efa_installed_packages absent (EFA installer not run here)"
        )
    m = re.search(r"^#\s*EFA installer version:\s*(\S+)", text, re.M)
    if not m:
        return Fact.unknown("no `# EFA installer version:` header in efa_installed_packages")
    pkgs: dict[str, str] = {}
    for tok in re.split(
        r"\s+", "\n".join(ln for ln in text.splitlines() if not ln.startswith("#"))
    ):
        d = _PKG_DEB.match(tok) or _PKG_RPM.match(tok)
        if d:
            pkgs[d.group(1)] = d.group(2)
    return Fact.of(InstallerInfo(m.group(1), pkgs), m.group(0).strip())


def parse_fi_info_version(text: str | None) -> Fact[str]:
    """`fi_info --version`: the `libfabric: X` line (the first line echoes argv[0])."""
    if not text:
        return Fact.unknown("fi_info --version gave no output")
    m = re.search(r"^libfabric:\s*(\S+)", text, re.M)
    if not m:
        return Fact.unknown("no `libfabric:` line in fi_info --version output")
    return Fact.of(m.group(1), m.group(0))


@dataclass(frozen=True)
class FiProvider:
    provider: str
    fabric: str
    domain: str
    version: str = ""


def parse_fi_info_providers(text: str | None) -> Fact[list[FiProvider]]:
    """`fi_info -p efa` entries (provider/fabric/domain/version blocks)."""
    if text is None:
        return Fact.unknown("fi_info -p efa did not run")
    out: list[FiProvider] = []
    cur: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("provider:"):
            if cur.get("provider"):
                out.append(_fi(cur))
            cur = {"provider": line.split(":", 1)[1].strip()}
        elif ":" in line and cur:
            k, _, v = line.partition(":")
            cur[k.strip()] = v.strip()
    if cur.get("provider"):
        out.append(_fi(cur))
    if not out:
        return Fact.unknown("fi_info listed no provider entries")
    return Fact.of(out, *[f"{p.provider} {p.fabric} {p.domain}" for p in out[:6]])


def _fi(d: dict[str, str]) -> FiProvider:
    return FiProvider(
        d.get("provider", ""), d.get("fabric", ""), d.get("domain", ""), d.get("version", "")
    )


@dataclass(frozen=True)
class RdmaPort:
    name: str
    hw_counters: tuple[str, ...] | None  # None: the hw_counters directory is absent
    counters: dict[str, int]
    state: str | None = None
    rate: str | None = None


@dataclass(frozen=True)
class RdmaDevice:
    name: str
    driver: str | None
    driver_version: str | None
    ports: tuple[RdmaPort, ...]
    p2p: str | None = None

    @property
    def is_efa(self) -> bool:
        return self.driver == "efa" or (
            self.driver is None and self.name.startswith(("rdmap", "efa_"))
        )


def parse_rdma_devices(section: object) -> Fact[list[RdmaDevice]]:
    """The probe's view of /sys/class/infiniband/*."""
    if not isinstance(section, dict) or not isinstance(section.get("devices"), dict):
        return Fact.unknown("probe has no /sys/class/infiniband listing")
    devs: list[RdmaDevice] = []
    for name, d in sorted(section["devices"].items()):
        if not isinstance(d, dict):
            continue
        ports = []
        ports_raw = d.get("ports") if isinstance(d.get("ports"), dict) else {}
        for pname, p in sorted(ports_raw.items()):
            if not isinstance(p, dict):
                continue
            hc = p.get("hw_counters")
            counters = {}
            raw = p.get("counters") if isinstance(p.get("counters"), dict) else {}
            for k, v in raw.items():
                try:
                    counters[str(k)] = int(str(v).strip())
                except ValueError:
                    continue
            ports.append(
                RdmaPort(
                    name=str(pname),
                    hw_counters=tuple(str(x) for x in hc) if isinstance(hc, list) else None,
                    counters=counters,
                    state=p.get("state") if isinstance(p.get("state"), str) else None,
                    rate=p.get("rate") if isinstance(p.get("rate"), str) else None,
                )
            )
        devs.append(
            RdmaDevice(
                name=str(name),
                driver=d.get("driver") if isinstance(d.get("driver"), str) else None,
                driver_version=d.get("driver_version")
                if isinstance(d.get("driver_version"), str)
                else None,
                ports=tuple(ports),
                p2p=d.get("p2p") if isinstance(d.get("p2p"), str) else None,
            )
        )
    return Fact.of(devs, *[f"/sys/class/infiniband/{d.name} (driver {d.driver})" for d in devs[:4]])


def libfabric_from_installer(info: InstallerInfo) -> str | None:
    for name in ("libfabric-aws", "libfabric1-aws", "libfabric-aws-bin", "libfabric-aws-dev"):
        if name in info.packages:
            return info.packages[name]
    return None


def plugin_from_installer(info: InstallerInfo) -> tuple[str, str] | None:
    for name, ver in info.packages.items():
        if name.startswith(("libnccl-ofi", "aws-ofi-nccl")):
            return name, ver
    return None


def installer_at_least(info: InstallerInfo, floor: str) -> bool | None:
    v = parse_version(info.version)
    return None if v is None else v >= parse_version(floor)  # type: ignore[operator]
