"""Open-world triage: every line that signals trouble is judged, known or not.

``classify(parsed)`` looks at one attributed line (``prefix.Parsed``) and says whether it signals
trouble, and if so which subsystem wrote it, how bad it is, and which mechanism it shows. The
knowledge is data, read once at import: the traps' ``[[log]]`` rules (knowledge/traps/*.toml)
and the lexicon (knowledge/log_lexicon.toml). This module compiles and applies them:

- a *known* mechanism (a ``[[log]]`` rule, first match in ``order``) carries its trap code and a
  role: ``cause`` (the line names why: an errno text, a missing library or symbol, a limit, a
  provider error) or ``symptom`` (what a cause led to: an NCCL error code, a crash, a torchrun
  summary); rules judged per rule or in code (the event table) are read before the benign list;
- a line of no rule still counts when it is trouble by its shape (an NCCL ``WARN``, a libfabric
  ``<warn>``/``<error>``, a UCX ``ERROR``, the last line of a Python traceback) or by the
  lexicon's words, whatever its prefix or format: a fatal word is an unrecognised failure from
  the subsystem that wrote it (E810), a trouble word a warning, a notice info;
- the lexicon's benign lines are what healthy runs print: counted, never a failure.

Rules match the mechanism's upstream wording (each rule cites its sources), never a particular
log's incidental text. ``classify`` itself is pure.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any

from epdoctor import knowledge
from epdoctor.facts.logs.prefix import Parsed

try:  # RE2: one linear pass over a line for every rule at once (google-re2, a dependency)
    import re2 as _re2
except ImportError:  # pragma: no cover - a checkout on a node without it tries each rule
    _re2 = None

if sys.version_info >= (3, 11):
    import re._parser as _sre_parser

    import tomllib
else:  # pragma: no cover
    import sre_parse as _sre_parser

    import tomli as tomllib

# roles
CAUSE = "cause"
SYMPTOM = "symptom"
TRAIL = "trail"  # NCCL's "file.cc:N -> 3" return trail, torch's "Last error:" header: context only
GENERIC = "generic"  # trouble of no known mechanism
SUMMARY = "summary"  # a process's exit reported by its launcher: says that, never why
BENIGN = "benign"

ERROR = "error"
WARNING = "warn"
NOTE = "note"  # the lexicon's notices: shown, never a warning by themselves


@dataclass(frozen=True)
class Verdict:
    """What one line says. ``code`` is None for benign lines and most trail lines."""

    role: str
    level: str  # "error" | "warn"
    subsystem: (
        str  # nccl, ofi, libfabric, cuda, torch, python, engine, deepep, nvshmem, ucx, kernel
    )
    code: str | None = None
    what: str = ""  # the mechanism in a few words: the finding's title starts with it
    event: str | None = None  # the event-table rule (per rule / judged) the line matched
    rule: str = ""  # the [[log]] rule the line matched (knowledge.log_rules), if any

    @property
    def is_trouble(self) -> bool:
        return self.role not in (BENIGN, TRAIL)


# --- the one table: every trap's [[log]] rules, and the lexicon -----------------------------------
def _scoped(pattern: str) -> str:
    """A pattern as one alternative of a larger one: a leading global flag becomes scoped."""
    m = re.match(r"^\(\?([aiLmsux]+)\)", pattern)
    return f"(?{m[1]}:{pattern[m.end() :]})" if m else f"(?:{pattern})"


def _compile(patterns: tuple[str, ...] | list[str]) -> re.Pattern[str]:
    return re.compile("|".join(_scoped(p) for p in patterns))


@dataclass(frozen=True)
class Rule:
    """A [[log]] rule of the catalogue, compiled (knowledge.LogRule is its source)."""

    code: str
    role: str
    level: str
    subsystem: str
    what: str
    rx: re.Pattern[str]
    id: str = ""
    per: str = "incident"  # incident | rule | judged (knowledge.catalogue.LOG_PER)
    candidates: tuple[str, ...] = ()


def _rules() -> tuple[Rule, ...]:
    return tuple(
        Rule(
            r.code, r.role, r.level, r.subsystem, r.title, _compile(r.patterns), r.id, r.per,
            r.candidates,
        )
        for r in knowledge.log_rules()
    )  # fmt: skip


def _lexicon() -> dict[str, object]:
    text = (resources.files("epdoctor.knowledge") / "log_lexicon.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def _loosened(pattern: str) -> str:
    """The pattern without lookarounds and ``^`` anchors, for a prefilter: it matches every line
    the pattern matches (and maybe more), and RE2 can compile it."""
    out: list[str] = []
    i, n, cls = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if cls:
            cls = c != "]"
            out.append(c)
            i += 1
            continue
        if c == "[":
            cls = True
            out.append(c)
            if pattern[i + 1 : i + 2] == "^":
                out.append("^")
                i += 1
            if pattern[i + 1 : i + 2] == "]":
                out.append("]")
                i += 1
            i += 1
            continue
        if c == "^":
            i += 1
            continue
        if pattern.startswith(("(?!", "(?=", "(?<!", "(?<="), i):
            depth, j = 0, i
            while j < n:
                if pattern[j] == "\\":
                    j += 2
                    continue
                if pattern[j] == "(":
                    depth += 1
                elif pattern[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            i = j + 1
            continue
        out.append(c)
        i += 1
    # a bounded repetition ({0,200}) multiplies a DFA's states: unbounded is a superset
    loose = re.sub(r"\{(\d*),\d+\}", lambda m: "+" if m[1] and int(m[1]) > 0 else "*", "".join(out))
    return loose.replace("\\Z", "$")


class Prefilter:
    """Does a line hold a match of any of these patterns? One RE2 pass (linear in the line,
    whatever the number of patterns) where RE2 is installed, else None: the caller tries each."""

    def __init__(self, patterns: list[str]) -> None:
        self._rx = None
        if _re2 is None or not patterns:
            return
        try:
            opts = _re2.Options()
            opts.max_mem = 64 << 20  # the DFA of one alternation of every rule
            self._rx = _re2.compile("|".join(_scoped(_loosened(p)) for p in patterns), opts)
        except Exception:  # a pattern RE2 cannot read: no prefilter, every rule is tried
            self._rx = None

    def miss(self, text: str) -> bool:
        """True when no pattern can match: the rules need not be tried."""
        return self._rx is not None and self._rx.search(text) is None


_LEX = _lexicon()
# rules judged one finding per rule or in code (the event table) come first and are read on
# every line, benign or not; the incident rules after the benign list
ALL_RULES: tuple[Rule, ...] = _rules()
EVENT_RULES: tuple[Rule, ...] = tuple(r for r in ALL_RULES if r.per != "incident")
RULES: tuple[Rule, ...] = tuple(r for r in ALL_RULES if r.per == "incident")
# most candidate lines match no rule: one pass says so before the rules are tried one by one
_ANY_RULE = Prefilter([p for r in knowledge.log_rules() for p in r.patterns])
BENIGN_PATTERNS: tuple[re.Pattern[str], ...] = tuple(re.compile(p) for p in _LEX["benign"])  # type: ignore[union-attr]
_ANY_BENIGN = Prefilter(list(_LEX["benign"]))  # type: ignore[arg-type]
_FATAL = re.compile("|".join(_scoped(p) for p in _LEX["fatal"]), re.IGNORECASE)  # type: ignore[arg-type]
_TROUBLE = re.compile("|".join(_scoped(p) for p in _LEX["trouble"]), re.IGNORECASE)  # type: ignore[arg-type]
_NOTICE = re.compile("|".join(_scoped(p) for p in _LEX["notice"]), re.IGNORECASE)  # type: ignore[arg-type]
_SUBSYSTEMS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (str(s["name"]), re.compile(str(s["pattern"]), re.IGNORECASE))
    for s in _LEX["subsystem"]  # type: ignore[union-attr]
)
# the writer's own level says the line is not an error: NCCL INFO, Python logging, glog, torch's
# C++ "[W ...]" / "[I ...]" warnings, klog "I0501"/"W0501"
_QUIET_LEVEL = re.compile(
    r"^\s*(?:\[\s*)?(?:INFO|WARNING|WARN|DEBUG|TRACE|NOTICE)\b|^\s*\[?[IWD]\d{4} |"
    r"^\s*\[[IWD][ \d]|^[^\n]{0,48}?\b(?:INFO|WARNING|DEBUG)\b[ :\]|-]"
)


def _hints() -> tuple[Prefilter, tuple[tuple[str, re.Pattern[str]], ...]]:
    """The traps' [discriminator] log patterns: one alternation that finds whether a line holds
    any (most lines hold none), and one pattern per trap that says whose they are."""
    per: list[tuple[str, re.Pattern[str]]] = []
    for t in knowledge.all_traps():
        if t.discriminator is not None and t.discriminator.log:
            per.append((t.code, _compile(t.discriminator.log)))
    return Prefilter(
        [p for t in knowledge.all_traps() if t.discriminator for p in t.discriminator.log]
    ), tuple(per)


_HINT_ANY, _HINTS = _hints()


def hints_in(text: str) -> list[str]:
    """The traps whose discriminator's log patterns this line holds (evidence for one cause
    over another where a line fits several)."""
    if not _HINTS or _HINT_ANY.miss(text):
        return []
    return [code for code, rx in _HINTS if rx.search(text)]


def mandatory_literal(pattern: str) -> str:
    """The longest run of plain characters every match of the pattern contains ("" if none).

    The scanner hands over only lines that hold an anchor; a rule's lines are seen when its
    pattern's mandatory literal (or a part of it) is one. Alternatives, classes and optional
    parts end a run; groups that must match are read through.
    """
    try:
        tree = _sre_parser.parse(pattern)
    except re.error:
        return ""
    best = ""
    run = ""

    def walk(items: Any) -> None:
        nonlocal best, run
        for op, av in items:
            name = str(op)
            if name == "LITERAL":
                run += chr(av)
                continue
            if name == "SUBPATTERN":
                walk(av[-1])
                continue
            if name == "AT":
                continue
            if len(run) > len(best):
                best = run
            run = ""

    walk(tree)
    return best if len(best) >= len(run) else run


ANCHORS_FILE = "log_anchors.txt"  # knowledge/: rule_anchors() as last written, one per line


def stored_anchors(existing: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """The rules' anchors: read from knowledge/log_anchors.txt when it matches this catalogue
    (deriving them parses every pattern, ~0.15 s a process start), derived otherwise."""
    path = resources.files("epdoctor.knowledge") / ANCHORS_FILE
    try:
        head, *rows = path.read_bytes().split(b"\n")
    except OSError:
        return rule_anchors(existing)
    if head.decode("ascii", "replace") != catalogue_digest():
        return rule_anchors(existing)
    return tuple(bytes.fromhex(r.decode("ascii")) for r in rows if r)


def catalogue_digest() -> str:
    """A digest of every [[log]] pattern and the static anchors: the stored anchors' key."""
    import hashlib

    from epdoctor.facts.logs.signatures import ANCHORS

    h = hashlib.sha256()
    for r in knowledge.log_rules():
        for p in r.patterns:
            h.update(p.encode() + b"\0")
    for a in ANCHORS:
        h.update(a + b"\1")
    return h.hexdigest()[:32]


