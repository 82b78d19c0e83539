"""Kernel module facts from /sys/module/<name>/version and /proc/modules."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import Version

from epdoctor.facts.versions import parse_version
from epdoctor.model import Fact


@dataclass(frozen=True)
class Module:
    name: str
    loaded: bool
    version: str | None

    @property
    def parsed(self) -> Version | None:
        return parse_version(self.version)


def parse_modules(section: object) -> dict[str, Fact[Module]]:
    """Per module: known loaded/unloaded state, with its version when it reports one."""
    if not isinstance(section, dict):
        return {}
    proc = section.get("proc_modules")
    loaded_names = (
        {ln.split()[0] for ln in proc.splitlines() if ln.split()} if isinstance(proc, str) else None
    )
    out: dict[str, Fact[Module]] = {}
    for name, d in section.items():
        if name == "proc_modules" or not isinstance(d, dict):
            continue
        present = bool(d.get("present"))
        if not present and loaded_names is not None and name in loaded_names:
            present = True
        version = d.get("version") if isinstance(d.get("version"), str) else None
        ev = (
            f"/sys/module/{name}/version = {version}"
            if version
            else (
                f"/sys/module/{name} present (no version file)"
                if present
                else f"/sys/module/{name} absent"
            )
        )
        out[name] = Fact.of(Module(name, present, version), ev)
    return out
