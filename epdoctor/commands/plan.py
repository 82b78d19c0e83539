"""`epdoctor plan`: engine x transport x instance x model -> verdict, env contract,
commands and manifests.

In a terminal it asks (questionary) for whatever no flag answered; with
--no-input, or when stdin is not a terminal, the flags and their defaults are
the whole input. The headless work is epdoctor.plan's make_plan().
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from epdoctor import exitcodes

NAME = "plan"
HELP = "plan a bring-up: verdict with trap codes, env contract, pins, commands, manifests"

# The --transport default in words, for --help only (register() stays free of the plan's
# data files); tests/test_plan_defaults.py holds it to engines.toml's default_transport.
TRANSPORT_DEFAULTS = "nvshmem for sglang, gin-proxy for the others"

# Flag destinations that are questions; None = not given on the command line.
QUESTIONS = (
    "engine", "transport", "instance", "nodes", "gpus_per_node", "model", "mode",
    "target", "namespace", "hosts", "num_experts", "image",
)  # fmt: skip


def register(p: argparse.ArgumentParser) -> None:
    from epdoctor.plan.model import ENGINES, MODES, TARGETS, TRANSPORTS

    g = p.add_argument_group("what to plan (each is asked in a terminal when not given)")
    g.add_argument("--engine", choices=ENGINES, help="serving engine (default vllm)")
    g.add_argument(
        "--transport",
        choices=TRANSPORTS,
        help="gin-proxy (NCCL GIN CPU proxy), efa-gda (GPU-initiated), nvshmem (SGLang); "
        f"default: the engine's own ({TRANSPORT_DEFAULTS})",
    )
    g.add_argument("--instance", metavar="TYPE", help="instance type (default p5en.48xlarge)")
    g.add_argument("--nodes", type=int, metavar="N", help="node count (default 2)")
    g.add_argument(
        "--gpus-per-node", type=int, metavar="N", help="GPUs per node (default: all of them)"
    )
    g.add_argument(
        "--model",
        metavar="ID|PATH",
        help="Hugging Face id or local model directory (default: the engine's recipe model, "
        "Qwen/Qwen3-30B-A3B-FP8; Qwen/Qwen3-30B-A3B for TensorRT-LLM)",
    )
    g.add_argument(
        "--mode",
        choices=MODES,
        help="eager or graphs where the engine has the choice (default eager)",
    )
    g.add_argument("--target", choices=TARGETS, help="kubernetes (default) or bare nodes")
    g.add_argument("-n", "--namespace", metavar="NS", help="Kubernetes namespace (default default)")
    g.add_argument(
        "--host",
        dest="hosts",
        action="append",
        metavar="HOST",
        help="a bare node, leader first; repeat per node",
    )
    g.add_argument(
        "--num-experts",
        type=int,
        metavar="N",
        help="routed experts, when config.json is not local or cached",
    )
    v = p.add_argument_group("pins")
    v.add_argument("--nccl", metavar="VER", help="NCCL version (default: the transport's pin)")
    v.add_argument("--vllm-pin", metavar="SHA", help="vLLM commit or wheel version")
    v.add_argument("--image", metavar="REF", help="container image with an immutable tag")
    v.add_argument("--name", metavar="NAME", help="StatefulSet / Service name")
    v.add_argument("--hf-cache", metavar="DIR", help="Hugging Face cache to read config.json from")
    v.add_argument(
        "--cache-host-path",
        metavar="DIR",
        help="model cache on each node (an existing instance-store directory); default: emptyDir",
    )
    v.add_argument(
        "--hub",
        action="store_true",
        help="ask the Hugging Face Hub for config.json when it is not cached (5 s timeout)",
    )
    o = p.add_argument_group("output")
    o.add_argument("--no-input", action="store_true", help="never prompt: flags and defaults only")
    o.add_argument("--json", action="store_true", help="print the plan as JSON")
    o.add_argument(
        "-o", "--output", metavar="DIR", help="write plan.json, plan.env, scripts and manifests"
    )
    o.add_argument(
        "--force", action="store_true", help="with -o: replace the plan files already in DIR"
    )


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The answers the flags already gave."""
    out = {k: getattr(args, k, None) for k in QUESTIONS}
    return {k: v for k, v in out.items() if v is not None}


def to_input(answers: dict[str, Any], args: argparse.Namespace) -> Any:
    from epdoctor.plan import PlanInput
    from epdoctor.plan.questions import answered

    fields: dict[str, Any] = answered(answers)
    if getattr(args, "hub", False):
        fields["hub"] = True
    for k in ("nccl", "vllm_pin", "image", "name", "hf_cache", "cache_host_path"):
        if getattr(args, k, None) is not None:
            fields[k] = getattr(args, k)
    return PlanInput(**fields)