def write_anchors() -> str:
    """Write knowledge/log_anchors.txt for this catalogue; returns its path."""
    from epdoctor.facts.logs.signatures import ANCHORS

    path = resources.files("epdoctor.knowledge") / ANCHORS_FILE
    rows = [catalogue_digest(), *(a.hex() for a in rule_anchors(ANCHORS))]
    with open(str(path), "w", encoding="ascii") as f:
        f.write("\n".join(rows) + "\n")
    return str(path)


def rule_anchors(existing: tuple[bytes, ...]) -> tuple[bytes, ...]:
    """Anchors for the rules' lines that no anchor of ``existing`` already finds: the mandatory
    literal of each pattern, in each case it can appear in (a discriminator's hint lines are
    read where the scanner hands them over, and never make a line a candidate)."""
    pats: list[str] = [p for r in knowledge.log_rules() for p in r.patterns]
    out: dict[bytes, None] = {}
    for p in pats:
        lit = mandatory_literal(p)
        if len(lit.strip()) < 8:
            # a short word ("time", "fabric") would hand over ordinary lines by the thousand
            # (NCCL's channel lines say "Libfabric"); those patterns also hold a word of the
            # lexicon ("failed", "error"), which finds them
            continue
        caseless = p.startswith("(?i") or "(?i" in p[:12]
        forms = {lit, lit.lower(), lit.upper(), lit[:1].upper() + lit[1:]} if caseless else {lit}
        for form in sorted(forms):
            b = form.encode("utf-8", "replace")[:40]
            if not any(a in b for a in existing) and not any(a in b for a in out):
                out[b] = None
    return tuple(out)


