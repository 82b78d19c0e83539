"""Version arithmetic the rules need: NCCL versions and vLLM pins."""

from __future__ import annotations

import re

from packaging.version import InvalidVersion, Version

from epdoctor.knowledge import stack
from epdoctor.knowledge.stack import VllmCommit
from epdoctor.plan.model import PlanInputError


def nccl(text: str) -> Version:
    """NCCL as the wheel (2.30.4) or the tag (v2.30.4-1) spells it."""
    cleaned = text.strip().lstrip("v")
    cleaned = re.sub(r"-\d+$", "", cleaned)  # v2.31.2-1 -> 2.31.2
    cleaned = cleaned.split("+", 1)[0]  # 2.28.9+cuda13.0 -> 2.28.9
    try:
        version = Version(cleaned)
    except InvalidVersion as exc:
        raise PlanInputError(f"--nccl {text!r} is not an NCCL version such as 2.30.4") from exc
    if len(version.release) < 2 or version.release[0] != 2:
        raise PlanInputError(f"--nccl {text!r} is not an NCCL 2.x version")
    return version


def at_least(version: Version, floor: str) -> bool:
    return version >= Version(floor)


SHA = re.compile(r"^[0-9a-f]{7,40}\Z")
GSHA = re.compile(r"\+g([0-9a-f]{7,40})")


def vllm_commit(pin: str) -> VllmCommit | None:
    """The known commit a pin names (a SHA prefix or a wheel version carrying +g<sha>)."""
    pin = pin.strip().lower()
    m = GSHA.search(pin)
    sha = m.group(1) if m else pin if SHA.match(pin) else ""
    for commit in stack.vllm_commits():
        if sha and (sha.startswith(commit.sha) or commit.sha.startswith(sha)):
            return commit
        if pin == commit.version.lower():
            return commit
    return None
