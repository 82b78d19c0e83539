"""What epdoctor knows, as data, in one package.

- traps/<CODE>.toml and redirects.toml: the trap catalogue (catalogue.py loads it), each
  trap naming its detectors (detectors.py finds where they live), its log rules (every
  upstream wording the log analyzer reads, with its role and subsystem) and how to tell it apart
  from the traps one log line may also mean;
- layers.toml: the layers of the stack, their titles and their order;
- stack/*.toml: instances, engines, transports, pins, env contract, vLLM commits and version
  floors (stack.py, the typed loader the plan, the checks and the log analyzer share);
- tour.toml: the guided tour (tour.py);
- sections.py: one trap as the sections every front end renders.
"""

from epdoctor.knowledge.catalogue import (
    LAYERS,
    Discriminator,
    Layer,
    LogRule,
    Trap,
    all_traps,
    get,
    layers,
    log_events,
    log_rules,
    resolve,
)

__all__ = [
    "LAYERS",
    "Discriminator",
    "Layer",
    "LogRule",
    "Trap",
    "all_traps",
    "get",
    "layers",
    "log_events",
    "log_rules",
    "resolve",
]
