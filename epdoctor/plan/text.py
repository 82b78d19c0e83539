"""The plan as plain text for a terminal: verdict first, then why, then what
to set, pin and run. No terminal library: the command prints these lines."""

from __future__ import annotations

from epdoctor.plan.contract import refused
from epdoctor.plan.model import Level, Plan

MARK = {Level.BLOCKER: "x", Level.CAVEAT: "!", Level.UNKNOWN: "?", Level.INFO: "-"}


def _wrap(text: str, width: int | None, indent: int) -> list[str]:
    """Prose wrapped at words with a hanging indent (never mid-word); unwrapped when piped."""
    if not width or len(text) <= width:
        return [text]
    import textwrap

    return textwrap.wrap(
        text,
        width=max(width, 40),
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    )


def lines(plan: Plan, width: int | None = None) -> list[str]:
    i = plan.input
    out = [f"Verdict: {plan.verdict.value.upper()}"]
    out += _wrap(
        f"  {plan.extra['engine_label']} over {plan.extra['transport_label']} on "
        f"{i.nodes} x {plan.instance} ({plan.gpus_per_node} x {plan.extra['gpu']}, "
        f"{plan.efa_per_node} EFA per node), {i.model}",
        width,
        4,
    )
    out += _wrap(
        f"  world {plan.world} GPUs, serve EP{plan.serve_ep}, mode {plan.mode}"
        + (f", NCCL {plan.nccl} (NCCL_GIN_TYPE={plan.gin_type})" if plan.nccl else "")
        + (f", vLLM {plan.vllm_pin}" if plan.vllm_pin else ""),
        width,
        4,
    )
    out += ["", "Reasons (epdoctor explain CODE for each):"]
    for r in plan.reasons:
        out += _wrap(f"  {MARK[r.level]} {r.code} [{r.level.value}] {r.message}", width, 4)
    if not plan.supported:
        return out
    out += ["", "Env contract (set exactly these):"]
    name_w = max(len(e.name) for e in plan.env) if plan.env else 0
    for e in plan.env:
        out.append(f"  {e.name.ljust(name_w)} = {e.value}    [{e.code}, read by {e.reader}]")
    if plan.forbidden:
        out += ["", "Must NOT be set:"]
        for f in plan.forbidden:
            out += _wrap(f"  {f.name}  [{f.code}] {f.why}", width, 4)
    if rows := refused(i.engine):
        out += ["", "Set by a reference recipe, not adopted here (and why):"]
        for r in rows:
            out += _wrap(f"  {r['name']}: {r['why']} ({r['recipe']})", width, 4)
    out += ["", "Pins and floors:"]
    for p in plan.pins:
        out.append(f"  {p.component}: {p.value}  ({p.kind}, {p.code})")
    c = plan.commands
    out += ["", "Commands (LEADER_ADDR and NODE_RANK come from the environment):"]
    out += [f"  kernel test (every node): {c.kernel_test}", f"  leader: {c.leader}"]
    if c.worker:
        out.append(f"  worker: {c.worker}")
    out.append(f"  smoke: {c.smoke}")
    return out


def render_text(plan: Plan, width: int | None = None) -> str:
    """`width`: the terminal's columns (prose wraps at words); None when piped."""
    return "\n".join(lines(plan, width)) + "\n"
