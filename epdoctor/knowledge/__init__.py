"""The trap catalogue: one TOML file per trap code under traps/, loaded as data."""

from epdoctor.knowledge.catalogue import LAYERS, Trap, all_traps, get, resolve

__all__ = ["LAYERS", "Trap", "all_traps", "get", "resolve"]
