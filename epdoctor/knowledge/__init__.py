"""The trap catalogue: one TOML file per trap code under traps/, loaded as data."""

from epdoctor.knowledge.catalogue import LAYERS, Layer, Trap, all_traps, get, layers, resolve

__all__ = ["LAYERS", "Layer", "Trap", "all_traps", "get", "layers", "resolve"]
