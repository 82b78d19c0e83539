"""Incidents: a rank's trouble lines grouped, and judged by their root cause.

``facts.logs.triage`` gives every line that signals trouble a verdict; this module groups a
rank's trouble lines that belong together (no more than ``INCIDENT_GAP`` lines apart in one
source) into an *incident*, picks its root cause (the earliest line that names *why*: an errno
text, a missing library, a limit, a provider error; else the most specific symptom; else the
first error), and turns incidents into findings. Incidents with the same cause on several ranks
become one finding that names the ranks; the cause is the title, the later lines its evidence.

``order_key`` ranks findings so that the first one is the one to fix: failures first, then root
causes before the network verdicts they explain, those before symptoms (an NCCL error code, a
torchrun summary), and unrecognised lines last.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from epdoctor import knowledge
from epdoctor.checks import log_differential as differential
from epdoctor.checks.base import finding
from epdoctor.checks.registry import detector
from epdoctor.facts.logs import triage
from epdoctor.facts.logs.model import LogFacts, Trouble
from epdoctor.model import Finding, Status

INCIDENT_GAP = 2000  # lines of one source between two trouble lines of one incident
MAX_EVIDENCE = 8
QUOTE = 160  # characters of the cause line in a title

# codes whose lines are judged by the fact checks (network, plugin, GIN) or the event table:
# an incident caused by one of them adds its lines to that finding instead of its own
FACT_CODES = frozenset({"N101", "N105", "N201", "N202", "T701", "T702", "T201"})
GENERIC_CODES = frozenset({"N203", "N306", "T809", "E808", "E809", "D809", "E810"})
# catch-alls that, as the earliest line of a failing incident, are its unrecognised cause: the
# finding is then "Unrecognised failure from <subsystem>" (E810), the line its evidence
WARN_GENERIC = frozenset({"E809", "N203"})  # N306 (aws-ofi-nccl) and T809 (UCX) name theirs
SYMPTOM_CODES = frozenset({"N202", "N204", "E203", "E204", "E804", "E807", "T201"})
SUMMARY_CODES = frozenset({"E204"})
WAIT_CODES = frozenset({"E806"})
# causes that explain why a rank fell back from EFA to another network
NET_CAUSES = frozenset(
    {
        "N101", "N105", "N201", "N301", "N302", "N303", "N304", "N305", "N306",
        "T802", "H801", "H802", "L801", "L101", "N313",
    }
)  # fmt: skip

_NCCL_HEAD = re.compile(r"^.*?\bNCCL (?:INFO|WARN) (?:[\w./-]+\.cc?:\d+ )?")
# what an errno says about a cause, named in the finding's title
HINTS: tuple[tuple[str, re.Pattern[str], str], ...] = (
    (
        "N305",
        re.compile(r"Cannot allocate memory|ENOMEM|\bRC: -?12\b"),
        "ENOMEM: most often the locked-memory limit, H801: check `ulimit -l` in the container",
    ),
)
_ABORT = re.compile(r"SIGABRT|Signal 6\b|exitcode\s*:?\s*-6\b|Aborted|terminate called")
_NCCL_INFO = re.compile(r"\bNCCL INFO\b")
_WARN_HEAD = re.compile(r"^[\w./-]+\.(?:cc|cpp):\d+ NCCL WARN ")
_NUM = re.compile(r"0x[0-9a-fA-F]+|\d+")


@dataclass
class Incident:
    rank: str
    lines: list[Trouble]
    cause: Trouble
    code: str
    status: Status
    known: bool  # the cause is a known mechanism, not an unrecognised line

    @property
    def first_line(self) -> int:
        return self.lines[0].line_no


@dataclass
class Triage:
    """Incidents of a log, and which of them explain a rank's network fallback."""

    incidents: list[Incident] = field(default_factory=list)

    def net_cause(self, rank_keys: list[str]) -> Incident | None:
        """The earliest incident on these ranks whose cause explains a fallback from EFA."""
        keys = set(rank_keys)
        best = [i for i in self.incidents if i.code in NET_CAUSES and i.rank in keys]
        if not best:  # lines without a rank (a pasted fragment) still explain a lone rank
            best = [i for i in self.incidents if i.code in NET_CAUSES]
        return min(best, key=lambda i: i.cause.line_no) if best else None

    def extra_evidence(self, code: str) -> list[str]:
        """Lines of incidents caused by a code another finding reports (FACT_CODES, events)."""
        out: list[str] = []
        for inc in self.incidents:
            if inc.code == code:
                out.extend(t.evidence() for t in inc.lines if t is not inc.cause)
        return out