def interactive(args: argparse.Namespace) -> bool:
    return not args.no_input and not args.json and sys.stdin.isatty() and sys.stdout.isatty()


def run(args: argparse.Namespace) -> int:
    from epdoctor.plan import PlanInputError, make_plan
    from epdoctor.plan.text import render_text

    answers = given(args)
    if interactive(args):
        answers = ask(answers)
        if answers is None:
            print("epdoctor: plan cancelled", file=sys.stderr)
            return exitcodes.INTERRUPTED
    try:
        plan = make_plan(to_input(answers, args))
    except PlanInputError as exc:
        print(f"epdoctor: error: {exc}", file=sys.stderr)
        return exitcodes.ERROR
    written: list[str] = []
    if args.output:
        try:
            written = plan.render(args.output, force=args.force)
        except OSError as exc:
            print(f"epdoctor: error: cannot write {args.output}: {exc}", file=sys.stderr)
            return exitcodes.ERROR
    if args.json:
        import json

        from epdoctor.plan.render import plan_json

        print(json.dumps(plan_json(plan), indent=2))
    else:
        import shutil

        width = shutil.get_terminal_size().columns - 1 if sys.stdout.isatty() else None
        sys.stdout.write(render_text(plan, width))
        if written:
            print(f"\nWrote {len(written)} files to {args.output}: {', '.join(written)}")
            _next_steps(plan, args.output)
    # Experts that do not divide over EP (or a dense model) are bad input, not a
    # finding about a stack: say so on stderr and exit 2, after the plan itself.
    bad_ep = [r for r in plan.reasons if r.code == "D506" and r.level.value == "blocker"]
    if bad_ep:
        print(f"epdoctor: error: {bad_ep[0].message}", file=sys.stderr)
        return exitcodes.ERROR
    return exitcodes.OK if plan.supported else exitcodes.FINDINGS


def _next_steps(plan: Any, out: str) -> None:
    """After -o with the placeholder image: the exact commands that make the recipe lint-clean."""
    import shlex

    from epdoctor.plan.rules import (
        PLACEHOLDER_REGISTRY,
        image_is_placeholder,
        replan_command,
        your_image,
    )

    if not image_is_placeholder(plan.image):
        return
    mine = your_image(plan.image) if plan.image.startswith(PLACEHOLDER_REGISTRY) else '"$IMAGE"'
    d = shlex.quote(out)
    # no Dockerfile written (SGLang: the sample's, D804): build from where the sample lives
    src = d if os.path.isfile(os.path.join(out, "Dockerfile")) else "SAMPLE_DIR"
    sample = "SGLang DeepEP sample's directory (D804); the plan writes no Dockerfile for it"
    where = f"  # SAMPLE_DIR: the {sample}\n" if src == "SAMPLE_DIR" else ""
    print(
        f"\nThe image is a placeholder (B415): `epdoctor lint {d}` fails until it is yours. Next:\n"
        "  export REGISTRY=123456789012.dkr.ecr.us-east-1.amazonaws.com   # your registry\n"
        f"{where}"
        f"  docker build -t {mine} {src} && docker push {mine}\n"
        f"  {replan_command(plan.input, mine)} -o {d} --force\n"
        f"  epdoctor lint {d}"
    )


def ask(answers: dict[str, Any], **io: Any) -> dict[str, Any] | None:
    """Ask, with questionary, every question no flag answered; None when cancelled.

    The questions, their order, defaults and checks are epdoctor.plan.questions
    (shared with the Textual wizard); `io` goes to prompt_toolkit (input=,
    output=), which is how the tests drive it through a pipe.
    """
    import questionary

    from epdoctor.plan import questions as Q

    out: dict[str, Any] = dict(answers)
    try:  # unsafe_ask: Ctrl-C is ours to report, once (ask() would print a line of its own)
        while (q := Q.next_question(out)) is not None:
            if q.kind == "select":
                choices = [questionary.Choice(label, value=v) for v, label in q.choices]
                value = questionary.select(
                    q.prompt, choices=choices, default=q.default, **io
                ).unsafe_ask()
            else:
                raw = questionary.text(
                    q.prompt,
                    default=q.default,
                    validate=lambda text, q=q: Q.check(q, text) or True,
                    **io,
                ).unsafe_ask()
                value = Q.parse(q, raw)
            out[q.key] = value
    except (KeyboardInterrupt, EOFError):
        return None
    return Q.answered(out)
