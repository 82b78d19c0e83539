"""A launch ready to confirm: what it runs, where, and the exact commands the operator approves.
The front ends show ``Launch.lines`` and ask; only then does the session run it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from epdoctor.launch.launcher import LocalNode, Node
from epdoctor.launch.nodes import close_nodes, where
from epdoctor.requests import LaunchRequest


@dataclass
class Launch:
    """A launch ready to confirm: what, where, the exact commands, and its configuration."""

    what: str
    lines: list[str]  # the commands, exactly as they will run
    request: LaunchRequest | None = None  # the typed request it was prepared from
    plan: dict[str, Any] = field(default_factory=dict)
    # KernelTestConfig / ServeConfig; for a benchmark its arms [(label, ServeConfig | None)];
    # None for smoke (HTTP only) and for a benchmark of what serves now
    cfg: Any = None
    nodes: list[Node] = field(default_factory=list)

    @property
    def options(self) -> Any:
        return self.request.options if self.request is not None else None

    @property
    def rollout(self) -> bool:
        """A Kubernetes plan, run by epdoctor.launch.kube_rollout."""
        from epdoctor.launch.kube_rollout import RolloutPlan

        return isinstance(self.cfg, RolloutPlan)

    @property
    def where(self) -> str:
        if self.rollout:
            return f"Kubernetes namespace {self.cfg.ns}"
        if self.what in ("smoke", "bench"):
            return str(getattr(self.options, "url", "") or "the leader")
        return where(self.nodes)

    @property
    def remote(self) -> bool:
        return self.rollout or any(not isinstance(n, LocalNode) for n in self.nodes)

    @property
    def isolate(self) -> bool:
        return bool(getattr(self.options, "isolate", False))

    def node_of(self, pane: str) -> str | None:
        """The node a pane's lines come from, when the launch reaches beyond this host."""
        if not self.remote:
            return None
        index: int | None = None
        if pane == "leader":
            index = 0
        elif m := re.match(r"^(rank|node|worker)(\d+)\b", pane):
            n = int(m.group(2))
            per_node = max(1, int(getattr(self.cfg, "gpus", 1) or 1))
            index = n // per_node if m.group(1) == "rank" else n
        if index is None or not 0 <= index < len(self.nodes):
            return None
        return self.nodes[index].name

    def close(self) -> None:
        """Drop the nodes' connections (a launch that was not confirmed, or has ended)."""
        close_nodes(self.nodes)
