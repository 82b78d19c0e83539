"""The guided tour as data: steps loaded from tour.toml, shared by the TUI and docs/tour.md
(written by `python -m epdoctor.reports.docs`).

A step names its layer's traps (explicit codes plus every trap of the listed
layer letters) and which node facts and environment variables belong to it,
so a front end can show "this layer, its traps, and what this node says".
"""

from __future__ import annotations

import functools
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

from epdoctor.knowledge.catalogue import Trap, all_traps, get

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib


@dataclass(frozen=True)
class TourStep:
    id: str
    title: str
    text: str
    facts: tuple[str, ...] = ()  # keys of NodeFacts.summary()
    env: tuple[str, ...] = ()  # names looked up in the summary's "env"
    codes: tuple[str, ...] = ()  # explicit trap codes
    layers: tuple[str, ...] = ()  # layer letters whose traps all belong here

    def traps(self) -> list[Trap]:
        """The step's traps: explicit codes first, then the listed layers' others."""
        seen: dict[str, Trap] = {}
        for code in self.codes:
            seen.setdefault(code, get(code))
        for t in all_traps():
            if t.code[:1] in self.layers:
                seen.setdefault(t.code, t)
        return list(seen.values())

    def live_facts(self, summary: dict[str, Any]) -> list[tuple[str, Any]]:
        """(name, value) of this step's facts and env vars on one node; None = absent."""
        rows: list[tuple[str, Any]] = [(k, summary.get(k)) for k in self.facts]
        env = summary.get("env") or {}
        rows += [(f"${name}", env.get(name)) for name in self.env]
        return rows


@dataclass(frozen=True)
class Tour:
    title: str
    intro: str
    steps: tuple[TourStep, ...]

    def step(self, step_id: str) -> TourStep:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(step_id)


def _tup(data: dict[str, Any], key: str) -> tuple[str, ...]:
    return tuple(str(v) for v in data.get(key, ()))


@functools.cache
def load() -> Tour:
    text = (resources.files("epdoctor.knowledge") / "tour.toml").read_text(encoding="utf-8")
    data = tomllib.loads(text)
    steps = tuple(
        TourStep(
            id=str(s["id"]),
            title=str(s["title"]),
            text=" ".join(str(s["text"]).split()),
            facts=_tup(s, "facts"),
            env=_tup(s, "env"),
            codes=_tup(s, "traps"),
            layers=_tup(s, "layers"),
        )
        for s in data.get("step", [])
    )
    return Tour(str(data["title"]), " ".join(str(data["intro"]).split()), steps)
