"""The plan's questions as data, for every front end (questionary prompts, the
Textual wizard): which question comes next given the answers so far, its
choices and default, and how an answer is checked and parsed. No terminal
library here; each front end only draws the question it is handed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from epdoctor.knowledge import stack
from epdoctor.plan.experts import validate_model
from epdoctor.plan.make import ALIASES, MAX_NODES, validate_image
from epdoctor.plan.model import DEFAULT_MODEL, PlanInput, PlanInputError


@dataclass(frozen=True)
class Question:
    key: str  # the PlanInput field it answers
    prompt: str
    kind: str  # "select", "int", "text", "optional-int", "hosts", "optional-image"
    choices: tuple[tuple[str, str], ...] = ()  # (value, label) for "select"
    default: str = ""
    limit: int = 0  # upper bound for "int"


_D = PlanInput()


def _engine(answers: dict[str, Any]) -> stack.Engine:
    key = str(answers.get("engine") or _D.engine)
    return stack.engines().get(ALIASES.get(key, key), stack.engines()[_D.engine])


def _instance(answers: dict[str, Any]) -> stack.Instance:
    found = stack.resolve_instance(str(answers.get("instance") or _D.instance))
    return found or stack.instances()[_D.instance]


def all_questions(answers: dict[str, Any]) -> list[Question]:
    """Every question that applies given `answers` (answered or not), in order."""
    engine = _engine(answers)
    inst = _instance(answers)
    ts = stack.transports()
    # The engine's own transports first; the rest stay pickable so the verdict explains.
    order = [*engine.transports, *[t for t in ts if t not in engine.transports]]
    qs = [
        Question(
            "engine",
            "Engine",
            "select",
            tuple((k, e.label) for k, e in stack.engines().items()),
            _D.engine,
        ),
        Question(
            "transport",
            "Transport",
            "select",
            tuple(
                (t, ts[t].label + ("" if t in engine.transports else "  (not for this engine)"))
                for t in order
            ),
            engine.default_transport,
        ),
        Question(
            "instance",
            "Instance type",
            "select",
            tuple(
                (i.type, f"{i.type}  ({i.gpus} x {i.gpu}, {i.efa} EFA)")
                for i in stack.instances().values()
            ),
            _D.instance,
        ),
        Question("nodes", "Nodes", "int", default=str(_D.nodes), limit=MAX_NODES),
        Question("gpus_per_node", "GPUs per node", "int", default=str(inst.gpus), limit=inst.gpus),
        Question(
            "model",
            "Model (Hugging Face id or local path)",
            "text",
            default=engine.default_model or DEFAULT_MODEL,
        ),
        Question("num_experts", "Routed experts (blank: read config.json)", "optional-int"),
    ]
    if engine.modes:
        labels = {"eager": "eager (--enforce-eager)", "graphs": "CUDA graphs"}
        qs.append(
            Question(
                "mode",
                "Execution mode",
                "select",
                tuple((m, labels.get(m, m)) for m in engine.modes),
                engine.default_mode,
            )
        )
    qs.append(
        Question(
            "target",
            "Target",
            "select",
            (
                ("kubernetes", "Kubernetes (StatefulSet manifests)"),
                ("bare", "bare nodes (scripts)"),
            ),
            _D.target,
        )
    )
    if (answers.get("target") or _D.target) == "kubernetes":
        qs.append(Question("namespace", "Namespace", "text", default=_D.namespace))
    else:
        qs.append(
            Question(
                "hosts",
                "Node addresses, leader first (space-separated; blank: set LEADER_ADDR later)",
                "hosts",
            )
        )
    qs.append(
        Question(
            "image",
            "Container image, REGISTRY/NAME:TAG (blank: a placeholder; build and push the "
            "written Dockerfile, then plan again with --image)",
            "optional-image",
        )
    )
    return qs


def still_holds(key: str, value: Any, answers: dict[str, Any]) -> bool:
    """Whether an answer given before an earlier answer changed still stands with `answers`.

    A form lets the operator go back: a transport kept from another engine, which the
    new engine does not run on, gives way to the new engine's default (asked again in a
    prompt, reset in the wizard); picking it again afterwards is the operator's choice."""
    if key == "transport":
        return str(value) in _engine(answers).transports
    if key == "model":  # a default of another engine gives way to this engine's recipe model
        defaults = {DEFAULT_MODEL} | {e.default_model for e in stack.engines().values()}
        return str(value) not in defaults or str(value) == (
            _engine(answers).default_model or DEFAULT_MODEL
        )
    return True


def next_question(answers: dict[str, Any]) -> Question | None:
    """The first question `answers` has no key for (a None value counts as answered)."""
    for q in all_questions(answers):
        if q.key not in answers:
            return q
    return None


def check(q: Question, raw: str) -> str | None:
    """Why `raw` is not an answer to `q`, or None when it is."""
    try:
        parse(q, raw)
    except PlanInputError as exc:
        return str(exc)
    return None


def parse(q: Question, raw: str) -> Any:
    """The answer's value (None for a blank optional answer); PlanInputError when bad."""
    v = raw.strip()
    if q.kind == "select":
        if v not in {c for c, _ in q.choices}:
            raise PlanInputError(f"choose one of: {', '.join(c for c, _ in q.choices)}")
        return v
    if q.kind == "int":
        if not v.isdigit() or not 1 <= int(v) <= q.limit:
            raise PlanInputError(f"a whole number from 1 to {q.limit}")
        return int(v)
    if q.kind == "optional-int":
        if not v:
            return None
        if not v.isdigit() or int(v) < 1:
            raise PlanInputError("blank, or a whole number above 0")
        return int(v)
    if q.kind == "hosts":
        return v.split() or None
    if q.kind == "optional-image":
        return validate_image(v) if v else None
    if q.key == "model":
        validate_model(v)
    elif not v:
        raise PlanInputError("required")
    return v


def answered(answers: dict[str, Any]) -> dict[str, Any]:
    """The answers PlanInput takes (blank optional answers dropped)."""
    out = {k: v for k, v in answers.items() if v is not None}
    if "hosts" in out:
        out["hosts"] = tuple(out["hosts"])
    return out
