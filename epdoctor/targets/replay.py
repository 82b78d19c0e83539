"""An offline bundle (written by `epdoctor collect`), replayed as targets.

Layout of a bundle (a .tar.gz):
    manifest.json                  {"format": "epdoctor-bundle/1", "created": ..., "targets": [...]}
    targets/<n>/probe.json         the node probe's output, already redacted
    targets/<n>/logs/<name>        optional log files captured with the probe
Each manifest target entry: {"name", "kind", "dir": "targets/<n>", "detail": {...}}.

The node probe's own output (`python3 probes/node_probe.py > node.json` on a node that cannot
install epdoctor) replays too: one target, named after the host it ran on.
"""

from __future__ import annotations

import gzip
import tarfile
import zlib
from collections.abc import Iterator

from epdoctor.model import TargetInfo
from epdoctor.safeio import check_source, loads_json, plain, read_capped
from epdoctor.targets.base import ProbeOptions, ProbeOutput, Target, TargetError

FORMAT = "epdoctor-bundle/1"
MANIFEST = "manifest.json"


MAX_MEMBER = 64 << 20  # a probe document or a captured log: far below this
MAX_BUNDLE = 256 << 20  # every member together
MAX_MEMBERS = 10_000
MAX_DEPTH = 64  # JSON nesting; probe documents are a few levels deep


def open_bundle(path: str) -> tuple[dict[str, object], dict[str, bytes]]:
    """Read a whole bundle into memory (bundles are small: probe JSON and capped logs).

    Every member is read with a bounded read (a sparse member or a gzip bomb stops at
    MAX_MEMBER); the manifest and each probe.json must be JSON objects of sane depth."""
    check_source(path, "bundle")
    files = _read_members(path)
    if MANIFEST not in files:
        raise TargetError(f"{path} is not an epdoctor bundle (no {MANIFEST})")
    manifest = loads_json(files[MANIFEST], f"{path}: {MANIFEST}", MAX_DEPTH)
    if not isinstance(manifest, dict):
        raise TargetError(f"{path}: {MANIFEST} is a JSON {_type(manifest)}, not an object")
    if manifest.get("format") != FORMAT:
        raise TargetError(f"{path}: unsupported bundle format {manifest.get('format')!r}")
    entries = manifest.get("targets")
    if entries is not None and not isinstance(entries, list):
        raise TargetError(f"{path}: {MANIFEST} targets is a JSON {_type(entries)}, not a list")
    for i, e in enumerate(entries or []):
        if not isinstance(e, dict):
            raise TargetError(f"{path}: {MANIFEST} target {i} is a JSON {_type(e)}, not an object")
        for key, want in (("name", str), ("kind", str), ("dir", str), ("detail", dict)):
            if e.get(key) is not None and not isinstance(e[key], want):
                raise TargetError(
                    f"{path}: {MANIFEST} target {i} {key} is a JSON {_type(e[key])}, "
                    f"not {'an object' if want is dict else 'a string'}"
                )
        probe = files.get(f"{e.get('dir', '')}/probe.json")
        if probe is not None:
            where = f"{path}: {e.get('dir')}/probe.json"
            doc = loads_json(probe, where, MAX_DEPTH)
            if not isinstance(doc, dict):
                raise TargetError(f"{where} is a JSON {_type(doc)}, not an object")
    return manifest, files


def _what_is_wrong(path: str) -> str:
    """Why tarfile refused a file: compressed but cut or corrupt, or no tar archive at all."""
    with open(path, "rb") as f:
        head = f.read(6)
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as g:
                first = g.read(1024)
        except (OSError, EOFError, zlib.error):
            return "it is truncated or corrupt (gzip)"
        if len(first) < 512 or first[257:262] != b"ustar":
            return "not a tar archive (a gzip file holding something else)"
        return "it is truncated or corrupt"
    if head[:3] == b"BZh" or head == b"\xfd7zXZ\x00":
        return "it is truncated or corrupt"
    return "not a tar archive or a gzip file (an epdoctor bundle is a .tar.gz)"


def _type(v: object) -> str:
    return {dict: "object", list: "list", str: "string", bool: "boolean"}.get(
        type(v), "null" if v is None else "number"
    )


