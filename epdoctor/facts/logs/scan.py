"""Find the few lines that can matter in a large log, working on bytes.

Decoding and matching every line in Python runs at a fraction of grep's speed, so the
scanner looks for a short list of rare literals with ``bytes.find`` (C speed) over big
chunks, and only the lines that hold one are sliced out, decoded and parsed. Every
signature the parser knows contains at least one of LITERALS (tests/test_logs_scan.py
checks that), so the prefilter loses nothing the parser would use.
"""

from __future__ import annotations

from collections.abc import Iterator

# Each literal stands for a family of upstream messages (see parse.py for the exact ones).
LITERALS: tuple[bytes, ...] = (
    b"NCCL version ",  # NCCL init.cc version line
    b"set by env",  # "X set by environment to Y", "Plugin name set by env to"
    b"lugin",  # NET/GIN plugin load, init, assign, failure lines
    b"Using network ",  # NCCL: the network a communicator uses
    b"NET/IB : No device",  # NCCL fallback context
    b"NET/OFI ",  # every aws-ofi-nccl line (provider, versions, GIN, GDAKI, GDRCopy)
    b"GIN",  # NCCL gin_host.cc, DeepEP "NCCL GIN is unavailable"
    b"NCCL WARN",
    b"rror",  # Python exceptions, CUDA/NCCL errors, HTTP 429, ptxas errors
    b"CUDA_ERROR_",  # CUDA driver errors (launch failed, no binary for GPU)
    b"compilation failed",  # DeepEP JIT: "NVCC compilation failed"
    b"[DeepEP]",  # DeepEP banners (QP capping)
    b"Prior to NCCL",  # DeepEP compile/runtime NCCL mismatch
    b"all2all manager",  # vLLM: "Using X all2all manager."
    b"Segmentation",  # "Segmentation fault"
    b"SIGSEGV",
    b'", line ',  # Python traceback / faulthandler frames (elastic.py, deepep_v2.py)
    b"nccl-ep is not installed",  # TensorRT-LLM NcclEP
    b"GDAKI-CQE",  # GDAKI completion error signature
    b"libfabric:",  # libfabric's own warnings (gdrcopy init)
)

MAX_CARRY = 1 << 20  # a line longer than this is cut: memory stays bounded
BLOCK = 8 << 20


def scan_block(buf: bytes, literals: tuple[bytes, ...] = LITERALS) -> tuple[list[tuple[int, bytes]], int]:
    """Candidate lines of ``buf`` (whole lines) as (line index in buf, bytes), and its newlines."""
    find, rfind = buf.find, buf.rfind
    spans: dict[int, int] = {}
    n = len(buf)
    for lit in literals:
        i = find(lit)
        while i != -1:
            s = rfind(b"\n", 0, i) + 1
            e = find(b"\n", i)
            if e == -1:
                e = n
            spans[s] = e
            i = find(lit, e)
    out: list[tuple[int, bytes]] = []
    line = 0
    prev = 0
    count = buf.count
    for s in sorted(spans):
        line += count(b"\n", prev, s)
        prev = s
        out.append((line, buf[s : spans[s]]))
    return out, line + count(b"\n", prev)


class ChunkScanner:
    """Incremental: bytes in, (line number, line bytes) of candidate lines out.

    Line numbers start at 1. A partial last line waits for its newline; a line that
    grows past MAX_CARRY without one is scanned as it is and the rest of it skipped.
    """

    def __init__(self, first_line: int = 1) -> None:
        self._carry = b""
        self._skipping = False
        self.line = first_line  # number of the line the next byte belongs to

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        if self._skipping:
            nl = data.find(b"\n")
            if nl == -1:
                return []
            self._skipping = False
            self.line += 1
            data = data[nl + 1 :]
        buf = self._carry + data if self._carry else data
        cut = buf.rfind(b"\n")
        if cut == -1:
            if len(buf) > MAX_CARRY:
                self._carry = b""
                self._skipping = True
                return self._emit(buf[:MAX_CARRY], count_last=False)
            self._carry = buf
            return []
        self._carry = buf[cut + 1 :]
        return self._emit(buf[: cut + 1], count_last=True)

    def flush(self) -> list[tuple[int, bytes]]:
        rest, self._carry = self._carry, b""
        if self._skipping:
            self._skipping = False
            return []
        return self._emit(rest, count_last=False) if rest else []

    def _emit(self, block: bytes, count_last: bool) -> list[tuple[int, bytes]]:
        found, newlines = scan_block(block)
        base = self.line
        self.line += newlines
        return [(base + i, ln) for i, ln in found]


def iter_file(path: str, start: int = 0, end: int | None = None) -> Iterator[tuple[int, bytes]]:
    """Candidates of a byte range of a file (line numbers relative to the range, from 1)."""
    sc = ChunkScanner()
    with open(path, "rb") as f:
        f.seek(start)
        left = None if end is None else end - start
        while left is None or left > 0:
            data = f.read(BLOCK if left is None else min(BLOCK, left))
            if not data:
                break
            if left is not None:
                left -= len(data)
            yield from sc.feed(data)
    yield from sc.flush()