def line_code(t: Trouble, event_codes: dict[str, tuple[str, Status]]) -> str | None:
    for k in t.events:
        if k in event_codes:
            return event_codes[k][0]
    return t.verdict.code


def _is_cause(t: Trouble, event_codes: dict[str, tuple[str, Status]]) -> bool:
    return t.verdict.role == triage.CAUSE


def build(facts: LogFacts, event_codes: dict[str, tuple[str, Status]]) -> Triage:
    groups: dict[str, list[list[Trouble]]] = {}
    last: dict[tuple[str, str], int] = {}
    for t in facts.all_troubles():
        runs = groups.setdefault(t.rank_key, [])
        prev = last.get((t.rank_key, t.source))
        if not runs or prev is None or t.line_no - prev > INCIDENT_GAP:
            runs.append([])
        runs[-1].append(t)
        last[(t.rank_key, t.source)] = t.line_no
    out = Triage()
    for rank, runs in groups.items():
        for lines in runs:
            out.incidents.extend(_incidents(rank, lines, event_codes))
    failed = any(i.status is Status.FAIL for i in out.incidents)
    if not failed and (trail := _error_trail(facts)) is not None:
        out.incidents.append(trail)
    out.incidents.sort(key=lambda i: (i.cause.source, i.cause.line_no))
    return out


# NCCL's return trail (`bootstrap.cc:270 -> 2`): printed only for a real error return (checks.h),
# 1-6 are the error codes (7 is ncclInProgress). Context for the line that caused it; where the
# log holds no such line (a fragment, a cut WARN), the trail itself says the run failed.
_ERROR_TRAIL = re.compile(r"\b[\w.-]+\.(?:cc|cpp|cu|h):\d+ -> [1-6]\b")
BOOTSTRAP_TRAIL_RULE = "nccl_bootstrap_error_trail"  # its [[log]] rule in T802.toml


def _error_trail(facts: LogFacts) -> Incident | None:
    """The NCCL error trail of a log with no failing line of its own, as one incident: the
    bootstrap's sockets (T802, T803 the other candidate) or any other call (N204)."""
    lines = [
        t
        for t in facts.all_troubles()
        if t.verdict.role == triage.TRAIL and t.verdict.subsystem == "nccl"
        and _ERROR_TRAIL.search(t.text)
    ]  # fmt: skip
    if not lines:
        return None
    # which trails are the bootstrap's: the T802 rule's own pattern, from the one table
    rule = next(r for r in triage.ALL_RULES if r.id == BOOTSTRAP_TRAIL_RULE)
    boot = next((t for t in lines if rule.rx.search(t.text)), None)
    if boot is not None:
        v = triage.Verdict(triage.SYMPTOM, triage.ERROR, "nccl", rule.code, rule.what,
                           rule=rule.id)  # fmt: skip
        cause = dataclasses.replace(boot, verdict=v)
    else:
        v = triage.Verdict(triage.SYMPTOM, triage.ERROR, "nccl", "N204", "NCCL returned an error")
        cause = dataclasses.replace(lines[0], verdict=v)
    others = [t for t in lines if t is not (boot or lines[0])]
    return Incident(cause.rank_key, [cause, *others], cause, v.code or "N204", Status.FAIL, True)


