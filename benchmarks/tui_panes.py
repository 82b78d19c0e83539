"""16 live log panes fed 10,000 lines/s in total: key-press-to-render latency and memory.

    python benchmarks/tui_panes.py [--seconds 30] [--rate 10000] [--panes 16]

Two runs of the same stream, each in its own process so memory is its own:
  app      the Launch screen of `epdoctor tui` (headless, 160x48), lines put into the same
           buffer the launch worker fills; every 100 ms a key (Tab: focus moves to the next
           pane, which redraws two borders) is pressed and the time until the next completed
           screen refresh after it is recorded;
  console  the baseline: the same lines, with the same signature styles, printed to a plain
           rich Console (a terminal-like sink to /dev/null, no windowing).
Printed: latency p50/p99/max (target p99 < 100 ms), peak and final RSS, lines kept, the
achieved feed rate and CPU seconds per 1,000 lines, then the app/console ratios.
The lines are real NCCL INFO lines (tests/fixtures/h200-run/nccl-rank0.log) with torchrun
rank prefixes, cycled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LOG = ROOT / "tests" / "fixtures" / "h200-run" / "nccl-rank0.log"


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def sample_lines() -> list[str]:
    lines = [ln for ln in LOG.read_text(errors="replace").splitlines() if ln.strip()]
    return lines or ["NCCL INFO placeholder"]


def feed(sink, seconds: float, rate: int, panes: int, stop: threading.Event, stats: dict) -> None:
    """Call sink(pane, line) at `rate` lines/s in total, in 10 ms batches, for `seconds`."""
    base = sample_lines()
    t0 = time.monotonic()
    sent = 0
    tick = 0.01
    while not stop.is_set():
        now = time.monotonic() - t0
        if now >= seconds:
            break
        due = int(now * rate)
        while sent < due:
            r = sent % panes
            sink(f"rank{r}", f"[default{r % 8}]:{base[sent % len(base)]}")
            sent += 1
        time.sleep(tick)
    stats["sent"] = sent
    stats["feed_s"] = time.monotonic() - t0


def run_console(seconds: float, rate: int, panes: int) -> dict:
    from rich.console import Console
    from rich.text import Text

    from epdoctor.reports.launch_panes import style_of

    console = Console(
        file=open(os.devnull, "w"),  # noqa: SIM115 - lives as long as the process
        force_terminal=True,
        width=160,
        color_system="truecolor",
    )

    def sink(pane: str, line: str) -> None:
        console.print(Text(f"[{pane}] {line}", style=style_of(line) or ""))

    stats: dict = {}
    peak = [rss_mb()]
    stop = threading.Event()

    def sampler() -> None:
        while not stop.is_set():
            peak[0] = max(peak[0], rss_mb())
            time.sleep(0.25)

    threading.Thread(target=sampler, daemon=True).start()
    c0 = time.process_time()
    feed(sink, seconds, rate, panes, threading.Event(), stats)
    cpu = time.process_time() - c0
    stop.set()
    return {
        "mode": "console",
        "sent": stats["sent"],
        "rate": stats["sent"] / stats["feed_s"],
        "cpu_s_per_1k": cpu / max(1, stats["sent"]) * 1000,
        "rss_peak_mb": max(peak[0], rss_mb()),
        "rss_end_mb": rss_mb(),
    }


def run_app(seconds: float, rate: int, panes: int) -> dict:
    from epdoctor.screens.app import EpdoctorApp
    from epdoctor.screens.logpane import LogPane
    from textual import events

    async def main() -> dict:
        app = EpdoctorApp(start="launch", diagnose_on_start=False)
        async with app.run_test(size=(160, 48)) as pilot:
            await pilot.pause(0.5)
            screen = app.screen
            stats: dict = {}
            stop = threading.Event()
            feeder = threading.Thread(
                target=feed, args=(screen._sink, seconds, rate, panes, stop, stats), daemon=True
            )
            latencies: list[float] = []
            peak = rss_mb()
            c0 = time.process_time()
            feeder.start()
            await pilot.pause(1.0)  # let the panes appear
            pane = screen.panes["rank0"]
            pane.focus()
            await pilot.pause(0.2)
            focus_lat: list[float] = []
            k = 0
            while feeder.is_alive():
                # Keys go in as a terminal's would (a Key event on the app's queue). The latency
                # ends at the first completed screen refresh after the key took effect: Up/Down
                # scroll the focused pane (reading a log); every 5th key is Tab (focus moves
                # between panes, which also redraws the key help).
                k += 1
                if not isinstance(app.focused, LogPane):  # Tab may land on a field: back to a pane
                    pane.focus()
                    await pilot.pause(0.05)
                refreshed = asyncio.Event()
                if k % 5 == 0:
                    key, before = "tab", app.focused
                    changed = lambda b=before: app.focused is not b  # noqa: E731
                else:
                    target = app.focused
                    key = "up"  # 2,000 kept lines: Up never reaches the top in a run
                    y0 = target.scroll_offset.y if target is not None else 0
                    changed = lambda t=target, y=y0: t is None or t.scroll_offset.y != y  # noqa: E731
                t0 = time.perf_counter()
                app.post_message(events.Key(key, None))
                while not changed() and time.perf_counter() - t0 < 5:
                    await asyncio.sleep(0.001)
                app.call_after_refresh(refreshed.set)
                await refreshed.wait()
                ms = (time.perf_counter() - t0) * 1000
                (focus_lat if key == "tab" else latencies).append(ms)
                peak = max(peak, rss_mb())
                await asyncio.sleep(0.1)
            feeder.join()
            await pilot.pause(0.5)
            cpu = time.process_time() - c0
            kept = sum(len(p.lines) for p in screen.panes.values())
            total = sum(p.total for p in screen.panes.values())
            latencies.sort()
            focus_lat.sort()
            return {
                "mode": "app",
                "sent": stats["sent"],
                "rate": stats["sent"] / stats["feed_s"],
                "shown_total": total,
                "lines_kept": kept,
                "panes": len(screen.panes),
                "presses": len(latencies),
                "p50_ms": statistics.median(latencies),
                "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
                "max_ms": latencies[-1],
                "tab_p50_ms": statistics.median(focus_lat) if focus_lat else None,
                "tab_p99_ms": focus_lat[min(len(focus_lat) - 1, int(len(focus_lat) * 0.99))]
                if focus_lat
                else None,
                "cpu_s_per_1k": cpu / max(1, stats["sent"]) * 1000,
                "rss_peak_mb": max(peak, rss_mb()),
                "rss_end_mb": rss_mb(),
                "maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            }

    return asyncio.run(main())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seconds", type=float, default=30.0)
    p.add_argument("--rate", type=int, default=10_000, help="lines per second, all panes")
    p.add_argument("--panes", type=int, default=16)
    p.add_argument("--mode", choices=("app", "console"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.mode:
        fn = run_app if args.mode == "app" else run_console
        print(json.dumps(fn(args.seconds, args.rate, args.panes)))
        return 0
    results = {}
    for mode in ("console", "app"):
        out = subprocess.run(
            [sys.executable, __file__, "--mode", mode, "--seconds", str(args.seconds),
             "--rate", str(args.rate), "--panes", str(args.panes)],
            capture_output=True, text=True, check=True, cwd=ROOT,
        )  # fmt: skip
        results[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    a, c = results["app"], results["console"]
    print(f"stream: {args.panes} panes, {args.rate} lines/s for {args.seconds:.0f} s")
    print(
        f"app:     fed {a['rate']:.0f} lines/s, {a['shown_total']} lines shown in {a['panes']} panes, "
        f"{a['lines_kept']} kept (capped window)"
    )
    print(
        f"         key-press-to-render (Up in a pane) over {a['presses']} presses: "
        f"p50 {a['p50_ms']:.1f} ms, p99 {a['p99_ms']:.1f} ms, max {a['max_ms']:.1f} ms "
        f"(target p99 < 100 ms: {'met' if a['p99_ms'] < 100 else 'MISSED'})"
    )
    if a["tab_p50_ms"] is not None:
        print(
            f"         Tab (focus to the next pane, key help redrawn): p50 {a['tab_p50_ms']:.1f} ms, "
            f"p99 {a['tab_p99_ms']:.1f} ms"
        )
    print(
        f"         RSS peak {a['rss_peak_mb']:.0f} MiB, end {a['rss_end_mb']:.0f} MiB; "
        f"CPU {a['cpu_s_per_1k'] * 1000:.0f} ms per 1,000 lines"
    )
    print(
        f"console: fed {c['rate']:.0f} lines/s; RSS peak {c['rss_peak_mb']:.0f} MiB, end "
        f"{c['rss_end_mb']:.0f} MiB; CPU {c['cpu_s_per_1k'] * 1000:.0f} ms per 1,000 lines"
    )
    print(
        f"ratios app/console: CPU per line {a['cpu_s_per_1k'] / c['cpu_s_per_1k']:.2f}x, "
        f"peak RSS {a['rss_peak_mb'] / c['rss_peak_mb']:.2f}x"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
