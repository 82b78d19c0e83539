"""Build one node's typed facts from the probe document (the only reader of its layout)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from epdoctor.facts.efa import (
    FiProvider,
    InstallerInfo,
    RdmaDevice,
    libfabric_from_installer,
    parse_fi_info_providers,
    parse_fi_info_version,
    parse_installed_packages,
    parse_rdma_devices,
    plugin_from_installer,
)
from epdoctor.facts.env import EffectiveEnv, effective_env
from epdoctor.facts.gpu import (
    Gpu,
    parse_nvidia_smi_csv,
    parse_peer_mapping_override,
    parse_proc_driver_version,
)
from epdoctor.facts.kernel import Module, parse_modules
from epdoctor.facts.libs import (
    NcclLib,
    OtherLib,
    PluginLib,
    nccl_libs,
    other_libs,
    parse_ldconfig,
    plugin_libs,
)
from epdoctor.facts.python_env import PythonEnv, python_envs
from epdoctor.facts.versions import parse_version
from epdoctor.model import Fact


@dataclass(frozen=True)
class Process:
    pid: int
    exists: bool
    mapped: tuple[str, ...] | None
    env: EffectiveEnv | None
    cmdline: tuple[str, ...] = ()


@dataclass
class NodeFacts:
    hostname: str
    kernel: str
    os_name: str
    instance_type: Fact[str]
    cpu_count: int | None
    in_container: bool
    euid: int | None
    memlock: Fact[str]
    gpus: Fact[list[Gpu]]
    driver: Fact[str]
    peer_mapping_effective: Fact[bool]
    peer_mapping_configured: Fact[bool]
    modules: dict[str, Fact[Module]]
    dev_gdrdrv: bool | None
    rdma: Fact[list[RdmaDevice]]
    installer: Fact[InstallerInfo]
    libfabric: Fact[str]
    fi_providers: Fact[list[FiProvider]]
    plugins: list[PluginLib]
    plugin_requests: dict[str, dict[str, Any]]
    ldconfig: Fact[dict[str, list[str]]]
    nccl: list[NcclLib]
    gdrapi: list[OtherLib]
    nvshmem: list[OtherLib]
    fabric_libs: list[OtherLib]
    python: list[PythonEnv]
    deepep_sources: dict[str, Any]
    env: EffectiveEnv
    processes: list[Process] = field(default_factory=list)
    distro_packages: dict[str, str] = field(default_factory=dict)
    probe_elapsed_s: float | None = None
    probe_errors: dict[str, str] = field(default_factory=dict)
    sections_failed: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------ helpers --
    def module(self, name: str) -> Module | None:
        f = self.modules.get(name)
        return f.value if f and f.known else None

    def efa_devices(self) -> list[RdmaDevice]:
        return [d for d in (self.rdma.value or []) if d.is_efa] if self.rdma.known else []

    def envs_to_check(self) -> list[EffectiveEnv]:
        """The workload's env when --pid was given, else the probe's own."""
        procs = [p.env for p in self.processes if p.env is not None]
        return procs or [self.env]

    def summary(self) -> dict[str, Any]:
        """The facts a report shows, in JSON-ready form (also drift's input)."""
        efa = self.efa_devices()
        efa_mod = self.module("efa")
        gdr = self.module("gdrdrv")
        hc = [p.hw_counters is not None for d in efa for p in d.ports]
        return {
            "hostname": self.hostname,
            "instance_type": self.instance_type.to_json(),
            "kernel": self.kernel,
            "os": self.os_name,
            "in_container": self.in_container,
            "gpus": [f"{g.index}: {g.name} (sm {g.compute_cap})" for g in self.gpus.value or []]
            if self.gpus.known
            else self.gpus.to_json(),
            "gpu_count": len(self.gpus.value or []) if self.gpus.known else None,
            "driver": self.driver.to_json(),
            "efa_ko": (efa_mod.version if efa_mod and efa_mod.loaded else None),
            "efa_devices": len(efa),
            "hw_counters": (all(hc) if hc else None),
            "gdrdrv": (gdr.version if gdr and gdr.loaded else None),
            "dev_gdrdrv": self.dev_gdrdrv,
            "efa_installer": self.installer.value.version if self.installer.known else None,
            "libfabric": self.libfabric.to_json(),
            "libfabric_files": sorted({lib.realpath for lib in self.fabric_libs}),
            "plugins": [
                {
                    "path": p.realpath,
                    "gin": p.exports("ncclGinPlugin"),
                    "net": p.exports("ncclNetPlugin"),
                    "gdrcopy": p.gdrcopy_compiled_in.to_json(),
                }
                for p in self.plugins
            ],
            "nccl": [
                {
                    "path": n.realpath,
                    "version": n.version.to_json() if not n.version.known else str(n.version.value),
                    "ncclGetLsaDevicePointer": n.has_lsa.to_json(),
                }
                for n in self.nccl
            ],
            "ldconfig_libnccl": (self.ldconfig.value or {}).get("libnccl.so.2", [None])[0]
            if self.ldconfig.known
            else None,
            "python": [
                {"site_packages": p.site_packages, **{k: v for k, v in sorted(p.dists.items())}}
                for p in self.python
            ],
            "env": dict(sorted(self.env.values.items())),
            "probe_elapsed_s": self.probe_elapsed_s,
        }


def _sec(doc: dict[str, Any], name: str) -> Any:
    sections = doc.get("sections")
    return sections.get(name) if isinstance(sections, dict) else None


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _d(value: Any) -> dict[str, Any]:
    """The value when it is a mapping, else empty: a malformed section reads as absent."""
    return value if isinstance(value, dict) else {}


def _stdout(cmd: Any) -> str | None:
    if isinstance(cmd, dict) and not cmd.get("missing") and cmd.get("rc") == 0:
        out = cmd.get("stdout")
        return out if isinstance(out, str) else None
    return None


def _os_name(text: Any) -> str:
    if isinstance(text, str):
        m = re.search(r'^PRETTY_NAME="?([^"\n]+)"?', text, re.M)
        if m:
            return m.group(1)
    return "unknown"


def _instance_type(system: dict[str, Any]) -> Fact[str]:
    name = system.get("product_name")
    vendor = system.get("sys_vendor") or ""
    if isinstance(name, str) and re.match(r"^[a-z][a-z0-9-]*\d[a-z0-9-]*\.[a-z0-9]+$", name):
        return Fact.of(name, f"/sys/class/dmi/id/product_name = {name}")
    if name:
        return Fact.unknown(f"not an EC2 instance type: product_name={name!r} vendor={vendor!r}")
    return Fact.unknown("/sys/class/dmi/id/product_name not readable")


def _memlock(system: dict[str, Any]) -> Fact[str]:
    m = system.get("memlock")
    if not isinstance(m, dict):
        return Fact.unknown("memlock limit not read")
    soft = m.get("soft")
    unlimited = m.get("unlimited")
    return Fact.of("unlimited" if soft == unlimited else str(soft))


def _distro_packages(efa: dict[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    pk = efa.get("packages") or {}
    for key in ("dpkg", "rpm"):
        text = (
            _stdout(pk.get(key)) or (pk.get(key) or {}).get("stdout")
            if isinstance(pk.get(key), dict)
            else None
        )
        for line in (text or "").splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
    return out


def _libfabric(
    installer: Fact[InstallerInfo], efa: dict[str, Any], distro: dict[str, str]
) -> Fact[str]:
    """The libfabric release, from the most direct source available."""
    fi = parse_fi_info_version(_stdout(efa.get("fi_info_version")))
    if fi.known:
        return fi
    if installer.known:
        v = libfabric_from_installer(installer.value)  # type: ignore[arg-type]
        if v:
            return Fact.of(v, f"efa_installed_packages lists libfabric-aws {v}")
    for name in ("libfabric-aws", "libfabric1-aws", "libfabric1", "libfabric"):
        if name in distro:
            return Fact.of(distro[name], f"distribution package {name} {distro[name]}")
    return Fact.unknown("no fi_info, no EFA installer manifest and no libfabric package record")


def _process(p: Any) -> Process | None:
    if not isinstance(p, dict) or not isinstance(p.get("pid"), int):
        return None
    env = p.get("env")
    env = (
        {str(k): v for k, v in env.items() if isinstance(v, str)} if isinstance(env, dict) else None
    )
    return Process(
        pid=p["pid"],
        exists=bool(p.get("exists")),
        mapped=tuple(str(x) for x in p["mapped"]) if isinstance(p.get("mapped"), list) else None,
        env=effective_env(env, {}, origin=f"pid {p['pid']}") if isinstance(env, dict) else None,
        cmdline=tuple(str(x) for x in _l(p.get("cmdline"))),
    )


def build_node_facts(doc: dict[str, Any]) -> NodeFacts:
    system = _d(_sec(doc, "system"))
    gpus = _d(_sec(doc, "gpus"))
    efa = _d(_sec(doc, "efa"))
    libs = _d(_sec(doc, "libraries"))
    plug = _d(_sec(doc, "plugins"))
    smi = gpus.get("query") if isinstance(gpus, dict) else None
    if isinstance(gpus, dict) and not gpus.get("nvidia_smi_path"):
        gpu_fact: Fact[list[Gpu]] = Fact.unknown("nvidia-smi not found on this host")
    elif isinstance(smi, dict) and smi.get("timeout"):
        gpu_fact = Fact.unknown("nvidia-smi timed out (wedged GPU or driver?)")
    elif isinstance(smi, dict) and smi.get("rc") not in (0, None):
        gpu_fact = Fact.unknown(
            f"nvidia-smi failed (rc={smi.get('rc')}): {(smi.get('stderr') or smi.get('stdout') or '').strip()[:160]}"
        )
    else:
        gpu_fact = parse_nvidia_smi_csv(_stdout(smi))
    driver = parse_proc_driver_version(gpus.get("proc_version") if isinstance(gpus, dict) else None)
    if not driver.known and gpu_fact.known and gpu_fact.value:
        driver = Fact.of(gpu_fact.value[0].driver, "nvidia-smi driver_version")
    pmo_eff, pmo_conf = parse_peer_mapping_override(
        gpus.get("proc_params") if isinstance(gpus, dict) else None,
        gpus.get("modprobe_d") if isinstance(gpus, dict) else None,
    )
    installer = parse_installed_packages(
        efa.get("installed_packages") if isinstance(efa, dict) else None
    )
    distro = _distro_packages(efa if isinstance(efa, dict) else {})
    rdma_sec = _sec(doc, "rdma")
    confs = {str(k): v for k, v in _d(_sec(doc, "nccl_conf")).items() if isinstance(v, str)}
    raw_env = {str(k): v for k, v in _d(_sec(doc, "env")).items() if isinstance(v, str)}
    env = effective_env(raw_env, confs)
    failed = {
        k: v["probe_error"]
        for k, v in _d(doc.get("sections")).items()
        if isinstance(v, dict) and "probe_error" in v
    }
    entries = list(libs.get("libs")) if isinstance(libs.get("libs"), list) else []
    mapped = _sec(doc, "mapped_libs")
    if isinstance(mapped, list):
        entries += mapped
    return NodeFacts(
        hostname=str(system.get("hostname", "?")),
        kernel=str(system.get("kernel", "?")),
        os_name=_os_name(system.get("os_release")),
        instance_type=_instance_type(system)
        if isinstance(system, dict)
        else Fact.unknown("no system section"),
        cpu_count=system.get("cpu_count") if isinstance(system.get("cpu_count"), int) else None,
        in_container=bool(system.get("in_container")),
        euid=system.get("euid") if isinstance(system.get("euid"), int) else None,
        memlock=_memlock(system),
        gpus=gpu_fact,
        driver=driver,
        peer_mapping_effective=pmo_eff,
        peer_mapping_configured=pmo_conf,
        modules=parse_modules(_sec(doc, "modules")),
        dev_gdrdrv=rdma_sec.get("dev_gdrdrv") if isinstance(rdma_sec, dict) else None,
        rdma=parse_rdma_devices(rdma_sec),
        installer=installer,
        libfabric=_libfabric(installer, efa if isinstance(efa, dict) else {}, distro),
        fi_providers=parse_fi_info_providers(
            _stdout(efa.get("fi_info_efa")) if isinstance(efa, dict) else None
        ),
        plugins=plugin_libs(plug.get("libs") if isinstance(plug, dict) else None),
        plugin_requests={k: v for k, v in _d(plug.get("requested")).items() if isinstance(v, dict)},
        ldconfig=parse_ldconfig(_stdout(libs.get("ldconfig")) if isinstance(libs, dict) else None),
        nccl=nccl_libs(entries),
        gdrapi=other_libs(entries, "gdrapi"),
        nvshmem=other_libs(entries, "nvshmem"),
        fabric_libs=other_libs(entries, "fabric"),
        python=python_envs(_sec(doc, "python")),
        deepep_sources=_d(_sec(doc, "deepep_src")),
        env=env,
        processes=[p for p in (_process(x) for x in _l(_sec(doc, "processes"))) if p],
        distro_packages=distro,
        probe_elapsed_s=doc.get("elapsed_s")
        if isinstance(doc.get("elapsed_s"), (int, float))
        else None,
        probe_errors={str(k): str(v) for k, v in _d(doc.get("errors")).items()},
        sections_failed=failed,
    )


def installer_plugin(node: NodeFacts) -> tuple[str, str] | None:
    return plugin_from_installer(node.installer.value) if node.installer.known else None  # type: ignore[arg-type]


def libfabric_version(node: NodeFacts):  # -> Version | None
    return parse_version(node.libfabric.value) if node.libfabric.known else None
