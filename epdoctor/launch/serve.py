"""Serve: start leader and workers, follow every log, wait for readiness.

The leader and each worker run as one command per node (``bash -c`` of the
plan's or the operator's command) in their own process group with a log file.
The run ends ready (readiness.py), or early: a process exited, the startup
budget ran out, or a log watcher reported a fatal finding (the log analyzer,
where installed, explains segfaults at ElasticBuffer init, `NCCL GIN is
unavailable`, CUDA launch failures and HF 429 storms the moment they appear).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from epdoctor.checks.registry import detector
from epdoctor.launch.gates import Gate
from epdoctor.launch.launcher import Group, Node, ProcSpec
from epdoctor.launch.readiness import Waiter
from epdoctor.launch.streams import Follower, LineSplitter
from epdoctor.model import Finding, Status

# Log findings after which the engine will not come up: serve stops at once and says why
# (the log analyzer's codes: DeepEP `NCCL GIN is unavailable`, vLLM without ElasticBuffer, CUDA
# illegal memory access / launch failure, segmentation fault, torchrun's failed child, GDAKI
# context creation). Others (a Socket fallback, one HF 429) are shown as they appear.
FATAL_CODES = frozenset({"D201", "E201", "E202", "E203", "E204", "T204"})


class LogWatch(Protocol):
    """What serve needs from a log analyzer: bytes in, findings out (per stream)."""

    def feed(self, data: bytes) -> list[Finding]: ...


@dataclass
class ServeConfig:
    nodes: list[Node]  # leader first
    leader_cmd: str
    worker_cmd: str = ""  # run on every node after the first; "" for one node
    engine: str = "vllm"
    url: str = "http://127.0.0.1:8000"
    run_dir: str = "/tmp/epdoctor-serve"
    env: dict[str, str] = field(default_factory=dict)
    budget_s: float = 1800.0
    leader_addr: str = "127.0.0.1"


def build_specs(cfg: ServeConfig) -> list[ProcSpec]:
    specs = []
    for i, _node in enumerate(cfg.nodes):
        cmd = cfg.leader_cmd if i == 0 else cfg.worker_cmd
        if not cmd:
            continue
        env = {**cfg.env, "NODE_RANK": str(i), "LEADER_ADDR": cfg.leader_addr}
        name = "leader" if i == 0 else f"worker{i}"
        specs.append(ProcSpec(name, ("bash", "-c", cmd), f"{cfg.run_dir}/{name}.log", env))
    return specs


def describe(cfg: ServeConfig) -> list[str]:
    return [node.describe(spec) for node, spec in zip(cfg.nodes, build_specs(cfg), strict=False)]


OnLine = Callable[[str, str], None]


class ServeRun:
    def __init__(
        self,
        cfg: ServeConfig,
        on_line: OnLine | None = None,
        watch_factory: Callable[[str], LogWatch] | None = None,
        on_finding: Callable[[str, Finding], None] | None = None,
    ) -> None:
        self.cfg = cfg
        self.on_line = on_line or (lambda pane, line: None)
        self.group = Group()
        self.follower: Follower | None = None
        self.waiter = Waiter(cfg.url, cfg.engine, cfg.budget_s)
        self._split: dict[str, LineSplitter] = {}
        self._watch: dict[str, LogWatch] = {}
        self._factory = watch_factory
        self.on_finding = on_finding or (lambda source, f: None)
        self.findings: list[Finding] = []
        self.fatal: Finding | None = None
        self.exited: dict[str, int] = {}

    def start(self) -> None:
        for node, spec in zip(self.cfg.nodes, build_specs(self.cfg), strict=False):
            self.group.add(node.start(spec))
        self.follower = Follower(self.group.procs)
        self.waiter.t0 = time.monotonic()

    def step(self) -> str | None:
        """None while starting; else why the wait ended: ready, exited, fatal, budget."""
        assert self.follower is not None
        self._read()
        if self.fatal:
            return "fatal"
        for p in self.group.procs:
            rc = p.poll()
            if rc is not None:
                self.exited[p.name] = rc
        if self.exited:
            return "exited"
        probe = self.waiter.step()
        if probe and probe.ready:
            return "ready"
        if self.waiter.expired:
            return "budget"
        return None

    def _read(self) -> None:
        assert self.follower is not None
        for chunk in self.follower.poll():
            sp = self._split.setdefault(chunk.source, LineSplitter())
            for line in sp.feed(chunk.data):
                self.on_line(chunk.source, line)
            if self._factory:
                watch = self._watch.setdefault(chunk.source, self._factory(chunk.source))
                for f in watch.feed(chunk.data):
                    self.findings.append(f)
                    self.on_finding(chunk.source, f)
                    if f.code in FATAL_CODES and f.status is Status.FAIL and self.fatal is None:
                        self.fatal = f

    def follow(self) -> None:
        """After ready: keep reading (the command loops on this until Ctrl-C)."""
        self._read()

    @detector("E702", domain="launch")
    def gate(self, why: str) -> Gate:
        if why == "ready":
            return self.waiter.gate()
        if why == "fatal" and self.fatal:
            return Gate(
                "serve",
                Status.FAIL,
                f"stopped on {self.fatal.code}: {self.fatal.title}",
                self.fatal.evidence,
                self.fatal.code,
            )
        if why == "exited":
            ev = tuple(f"{n} exited {rc}" for n, rc in self.exited.items())
            return Gate(
                "serve", Status.FAIL, "an engine process exited before it was ready", ev, "E702"
            )
        return self.waiter.gate()

    def stop(self) -> list[str]:
        return self.group.stop(grace_s=10.0)

    def summary(self) -> dict[str, Any]:
        return {
            "logs": {p.name: f"{p.node.name}:{p.spec.log_path}" for p in self.group.procs},
            "pids": {p.name: p.pid for p in self.group.procs},
            "findings": [f.to_json() for f in self.findings],
        }
