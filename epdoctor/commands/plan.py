"""`epdoctor plan`: engine x transport x instance x model -> verdict, env contract,
commands and manifests.

In a terminal it asks (questionary) for whatever no flag answered; with
--no-input, or when stdin is not a terminal, the flags and their defaults are
the whole input. The headless work is epdoctor.plan's make_plan().
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from epdoctor import exitcodes

NAME = "plan"
HELP = "plan a bring-up: verdict with trap codes, env contract, pins, commands, manifests"

# Flag destinations that are questions; None = not given on the command line.
QUESTIONS = (
    "engine", "transport", "instance", "nodes", "gpus_per_node", "model", "mode",
    "target", "namespace", "hosts", "num_experts",
)  # fmt: skip


def register(p: argparse.ArgumentParser) -> None:
    from epdoctor.plan.model import ENGINES, MODES, TARGETS, TRANSPORTS

    g = p.add_argument_group("what to plan (each is asked in a terminal when not given)")
    g.add_argument("--engine", choices=ENGINES, help="serving engine (default vllm)")
    g.add_argument(
        "--transport",
        choices=TRANSPORTS,
        help="gin-proxy (NCCL GIN CPU proxy), efa-gda (GPU-initiated), nvshmem (SGLang); "
        "default gin-proxy",
    )
    g.add_argument("--instance", metavar="TYPE", help="instance type (default p5en.48xlarge)")
    g.add_argument("--nodes", type=int, metavar="N", help="node count (default 2)")
    g.add_argument(
        "--gpus-per-node", type=int, metavar="N", help="GPUs per node (default: all of them)"
    )
    g.add_argument(
        "--model",
        metavar="ID|PATH",
        help="Hugging Face id or local model directory (default Qwen/Qwen3-30B-A3B-FP8)",
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


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The answers the flags already gave."""
    out = {k: getattr(args, k, None) for k in QUESTIONS}
    return {k: v for k, v in out.items() if v is not None}


def to_input(answers: dict[str, Any], args: argparse.Namespace) -> Any:
    from epdoctor.plan import PlanInput

    fields: dict[str, Any] = dict(answers)
    if "hosts" in fields:
        fields["hosts"] = tuple(fields["hosts"])
    if getattr(args, "hub", False):
        fields["hub"] = True
    for k in ("nccl", "vllm_pin", "image", "name", "hf_cache"):
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
            written = plan.render(args.output)
        except OSError as exc:
            print(f"epdoctor: error: cannot write {args.output}: {exc}", file=sys.stderr)
            return exitcodes.ERROR
    if args.json:
        import json

        from epdoctor.plan.render import plan_json

        print(json.dumps(plan_json(plan), indent=2))
    else:
        sys.stdout.write(render_text(plan))
        if written:
            print(f"\nWrote {len(written)} files to {args.output}: {', '.join(written)}")
    # Experts that do not divide over EP (or a dense model) are bad input, not a
    # finding about a stack: say so on stderr and exit 2, after the plan itself.
    bad_ep = [r for r in plan.reasons if r.code == "D506" and r.level.value == "blocker"]
    if bad_ep:
        print(f"epdoctor: error: {bad_ep[0].message}", file=sys.stderr)
        return exitcodes.ERROR
    return exitcodes.OK if plan.supported else exitcodes.FINDINGS


def ask(answers: dict[str, Any], **io: Any) -> dict[str, Any] | None:
    """Ask, with questionary, every question no flag answered; None when cancelled.

    `io` goes to prompt_toolkit (input=, output=): tests drive it through a pipe.
    """
    import questionary

    from epdoctor.plan import PlanInput, PlanInputError, knowledge
    from epdoctor.plan.experts import validate_model

    out = dict(answers)
    d = PlanInput()

    def need(key: str) -> bool:
        return key not in out

    def pick(key: str, message: str, choices: list[Any], default: Any) -> bool:
        value = questionary.select(message, choices=choices, default=default, **io).ask()
        if value is None:
            return False
        out[key] = value
        return True

    def text(key: str, message: str, default: str, check: Any, convert: Any = str) -> bool:
        value = questionary.text(message, default=default, validate=check, **io).ask()
        if value is None:
            return False
        out[key] = convert(value.strip()) if value.strip() else None
        if out[key] is None:
            del out[key]
        return True

    def positive(limit: int) -> Any:
        def check(v: str) -> bool | str:
            if v.strip().isdigit() and 1 <= int(v) <= limit:
                return True
            return f"a whole number from 1 to {limit}"

        return check

    def model_ok(v: str) -> bool | str:
        try:
            validate_model(v.strip())
        except PlanInputError as exc:
            return str(exc)
        return True

    def experts_ok(v: str) -> bool | str:
        return True if not v.strip() or (v.strip().isdigit() and int(v) > 0) else "blank or N > 0"

    engines = knowledge.engines()
    if need("engine") and not pick(
        "engine",
        "Engine",
        [questionary.Choice(e.label, value=k) for k, e in engines.items()],
        d.engine,
    ):
        return None
    engine = engines[out["engine"]] if out["engine"] in engines else engines[d.engine]
    transports = knowledge.transports()
    if need("transport"):
        # The engine's own transports first; the others stay pickable so the verdict explains.
        order = [*engine.transports, *[t for t in transports if t not in engine.transports]]
        choices = [
            questionary.Choice(
                transports[t].label + ("" if t in engine.transports else "  (not for this engine)"),
                value=t,
            )
            for t in order
        ]
        if not pick("transport", "Transport", choices, engine.transports[0]):
            return None
    if need("instance"):
        choices = [
            questionary.Choice(f"{i.type}  ({i.gpus} x {i.gpu}, {i.efa} EFA)", value=i.type)
            for i in knowledge.instances().values()
        ]
        if not pick("instance", "Instance type", choices, d.instance):
            return None
    inst = knowledge.resolve_instance(str(out["instance"])) or knowledge.resolve_instance(
        d.instance
    )
    if need("nodes") and not text("nodes", "Nodes", str(d.nodes), positive(64), int):
        return None
    if need("gpus_per_node") and not text(
        "gpus_per_node", "GPUs per node", str(inst.gpus), positive(inst.gpus), int
    ):
        return None
    if need("model") and not text(
        "model", "Model (Hugging Face id or local path)", d.model, model_ok
    ):
        return None
    if need("num_experts") and not text(
        "num_experts",
        "Routed experts (blank: read config.json)",
        "",
        experts_ok,
        int,
    ):
        return None
    if need("mode") and engine.modes:
        labels = {"eager": "eager (--enforce-eager)", "graphs": "CUDA graphs"}
        choices = [questionary.Choice(labels[m], value=m) for m in engine.modes]
        if not pick("mode", "Execution mode", choices, engine.default_mode):
            return None
    if need("target"):
        choices = [
            questionary.Choice("Kubernetes (StatefulSet manifests)", value="kubernetes"),
            questionary.Choice("bare nodes (scripts)", value="bare"),
        ]
        if not pick("target", "Target", choices, d.target):
            return None
    ns_ok = lambda v: bool(v.strip()) or "required"  # noqa: E731
    if (
        out["target"] == "kubernetes"
        and need("namespace")
        and not text("namespace", "Namespace", d.namespace, ns_ok)
    ):
        return None
    if out["target"] == "bare" and need("hosts"):
        value = questionary.text(
            "Node addresses, leader first (space-separated; blank: set LEADER_ADDR later)",
            default="",
            **io,
        ).ask()
        if value is None:
            return None
        if value.split():
            out["hosts"] = value.split()
    return out
