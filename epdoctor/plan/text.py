"""The plan as plain text for a terminal: verdict first, then why, then what
to set, pin and run. No terminal library: the command prints these lines."""

from __future__ import annotations

from epdoctor.plan.model import Level, Plan

MARK = {Level.BLOCKER: "x", Level.CAVEAT: "!", Level.UNKNOWN: "?", Level.INFO: "-"}


def lines(plan: Plan) -> list[str]:
    i = plan.input
    out = [
        f"Verdict: {plan.verdict.value.upper()}",
        f"  {plan.extra['engine_label']} over {plan.extra['transport_label']} on "
        f"{i.nodes} x {plan.instance} ({plan.gpus_per_node} x {plan.extra['gpu']}, "
        f"{plan.efa_per_node} EFA per node), {i.model}",
        f"  world {plan.world} GPUs, serve EP{plan.serve_ep}, mode {plan.mode}"
        + (f", NCCL {plan.nccl} (NCCL_GIN_TYPE={plan.gin_type})" if plan.nccl else "")
        + (f", vLLM {plan.vllm_pin}" if plan.vllm_pin else ""),
        "",
        "Reasons (epdoctor explain CODE for each):",
    ]
    for r in plan.reasons:
        out.append(f"  {MARK[r.level]} {r.code} [{r.level.value}] {r.message}")
    if not plan.supported:
        return out
    out += ["", "Env contract (set exactly these):"]
    width = max(len(e.name) for e in plan.env) if plan.env else 0
    for e in plan.env:
        out.append(f"  {e.name.ljust(width)} = {e.value}    [{e.code}, read by {e.reader}]")
    if plan.forbidden:
        out += ["", "Must NOT be set:"]
        out += [f"  {f.name}  [{f.code}] {f.why}" for f in plan.forbidden]
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


def render_text(plan: Plan) -> str:
    return "\n".join(lines(plan)) + "\n"
