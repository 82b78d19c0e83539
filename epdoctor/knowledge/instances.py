"""Instance facts the checks and the plan share (one table, one place)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceSpec:
    family: str
    efa_count: int
    gpus: int
    gpu: str
    efa_completion_counters: bool  # EFA-GDA possible (aws-ofi-nccl platform-aws.cpp)


# EFA interface counts: aws ec2 describe-instance-types (p5 32, p5en 16) and
# the deepep-v2-benchmark README (p6-b200 8, p6-b300 16).
INSTANCES: dict[str, InstanceSpec] = {
    "p5": InstanceSpec("p5", 32, 8, "H100", False),
    "p5e": InstanceSpec("p5e", 32, 8, "H200", False),
    "p5en": InstanceSpec("p5en", 16, 8, "H200", True),
    "p6-b200": InstanceSpec("p6-b200", 8, 8, "B200", True),
    "p6-b300": InstanceSpec("p6-b300", 16, 8, "B300", True),
}

_FAMILY = re.compile(r"^(?:ml\.)?([a-z0-9]+(?:-[a-z0-9]+)?)\.")


def instance_spec(instance_type: str | None) -> InstanceSpec | None:
    """Spec for e.g. 'p5en.48xlarge' or SageMaker's 'ml.p5en.48xlarge'; None if not in the table."""
    if not instance_type:
        return None
    m = _FAMILY.match(instance_type.strip())
    return INSTANCES.get(m.group(1)) if m else None
