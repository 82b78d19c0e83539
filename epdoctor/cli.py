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
import os
import pkgutil
import sys
from collections.abc import Sequence

from epdoctor import __version__, exitcodes
from epdoctor.model import EpdoctorError

# The parser and its checks are the flags module's (the terminal app's flag fields use them too)
from epdoctor.options import ZERO_OK, Parser, checked

__all__ = ["ZERO_OK", "Parser", "build_parser", "main"]

# Shown first in --help, in this order; other discovered commands follow.
ORDER = ["diagnose", "logs", "collect", "explain", "traps", "lint", "plan", "run", "tui"]


def _command_modules() -> list[object]:
    import epdoctor.commands as pkg

    names = [m.name for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")]
    names.sort(key=lambda n: (ORDER.index(n) if n in ORDER else len(ORDER), n))
    return [importlib.import_module(f"epdoctor.commands.{n}") for n in names]


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
    checked(parser)
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
    argv = _kubectl_output(parser, argv)
    args, extra = parser.parse_known_args(argv)
    if extra:  # answered by the sub-command that was given them, with its usage line
        sub = getattr(args, "_parser", parser)
        sub.error(f"unrecognized arguments: {' '.join(extra)}{did_you_mean(sub, extra)}")
    if not getattr(args, "_run", None):
        parser.print_help()
        return exitcodes.ERROR
    try:
        return int(args._run(args))
    except EpdoctorError as exc:
        print(f"epdoctor: error: {exc}", file=sys.stderr)
        return int(getattr(exc, "exit_code", exitcodes.ERROR))
    except KeyboardInterrupt:
        print("epdoctor: interrupted", file=sys.stderr)
        return exitcodes.INTERRUPTED
    except BrokenPipeError:
        # `epdoctor ... | head` closed the pipe: not an error of ours.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return exitcodes.OK


# kubectl's output flag, as its users type it: -o json|yaml|wide
_KUBECTL_O = {"json": "--json", "yaml": "--json (epdoctor writes JSON, not YAML)", "wide": "-v"}


def did_you_mean(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """A hint for a mistyped flag (the closest the command has), as git and cargo give one."""
    import difflib

    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    for word in extra:
        if word.startswith("--"):
            close = difflib.get_close_matches(word.split("=", 1)[0], flags, n=1, cutoff=0.6)
            if close:
                return f" (did you mean {close[0]}?)"
    return ""


def _kubectl_output(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`-o json|yaml|wide` where a command has no -o of its own: its --json or -v, said once."""
    sub = argv[0] if argv else ""
    p: argparse.ArgumentParser | None = parser
    for word in argv[:2]:  # the command, and its own sub-command (`run bench` has -o DIR)
        cmds = next(
            (a.choices for a in p._actions if isinstance(a, argparse._SubParsersAction)), None
        )
        if not isinstance(cmds, dict) or word not in cmds:
            break
        p = cmds[word]
    if p is parser or p is None or any("-o" in a.option_strings for a in p._actions):
        return argv
    out = list(argv)
    for i, word in enumerate(out):
        value = None
        if word in ("-o", "--output") and i + 1 < len(out):
            value, n = out[i + 1], 2
        elif word.startswith(("-o", "--output=")) and word not in ("-o", "--output"):
            value, n = word.split("=", 1)[-1] if "=" in word else word[2:], 1
        if value is None:
            continue
        flags = {a for x in p._actions for a in x.option_strings}
        if value == "json" and "--json" in flags:
            out[i : i + n] = ["--json"]
        elif value == "wide" and "-v" in flags:
            out[i : i + n] = ["-v"]
        elif value == "yaml" and "--json" in flags:
            p.error("-o yaml: epdoctor writes JSON (--json, or -o json); pipe it to yq for YAML")
        else:
            known = [k for k in ("json", "wide") if _KUBECTL_O[k].split()[0] in flags]
            p.error(f"-o {value}: {sub} takes -o " + ("|".join(known) or "nothing"))
        break
    return out


def _names(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
