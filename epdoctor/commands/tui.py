"""`epdoctor tui`: the terminal app (targets, traps, plan wizard, launch, guided tour).

Textual is imported only inside run(), so `epdoctor --help` stays light.
"""

from __future__ import annotations

import argparse
import sys

NAME = "tui"
HELP = "the terminal app: diagnose targets, browse traps, plan, launch with live panes, tour"

STARTS = ("targets", "traps", "wizard", "launch", "tour")


def register(p: argparse.ArgumentParser) -> None:
    from epdoctor.options import add_context_arguments, add_target_arguments

    p.add_argument("--plan", metavar="FILE", help="plan.json from `epdoctor plan -o DIR`")
    p.add_argument(
        "--start", choices=STARTS, default="targets", help="screen to open first (default targets)"
    )
    add_context_arguments(p)
    add_target_arguments(p)


def target_argv(argv: list[str]) -> list[str]:
    """The target flags of this command line, as `epdoctor diagnose` would take them."""
    out: list[str] = []
    skip_next = False
    own = {"--plan", "--start", "--transport", "--engine", "--instance"}
    for i, a in enumerate(argv):
        if skip_next:
            skip_next = False
            continue
        name = a.split("=", 1)[0]
        if name in own:
            skip_next = "=" not in a and i + 1 < len(argv)
            continue
        out.append(a)
    return out


def run(args: argparse.Namespace) -> int:
    from epdoctor import exitcodes

    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        print("epdoctor tui needs a terminal (use `epdoctor diagnose` in scripts)", file=sys.stderr)
        return exitcodes.ERROR
    from epdoctor.screens.app import make_app

    argv = sys.argv[1:]
    if argv and argv[0] == "tui":
        argv = argv[1:]
    args.target_argv = target_argv(argv)
    app = make_app(args)
    app.run()
    return int(app.return_code or 0)
