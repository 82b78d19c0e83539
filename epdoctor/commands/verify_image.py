"""`epdoctor verify-image`: the read-only image gate, run inside a built image or a pod of it.

It runs probes/image_gate.py (the same file the plan's Dockerfile runs as its last layer)
with the engine's python against a plan's expectations, and reports each check as a
trap-coded finding."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from epdoctor import exitcodes

NAME = "verify-image"
HELP = "check this image (or a pod of it) against a plan: NCCL, GIN plugin, DeepEP, engine pins"


def register(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "plan",
        metavar="PLAN",
        help="the plan directory `epdoctor plan -o` wrote, its image/image-gate.json, or "
        "/opt/recipe/image-gate.json inside the image",
    )
    p.add_argument(
        "--stage",
        choices=("build", "pod"),
        default="pod",
        help="build: what a docker build can check; pod (default): also `import deep_ep` "
        "after the in-pod DeepEP build and TensorRT-LLM's factory import",
    )
    p.add_argument("--python", default="python3", metavar="EXE",
                   help="the engine's python (default: python3 on PATH)")  # fmt: skip
    p.add_argument("--timeout", type=_seconds, default=600, metavar="S",
                   help="give up after S seconds (default 600)")  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--fail-on", choices=("fail", "warn", "unknown"), default="unknown",
                   help="lowest status that makes the exit code 1 (default unknown: "
                   "an undecided check is never a pass)")  # fmt: skip


def _seconds(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 1 <= v <= 86400:
        raise argparse.ArgumentTypeError("--timeout must be 1..86400 seconds")
    return v


def expect_file(arg: str) -> Path:
    p = Path(arg)
    for candidate in (p, p / "image" / "image-gate.json", p / "image-gate.json"):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"no image-gate expectations at {arg} (epdoctor plan -o DIR writes "
                            "DIR/image/image-gate.json)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    from importlib import resources

    from epdoctor.checks.image import gate_findings
    from epdoctor.model import Status

    try:
        expect = expect_file(args.plan)
        json.loads(expect.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        print(f"epdoctor: {exc}", file=sys.stderr)
        return exitcodes.ERROR
    script = resources.files("epdoctor.probes") / "image_gate.py"
    argv = [args.python, "-", "--expect", str(expect), "--stage", args.stage,
            "--python", args.python, "--json"]  # fmt: skip
    try:
        p = subprocess.run(argv, input=script.read_bytes(), capture_output=True,
                           timeout=args.timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        print(f"epdoctor: the image gate ran past {args.timeout} s", file=sys.stderr)
        return exitcodes.ERROR
    except OSError as exc:
        print(f"epdoctor: cannot run {args.python}: {exc.strerror or exc}", file=sys.stderr)
        return exitcodes.ERROR
    if p.returncode not in (0, 1):
        err = p.stderr.decode("utf-8", "replace").strip().splitlines()
        print(f"epdoctor: the image gate could not run: {err[-1] if err else p.returncode}",
              file=sys.stderr)  # fmt: skip
        return exitcodes.ERROR
    try:
        doc = json.loads(p.stdout.decode("utf-8", "replace"))
    except ValueError:
        doc = None
    findings = gate_findings(doc)
    threshold = Status(args.fail_on).rank
    rc = exitcodes.FINDINGS if any(f.status.rank >= threshold for f in findings) else exitcodes.OK
    if args.json:
        out = {"command": NAME, "expect": str(expect), "stage": args.stage,
               "findings": [f.to_json() for f in findings], "exit": rc}  # fmt: skip
        print(json.dumps(out, indent=2))
        return rc
    for f in findings:
        print(f"{f.status.value.upper():<8}{f.code}  {f.title}")
        for e in f.evidence:
            print(f"              {e}")
    bad = sum(1 for f in findings if f.status.rank >= threshold)
    print(f"verify-image ({args.stage}): {len(findings)} checks, {bad} at or above {args.fail_on}")
    return rc
