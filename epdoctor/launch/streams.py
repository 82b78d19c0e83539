"""Follow what a launch writes: process logs and per-rank NCCL files, as byte chunks.

``Follower.poll()`` returns the bytes every followed source gained since the
last call. Sources are the started processes' logs and, for each watched
directory on a node, every file that appears in it (NCCL_DEBUG_FILE writes one
per rank). ``LineSplitter`` turns a source's chunks into lines, and
``epdoctor.facts.logs.prefix.rank_of_line`` finds which rank a torchrun-prefixed line
belongs to, so one node stream becomes one pane per rank.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from epdoctor.launch.launcher import Node, Proc
from epdoctor.redact import redact_text

MAX_LINE = 64 * 1024  # a line longer than this is cut, never held whole


@dataclass(frozen=True)
class Chunk:
    source: str  # "node0", "rank3 nccl": how panes are keyed
    data: bytes


@dataclass
class WatchedDir:
    node: Node
    path: str
    # file name -> source name, or None to ignore the file
    name_of: Callable[[str], str | None]
    offsets: dict[str, int] = field(default_factory=dict)


class Follower:
    def __init__(self, procs: list[Proc], dirs: list[WatchedDir] | None = None) -> None:
        self.procs = procs
        self.dirs = list(dirs or [])

    def watch(self, d: WatchedDir) -> None:
        self.dirs.append(d)

    def poll(self) -> list[Chunk]:
        out: list[Chunk] = []
        for p in self.procs:
            data = p.read_new()
            if data:
                out.append(Chunk(p.name, data))
        for d in self.dirs:
            for fname in d.node.list_dir(d.path):
                source = d.name_of(fname)
                if source is None:
                    continue
                off = d.offsets.get(fname, 0)
                data = d.node.read_file(f"{d.path}/{fname}", off)
                if data:
                    d.offsets[fname] = off + len(data)
                    out.append(Chunk(source, data))
        return out

    def drain(self, rounds: int = 50) -> list[Chunk]:
        """Everything left after the processes ended (reads are bounded per call)."""
        out: list[Chunk] = []
        for _ in range(rounds):
            got = self.poll()
            if not got:
                break
            out.extend(got)
        return out


class LineSplitter:
    """Bytes in, complete decoded and redacted lines out; a partial last line waits for its end.

    Every launch pane line (``epdoctor run`` and the TUI) comes from here, so this is where
    launch output is redacted (epdoctor.redact), before any pane or screen holds it.
    """

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[str]:
        self._buf += data
        *lines, self._buf = self._buf.split(b"\n")
        if len(self._buf) > MAX_LINE:
            lines.append(self._buf[:MAX_LINE])
            self._buf = b""
        return [redact_text(ln[:MAX_LINE].decode("utf-8", "replace").rstrip("\r")) for ln in lines]

    def flush(self) -> list[str]:
        rest, self._buf = self._buf, b""
        return [redact_text(rest.decode("utf-8", "replace"))] if rest else []
