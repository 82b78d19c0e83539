"""Lenient version parsing for the spellings this stack uses.

``3.3.0g`` (efa.ko), ``2.6.0amzn1.0`` (libfabric-aws), ``2.28.9+cuda13.0``
(NCCL), ``1.21.1-1`` (deb), ``2.5`` (gdrdrv), ``git-9c44d34`` (unknown).
"""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

_LEAD = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def parse_version(text: str | None) -> Version | None:
    """The leading X.Y[.Z] of a version string, or None when there is none."""
    if not text:
        return None
    m = _LEAD.search(str(text))
    if not m:
        return None
    try:
        return Version(".".join(g for g in m.groups() if g is not None))
    except InvalidVersion:
        return None


def vstr(v: Version | None) -> str:
    return str(v) if v is not None else "?"


def at_least(v: Version | None, floor: str) -> bool | None:
    """True/False against a floor, None when the version is unknown."""
    if v is None:
        return None
    return v >= Version(floor)
