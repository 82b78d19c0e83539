"""The env contract, the knobs that must stay unset, and the pin table for one
engine x transport, selected from data/env.toml and data/pins.toml."""

from __future__ import annotations

from epdoctor.plan import knowledge
from epdoctor.plan.model import EnvVar, Forbidden, Pin


def env_contract(engine: str, transport: str, gin_type: int | None) -> tuple[EnvVar, ...]:
    out = []
    for d in knowledge.env_rules()["set"]:
        if knowledge.matches(d["engines"], engine) and knowledge.matches(
            d["transports"], transport
        ):
            value = str(d["value"]).format(gin_type="" if gin_type is None else gin_type)
            out.append(EnvVar(d["name"], value, d["reader"], d["code"], d["why"]))
    return tuple(out)


def must_not_set(transport: str, env: tuple[EnvVar, ...]) -> tuple[Forbidden, ...]:
    names = {e.name for e in env}
    return tuple(
        Forbidden(d["name"], d["code"], d["why"])
        for d in knowledge.env_rules()["unset"]
        if knowledge.matches(d["transports"], transport) and d["name"] not in names
    )


def pin_table(engine: str, transport: str, nccl: str, vllm_pin: str) -> tuple[Pin, ...]:
    out = []
    for d in knowledge.pins():
        applies = d["applies"]
        if not (
            knowledge.matches(applies["engines"], engine)
            and knowledge.matches(applies["transports"], transport)
        ):
            continue
        value = str(d["value"]).format(nccl=nccl, vllm_pin=vllm_pin)
        out.append(Pin(d["component"], value, d["kind"], d["code"], d["why"]))
    return tuple(out)


def contract_violations(env: dict[str, str], forbidden: tuple[Forbidden, ...]) -> list[str]:
    """Names the contract itself sets although it forbids them (a data error)."""
    return [f.name for f in forbidden if f.name in env]
