"""The data of a plan: what the operator asked for and what the plan answers.

Plain frozen dataclasses with to_json(); no terminal library, so the
questionary prompts, the Textual wizard and the launcher all share them.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import Any

from epdoctor.model import EpdoctorError, Finding, Status

ENGINES = ("vllm", "dynamo", "tensorrt-llm", "sglang")
TRANSPORTS = ("gin-proxy", "efa-gda", "nvshmem")
MODES = ("eager", "graphs")
TARGETS = ("kubernetes", "bare")


class PlanInputError(EpdoctorError):
    """The operator's input cannot be planned (exit code 2)."""


class Level(str, enum.Enum):
    """The plan's name for a reason's status: how much it weighs on the verdict."""

    BLOCKER = "blocker"  # FAIL: the combination cannot work as asked
    CAVEAT = "caveat"  # WARN: works with a known limit or an unproven step
    UNKNOWN = "unknown"  # UNKNOWN: the plan could not check something: never a pass
    INFO = "info"  # INFO: a precondition or note that does not change the verdict

    @property
    def rank(self) -> int:
        return {"info": 0, "unknown": 1, "caveat": 1, "blocker": 2}[self.value]

    @property
    def status(self) -> Status:
        return _STATUS[self]

    @classmethod
    def of(cls, status: Status) -> Level:
        return next(level for level, s in _STATUS.items() if s is status)


_STATUS = {
    Level.BLOCKER: Status.FAIL,
    Level.CAVEAT: Status.WARN,
    Level.UNKNOWN: Status.UNKNOWN,
    Level.INFO: Status.INFO,
}


class Verdict(str, enum.Enum):
    SUPPORTED = "supported"
    CAVEATS = "supported with caveats"
    NOT_SUPPORTED = "not supported"


DEFAULT_MODEL = "Qwen/Qwen3-30B-A3B-FP8"  # the vLLM, Dynamo and SGLang recipes' model


@dataclass(frozen=True)
class PlanInput:
    """Everything the plan needs; every field is also a flag of `epdoctor plan`."""

    engine: str = "vllm"
    transport: str | None = None  # None: the engine's default_transport (engines.toml)
    instance: str = "p5en.48xlarge"
    nodes: int = 2
    gpus_per_node: int | None = None  # None: every GPU of the instance
    # "": the engine's recipe model (engines.toml default_model), else DEFAULT_MODEL
    model: str = ""
    mode: str | None = None  # None: the engine's default (eager where it has the choice)
    target: str = "kubernetes"
    namespace: str = "default"
    hosts: tuple[str, ...] = ()  # bare nodes: leader first
    num_experts: int | None = None  # overrides config.json
    nccl: str | None = None  # None: the transport's default pin
    vllm_pin: str | None = None  # None: the engine's seed pin
    image: str | None = None  # None: the engine's placeholder with an immutable tag
    name: str | None = None  # StatefulSet / script prefix
    hf_cache: str | None = None  # where to look for a cached config.json
    hub: bool = False  # may ask the Hugging Face Hub for config.json
    cache_host_path: str | None = None  # model cache on the node (instance store); else emptyDir

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d["hosts"] = list(self.hosts)
        return d


@dataclass(frozen=True)
class Reason(Finding):
    """One reason behind the verdict: a Finding, read in the plan's words (level, message)."""

    @property
    def level(self) -> Level:
        return Level.of(self.status)

    @property
    def message(self) -> str:
        return self.title

    def to_json(self) -> dict[str, str]:  # type: ignore[override]
        return {"code": self.code, "level": self.level.value, "message": self.message}


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    reader: str
    code: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {
            "name": self.name,
            "value": self.value,
            "reader": self.reader,
            "code": self.code,
            "why": self.why,
        }


@dataclass(frozen=True)
class Forbidden:
    name: str
    code: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "code": self.code, "why": self.why}


@dataclass(frozen=True)
class Pin:
    component: str
    value: str
    kind: str  # "pin" or "floor"
    code: str
    why: str

    def to_json(self) -> dict[str, str]:
        return {
            "component": self.component,
            "value": self.value,
            "kind": self.kind,
            "code": self.code,
            "why": self.why,
        }


@dataclass(frozen=True)
class Experts:
    """The EP-divisibility preflight: routed experts and where they came from."""

    count: int | None
    source: str  # "flag", a config.json path, or why it is unknown
    key: str = ""  # the config key that held the count
    dense: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"count": self.count, "source": self.source, "key": self.key, "dense": self.dense}


@dataclass(frozen=True)
class Commands:
    """What the launcher runs, exactly: per role, then the gates."""

    leader: str
    worker: str
    kernel_test: str  # the test, its log and the banner check, for a shell
    smoke: str
    kernel_run: str = ""  # the test alone, printing to its stdout: what `epdoctor run` follows

    def to_json(self) -> dict[str, str]:
        return {
            "leader": self.leader,
            "worker": self.worker,
            "kernel_test": self.kernel_test,
            "kernel_run": self.kernel_run,
            "smoke": self.smoke,
        }


@dataclass(frozen=True)
class Plan:
    input: PlanInput
    instance: str  # canonical instance type
    gpus_per_node: int
    efa_per_node: int
    world: int  # GPUs across all nodes
    serve_ep: int  # the EP size the served model runs at
    mode: str  # eager | graphs | n/a
    nccl: str  # "" where the transport does not use NCCL GIN
    gin_type: int | None
    vllm_pin: str
    image: str
    name: str
    verdict: Verdict
    reasons: tuple[Reason, ...]
    experts: Experts
    env: tuple[EnvVar, ...]
    forbidden: tuple[Forbidden, ...]
    pins: tuple[Pin, ...]
    commands: Commands
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def supported(self) -> bool:
        return self.verdict is not Verdict.NOT_SUPPORTED

    def env_dict(self) -> dict[str, str]:
        return {e.name: e.value for e in self.env}

    def codes(self) -> list[str]:
        return [r.code for r in self.reasons]

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict.value,
            "reasons": [r.to_json() for r in self.reasons],
            "input": self.input.to_json(),
            "instance": self.instance,
            "nodes": self.input.nodes,
            "gpus_per_node": self.gpus_per_node,
            "efa_per_node": self.efa_per_node,
            "world": self.world,
            "serve_ep": self.serve_ep,
            "mode": self.mode,
            "nccl": self.nccl,
            "gin_type": self.gin_type,
            "vllm_pin": self.vllm_pin,
            "image": self.image,
            "name": self.name,
            "experts": self.experts.to_json(),
            "env": [e.to_json() for e in self.env],
            "must_not_set": [f.to_json() for f in self.forbidden],
            "pins": [p.to_json() for p in self.pins],
            "commands": self.commands.to_json(),
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), indent=2, sort_keys=False) + "\n"

    def render(self, directory: str, force: bool = False) -> list[str]:
        """Write plan.json, the env file, scripts and (for Kubernetes) manifests."""
        from epdoctor.plan.render import render

        return render(self, directory, force)
