"""The `epdoctor` command line.

Each sub-command is a module in epdoctor/commands/ exposing NAME, HELP,
register(parser) and run(args) -> int. Modules are discovered, so adding a
command touches no shared file. Command modules import heavy clients
(paramiko, kubernetes, textual, questionary) only inside run(), which keeps
`epdoctor --help` and the local diagnose path fast and runnable on a Python
that has only rich and packaging.
"""

from __future__ import annotations

import argparse
import importlib
import math
import os
import pkgutil
import sys
from collections.abc import Sequence

from epdoctor import __version__, exitcodes
from epdoctor.model import EpdoctorError
from epdoctor.redact import redact_text

# Shown first in --help, in this order; other discovered commands follow.
ORDER = ["diagnose", "logs", "collect", "explain", "traps", "lint", "plan", "run", "tui"]


def _command_modules() -> list[object]:
    import epdoctor.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    names.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    return [importlib.import_module(f"epdoctor.commands.{n}") for n in names]


class Parser(argparse.ArgumentParser):
    """argparse with a short answer to wrong input: the command's own usage line and the error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        message = redact_text(message)  # argparse quotes what was typed (--api-key X, a token)
        self.exit(exitcodes.ERROR, f"usage: {short_usage(self)}\n{self.prog}: error: {message}\n")


def short_usage(p: argparse.ArgumentParser) -> str:
    """`epdoctor lint [options] PATH [PATH ...]`: positionals only, options behind --help."""
    parts = [p.prog]
    if any(a.option_strings and a.help is not argparse.SUPPRESS for a in p._actions):
        parts.append("[options]")
    for a in p._actions:
        if a.option_strings or a.help is argparse.SUPPRESS:
            continue
        if isinstance(a, argparse._SubParsersAction):
            parts.append(f"{a.metavar or '{' + ','.join(a.choices) + '}'} ...")
            continue
        name = a.metavar if isinstance(a.metavar, str) else a.dest.upper()
        shapes = {"?": f"[{name}]", "*": f"[{name} ...]", "+": f"{name} [{name} ...]"}
        parts.append(shapes.get(str(a.nargs), name))
    return " ".join(parts) + f"  (`{p.prog} --help` lists them all)"


# Numeric flags where 0 is a real answer; every other int/float flag must be above 0.
ZERO_OK = {"warmup"}


def _number(kind: type, dest: str) -> argparse.Action:
    low = 0 if dest in ZERO_OK else None
    port = dest.endswith("port")
    word = "a whole number" if kind is int else "a number"
    want = f"{word} of 0 or more" if low == 0 else f"{word} above 0"
    if port:
        want = "a port number (1-65535)"

    def parse(text: str):  # type: ignore[no-untyped-def]
        try:
            value = kind(text)
        except ValueError:
            value = None
        ok = value is not None and math.isfinite(value)
        ok = ok and (value >= 0 if low == 0 else value > 0) and (not port or value <= 65535)
        if not ok:
            raise argparse.ArgumentTypeError(f"must be {want}, not {text!r}")
        return value

    parse.__name__ = kind.__name__
    return parse  # type: ignore[return-value]


def _walk(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):
                found += _walk(child)
    return found


def _checked(parser: argparse.ArgumentParser) -> None:
    """Every numeric flag of every command refuses zero, negatives, nan and inf at parse time,
    and each parser remembers itself so a stray argument is answered by its own usage."""
    for p in _walk(parser):
        p.set_defaults(_parser=p)
        for a in p._actions:
            if a.type in (int, float):
                a.type = _number(a.type, a.dest)  # type: ignore[arg-type]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="epdoctor",
        description=(
            "Diagnose and bring up MoE expert-parallel all-to-all over AWS EFA "
            "(DeepEP-V2 / NCCL GIN, vLLM, Dynamo, TensorRT-LLM, SGLang)."
        ),
        epilog="Exit codes: 0 no failures, 1 failures found, 2 epdoctor could not run, "
        "130 interrupted. `epdoctor explain CODE` explains a trap.",
    )
    parser.add_argument("--version", action="version", version=f"epdoctor {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in _command_modules():
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)  # type: ignore[attr-defined]
        mod.register(p)  # type: ignore[attr-defined]
        p.set_defaults(_run=mod.run)  # type: ignore[attr-defined]
    _checked(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if not argv:
        # No arguments in a real terminal opens the app when it is installed;
        # anywhere else (pipes, CI) print help rather than block.
        if sys.stdin.isatty() and sys.stdout.isatty() and "tui" in _names(parser):
            argv = ["tui"]
        else:
            parser.print_help()
            return exitcodes.OK
    args, extra = parser.parse_known_args(argv)
    if extra:  # answered by the sub-command that was given them, with its usage line
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "_run", None):
        parser.print_help()
        return exitcodes.ERROR
    try:
        return int(args._run(args))
    except EpdoctorError as exc:
        print(f"epdoctor: error: {exc}", file=sys.stderr)
        return exitcodes.ERROR
    except KeyboardInterrupt:
        print("epdoctor: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        # `epdoctor ... | head` closed the pipe: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exitcodes.OK


def _names(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
