"""Who wrote a log line: peel launcher prefixes, then find NCCL's own prefix.

A line may carry several prefixes, outermost first, e.g. a kubectl
``--timestamps --prefix`` line around a torchrun ``[rank3]:`` line around an
NCCL line ``host:pid:tid [dev] NCCL INFO ...``. Each launcher prefix becomes a
*label* (``rank3``, ``Worker_DP3_EP3``, ``pod/NAME/container``, ``srun 1``,
``mpi 1,3``); NCCL's ``host:pid`` is the process identity. ANSI colour, CR,
timestamps and cut lines are tolerated; nothing here raises on odd input.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-_]")
# colour codes that lost their ESC on the way (a copy from a web page): "[0m ", "[32m"
_ANSI_REMNANT = re.compile(r"(?:\[\d{1,3}(?:;\d{1,3})*m)+ ?")
# kubectl --timestamps (RFC3339), NCCL WARN's "[2026-01-02 10:24:27] ", "2026-01-02 10:24:27,123 "
_TIMESTAMP = re.compile(
    r"(?:\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?(?: UTC)?\]?)"
    r"(?: |\t|$)"
)
# syslog / journalctl "Dec 03 10:00:00 host prog[123]: ", dmesg "[12345.678901] "
_SYSLOG = re.compile(
    r"(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d [\w.-]+ [\w./-]+(?:\[\d+\])?: |\[ *\d+\.\d+\] )"
)
# what a paste adds: CloudWatch / table "| " joins, e-mail and GitHub quoting "> ", a shell prompt
_JOIN = re.compile(r"(?:\|\s?|>\s?|\$ )")
_KUBECTL = re.compile(r"\[pod/(?P<pod>[\w.-]+)/(?P<ctr>[\w.-]+)\] ")
_TORCHRUN = re.compile(r"\[(?P<kind>rank|default)(?P<n>\d+)\]:\s?")
# torchx / other launchers: "[trainer3]:", "[trainer0|0]:", "[worker-1]:"
_ROLE = re.compile(r"\[(?P<role>[A-Za-z][\w-]{0,40}?)(?:\|(?P<n>\d+))?\]:\s?")
_SRUN = re.compile(r"(?P<n>\d{1,5}): ")
_MPIRUN = re.compile(r"\[(?P<job>\d+),(?P<n>\d+)\]<(?:stdout|stderr)>:\s?")
# vLLM: "(Worker_DP3_EP3 pid=123) ", "(EngineCore_DP0 pid=1) ", "[Worker pid=3737] "
_VLLM = re.compile(
    r"[(\[](?:(?P<name>[A-Za-z][\w-]*?) pid=(?P<pid>\d+)|"
    r"(?P<bare>(?:Worker|EngineCore|APIServer|VllmWorker|RayWorkerWrapper)\w*))[)\]] "
)
# stern "POD CONTAINER msg": only taken when POD looks like a pod (a DNS-1123 name with a
# replica/hash suffix), so an ordinary sentence is never read as a prefix.
_STERN = re.compile(
    r"(?P<pod>[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?-(?:\d+|[a-z0-9]{6,10}-[a-z0-9]{5})) "
    r"(?P<ctr>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?) "
)
# NCCL src/debug.cc: "%s:%d:%d [%d] " before "NCCL INFO"/"...NCCL WARN"
_NCCL = re.compile(r"(?P<host>[A-Za-z0-9][\w.-]*):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
_NCCL_LEVEL = re.compile(r"NCCL (?P<level>INFO|WARN|ERROR|TRACE) ?")
# A line pasted without NCCL's full prefix: "host NCCL INFO ...", "host:pid NCCL WARN ...",
# or only "NCCL WARN ..." (a GitHub comment, a grep -h). The NCCL message is still NCCL's.
_NCCL_PARTIAL = re.compile(
    r"(?:(?P<host>[A-Za-z0-9][\w.-]*)(?::(?P<pid>\d+))?(?::\d+)?(?: \[(?P<dev>\d+)\])? )?"
    r"(?:(?P<loc>[\w./-]+\.(?:cc|cpp|h|c):\d+) )?NCCL (?P<level>INFO|WARN) "
)

# aws-ofi-nccl 1.x's own logger in its test binaries (nccl_message_transfer, ring): the same
# message NCCL prints after "NCCL WARN ", with the level in front instead
_OFI_OWN = re.compile(r"(?P<level>INFO|WARN|TRACE): (?=Function: \S+ Line: \d+: )")

MAX_PREFIXES = 6


@dataclass(frozen=True)
class Parsed:
    """One attributed line. host/pid/dev are NCCL's; labels come from launchers."""

    text: str  # the line without ANSI/CR, launcher prefixes kept out
    labels: tuple[str, ...] = ()
    host: str | None = None
    pid: int | None = None
    dev: int | None = None
    level: str | None = None  # NCCL INFO / WARN
    msg: str = ""  # after "NCCL INFO " / "NCCL WARN ", else the text
    label_pid: int | None = None  # vLLM "(Worker... pid=N)": the same pid NCCL prints
    nccl: bool = False  # an NCCL debug line, with or without its host:pid:tid prefix
    loc: str = ""  # the source location NCCL WARN lines carry ("transport/nvls.cc:165")

    @property
    def nccl_key(self) -> str | None:
        if self.host is None:
            return None
        return f"{self.host}:{self.pid}" if self.pid is not None else self.host


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def clean(raw: str) -> str:
    """The line as a terminal would not mis-draw it: no escape sequences or control bytes."""
    if "\x1b" in raw:
        raw = _ANSI.sub("", raw)
    raw = raw.rstrip("\r\n").replace("\r", "")
    return _CONTROL.sub("", raw) if _CONTROL.search(raw) else raw