def _incidents(
    rank: str, lines: list[Trouble], event_codes: dict[str, tuple[str, Status]]
) -> list[Incident]:
    """The incident of a run of lines, and one more for each other cause it holds.

    A run's lines are one chain (cause, then symptoms) as far as they follow from one cause;
    a second line naming a cause of another kind (a topology file that cannot be opened next to
    a missing plugin) is a problem of its own and must not vanish into the first one's evidence.
    """
    main = _incident(rank, lines, event_codes)
    if main is None:
        return []
    out = [main]
    seen = {main.code}
    # a fact check judges the main cause (FACT_CODES) and may find it harmless (a missing
    # default plugin where EFA is not the goal): lines it does not explain stand on their own
    lends = main.code in FACT_CODES
    main_is_cause = _specificity(main.cause, event_codes, None) < 4
    for t in lines:
        code = line_code(t, event_codes)
        if code in seen or code is None or t.line_no < main.cause.line_no:
            continue
        if code in GENERIC_CODES:
            if not lends or not t.verdict.is_trouble:
                continue
        elif not (_is_cause(t, event_codes) or not main_is_cause):
            continue  # a symptom of the main cause; in a run of symptoms only, each kind counts
        seen.add(code)
        status = Status.FAIL if _fails([t], code, event_codes) else Status.WARN
        if status is Status.WARN and t.verdict.level == triage.NOTE:
            status = Status.INFO
        out.append(Incident(rank, [t], t, code, status, True))
    if lends:
        # the lines of the run the fact check does not judge, before the main cause or after
        # it, are an incident of their own: NCCL's "NET/IB : Unable to open device" before a
        # plugin it did not find must not become evidence of a finding that may say "skip"
        rest = [t for t in lines if t.verdict.code != main.code and t.verdict.is_trouble]
        extra = _incident(rank, rest, event_codes) if rest else None
        if extra is not None and extra.code not in seen:
            out.append(extra)
    return out


def generic_symptom(code: str | None, role: str) -> bool:
    """A symptom any failure leads to (an NCCL error code, a crash, a failed child, a wait for a
    peer): it says that something broke, not what. A symptom of a named mechanism (GDRCopy could
    not pin, vLLM's engines never answered) says more than any unrecognised line."""
    return role == triage.SYMPTOM and (
        code in SYMPTOM_CODES or code in WAIT_CODES or code == "T803" or code in GENERIC_CODES
    )


def _specificity(
    t: Trouble, event_codes: dict[str, tuple[str, Status]], first_symptom: int | None
) -> int:
    """How well a line names why an incident happened: 0 a known cause; 1 a symptom of a named
    mechanism or an unrecognised error line (the earlier of them names it: an unrecognised
    error before a named symptom is usually its cause); 3 an unrecognised warning, both only
    before the incident's first generic symptom (after it they are more of its symptoms, 6); 4 a
    generic symptom; 5 a summary (a launcher's or torchrun's report that a process ended)."""
    code = line_code(t, event_codes)
    role = t.verdict.role
    if role == triage.CAUSE and code:
        return 0
    if role == triage.SUMMARY or code in SUMMARY_CODES:
        return 5
    if role == triage.GENERIC or code in GENERIC_CODES:
        if first_symptom is not None and t.line_no > first_symptom:
            return 6
        return 1 if t.verdict.level == triage.ERROR else 3
    if code and not generic_symptom(code, role):
        return 1
    return 4


