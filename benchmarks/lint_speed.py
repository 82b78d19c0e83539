"""`epdoctor lint` speed on a large recipe tree, as a ratio to reading the same files.

Builds a tree of N copies of the seed-shaped fixture recipes (tests/fixtures/lint/recipe-*),
then times, in the same run: (a) the baseline, walking the tree and reading every file, and
(b) `lint_paths` on the tree (discovery, every linter, suppressions). Prints both and the ratio.
The target is that lint stays within a small constant factor of reading the files (it parses
each file once and never executes anything): about 100 recipe files a second is the floor for
linting a whole examples/ checkout interactively.

    python benchmarks/lint_speed.py --copies 200
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from epdoctor.lint import lint_paths  # noqa: E402
from epdoctor.lint.shell import pipelines  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "lint"


def build(tree: Path, copies: int) -> int:
    n = 0
    for i in range(copies):
        for src in FIXTURES.glob("recipe-*"):
            dst = tree / f"sample-{i:04d}" / src.name
            shutil.copytree(src, dst)
            for f in dst.rglob("*"):
                if f.is_file():
                    # A distinct comment per copy, so no parse is reused between copies.
                    with f.open("a") as fh:
                        fh.write(f"\n# copy {i}\n")
                    n += 1
    return n


def read_all(tree: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(tree):
        for name in files:
            total += len((Path(dirpath) / name).read_bytes())
    return total


def best_of(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--copies", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp)
        files = build(tree, args.copies)
        base = best_of(lambda: read_all(tree), args.repeat)
        report = lint_paths([tree])

        def cold_lint() -> None:
            pipelines.cache_clear()  # every copy is parsed afresh, as in a real first run
            lint_paths([tree])

        lint = best_of(cold_lint, args.repeat)
    print(f"files: {files}, findings: {len(report.findings)}")
    print(f"read every file: {base * 1000:.1f} ms")
    print(f"epdoctor lint:   {lint * 1000:.1f} ms ({files / lint:.0f} files/s)")
    print(f"ratio lint/read: {lint / base:.1f}x")
    return 0 if files / lint >= 100 else 1


if __name__ == "__main__":
    raise SystemExit(main())
