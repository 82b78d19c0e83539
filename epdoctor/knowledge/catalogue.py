"""Load and validate the trap catalogue.

Each trap lives in ``traps/<CODE>.toml``. Codes are stable: a renamed trap
keeps its code, a removed one is listed in ``redirects.toml`` and its code is
never reused (ruff's rule-redirect discipline).
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from dataclasses import dataclass, field
from importlib import resources

from epdoctor.model import Status

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib


class CatalogueError(ValueError):
    pass


@dataclass(frozen=True)
class Layer:
    letter: str  # the code prefix (H101, T201, ...)
    name: str
    title: str  # the heading of its docs page
    order: int  # reports and docs list layers in this order


def _read_toml(name: str) -> dict[str, object]:
    return tomllib.loads((resources.files("epdoctor.knowledge") / name).read_text(encoding="utf-8"))


@functools.cache
def layers() -> tuple[Layer, ...]:
    """The stack's layers from layers.toml, in their order."""
    rows = _read_toml("layers.toml")["layer"]
    out = sorted((Layer(**row) for row in rows), key=lambda la: la.order)  # type: ignore[union-attr,arg-type]
    if len({la.letter for la in out}) != len(out) or len({la.order for la in out}) != len(out):
        raise CatalogueError("layers.toml: a letter or an order is used twice")
    return tuple(out)


# Layer letter -> layer name, in layer order. The letter is the code prefix (H101, T201, ...).
LAYERS: dict[str, str] = {la.letter: la.name for la in layers()}
CODE_RE = re.compile(r"^[A-Z][0-9]{3}$")
DETECTOR_RE = re.compile(r"^epdoctor(?:\.\w+)+:\w+(?:\.\w+)?$")  # module:function or Class.method
# The status a finding of the trap takes unless its detector says otherwise (lint reports at
# it; drift and the log incidents read it). Users see it as the trap's "severity".
DEFAULT_STATUSES = (Status.FAIL, Status.WARN, Status.UNKNOWN, Status.INFO)
SEVERITIES = tuple(s.value for s in DEFAULT_STATUSES)  # the values `traps --severity` takes
REQUIRED = ("title", "default_status", "symptom", "why", "detect")


@dataclass(frozen=True)
class LogEvent:
    """A log signature event (facts/logs/signatures.py EVENTS) and the finding it raises."""

    event: str
    code: str
    status: Status
    title: str


@dataclass(frozen=True)
class Trap:
    code: str
    name: str
    title: str
    layer: str
    default_status: Status
    symptom: str
    why: str
    detect: str
    fix_safe: tuple[str, ...] = ()
    fix_change: tuple[str, ...] = ()
    fix: str = ""
    versions: str = ""
    transports: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    references: tuple[str, ...] = ()  # public URLs: the pull request, issue, doc or source
    status: str = "stable"
    detectors: tuple[str, ...] = ()  # "module:function" of every detector that raises it
    log_events: tuple[LogEvent, ...] = ()  # [[log]]: the log events that raise it
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def explain_only(self) -> bool:
        return self.detect.strip().lower().startswith("explain-only")

    def fix_text(self) -> str:
        """One-paragraph fix for reports: the prose, then what to change."""
        parts = [self.fix] if self.fix else []
        if self.fix_change:
            parts.append("Change: " + "; ".join(self.fix_change))
        return " ".join(parts).strip()

    def to_json(self) -> dict[str, object]:
        return {
            "code": self.code,
            "name": self.name,
            "title": self.title,
            "layer": self.layer,
            "severity": self.default_status.value,
            "symptom": self.symptom,
            "why": self.why,
            "fix": self.fix,
            "fix_safe": list(self.fix_safe),
            "fix_change": list(self.fix_change),
            "detect": self.detect,
            "versions": self.versions,
            "transports": list(self.transports),
            "engines": list(self.engines),
            "references": list(self.references),
            "status": self.status,
        }


def _tup(data: dict[str, object], key: str) -> tuple[str, ...]:
    value = data.get(key, ())
    if isinstance(value, str):
        return (value,)
    return tuple(str(v) for v in value)  # type: ignore[union-attr]


