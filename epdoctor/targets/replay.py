"""An offline bundle (written by `epdoctor collect`), replayed as targets.

Layout of a bundle (a .tar.gz):
    manifest.json                  {"format": "epdoctor-bundle/1", "created": ..., "targets": [...]}
    targets/<n>/probe.json         the node probe's output, already redacted
    targets/<n>/logs/<name>        optional log files captured with the probe
Each manifest target entry: {"name", "kind", "dir": "targets/<n>", "detail": {...}}.
"""

from __future__ import annotations

import json
import tarfile
from collections.abc import Iterator

from epdoctor.model import TargetInfo
from epdoctor.targets.base import ProbeOptions, ProbeOutput, Target, TargetError

FORMAT = "epdoctor-bundle/1"
MANIFEST = "manifest.json"


def open_bundle(path: str) -> tuple[dict[str, object], dict[str, bytes]]:
    """Read a whole bundle into memory (bundles are small: probe JSON and capped logs)."""
    try:
        with tarfile.open(path, "r:*") as tar:
            files: dict[str, bytes] = {}
            for member in tar.getmembers():
                # Never follow links or absolute/parent paths out of a bundle.
                if (
                    not member.isfile()
                    or member.name.startswith(("/", ".."))
                    or "/../" in member.name
                ):
                    continue
                fh = tar.extractfile(member)
                if fh is not None:
                    files[member.name.removeprefix("./")] = fh.read()
    except (OSError, tarfile.TarError) as exc:
        raise TargetError(f"cannot read bundle {path}: {exc}") from exc
    if MANIFEST not in files:
        raise TargetError(f"{path} is not an epdoctor bundle (no {MANIFEST})")
    try:
        manifest = json.loads(files[MANIFEST])
    except ValueError as exc:
        raise TargetError(f"{path}: manifest.json is not JSON: {exc}") from exc
    if manifest.get("format") != FORMAT:
        raise TargetError(f"{path}: unsupported bundle format {manifest.get('format')!r}")
    return manifest, files


class BundleTarget(Target):
    def __init__(self, bundle_path: str, entry: dict[str, object], files: dict[str, bytes]):
        self.entry = entry
        self.files = files
        detail = {str(k): str(v) for k, v in dict(entry.get("detail") or {}).items()}
        detail["bundle"] = bundle_path
        self.info = TargetInfo(
            name=str(entry.get("name", "?")),
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


def bundle_targets(path: str) -> list[BundleTarget]:
    manifest, files = open_bundle(path)
    entries = manifest.get("targets") or []
    if not isinstance(entries, list) or not entries:
        raise TargetError(f"{path}: bundle lists no targets")
    return [BundleTarget(path, dict(e), files) for e in entries]
