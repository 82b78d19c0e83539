"""The node probe's source text, read as package data (probes/ ships as epdoctor.probes)."""

from __future__ import annotations

import functools
from importlib import resources

PROBE = "node_probe.py"


@functools.cache
def node_probe_source() -> bytes:
    return (resources.files("epdoctor.probes") / PROBE).read_bytes()
