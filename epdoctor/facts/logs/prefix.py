"""Who wrote a log line: launcher, Kubernetes and NCCL prefixes peeled off one by one.

Outer prefixes come first and may nest (``[pod/p/c] 1: [default3]:host:1:1 [3] NCCL ...``):
kubectl ``--timestamps`` (RFC 3339), ``[2026-01-02 10:24:27]`` dates, ``kubectl logs --prefix``
(``[pod/NAME/container]``), stern (``pod container``), srun -l (``N: ``), mpirun --tag-output
(``[1,N]<stdout>:``), torchrun (``[defaultN]:``, ``[rankN]:``) and vLLM worker tags
(``(Worker_DP3_EP3 pid=123)``, ``(EngineCore_DP0 pid=9)``, ``(VllmWorker rank=2 pid=7)``).
Then NCCL's own ``host:pid:tid [dev]`` (src/debug.cc) is searched, not anchored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07")
_OUTER = [
    ("ts", re.compile(r"(?:\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?) ")),
    ("ts", re.compile(r"\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\] ?")),
    ("pod", re.compile(r"\[pod/(?P<pod>[^/\]\s]+)/(?P<ctr>[^\]\s]+)\] ")),
    ("mpi", re.compile(r"\[\d+,(?P<n>\d+)\]<(?:stdout|stderr)>: ?")),
    ("torchrun", re.compile(r"\[(?P<role>[A-Za-z_]*?)(?P<n>\d+)\]: ?")),
    (
        "vllm",
        re.compile(
            r"\((?P<name>[A-Za-z][\w]*?)(?: rank=(?P<rank>\d+))? pid=(?P<pid>\d+)"
            r"(?:, ip=[\w.:-]+)?\) ?"
        ),
    ),
    ("srun", re.compile(r"(?P<n>\d{1,5}): ")),
    # stern: "<pod> <container> msg"; a pod name has a dash, which keeps "ptxas fatal" out.
    ("stern", re.compile(r"(?P<pod>[a-z0-9]+(?:-[a-z0-9]+)+) (?P<ctr>[a-z0-9]+(?:-[a-z0-9]+)*) ")),
]
NCCL_PREFIX = re.compile(r"(?P<host>[\w.-]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")


@dataclass(frozen=True)
class Attribution:
    labels: tuple[str, ...]  # outer labels, outermost first ("pod/x/c", "torchrun default3")
    host: str | None
    pid: int | None
    dev: int | None
    process_pid: int | None  # a pid named by an outer tag (vLLM), for aliasing
    message: str  # the line after every prefix


def clean(raw: bytes, limit: int) -> str:
    """Bytes of one line -> text without colour codes or carriage returns (cut at limit)."""
    text = raw[:limit].decode("utf-8", "replace")
    if "\x1b" in text:
        text = ANSI.sub("", text)
    if "\r" in text:
        text = text.replace("\r", "")
    return text.strip()


def attribute(text: str) -> Attribution:
    labels: list[str] = []
    process_pid: int | None = None
    pos = 0
    for _ in range(8):  # prefixes nest a few deep at most
        if pos < len(text) and text[pos] == " ":
            pos = len(text) - len(text[pos:].lstrip())
        for kind, rx in _OUTER:
            m = rx.match(text, pos)
            if not m:
                continue
            if kind == "pod":
                labels.append(f"pod/{m['pod']}/{m['ctr']}")
            elif kind == "stern":
                # only a stern prefix when what follows is not NCCL's own host:pid:tid
                labels.append(f"pod/{m['pod']}/{m['ctr']}")
            elif kind == "mpi":
                labels.append(f"mpi {m['n']}")
            elif kind == "torchrun":
                labels.append(f"{m['role'] or 'local'}{m['n']}")
            elif kind == "vllm":
                labels.append(m["name"] + (f" rank={m['rank']}" if m["rank"] else ""))
                process_pid = int(m["pid"])
            elif kind == "srun":
                labels.append(f"task {m['n']}")
            pos = m.end()
            break
        else:
            break
    rest = text[pos:]
    m = NCCL_PREFIX.search(rest, 0, 200)
    if m and (m.start() == 0 or rest[m.start() - 1] in " ]:|"):
        return Attribution(
            tuple(labels),
            m["host"],
            int(m["pid"]),
            int(m["dev"]),
            process_pid,
            rest[m.end() :],
        )
    return Attribution(tuple(labels), None, None, None, process_pid, rest)
