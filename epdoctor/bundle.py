"""Write an offline bundle: what the probe saw, redacted, replayable with --bundle."""

from __future__ import annotations

import io
import json
import tarfile
import time
from typing import TYPE_CHECKING, Any

from epdoctor import __version__
from epdoctor.redact import redact_argv, redact_obj, redact_text
from epdoctor.safeio import write_file
from epdoctor.targets.replay import FORMAT, MANIFEST

if TYPE_CHECKING:
    from epdoctor.diagnose import Diagnosis


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: float) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(mtime)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def write_bundle(
    path: str,
    diagnoses: list[Diagnosis],
    argv: list[str],
    logs: dict[str, bytes] | None = None,
    force: bool = False,
) -> int:
    """Write the bundle; returns how many targets it holds. Logs go to the first target.

    Nothing is written when no target was probed; otherwise the file appears whole (see
    epdoctor.safeio.write_file: never through a symbolic link, an existing one only with
    ``force``)."""
    now = time.time()
    entries: list[dict[str, Any]] = []
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i, d in enumerate(diagnoses):
            if d.probe_doc is None:
                continue
            folder = f"targets/{i}"
            doc = redact_obj(d.probe_doc)
            _add(tar, f"{folder}/probe.json", json.dumps(doc, sort_keys=True).encode(), now)
            if logs and not entries:
                seen: set[str] = set()
                for name, data in logs.items():
                    shown = redact_text(name)  # a log's name is its path: it may hold a token
                    while shown in seen:
                        shown = "_" + shown
                    seen.add(shown)
                    _add(
                        tar,
                        f"{folder}/logs/{shown}",
                        redact_text(data.decode("utf-8", "replace")).encode(),
                        now,
                    )
            info = d.result.target
            entries.append(
                {
                    "name": info.name,
                    "kind": info.kind,
                    "dir": folder,
                    "detail": redact_obj(info.detail),
                }
            )
        manifest = {
            "format": FORMAT,
            "epdoctor_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now)),
            "argv": redact_argv(list(argv)),
            "targets": entries,
        }
        _add(tar, MANIFEST, json.dumps(manifest, indent=2).encode(), now)
    if entries:
        write_file(path, buf.getvalue(), force=force)
    return len(entries)