def parse_trap(code: str, data: dict[str, object]) -> Trap:
    if not CODE_RE.match(code):
        raise CatalogueError(f"{code}: a code is one capital letter and three digits")
    layer = LAYERS.get(code[0])
    if layer is None:
        raise CatalogueError(f"{code}: unknown layer letter {code[0]!r}")
    missing = [k for k in REQUIRED if not str(data.get(k, "")).strip()]
    if missing:
        raise CatalogueError(f"{code}: missing {', '.join(missing)}")
    if str(data["default_status"]) not in SEVERITIES:
        raise CatalogueError(f"{code}: default_status must be one of {SEVERITIES}")
    default_status = Status(str(data["default_status"]))
    detectors = _tup(data, "detectors")
    bad = [d for d in detectors if not DETECTOR_RE.match(d)]
    if bad:
        raise CatalogueError(f"{code}: a detector is named module:function, not {bad[0]!r}")
    fix = data.get("fix", {})
    if isinstance(fix, str):
        fix = {"text": fix}
    if not isinstance(fix, dict):
        raise CatalogueError(f"{code}: fix must be a table")
    known = set(REQUIRED) | {
        "name",
        "fix",
        "versions",
        "transports",
        "engines",
        "references",
        "status",
        "detectors",
        "log",
    }
    return Trap(
        code=code,
        name=str(data.get("name", code.lower())),
        title=str(data["title"]),
        layer=layer,
        default_status=default_status,
        symptom=str(data["symptom"]).strip(),
        why=str(data["why"]).strip(),
        detect=str(data["detect"]).strip(),
        fix=str(fix.get("text", "")).strip(),
        fix_safe=_tup(fix, "safe"),
        fix_change=_tup(fix, "change"),
        versions=str(data.get("versions", "")).strip(),
        transports=_tup(data, "transports"),
        engines=_tup(data, "engines"),
        references=_tup(data, "references"),
        status=str(data.get("status", "stable")),
        detectors=detectors,
        log_events=_log_events(code, data.get("log", [])),
        extra={k: v for k, v in data.items() if k not in known},
    )


def _log_events(code: str, rows: object) -> tuple[LogEvent, ...]:
    if not isinstance(rows, list):
        raise CatalogueError(f"{code}: log is an array of tables ([[log]])")
    out = []
    for row in rows:
        if not isinstance(row, dict) or set(row) != {"event", "status", "title"}:
            raise CatalogueError(f"{code}: a [[log]] entry has event, status and title")
        if row["status"] not in [s.value for s in Status]:
            raise CatalogueError(f"{code}: [[log]] status {row['status']!r} is not a status")
        out.append(LogEvent(str(row["event"]), code, Status(row["status"]), str(row["title"])))
    return tuple(out)


_LOCK = threading.Lock()


def _load() -> dict[str, Trap]:
    # Many threads (a fleet fan-out) may ask at once: parse the catalogue once.
    with _LOCK:
        return _load_unlocked()


@functools.cache
def _load_unlocked() -> dict[str, Trap]:
    traps: dict[str, Trap] = {}
    folder = resources.files("epdoctor.knowledge") / "traps"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".toml"):
            continue
        code = entry.name[: -len(".toml")]
        try:
            data = tomllib.loads(entry.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise CatalogueError(f"{entry.name}: {exc}") from exc
        traps[code] = parse_trap(code, data)
    return traps


@functools.cache
def _redirects() -> dict[str, str]:
    path = resources.files("epdoctor.knowledge") / "redirects.toml"
    if not path.is_file():
        return {}
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    return {str(k): str(v) for k, v in data.get("redirects", {}).items()}


def all_traps() -> list[Trap]:
    return list(_load().values())


def log_events() -> list[LogEvent]:
    """Every trap's [[log]] entries: the table of log event -> (code, status, title)."""
    return [e for t in all_traps() for e in t.log_events]


def resolve(code: str) -> str:
    code = code.strip().upper()
    return _redirects().get(code, code)


def get(code: str) -> Trap:
    """The trap for a code (following redirects); KeyError when it does not exist."""
    return _load()[resolve(code)]
