"""The stack as data: instances, engines, transports, pins, env, vLLM commits.

The TOML files in stack/ are the registry; this module only loads and types
them, so adding an instance or bumping a pin is a data edit. The plan, the
checks and the log analyzer read the same tables (one instance table, one
place for each version floor).
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib


@dataclass(frozen=True)
class Instance:
    type: str
    aliases: tuple[str, ...]
    gpu: str
    gpus: int
    sm: str
    efa: int  # EFA interfaces (the vpc.amazonaws.com/efa request)
    efa_comp_counters: bool  # hardware completion counters: EFA-GDA possible
    vcpu: int
    memory_gib: int
    cpu_request: str
    memory_request: str


@dataclass(frozen=True)
class Engine:
    key: str
    label: str
    ep_kernel: str
    transports: tuple[str, ...]
    default_transport: str  # what the plan uses when no transport is asked for
    modes: tuple[str, ...]
    default_mode: str
    uses_deepep: bool
    serve_ep: str
    measured: tuple[tuple[str, str], ...]
    recipe: str  # the reference recipe it was measured on: a public pull request URL
    image: str
    vllm_pin: str = ""
    vllm_graphs_pin: str = ""
    dynamo_version: str = ""
    nccl_hold: str = ""
    nccl_floor: str = ""  # the lowest NCCL its EP backend loads (TensorRT-LLM NcclEP)
    nccl_ep_prebuilt: str = ""  # the prebuilt libnccl_ep release ...
    nccl_abi_change: str = ""  # ... and the NCCL whose device API it no longer matches
    default_model: str = ""  # the model its recipe serves, where the global default cannot run


@dataclass(frozen=True)
class Transport:
    key: str
    label: str
    gin: bool
    gin_type: int
    nccl_min: str
    default_nccl: str
    needs_comp_counters: bool
    nccl_base: str = ""  # the NCCL upstream's getting-started guide builds on
    libfabric_min: str = ""
    efa_driver_min: str = ""
    legacy_gin_type: int | None = None
    legacy_note: str = ""


@dataclass(frozen=True)
class VllmCommit:
    sha: str
    version: str
    has_52632: bool
    served: bool
    note: str


def _data(name: str) -> dict[str, Any]:
    text = (resources.files("epdoctor.knowledge") / "stack" / name).read_text(encoding="utf-8")
    return tomllib.loads(text)


@functools.cache
def instances() -> dict[str, Instance]:
    out = {}
    for key, d in _data("instances.toml")["instances"].items():
        out[key] = Instance(type=key, aliases=tuple(d.get("aliases", ())), **_drop(d, "aliases"))
    return out


@functools.cache
def engines() -> dict[str, Engine]:
    out = {}
    for key, d in _data("engines.toml")["engines"].items():
        d = dict(d)
        d["transports"] = tuple(d["transports"])
        d["modes"] = tuple(d["modes"])
        d["measured"] = tuple(tuple(m) for m in d["measured"])
        if d["default_transport"] not in d["transports"]:  # a data error, caught by the tests
            raise ValueError(f"engines.toml: {key}'s default_transport is not one it runs on")
        out[key] = Engine(key=key, **d)
    return out


def engine(key: str) -> Engine:
    return engines()[key]


def transport(key: str) -> Transport:
    return transports()[key]


@functools.cache
def _floors() -> dict[str, str]:
    return {k: str(v) for k, v in _data("floors.toml")["floors"].items()}


def floor(name: str) -> Version:
    """A component's version floor from floors.toml (KeyError for a name it lacks)."""
    return Version(_floors()[name])


@functools.cache
def gin_type_since() -> dict[str, str]:
    """NCCL_GIN_TYPE value -> the first NCCL release that has it."""
    return {str(k): str(v) for k, v in _data("transports.toml")["gin_types"].items()}


def default_transport(engine: str) -> str:
    """The transport planned for `engine` when none is asked for: one default per engine,
    shared by `plan --transport`, `plan --no-input`, the questionary prompts and the wizard."""
    return engines()[engine].default_transport


@functools.cache
def unsupported() -> dict[str, str]:
    return dict(_data("engines.toml").get("unsupported", {}))


@functools.cache
def transports() -> dict[str, Transport]:
    return {k: Transport(key=k, **d) for k, d in _data("transports.toml")["transports"].items()}


@functools.cache
def vllm_commits() -> tuple[VllmCommit, ...]:
    return tuple(VllmCommit(**c) for c in _data("vllm.toml")["commits"])


@functools.cache
def _image() -> dict[str, Any]:
    return dict(_data("image.toml")["image"])


def image_pin(name: str) -> str:
    """An exact pin of the plan's image (image.toml), KeyError for a name it lacks."""
    return str(_image()[name])


def vllm_full_sha(pin: str) -> str:
    """The full commit of a known vLLM pin ("" when the plan does not know it)."""
    pin = pin.strip().lower()
    for short, full in _image()["vllm_sha"].items():
        if full.startswith(pin) or pin.startswith(short):
            return str(full)
    return ""


@functools.cache
def pins() -> tuple[dict[str, Any], ...]:
    return tuple(_data("pins.toml")["pins"])


@functools.cache
def env_rules() -> dict[str, tuple[dict[str, Any], ...]]:
    d = _data("env.toml")
    return {
        "set": tuple(d.get("set", ())),
        "unset": tuple(d.get("unset", ())),
        "refused": tuple(d.get("refused", ())),
    }


_FAMILY = re.compile(r"^(?:ml\.)?([a-z0-9]+(?:-[a-z0-9]+)?)\.")


def instance_spec(instance_type: str | None) -> Instance | None:
    """The instance of a type as a node or a pod reports it ('p5en.48xlarge', SageMaker's
    'ml.p5en.48xlarge'), by its family; None when the family is not in the table."""
    if not instance_type:
        return None
    m = _FAMILY.match(instance_type.strip())
    if m is None:
        return None
    return next((i for i in instances().values() if m.group(1) in i.aliases), None)


def resolve_instance(name: str) -> Instance | None:
    """An instance by type or alias, case-insensitive; None when unknown."""
    wanted = name.strip().lower()
    for inst in instances().values():
        if wanted == inst.type or wanted in inst.aliases:
            return inst
    return None


def matches(selector: list[str] | tuple[str, ...], value: str) -> bool:
    return "*" in selector or value in selector


def _drop(d: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in keys}
