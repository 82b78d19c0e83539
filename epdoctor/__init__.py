"""epdoctor: doctor and bring-up wizard for expert-parallel all-to-all over AWS EFA."""

from __future__ import annotations

import os as _os

__version__ = "0.1.0"

# In a wheel, probes/ and screens/ are installed as epdoctor.probes and
# epdoctor.screens (see pyproject.toml). Run from a source checkout they sit
# beside this package instead; adding the checkout root to the package path
# lets `python -m epdoctor` work there too (e.g. on a GPU node that cannot
# install anything) without installing generic top-level names.
_root = _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__)))
if not _os.path.isdir(_os.path.join(_os.path.dirname(__file__), "probes")) and _os.path.isfile(
    _os.path.join(_root, "probes", "node_probe.py")
):
    __path__.append(_root)  # type: ignore[name-defined]
