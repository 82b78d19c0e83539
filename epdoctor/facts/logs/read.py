"""Read log sources as candidate lines: regular files split over worker processes,
gzip and stdin streamed in one process. Memory stays bounded by the block size."""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterator
from typing import BinaryIO

from epdoctor.facts.logs.scan import BLOCK, ChunkScanner

PARALLEL_MIN = 64 << 20  # smaller files are not worth a second process
SPLIT = 32 << 20  # bytes per worker task


def _scan_range(args: tuple[str, int, int]) -> tuple[list[tuple[int, bytes]], int]:
    """Worker: candidates of [start, end) of a file (lines from 1) and its newline count."""
    path, start, end = args
    sc = ChunkScanner()
    out: list[tuple[int, bytes]] = []
    with open(path, "rb") as f:
        f.seek(start)
        left = end - start
        while left > 0:
            data = f.read(min(BLOCK, left))
            if not data:
                break
            left -= len(data)
            out += sc.feed(data)
    out += sc.flush()
    return out, sc.line - 1


def _boundaries(path: str, size: int) -> list[int]:
    """Offsets at line starts about SPLIT apart (a long line moves a cut, never splits)."""
    cuts = [0]
    with open(path, "rb") as f:
        pos = SPLIT
        while pos < size:
            f.seek(pos)
            while True:
                block = f.read(1 << 16)
                if not block:
                    pos = size
                    break
                nl = block.find(b"\n")
                if nl != -1:
                    pos += nl + 1
                    break
                pos += len(block)
            if pos >= size:
                break
            cuts.append(pos)
            pos += SPLIT
    cuts.append(size)
    return cuts


def iter_path(path: str, workers: int = 2) -> Iterator[list[tuple[int, bytes]]]:
    """Candidate batches of a regular file, in file order, with file line numbers."""
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as f:
            yield from iter_stream(f)
        return
    size = os.path.getsize(path)
    if workers < 2 or size < PARALLEL_MIN:
        with open(path, "rb") as f:
            yield from iter_stream(f)
        return
    import multiprocessing

    cuts = _boundaries(path, size)
    tasks = [(path, a, b) for a, b in zip(cuts, cuts[1:]) if b > a]
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - platforms without fork
        ctx = multiprocessing.get_context()
    base = 0
    with ctx.Pool(workers) as pool:
        # imap keeps file order; each result is one range's candidates
        for found, newlines in pool.imap(_scan_range, tasks):
            yield [(base + n, raw) for n, raw in found]
            base += newlines


def iter_stream(f: BinaryIO, block: int = BLOCK) -> Iterator[list[tuple[int, bytes]]]:
    sc = ChunkScanner()
    while True:
        data = f.read(block)
        if not data:
            break
        got = sc.feed(data)
        if got:
            yield got
    rest = sc.flush()
    if rest:
        yield rest
