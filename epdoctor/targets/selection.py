"""Turn a TargetSpec into targets.

Target kinds beyond the local host and bundles plug in as provider modules: each
exposes ``from_spec(spec) -> list[Target] | None`` (None when the spec names none of
its kind), importing its transport client only then. A provider that is not
installed is skipped. The flags that fill a TargetSpec are in epdoctor.options.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from epdoctor.requests import TargetSpec
from epdoctor.targets.base import Target

PROVIDERS = ("epdoctor.targets.ssh_cli", "epdoctor.targets.kube_cli")


def _providers() -> list[ModuleType]:
    mods = []
    for name in PROVIDERS:
        try:
            mods.append(importlib.import_module(name))
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return mods


def open_targets(spec: TargetSpec) -> list[Target]:
    """The targets the spec names, in its order (bundles, SSH hosts, pods); this host when
    it names none."""
    from epdoctor.targets.local import LocalTarget
    from epdoctor.targets.replay import bundle_targets

    targets: list[Target] = []
    for path in spec.bundle:
        targets.extend(bundle_targets(path))
    for mod in _providers():
        got = mod.from_spec(spec)
        if got:
            targets.extend(got)
    return targets or [LocalTarget()]
