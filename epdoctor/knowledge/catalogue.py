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


# What a [[log]] rule says of the line it matches: the cause (the line names why: an errno text,
# a missing library, a limit), or a symptom (what a cause led to: an NCCL error code, a crash,
# a failed child). A symptom never ranks above a cause of the same incident.
LOG_ROLES = ("cause", "symptom")
# How a rule's lines become findings: "incident" (grouped per rank and time with the lines
# around them, the earliest cause named: checks/log_incidents.py), "rule" (one finding per rule
# over every rank: checks/logs.event_findings) or "judged" (checks/logs.py decides the code from
# the rest of the log, e.g. a segfault with DeepEP-V2 in the process is D101).
LOG_PER = ("incident", "rule", "judged")
LOG_LEVELS = ("error", "warn")
LOG_FIELDS = {
    "id", "order", "role", "subsystem", "title", "patterns", "status", "per", "level",
    "sources", "candidates",
}  # fmt: skip
RULE_ID_RE = re.compile(r"^[a-z][a-z0-9_]*\Z")


@dataclass(frozen=True)
class LogRule:
    """One [[log]] entry of a trap: the upstream wordings of one mechanism and what they mean.

    The log analyzer (facts/logs/triage.py) reads every rule in ``order``; the first whose
    pattern matches a line files the line under it.
    """

    id: str
    code: str
    order: int
    role: str  # LOG_ROLES
    subsystem: str  # nccl, ofi, libfabric, gdrcopy, nvshmem, deepep, cuda, torch, vllm, ...
    title: str  # the mechanism in a few words: a finding's title starts with it
    patterns: tuple[str, ...]  # Python regexes, searched in the NCCL message or the whole line
    status: Status
    per: str = "incident"  # LOG_PER
    level: str = "error"  # LOG_LEVELS: how bad the line is where no other line says more
    sources: tuple[str, ...] = ()  # where each wording lives upstream (repo@tag:file:line)
    candidates: tuple[str, ...] = ()  # other traps the same line may mean (the differential)

    @property
    def event(self) -> str:  # the name the event table and the facts file the line under
        return self.id

    @property
    def file(self) -> str:
        return f"epdoctor/knowledge/traps/{self.code}.toml"

    def to_json(self) -> dict[str, object]:
        return {
            "id": self.id,
            "role": self.role,
            "subsystem": self.subsystem,
            "title": self.title,
            "status": self.status.value,
            "per": self.per,
            "patterns": list(self.patterns),
            "sources": list(self.sources),
            "candidates": list(self.candidates),
            "file": self.file,
        }


@dataclass(frozen=True)
class Discriminator:
    """How to tell this trap apart from the others one log line may also mean."""

    command: str  # one read-only command
    says: str  # what its output means for this trap
    log: tuple[str, ...] = ()  # other lines in the same log that make this trap more likely
    node: str = ""  # a node fact that confirms ("efa") or rules out ("!efa") this trap


NODE_PREDICATES = (
    "efa", "mlx5", "gdrdrv_module", "dev_gdrdrv", "memlock_unlimited", "in_container", "root",
)  # fmt: skip


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
    log_rules: tuple[LogRule, ...] = ()  # [[log]]: the log rules that raise it
    discriminator: Discriminator | None = None  # [discriminator]: how to tell it apart
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
            "log_rules": [r.to_json() for r in self.log_rules],
            "discriminator": (
                None
                if self.discriminator is None
                else {
                    "command": self.discriminator.command,
                    "says": self.discriminator.says,
                    "log": list(self.discriminator.log),
                    "node": self.discriminator.node,
                }
            ),
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
        "discriminator",
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
        log_rules=_log_rules(code, data.get("log", []), default_status),
        discriminator=_discriminator(code, data.get("discriminator")),
        extra={k: v for k, v in data.items() if k not in known},
    )


def _log_rules(code: str, rows: object, default: Status) -> tuple[LogRule, ...]:
    if not isinstance(rows, list):
        raise CatalogueError(f"{code}: log is an array of tables ([[log]])")
    out = []
    for row in rows:
        if not isinstance(row, dict):
            raise CatalogueError(f"{code}: [[log]] entries are tables")
        where = f"{code}: [[log]] {row.get('id', '?')}"
        missing = [
            k for k in ("id", "order", "role", "subsystem", "title", "patterns") if k not in row
        ]
        if missing:
            raise CatalogueError(f"{where}: missing {', '.join(missing)}")
        unknown = set(row) - LOG_FIELDS
        if unknown:
            raise CatalogueError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        if not RULE_ID_RE.match(str(row["id"])):
            raise CatalogueError(f"{where}: an id is snake_case")
        if row["role"] not in LOG_ROLES:
            raise CatalogueError(f"{where}: role is one of {LOG_ROLES}")
        per = row.get("per", "incident")
        if per not in LOG_PER:
            raise CatalogueError(f"{where}: per is one of {LOG_PER}")
        level = row.get("level", "error")
        if level not in LOG_LEVELS:
            raise CatalogueError(f"{where}: level is one of {LOG_LEVELS}")
        status = row.get("status", default.value)
        if status not in [s.value for s in Status]:
            raise CatalogueError(f"{where}: status {status!r} is not a status")
        patterns = _tup(row, "patterns")
        if not patterns:
            raise CatalogueError(f"{where}: patterns is empty")
        # the patterns compile where they are used (facts/logs/triage.py) and every one is
        # compiled by tests/test_catalogue.py: compiling them here too would double the start
        if not isinstance(row["order"], int):
            raise CatalogueError(f"{where}: order is an integer")
        out.append(
            LogRule(
                id=str(row["id"]),
                code=code,
                order=row["order"],
                role=str(row["role"]),
                subsystem=str(row["subsystem"]),
                title=str(row["title"]),
                patterns=patterns,
                status=Status(status),
                per=str(per),
                level=str(level),
                sources=_tup(row, "sources"),
                candidates=_tup(row, "candidates"),
            )
        )
    return tuple(out)


def _discriminator(code: str, data: object) -> Discriminator | None:
    if data is None:
        return None
    if not isinstance(data, dict) or not str(data.get("command", "")).strip():
        raise CatalogueError(f"{code}: [discriminator] is a table with a command")
    node = str(data.get("node", ""))
    if node and node.lstrip("!") not in NODE_PREDICATES:
        raise CatalogueError(f"{code}: [discriminator] node is one of {NODE_PREDICATES}")
    return Discriminator(
        command=str(data["command"]).strip(),
        says=str(data.get("says", "")).strip(),
        log=_tup(data, "log"),
        node=node,
    )


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


def log_rules() -> list[LogRule]:
    """Every trap's [[log]] rules, in the order the log analyzer reads them."""
    rules = sorted((r for t in all_traps() for r in t.log_rules), key=lambda r: (r.order, r.id))
    seen: dict[str, str] = {}
    for r in rules:
        if r.id in seen:
            raise CatalogueError(f"[[log]] id {r.id!r} is used by {seen[r.id]} and {r.code}")
        seen[r.id] = r.code
    return rules


def log_events() -> list[LogRule]:
    """The rules judged one finding per rule (``per = "rule"``): the event table."""
    return [r for r in log_rules() if r.per == "rule"]


def resolve(code: str) -> str:
    code = code.strip().upper()
    return _redirects().get(code, code)


def get(code: str) -> Trap:
    """The trap for a code (following redirects); KeyError when it does not exist."""
    return _load()[resolve(code)]