def _read_members(path: str) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, "r:*") as tar:
            for n, member in enumerate(tar):
                if n >= MAX_MEMBERS:
                    raise TargetError(f"bundle {path} has more than {MAX_MEMBERS} members")
                # Never follow links or absolute/parent paths out of a bundle.
                if (
                    not member.isfile()
                    or member.name.startswith(("/", ".."))
                    or "/../" in member.name
                ):
                    continue
                name = member.name.removeprefix("./")
                if member.size > MAX_MEMBER:
                    raise TargetError(
                        f"bundle {path}: {name} is larger than {MAX_MEMBER >> 20} MiB "
                        f"({member.size} bytes); not read"
                    )
                fh = tar.extractfile(member)
                if fh is None:
                    continue
                data = read_capped(fh, MAX_MEMBER, f"bundle {path}: {name}")  # type: ignore[arg-type]
                total += len(data)
                if total > MAX_BUNDLE:
                    raise TargetError(f"bundle {path} unpacks larger than {MAX_BUNDLE >> 20} MiB")
                files[name] = data
    except (EOFError, zlib.error, gzip.BadGzipFile) as exc:
        raise TargetError(f"cannot read bundle {path}: it is truncated or corrupt ({exc})") from exc
    except tarfile.ReadError as exc:
        raise TargetError(f"cannot read bundle {path}: {_what_is_wrong(path)}") from exc
    except (OSError, tarfile.TarError) as exc:
        raise TargetError(f"cannot read bundle {path}: {exc}") from exc
    return files


class BundleTarget(Target):
    def __init__(self, bundle_path: str, entry: dict[str, object], files: dict[str, bytes]):
        self.entry = entry
        self.files = files
        # a bundle is foreign: its names and details lose control sequences here, once, so no
        # front end (CLI, JSON, the terminal app) can pass an OSC 0/8/52 on to a terminal
        detail = {plain(k): plain(v) for k, v in dict(entry.get("detail") or {}).items()}
        detail["bundle"] = bundle_path
        self.info = TargetInfo(
            name=plain(entry.get("name", "?"))[:253],
            kind=f"bundle:{entry.get('kind', 'local')}",
            detail=detail,
        )
        self.dir = str(entry.get("dir", ""))

    def run_probe(self, options: ProbeOptions) -> ProbeOutput:
        raw = self.files.get(f"{self.dir}/probe.json")
        if raw is None:
            raise TargetError(f"bundle has no probe output for {self.info.name}")
        return ProbeOutput(stdout=raw.decode("utf-8", "replace"), round_trips=0)

    def log_names(self) -> list[str]:
        prefix = f"{self.dir}/logs/"
        return sorted(k[len(prefix) :] for k in self.files if k.startswith(prefix))

    def read_logs(self, name: str = "", **_: object) -> Iterator[bytes]:  # type: ignore[override]
        names = [name] if name else self.log_names()
        for n in names:
            data = self.files.get(f"{self.dir}/logs/{n}")
            if data is None:
                raise TargetError(f"bundle has no log {n!r} for {self.info.name}")
            yield data


PROBE_NAME = "epdoctor-node-probe"


def _probe_document(path: str) -> tuple[dict[str, object], dict[str, bytes]] | None:
    """A file of probe JSON as one-target bundle contents; None when it is not JSON."""
    check_source(path, "bundle")
    try:
        with open(path, "rb") as fh:
            if fh.read(4096).lstrip()[:1] != b"{":  # a tar or gzip archive: read as a bundle
                return None
            fh.seek(0)
            data = read_capped(fh, MAX_MEMBER, f"bundle {path}")
    except OSError as exc:
        raise TargetError(f"cannot read bundle {path}: {exc}") from exc
    doc = loads_json(data, path, MAX_DEPTH)
    if not isinstance(doc, dict) or doc.get("probe") != PROBE_NAME:
        raise TargetError(
            f"{path}: JSON, but neither node probe output (probes/node_probe.py) "
            "nor an epdoctor bundle (a .tar.gz from epdoctor collect)"
        )
    sections = doc.get("sections")
    system = sections.get("system") if isinstance(sections, dict) else None
    host = system.get("hostname") if isinstance(system, dict) else None
    entry = {
        "name": str(host or path),
        "kind": "local",
        "dir": "targets/0",
        "detail": {"probe output": path},
    }
    return {"format": FORMAT, "targets": [entry]}, {"targets/0/probe.json": data}


def bundle_targets(path: str) -> list[BundleTarget]:
    probe = _probe_document(path)
    manifest, files = probe if probe is not None else open_bundle(path)
    entries = manifest.get("targets") or []
    if not entries:
        raise TargetError(f"{path}: bundle lists no targets")
    return [BundleTarget(path, dict(e), files) for e in entries]
