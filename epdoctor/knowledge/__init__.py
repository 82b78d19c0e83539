"""The trap catalogue: one TOML file per trap code under traps/, loaded as data."""

from epdoctor.knowledge.catalogue import (
    LAYERS,
    Layer,
    LogEvent,
    Trap,
    all_traps,
    get,
    layers,
    log_events,
    resolve,
)

__all__ = [
    "LAYERS",
    "Layer",
    "LogEvent",
    "Trap",
    "all_traps",
    "get",
    "layers",
    "log_events",
    "resolve",
]