def _incident(
    rank: str, lines: list[Trouble], event_codes: dict[str, tuple[str, Status]]
) -> Incident | None:
    """The incident of a run of lines: its cause is the earliest line that names why.

    A known cause wins; else the earliest unrecognised line printed before the first known
    symptom (an NCCL error code, a crash, a watchdog timeout, an engine that failed to start:
    generic lines that follow whatever broke); else the earliest symptom; a summary last.
    """
    judged = [t for t in lines if t.verdict.is_trouble or t.events]
    if not judged:
        return None
    symptoms = [t.line_no for t in judged if _specificity(t, event_codes, None) == 4]
    first_symptom = min(symptoms) if symptoms else None
    cause = min(judged, key=lambda t: (_specificity(t, event_codes, first_symptom), t.line_no))
    code = line_code(cause, event_codes) or "E809"
    status = Status.FAIL if _fails(judged, code, event_codes) else Status.WARN
    if status is Status.WARN and all(t.verdict.level == triage.NOTE for t in judged):
        status = Status.INFO  # only notices: a program said it fell back and went on
    if code in WARN_GENERIC and status is Status.FAIL:
        # an unrecognised warning that opens a failing incident: the failure's best witness
        sub = triage.subsystem_of(cause.text)
        cause = dataclasses.replace(
            cause,
            verdict=dataclasses.replace(
                cause.verdict, code="E810", what=f"Unrecognised failure from {sub}"
            ),
        )
        code = "E810"
    return Incident(rank, lines, cause, code, status, code not in GENERIC_CODES)


_RULE_STATUS: dict[str, Status] = {r.id: r.status for r in knowledge.log_rules()}


def _fails(lines: list[Trouble], code: str, event_codes: dict[str, tuple[str, Status]]) -> bool:
    if code not in NET_CAUSES and lines and all(_NCCL_INFO.search(t.text) for t in lines):
        # NCCL said it at INFO level and went on: worth a warning, not a failure (NCCL reports
        # every plugin load failure at INFO, so those are judged by their code)
        return False
    ruled = [_RULE_STATUS[t.verdict.rule] for t in lines if t.verdict.rule in _RULE_STATUS]
    if ruled and len(ruled) == len(lines) and Status.FAIL not in ruled:
        # every line is a rule's, and each rule says the program goes on: a rule's status
        # outranks the lexicon's fatal words (libfabric's "gdrcopy_dl_hmem_init failed!")
        return False
    if any(t.verdict.level == triage.ERROR for t in lines):
        return True
    if any(k in event_codes and event_codes[k][1] is Status.FAIL for t in lines for k in t.events):
        return True
    return code not in GENERIC_CODES and knowledge.get(code).default_status is Status.FAIL


def watchdog_abort(text: str) -> bool:
    """The line reports an abort, which after a collective timed out is the watchdog's own.

    ProcessGroupNCCL aborts the process itself once a collective timed out ("we are taking the
    entire process down"): the timeout is then the finding and the abort only its end.
    """
    return _ABORT.search(text) is not None


def timed_out(facts: LogFacts) -> bool:
    """A collective timed out somewhere in the log (a WAIT_CODES line)."""
    return any(t.verdict.code in WAIT_CODES for t in facts.all_troubles())


def message(t: Trouble) -> str:
    """The line without NCCL's prefix and location: what it says."""
    text = _NCCL_HEAD.sub("", t.text, count=1)
    return _WARN_HEAD.sub("", text, count=1).strip()


def _norm(text: str) -> str:
    return _NUM.sub("#", text)[:80]


