"""Bundles for the TUI tests, composed with the real node probe over fake node trees.

    python tests/tui_fixtures.py    # rewrites tests/fixtures/tui/three-nodes.tar.gz

Three p5en.48xlarge trees from tests/nodefs.py (p5en_node: the seeds' CPU-proxy recipe,
values from shared/reference/efa-node-samples.md and upstream-facts.md): p5en-a and p5en-c
healthy; p5en-b with the seed's GDRCopy trap (gdrdrv 2.4 under libgdrapi 2.5) and no EFA
hw_counters. The real probe reads each tree (`--root`), and the bundle is written in the
layout epdoctor/targets/replay.py reads. The committed file keeps snapshots stable (the
probe records the machine's kernel and timing, which a fresh build would change).
"""

from __future__ import annotations

import io
import json
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from nodefs import p5en_node

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "tui" / "three-nodes.tar.gz"


def probe_docs(work: Path) -> dict[str, str]:
    docs = {}
    for name in ("p5en-a", "p5en-b", "p5en-c"):
        node = p5en_node(work / name)
        if name == "p5en-b":
            node.gdrdrv("2.4")
            for d in (node.root / "sys/class/infiniband").glob("*/ports/1/hw_counters"):
                shutil.rmtree(d)
        docs[name] = node.probe()
    return docs


def write_bundle(path: Path, docs: dict[str, str]) -> Path:
    entries = []
    with tarfile.open(path, "w:gz") as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mtime = 1764763200  # fixed: the file is committed
            tar.addfile(info, io.BytesIO(data))

        for i, (name, doc) in enumerate(docs.items()):
            add(f"targets/{i}/probe.json", doc.encode())
            entries.append({"name": name, "kind": "ssh", "dir": f"targets/{i}", "detail": {}})
        manifest = {
            "format": "epdoctor-bundle/1",
            "epdoctor_version": "0.1.0",
            "created": "2026-12-03T12:00:00Z",
            "argv": ["tests/tui_fixtures.py"],
            "targets": entries,
        }
        add("manifest.json", json.dumps(manifest, indent=2).encode())
    return path


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        out = write_bundle(FIXTURE, probe_docs(Path(d)), force=True)
    print(out)
