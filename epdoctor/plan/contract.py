"""The env contract, the knobs that must stay unset, and the pin table for one
engine x transport, selected from data/env.toml and data/pins.toml."""

from __future__ import annotations

from epdoctor.knowledge import stack
from epdoctor.plan.model import EnvVar, Forbidden, Pin


def env_contract(engine: str, transport: str, gin_type: int | None) -> tuple[EnvVar, ...]:
    out = []
    for d in stack.env_rules()["set"]:
        if stack.matches(d["engines"], engine) and stack.matches(d["transports"], transport):
            value = str(d["value"]).format(gin_type="" if gin_type is None else gin_type)
            out.append(EnvVar(d["name"], value, d["reader"], d["code"], d["why"]))
    return tuple(out)


def must_not_set(transport: str, env: tuple[EnvVar, ...]) -> tuple[Forbidden, ...]:
    names = {e.name for e in env}
    return tuple(
        Forbidden(d["name"], d["code"], d["why"])
        for d in stack.env_rules()["unset"]
        if stack.matches(d["transports"], transport) and d["name"] not in names
    )


def pin_table(engine: str, transport: str, nccl: str, vllm_pin: str) -> tuple[Pin, ...]:
    out = []
    for d in stack.pins():
        applies = d["applies"]
        if not (
            stack.matches(applies["engines"], engine)
            and stack.matches(applies["transports"], transport)
        ):
            continue
        value = str(d["value"]).format(nccl=nccl, vllm_pin=vllm_pin)
        out.append(Pin(d["component"], value, d["kind"], d["code"], d["why"]))
    return tuple(out)


def contract_violations(env: dict[str, str], forbidden: tuple[Forbidden, ...]) -> list[str]:
    """Names the contract itself sets although it forbids them (a data error)."""
    return [f.name for f in forbidden if f.name in env]


def refused(engine: str) -> list[dict[str, str]]:
    """What a reference recipe's contract sets that the plan does not adopt, with why."""
    return [
        {"name": d["name"], "recipe": d["recipe"], "why": d["why"]}
        for d in stack.env_rules()["refused"]
        if stack.matches(d["engines"], engine)
    ]