@detector(*sorted({r.code for r in triage.RULES} | GENERIC_CODES), domain="logs")
def findings(
    tri: Triage,
    ranks_named: dict[str, str],
    owned: set[str],
    hints: Mapping[str, list[str]] | None = None,
    node: Mapping[str, bool | None] | None = None,
) -> list[tuple[str, Finding]]:
    """One finding per (cause code, cause wording), over every rank that shows it; one per
    candidate cause where the cause line fits several (``log_differential``).

    ``owned`` are codes other findings report (fact checks, events): their incidents only lend
    evidence (``Triage.extra_evidence``). ``hints``: the log's lines per trap that make it
    likelier (LogFacts.hints); ``node``: the node's facts (log_differential.node_predicates).
    """
    merged: dict[tuple[str, str], list[Incident]] = {}
    waited = any(i.code in WAIT_CODES for i in tri.incidents)
    for inc in tri.incidents:
        if inc.code in owned or inc.cause.events:  # the event table reports that line
            continue
        what = "" if inc.code in GENERIC_CODES else _norm(message(inc.cause))
        if inc.cause.verdict.role == triage.SUMMARY:
            what = f"summary:{inc.cause.verdict.subsystem}"
        elif inc.code in GENERIC_CODES:
            # the earliest unrecognised line of its incident: ordered as that incident's cause
            what = f"unrec:{inc.cause.verdict.subsystem}"
        elif waited and inc.code == "E807" and watchdog_abort(inc.cause.text):
            what = f"summary:{what}"
        elif generic_symptom(inc.code, inc.cause.verdict.role):
            what = f"symptom:{what}"  # ordered with the symptoms (``tier``)
        merged.setdefault((inc.code, what), []).append(inc)
    out: list[tuple[str, Finding]] = []
    for (code, what), incs in merged.items():
        first = incs[0]
        v = first.cause.verdict
        ranks = sorted({i.rank for i in incs})
        title = _title(code, v.what, first, incs, ranks, ranks_named)
        ev = [first.cause.evidence()]
        at = (first.cause.source, first.cause.line_no)
        ev += [t.evidence() for t in first.lines if (t.source, t.line_no) != at][
            : MAX_EVIDENCE // 2
        ]
        for other in incs[1:]:
            if len(ev) >= MAX_EVIDENCE:
                break
            ev.append(other.cause.evidence())
        status = max((i.status for i in incs), key=lambda s: s.rank)
        f = finding(code, status, title, ev[:MAX_EVIDENCE])
        out += differential.expand(
            f"{code}:triage:{what}", f, first.cause.verdict.rule, hints or {}, node or {}
        )
    return out


def _title(
    code: str,
    what: str,
    first: Incident,
    incs: list[Incident],
    ranks: list[str],
    ranks_named: dict[str, str],
) -> str:
    what = what or knowledge.get(code).title
    quote = message(first.cause)
    for hint_code, rx, hint in HINTS:
        if code == hint_code and rx.search(quote):
            what += f" ({hint})"
    if len(quote) > QUOTE:
        quote = quote[: QUOTE - 3] + "..."
    title = f"{what}: `{quote}`"
    if code in GENERIC_CODES and len(incs) > 1:
        title += f" (and {len(incs) - 1} more)"
    named = [ranks_named.get(r, r) for r in ranks if not r.startswith("source:")]
    if len(named) > 1:
        shown = ", ".join(named[:4]) + (f" and {len(named) - 4} more" if len(named) > 4 else "")
        title += f" on {len(named)} ranks: {shown}"
    elif named:
        title += f" ({named[0]})"
    return title


def tier(code: str, key: str) -> int:
    """0 root causes, 1 plugin verdicts, 2 network verdicts, 3 unrecognised causes, 4 symptoms,
    5 waits, 6 unrecognised lines, 7 summaries.

    A plugin that was not found or did not start explains the network a rank fell back to. An
    unrecognised line that opens an incident (the earliest line of its rank and time that reads
    as a failure, before any known symptom) names that incident better than the generic lines
    after it. A wait (a collective watchdog timeout, a peer that went away) follows from a peer
    that died or hung: a crash anywhere says more. A summary (torchrun's "child failed", a
    launcher's "exited with exit code 1") never says why: even an unrecognised line says more.
    """
    if ":cand:" in key:  # another cause the same line fits: ranks with the first one
        code, key = key.split(":cand:", 1)[1].split(":", 1)[0], key.split(":cand:", 1)[1]
    if code in SUMMARY_CODES or ":triage:summary:" in key:
        return 7
    if ":triage:unrec:" in key:
        return 3
    if code in GENERIC_CODES:
        return 6
    if code in WAIT_CODES or (code == "T803" and ":triage:symptom:" in key):
        return 5
    if code in SYMPTOM_CODES or ":triage:symptom:" in key or key.startswith("T802:if-onehost:"):
        return 4
    if code.startswith(("T7", "F2")) or key.startswith("T802:if:"):
        return 2
    if code in FACT_CODES:
        return 1
    return 0