def subsystem_of(text: str) -> str:
    """Which part of the stack wrote a line of no rule, for the finding's title."""
    for name, rx in _SUBSYSTEMS:
        if rx.search(text):
            return name
    return "the run"


def event_rule(text: str) -> Rule | None:
    """The event-table rule a line matches (first in order), read before the benign list."""
    for r in EVENT_RULES:
        if r.rx.search(text):
            return r
    return None


# generic shapes: lines that are trouble whatever they say
_PY_EXC = re.compile(
    r"^(?:[A-Za-z_]\w*\.)*(?P<exc>[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure|Timeout))"
    r"(?::\s?(?P<msg>.*))?$"
)
# a traceback's frame of context, Python's or c10's (c10/util/Exception.cpp: "Exception raised
# from %s at %s:%d (most recent call first):", then "frame #%d: ..."): the error is elsewhere
_PY_EXC_TRAIL = re.compile(
    r"^Traceback \(most recent call last\)|^During handling of the above exception|"
    r"^The above exception was the direct cause|^Exception raised from \S+ at \S+:\d+|"
    r"^frame #\d+: "
)
_NCCL_TRAIL = re.compile(r"^[\w./-]+\.(?:cc|cpp|cu|h):\d+ -> \d+")
_TORCH_LAST = re.compile(r"^Last error:\s*$")
_LIBFABRIC = re.compile(
    r"libfabric:\d+:\d+:(?P<prov>[\w;]*):(?P<sub>\w*):[^<]{0,200}<(?P<level>warn|error|info|debug|trace)>"
)
_UCX = re.compile(r"\bUCX\s+(?P<level>ERROR|WARN|FATAL)\b")
_LEVEL = re.compile(
    r"^(?:\[[^\]]{0,40}\]\s?)?(?P<level>ERROR|CRITICAL|FATAL|E)(?:\s|:|\d{4}\s|\]|$)|"
    r"\[(?P<tl>E|TRT-LLM\] \[E)\]|\b(?P<lv>ERROR|CRITICAL|FATAL)\b(?:\s|:|\]|\))"
)
_ERRORISH = re.compile(
    r"(?i)\b(?:error|errors|failed|failure|fatal|cannot|can't|unable to|denied|refused|"
    r"timed out|timeout|abort(?:ed|ing)?|unsupported|not supported|not found|no such file|"
    r"exception|traceback|segmentation|killed)\b"
)
_DEEPEP = re.compile(r"\[DeepEP\]|deep_ep|DeepEP")
_NVSHMEM = re.compile(r"(?i)nvshmem")
_OFI = re.compile(r"NET/OFI|aws-ofi-nccl|ofi-nccl|OFI ")


