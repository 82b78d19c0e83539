"""Turn command-line flags into targets.

Target kinds beyond the local host and bundles plug in as provider modules:
each exposes ``add_arguments(parser)`` (light: no transport import) and
``from_args(args) -> list[Target] | None`` (None when its flags were not used).
A provider that is not installed is skipped.
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType

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


def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--bundle",
        metavar="FILE",
        action="append",
        default=[],
        help="replay a saved bundle (from `epdoctor collect`) or the node probe's JSON "
        "(python3 probes/node_probe.py > node.json) instead of probing live",
    )
    for mod in _providers():
        mod.add_arguments(parser)


def targets_from_args(args: argparse.Namespace) -> list[Target]:
    from epdoctor.targets.local import LocalTarget
    from epdoctor.targets.replay import bundle_targets

    targets: list[Target] = []
    for path in getattr(args, "bundle", []) or []:
        targets.extend(bundle_targets(path))
    for mod in _providers():
        got = mod.from_args(args)
        if got:
            targets.extend(got)
    return targets or [LocalTarget()]
