"""Where a probe runs: local host, SSH host, Kubernetes pod, or a saved bundle.

All targets share one interface (base.Target): run the node probe once and
return its raw output, plus read logs. Transport clients are imported only by
the module that needs them. ``open(spec)`` turns a TargetSpec (epdoctor.requests)
into targets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from epdoctor.requests import TargetSpec
    from epdoctor.targets.base import Target


def open(spec: TargetSpec) -> list[Target]:
    """The targets a TargetSpec names (this host when it names none)."""
    from epdoctor.targets.selection import open_targets

    return open_targets(spec)