def classify(p: Parsed) -> Verdict | None:
    """The verdict on one line, or None when it is not trouble (most lines)."""
    ruled = not _ANY_RULE.miss(p.text)
    ev = event_rule(p.msg if p.nccl else p.text) if ruled else None
    if ev is not None:
        level = ERROR if (p.nccl and p.level == "WARN" and ev.role == CAUSE) else ev.level
        return Verdict(ev.role, level, ev.subsystem, ev.code, ev.what, ev.id, ev.id)
    hay = (f"{p.loc} {p.msg}" if p.loc else p.msg) if p.nccl else p.text
    if not hay:
        return None
    stripped = hay.strip()
    if _NCCL_TRAIL.match(stripped):
        # NCCL passing an error code up (N204), context for the line that caused it
        return Verdict(TRAIL, ERROR, "nccl", "N204", "NCCL returned an error")
    if _TORCH_LAST.match(stripped) or _PY_EXC_TRAIL.match(stripped):
        return Verdict(TRAIL, ERROR, "nccl" if p.nccl else "python")
    if not _ANY_BENIGN.miss(p.text):
        for rx in BENIGN_PATTERNS:
            if rx.search(hay):
                return Verdict(BENIGN, WARNING, "nccl" if p.nccl else "other")
    lf = _LIBFABRIC.search(hay)
    if lf is not None and lf["level"] not in ("warn", "error"):
        return None  # libfabric's info/debug lines
    for r in RULES if ruled else ():
        if r.rx.search(hay):
            level = r.level
            if p.nccl and p.level == "WARN" and r.role == CAUSE:
                level = ERROR
            return Verdict(r.role, level, r.subsystem, r.code, r.what, rule=r.id)
    return _generic(p, hay, stripped, lf)


