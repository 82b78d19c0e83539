"""Pure detectors: facts in, coded findings out. See base.py for the conventions.

Check modules register themselves on import; load_all() imports every module
in this package once, so a new check module needs no registration elsewhere.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil


@functools.cache
def load_all() -> None:
    for mod in pkgutil.iter_modules(__path__):
        if mod.name not in ("base", "registry"):
            importlib.import_module(f"{__name__}.{mod.name}")
