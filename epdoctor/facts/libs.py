"""Shared-library facts: ldconfig -p, nm -D, and the probe's ELF scan of NCCL/plugin files."""

from __future__ import annotations

import re
from dataclasses import dataclass

from packaging.version import Version

from epdoctor.facts.versions import parse_version
from epdoctor.model import Fact

# The real format is `name (libc6,x86-64) => path` (a hwcap list may follow the
# ABI tag). A seed's Dockerfile assert matched `name => path`, which ldconfig
# never prints, and so failed every build: parse the real shape.
_LDCONFIG = re.compile(r"^\s*(\S+)\s+\(([^)]*)\)(?:\s*,\s*OS ABI:[^=]*)?\s*=>\s*(\S.*?)\s*$")


def parse_ldconfig(text: str | None) -> Fact[dict[str, list[str]]]:
    """soname -> paths in cache order (the first is what the loader picks)."""
    if text is None:
        return Fact.unknown("ldconfig -p did not run")
    cache: dict[str, list[str]] = {}
    for line in text.splitlines():
        m = _LDCONFIG.match(line)
        if m:
            cache.setdefault(m.group(1), []).append(m.group(3))
    if not cache:
        return Fact.unknown("ldconfig -p printed no cache entries")
    return Fact.of(cache)


_NM = re.compile(r"^(?:[0-9a-fA-F]+)?\s+([A-Za-z])\s+(\S+)$")


def parse_nm_dynamic(text: str | None) -> Fact[set[str]]:
    """Defined dynamic symbols from `nm -D` (types T/W/D/B/R/V/i; U is imported)."""
    if text is None:
        return Fact.unknown("nm -D did not run")
    syms: set[str] = set()
    for line in text.splitlines():
        m = _NM.match(line.rstrip())
        if m and m.group(1) not in "Uuw":
            syms.add(m.group(2).split("@")[0])
    if not syms:
        return Fact.unknown("nm -D listed no defined symbols")
    return Fact.of(syms)


_NCCL_VER = re.compile(r"NCCL version (\d+\.\d+\.\d+)(?:\+cuda(\d+\.\d+))?")
_SONAME_VER = re.compile(r"libnccl\.so\.(\d+\.\d+\.\d+)$")


def nccl_version_from(version_string: str | None, path: str | None = None) -> Fact[Version]:
    """NCCL's own `NCCL version 2.28.9+cuda13.0` string, else a libnccl.so.2.X.Y file name."""
    if version_string:
        m = _NCCL_VER.search(version_string)
        if m:
            return Fact.of(Version(m.group(1)), version_string)
    if path:
        m = _SONAME_VER.search(path)
        if m:
            return Fact.of(Version(m.group(1)), f"file name {path}")
    return Fact.unknown("no NCCL version string in the library")


@dataclass(frozen=True)
class NcclLib:
    path: str
    realpath: str
    version: Fact[Version]
    has_lsa: Fact[bool]  # exports ncclGetLsaDevicePointer (first in 2.29.2)
    aliases: tuple[str, ...] = ()

    def label(self) -> str:
        v = str(self.version.value) if self.version.known else "?"
        return f"{self.realpath} (NCCL {v})"


@dataclass(frozen=True)
class PluginLib:
    path: str
    realpath: str
    symbols: Fact[tuple[str, ...]]
    gdrcopy_compiled_in: Fact[bool]
    version: str | None = None
    aliases: tuple[str, ...] = ()

    def exports(self, prefix: str) -> list[str]:
        return [s for s in (self.symbols.value or ()) if s.startswith(prefix)]


@dataclass(frozen=True)
class OtherLib:
    kind: str
    path: str
    realpath: str
    version: Version | None


def _group(entries: list[dict[str, object]]) -> list[tuple[dict[str, object], list[str]]]:
    """Fold alias entries (symlinks to the same file) into their described entry."""
    described: dict[str, tuple[dict[str, object], list[str]]] = {}
    order: list[str] = []
    for e in entries:
        real = str(e.get("realpath") or e.get("path"))
        if "alias_of" in e:
            continue
        described[real] = (e, [])
        order.append(real)
    for e in entries:
        if "alias_of" in e and str(e["alias_of"]) in described:
            described[str(e["alias_of"])][1].append(str(e["path"]))
    return [described[r] for r in order]


def nccl_libs(entries: object) -> list[NcclLib]:
    out = []
    for e, aliases in _group([x for x in _dicts(entries) if x.get("kind") == "nccl"]):
        if "error" in e:
            continue
        syms = e.get("symbols")
        if isinstance(syms, list):
            has_lsa: Fact[bool] = Fact.of("ncclGetLsaDevicePointer" in syms)
        else:
            has_lsa = Fact.unknown(str(e.get("elf_error") or "symbols not read"))
        out.append(
            NcclLib(
                path=str(e["path"]),
                realpath=str(e.get("realpath") or e["path"]),
                version=nccl_version_from(
                    _s(e.get("version")), str(e.get("realpath") or e["path"])
                ),
                has_lsa=has_lsa,
                aliases=tuple(aliases),
            )
        )
    return out


def plugin_libs(entries: object) -> list[PluginLib]:
    out = []
    for e, aliases in _group(_dicts(entries)):
        if "error" in e:
            continue
        syms = e.get("symbols")
        symbols: Fact[tuple[str, ...]] = (
            Fact.of(tuple(str(s) for s in syms))
            if isinstance(syms, list)
            else Fact.unknown(str(e.get("elf_error") or "symbols not read"))
        )
        if "gdrcopy_missing" in e:
            gdr: Fact[bool] = Fact.of(
                e["gdrcopy_missing"] is None,
                "binary contains 'GDRCopy support not available at compile time'"
                if e["gdrcopy_missing"]
                else "no 'GDRCopy support not available at compile time' string in the binary",
            )
        else:
            gdr = Fact.unknown("plugin binary not scanned")
        out.append(
            PluginLib(
                path=str(e["path"]),
                realpath=str(e.get("realpath") or e["path"]),
                symbols=symbols,
                gdrcopy_compiled_in=gdr,
                version=_s(e.get("version")),
                aliases=tuple(aliases),
            )
        )
    return out


def other_libs(entries: object, kind: str) -> list[OtherLib]:
    out = []
    for e, _ in _group([x for x in _dicts(entries) if x.get("kind") == kind]):
        real = str(e.get("realpath") or e.get("path"))
        m = re.search(r"\.so\.(\d+(?:\.\d+)+)$", real)
        ver = parse_version(_s(e.get("version"))) or (parse_version(m.group(1)) if m else None)
        out.append(OtherLib(kind, str(e.get("path")), real, ver))
    return out


def _dicts(entries: object) -> list[dict[str, object]]:
    return (
        [e for e in entries if isinstance(e, dict) and e.get("path")]
        if isinstance(entries, list)
        else []
    )


def _s(v: object) -> str | None:
    return v if isinstance(v, str) else None
