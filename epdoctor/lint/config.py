"""lint's settings file, as ruff finds its own: ``.epdoctor.toml`` (a ``[lint]`` table) or
``pyproject.toml`` (a ``[tool.epdoctor.lint]`` table) in the folder linted or above it.

The nearest folder that holds either file wins (``.epdoctor.toml`` first); the search stops at
a repository's top (a ``.git`` entry). Keys, all optional::

    [tool.epdoctor.lint]
    select = ["B4", "D101"]     # only these codes or prefixes
    ignore = ["K209"]           # never these codes or prefixes
    exclude = ["vendor/**", "*.example"]   # files not linted (listed with the reason)
    fail-on = "fail"            # fail | warn | unknown | info

Flags add to ``ignore`` and ``exclude`` and replace ``select`` and ``fail-on``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import tomllib

from epdoctor.model import EpdoctorError
from epdoctor.safeio import plain

LEVELS = ("fail", "warn", "unknown", "info")
KEYS = {"select", "ignore", "exclude", "fail-on"}


@dataclass(frozen=True)
class LintConfig:
    path: str | None = None  # the file read, None when none was found
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    fail_on: str | None = None
    unknown_keys: tuple[str, ...] = field(default=())


def find(start: Path) -> tuple[Path, tuple[str, ...]] | None:
    """(file, the table's path in it) of the nearest settings file at or above `start`."""
    here = start if start.is_dir() else start.parent
    for d in (here, *here.parents):
        dot = d / ".epdoctor.toml"
        if dot.is_file():
            return dot, ("lint",)
        py = d / "pyproject.toml"
        if py.is_file() and _table(_read(py), ("tool", "epdoctor", "lint")) is not None:
            return py, ("tool", "epdoctor", "lint")
        if (d / ".git").exists():
            return None
    return None


def load(start: Path) -> LintConfig:
    found = find(start)
    if found is None:
        return LintConfig()
    path, where = found
    table = _table(_read(path), where) or {}
    name = f"{path} [{'.'.join(where)}]"

    def strings(key: str) -> tuple[str, ...]:
        v = table.get(key, [])
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise EpdoctorError(f"{plain(name)}: {key} must be a list of strings")
        return tuple(x.strip() for x in v if x.strip())

    fail_on = table.get("fail-on")
    if fail_on is not None and fail_on not in LEVELS:
        raise EpdoctorError(f"{plain(name)}: fail-on must be one of {', '.join(LEVELS)}")
    unknown = tuple(sorted(set(table) - KEYS))
    if unknown:
        raise EpdoctorError(
            f"{plain(name)}: unknown key(s) {', '.join(map(plain, unknown))}; "
            f"known: {', '.join(sorted(KEYS))}"
        )
    return LintConfig(str(path), strings("select"), strings("ignore"), strings("exclude"), fail_on)


def _read(path: Path) -> dict:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise EpdoctorError(f"cannot read {plain(str(path))}: {plain(str(exc))}") from exc


def _table(doc: dict, where: tuple[str, ...]) -> dict | None:
    for key in where:
        doc = doc.get(key) if isinstance(doc, dict) else None  # type: ignore[assignment]
        if doc is None:
            return None
    if not isinstance(doc, dict):
        return None
    return doc