def _generic(p: Parsed, hay: str, stripped: str, lf: re.Match[str] | None) -> Verdict | None:
    """A line of no rule: trouble by its shape (NCCL WARN, libfabric <warn>, UCX, a traceback's
    last line) or by the lexicon's words, whatever its prefix or format."""
    if lf is not None:
        level = ERROR if lf["level"] == "error" else WARNING
        return Verdict(GENERIC, level, "libfabric", "N306", "libfabric reported a problem")
    if p.nccl:
        if p.level != "WARN" and not _ERRORISH.search(hay):
            return None
        if p.level != "WARN" and not re.search(r"(?i)\b(?:error|failed|failure)\b", hay):
            return None  # an INFO line that mentions a timeout knob etc.
        # a WARN NCCL survives stays a warning (a run can finish after one); the failed return
        # code that follows a fatal one is what fails the incident
        if _OFI.search(hay):
            return Verdict(GENERIC, WARNING, "ofi", "N306", "aws-ofi-nccl reported a problem")
        return Verdict(GENERIC, WARNING, "nccl", "N203", "NCCL warned")
    if m := _UCX.search(hay):
        level = WARNING if m["level"] == "WARN" else ERROR
        return Verdict(GENERIC, level, "ucx", "T809", "UCX reported a problem")
    if m := _PY_EXC.match(stripped):
        exc = m["exc"]
        if exc in ("KeyboardInterrupt", "SystemExit"):
            return Verdict(GENERIC, WARNING, "python", "E808", "The process was interrupted")
        if _NVSHMEM.search(hay) or _DEEPEP.search(hay):
            return Verdict(GENERIC, ERROR, "deepep", "D809", "DeepEP / NVSHMEM raised an error")
        return Verdict(GENERIC, ERROR, "python", "E808", f"Unrecognised Python {exc}")
    fatal = _FATAL.search(hay)
    if fatal is None and _TROUBLE.search(hay) is None and _LEVEL.search(hay) is None:
        if _NOTICE.search(hay) and _QUIET_LEVEL.search(hay) is None:
            sub = subsystem_of(hay)
            return Verdict(GENERIC, NOTE, sub, "E809", f"A notice from {sub}")
        return None
    sub = subsystem_of(hay)
    deep = sub in ("nvshmem", "DeepEP")
    if fatal is not None and _QUIET_LEVEL.search(hay) is None:
        if _EXIT_SUMMARY.search(hay) and not _CAUSE_WORDS.search(hay):
            # "srun: error: node1: task 0: Exited with exit code 1": that a process ended, not why
            return Verdict(SUMMARY, ERROR, sub, "E810", f"A process of {sub} exited with an error")
        code = "D809" if deep else "E810"
        return Verdict(GENERIC, ERROR, sub, code, f"Unrecognised failure from {sub}")
    return Verdict(GENERIC, WARNING, sub, "D809" if deep else "E809", f"Trouble reported by {sub}")


# a launcher's report that a process ended badly; the reason, if any, is on other lines
_EXIT_SUMMARY = re.compile(
    r"(?i)\bexit(?:ed)?(?: with)? (?:exit )?(?:code|status)[ :=]*-?\d+|\bnon-zero exit|"
    r"\breturned non-zero exit status|\bterminated with (?:exit )?(?:code|status)"
)
_CAUSE_WORDS = re.compile(
    r"(?i)\b(?:abort|fatal|exception|signal|timed out|out of memory|no space|segmentation|"
    r"core dumped|unhandled|cannot|unable|denied|refused|invalid|not found|error [a-z])"
)


if __name__ == "__main__":  # python -m epdoctor.facts.logs.triage: refresh the stored anchors
    print(write_anchors())
