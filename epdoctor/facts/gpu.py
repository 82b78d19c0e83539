"""GPU and NVIDIA driver facts: nvidia-smi CSV, /proc/driver/nvidia, RegistryDwords."""

from __future__ import annotations

import re
from dataclasses import dataclass

from epdoctor.model import Fact


@dataclass(frozen=True)
class Gpu:
    index: int
    name: str
    driver: str
    compute_cap: str
    bus_id: str = ""
    memory: str = ""


_FIELDS = ("index", "name", "driver_version", "compute_cap", "pci.bus_id", "memory.total")


def parse_nvidia_smi_csv(text: str | None) -> Fact[list[Gpu]]:
    """Parse `nvidia-smi --query-gpu=index,name,driver_version,compute_cap,... --format=csv`.

    Accepts output with or without the header line. Rows that do not have the
    expected shape make the whole fact unknown rather than half-true.
    """
    if text is None:
        return Fact.unknown("nvidia-smi did not run")
    rows = [ln.strip() for ln in text.splitlines() if ln.strip()]
    if rows and rows[0].lower().startswith(("index", "name")):
        header = [h.strip().split(" [")[0] for h in rows[0].split(",")]
        rows = rows[1:]
    else:
        header = list(_FIELDS)
    if not rows:
        return Fact.unknown("nvidia-smi listed no GPU")
    gpus: list[Gpu] = []
    for i, row in enumerate(rows):
        cells = [c.strip() for c in row.split(",")]
        if len(cells) != len(header):
            return Fact.unknown(f"unexpected nvidia-smi row: {row[:120]}")
        rec = dict(zip(header, cells, strict=True))
        name = rec.get("name", "")
        driver = rec.get("driver_version", "")
        if not name or not re.match(r"^\d+\.\d+", driver):
            return Fact.unknown(f"unexpected nvidia-smi row: {row[:120]}")
        try:
            index = int(rec.get("index", i))
        except ValueError:
            return Fact.unknown(f"unexpected GPU index in: {row[:120]}")
        gpus.append(
            Gpu(
                index=index,
                name=name,
                driver=driver,
                compute_cap=rec.get("compute_cap", ""),
                bus_id=rec.get("pci.bus_id", ""),
                memory=rec.get("memory.total", ""),
            )
        )
    return Fact.of(gpus, *rows[:8])


_NVRM = re.compile(r"NVRM version:.*?\s(\d+\.\d+(?:\.\d+)?)\s")


def parse_proc_driver_version(text: str | None) -> Fact[str]:
    """Driver version from /proc/driver/nvidia/version (the kernel module actually loaded)."""
    if not text:
        return Fact.unknown("/proc/driver/nvidia/version absent (NVIDIA kernel module not loaded)")
    m = _NVRM.search(text + " ")
    if not m:
        return Fact.unknown("unrecognised /proc/driver/nvidia/version")
    return Fact.of(m.group(1), text.splitlines()[0].strip())


_PMO = re.compile(r"PeerMappingOverride\s*=\s*(0x)?([0-9a-fA-F]+)")


def parse_peer_mapping_override(
    params: str | None, modprobe: dict[str, str] | None
) -> tuple[Fact[bool], Fact[bool]]:
    """(effective now, configured for next load).

    /proc/driver/nvidia/params shows what the loaded driver runs with;
    /etc/modprobe.d only takes effect after a driver reload or reboot, so the
    two are reported apart.
    """
    if params is None:
        effective: Fact[bool] = Fact.unknown("/proc/driver/nvidia/params not readable")
    else:
        line = next((ln for ln in params.splitlines() if ln.startswith("RegistryDwords")), None)
        if line is None:
            effective = Fact.unknown("RegistryDwords not listed in /proc/driver/nvidia/params")
        else:
            m = _PMO.search(line)
            effective = Fact.of(bool(m and int(m.group(2), 16) != 0), line.strip())
    configured: Fact[bool]
    if modprobe is None:
        configured = Fact.unknown("/etc/modprobe.d not readable")
    else:
        hits = [
            f"{path}: {ln.strip()}"
            for path, text in sorted(modprobe.items())
            for ln in text.splitlines()
            if not ln.lstrip().startswith("#") and "nvidia" in ln and _PMO.search(ln)
        ]
        on = any(int(_PMO.search(h).group(2), 16) != 0 for h in hits)  # type: ignore[union-attr]
        configured = (
            Fact.of(on, *hits)
            if hits
            else Fact.of(False, "no PeerMappingOverride in /etc/modprobe.d")
        )
    return effective, configured