# Ray's log deduplication appends this to a line many workers printed alike
# (python/ray/_private/ray_logging: "[repeated {}x across cluster]"): a count, not the message
_RAY_REPEATED = re.compile(r"\s*\[repeated \d+x across cluster\]\s*$")


def parse_line(raw: str) -> Parsed:
    """Attribute one decoded line. Total: never raises for any str."""
    text = clean(raw)
    if text.endswith("cluster]"):
        text = _RAY_REPEATED.sub("", text)
    labels: list[str] = []
    label_pid: int | None = None
    pos = 0
    for _ in range(MAX_PREFIXES):
        while text.startswith(" ", pos):
            pos += 1
        if m := _TIMESTAMP.match(text, pos):
            pos = m.end()
            continue
        if m := _SYSLOG.match(text, pos):
            pos = m.end()
            continue
        if m := _JOIN.match(text, pos):
            pos = m.end()
            continue
        if m := _KUBECTL.match(text, pos):
            labels.append(f"pod/{m['pod']}/{m['ctr']}")
            pos = m.end()
            continue
        if m := _TORCHRUN.match(text, pos):
            labels.append(f"{m['kind']}{m['n']}")
            pos = m.end()
            continue
        if m := _ANSI_REMNANT.match(text, pos):
            pos = m.end()
            continue
        if m := _ROLE.match(text, pos):
            labels.append(m["role"] + (f"|{m['n']}" if m["n"] else ""))
            pos = m.end()
            continue
        if m := _MPIRUN.match(text, pos):
            labels.append(f"mpi {m['job']},{m['n']}")
            pos = m.end()
            continue
        if m := _VLLM.match(text, pos):
            labels.append(m["name"] or m["bare"])
            if m["pid"]:
                label_pid = int(m["pid"])
            pos = m.end()
            continue
        if m := _SRUN.match(text, pos):
            labels.append(f"srun {m['n']}")
            pos = m.end()
            continue
        if m := _STERN.match(text, pos):
            labels.append(f"pod/{m['pod']}/{m['ctr']}")
            pos = m.end()
            continue
        break
    body = text[pos:]
    m = _NCCL.search(body, 0, 160)
    if m is None:
        return _partial(body, tuple(labels), label_pid)
    lv = _NCCL_LEVEL.search(body, m.end(), m.end() + 400)
    level = lv["level"] if lv else None
    msg = body[lv.end() :] if lv else body[m.end() :]
    loc = body[m.end() : lv.start()].strip() if lv else ""
    return Parsed(
        body,
        tuple(labels),
        host=m["host"],
        pid=int(m["pid"]),
        dev=int(m["dev"]),
        level=level,
        msg=msg.strip(),
        label_pid=label_pid,
        nccl=lv is not None,
        loc=loc if len(loc) < 120 else "",
    )


def _partial(body: str, labels: tuple[str, ...], label_pid: int | None) -> Parsed:
    """A line without NCCL's host:pid:tid [dev] prefix: an NCCL message all the same?"""
    if (own := _OFI_OWN.match(body)) is not None:
        return Parsed(
            body, labels, level=own["level"], msg=body[own.end() :].strip(),
            label_pid=label_pid, nccl=True,
        )  # fmt: skip
    i = body.find("NCCL ", 0, 240)
    if i == -1 or (m := _NCCL_PARTIAL.search(body, max(0, i - 120), i + 12)) is None:
        return Parsed(body, labels, msg=body, label_pid=label_pid)
    if m.start() > 0 and not body[m.start() - 1].isspace():
        return Parsed(body, labels, msg=body, label_pid=label_pid)
    host = m["host"]
    # "NCCL WARN" alone, or a word that is no host name ("the NCCL INFO line"): no host
    if host is not None and (m["pid"] is None and not any(c in host for c in ".-") and m["dev"] is None):
        host = None
    return Parsed(
        body,
        labels,
        host=host,
        pid=int(m["pid"]) if m["pid"] else None,
        dev=int(m["dev"]) if m["dev"] else None,
        level=m["level"],
        msg=body[m.end() :].strip(),
        label_pid=label_pid,
        nccl=True,
        loc=m["loc"] or "",
    )


# --- a launch's own lines (epdoctor.launch, the panes) ------------------------------------
# torchrun --tee prefixes each local rank's lines with [<role><local_rank>]:
# (e.g. [default3]:); PyTorch's own error output uses [rank<global>]:. A launch knows its own
# launcher, so here any role name counts (parse_line, reading any pasted log, takes only
# rank/default as torchrun's and other [role]: prefixes as labels).
_TEE = re.compile(r"^\[(?P<role>[A-Za-z_]*?)(?P<n>\d+)\]:")


def rank_of_line(line: str, node_index: int, nproc_per_node: int) -> int | None:
    """Global rank of a torchrun-prefixed line, or None for the agent's own lines."""
    m = _TEE.match(line)
    if not m:
        return None
    n = int(m.group("n"))
    if m.group("role") == "rank":
        return n
    return node_index * nproc_per_node + n


def strip_rank_prefix(line: str) -> str:
    return _TEE.sub("", line, count=1)


# Escape sequences and other control characters in a log line: written to the terminal as they
# are, they would move the cursor or recolour a screen; a log may carry them (coloured output).
# Unlike clean() (for parsing), every visible character stays, tabs included.
_SHOWN_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|[\x00-\x1f\x7f]"
)


def shown(line: str) -> str:
    """A log line as a pane shows it: tabs expanded, escape sequences and control codes gone."""
    if "\t" in line:
        line = line.expandtabs(4)
    return line if line.isprintable() else _SHOWN_CONTROL.sub("", line)
