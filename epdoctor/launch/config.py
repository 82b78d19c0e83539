"""A launch's configuration from the plan and the typed options: what runs where, exactly.

The command line and the terminal app both build their launches here (through
``prepare``), so the commands one shows before asking are the commands the other would
run. The options are those of epdoctor.requests; a plan is the JSON `epdoctor plan` writes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from epdoctor.model import EpdoctorError
from epdoctor.requests import (
    BenchOptions,
    KernelTestOptions,
    LaunchRequest,
    ServeOptions,
    SmokeOptions,
)

if TYPE_CHECKING:
    from epdoctor.launch.kernel_test import KernelTestConfig
    from epdoctor.launch.prepared import Launch
    from epdoctor.launch.serve import ServeConfig


def load_plan(path: str | None) -> dict[str, Any]:
    """plan.json through the one input boundary (epdoctor.schema): a bounded read of a regular
    file, then every field the launch reads checked against its bounds."""
    from epdoctor.schema import load_plan_file

    if not path:
        return {}
    return load_plan_file(path)


def plan_of(request: LaunchRequest) -> dict[str, Any]:
    """The request's plan: the file it names, else the plan at hand (the app's)."""
    return load_plan(request.plan_file) if request.plan_file else dict(request.plan)


def plan_env(plan: dict[str, Any]) -> dict[str, str]:
    return {
        str(e["name"]): str(e["value"])
        for e in plan.get("env") or []
        if isinstance(e, dict) and "name" in e and "value" in e
    }


def default_python() -> str:
    if importlib.util.find_spec("torch") is not None:
        return sys.executable
    return "python3"


def run_dir(options: Any, what: str) -> str:
    return options.run_dir or f"/tmp/epdoctor-{what}-{time.strftime('%Y%m%d-%H%M%S')}"


def kernel_config(
    options: KernelTestOptions, plan: dict[str, Any], nodes: list[Any]
) -> KernelTestConfig:
    from epdoctor.launch.gates import NetworkExpectation
    from epdoctor.launch.kernel_test import KernelTestConfig, builtin_args

    o = options
    kind = "deepep" if o.deepep else (o.kind or "builtin")
    gpus = o.gpus or int(plan.get("gpus_per_node") or 1)
    efa_count = o.efa_count or (int(plan["efa_per_node"]) if plan.get("efa_per_node") else None)
    multi = len(nodes) > 1
    expect_efa = o.expect_efa if o.expect_efa is not None else (True if multi else None)
    if expect_efa:
        reason = ""
    elif multi:  # --no-expect-efa on several nodes: the operator's word, not a topology
        reason = "--no-expect-efa"
    else:
        reason = "one node: ranks talk over NVLink/PCIe, not a NIC"
    tokens = [int(t) for t in o.tokens.split(",")] if o.tokens else None
    test_args = list(builtin_args(tokens, o.baseline)) if kind == "builtin" else []
    test_args += o.test_arg
    return KernelTestConfig(
        kind=kind,
        nodes=nodes,
        gpus=gpus,
        run_dir=run_dir(o, "kernel-test"),
        python=o.python or default_python(),
        test_args=tuple(test_args),
        env=plan_env(plan),
        deepep_dir=o.deepep or "",
        backend=o.backend,
        expect=NetworkExpectation(
            efa=expect_efa, efa_count=efa_count, multi_node=multi, reason=reason
        ),
        timeout_s=o.timeout,
        master_port=o.master_port,
        master_addr=o.master_addr or _first_address(nodes),
    )


def isolate_options(options: KernelTestOptions) -> KernelTestOptions:
    """Isolation runs the built-in test on every pair, whatever kind was asked for."""
    return replace(options, deepep=None, kind="builtin")


def _engine_of(options: Any, plan: dict[str, Any]) -> str:
    return options.engine or str((plan.get("input") or {}).get("engine") or "vllm")


def serve_config(
    options: ServeOptions, plan: dict[str, Any], nodes: list[Any], leader_cmd: str | None = None
) -> ServeConfig:
    from epdoctor.launch.serve import ServeConfig

    cmds = plan.get("commands") or {}
    leader = leader_cmd or options.cmd or cmds.get("leader")
    if not leader:
        raise EpdoctorError("no serve command: pass --cmd or --plan plan.json")
    worker = options.worker_cmd
    if worker is None:
        worker = cmds.get("worker") or ""
    return ServeConfig(
        nodes=nodes,
        leader_cmd=leader,
        worker_cmd=worker if len(nodes) > 1 else "",
        engine=_engine_of(options, plan),
        url=options.url,
        run_dir=run_dir(options, "serve"),
        env=plan_env(plan),
        budget_s=options.startup_budget,
        leader_addr=_first_address(nodes),
    )


def bench_arms(
    options: BenchOptions, plan: dict[str, Any], nodes: list[Any]
) -> list[tuple[str, ServeConfig | None]]:
    """The sweep against what serves now, or an A/B on the same nodes and image, each arm
    served, swept and stopped in turn: --ab switches every node's all-to-all backend with the
    engine's own switch; --ab-transport flips CPU proxy and GPU-initiated GIN by env only."""
    if options.ab and options.ab_transport:
        raise EpdoctorError("--ab and --ab-transport each compare one thing: pass one of them")
    if not options.ab and not options.ab_transport:
        return [("current", None)]
    from dataclasses import replace

    from epdoctor.launch.bench import with_backend, with_transport

    base = serve_config(options.serve(), plan, nodes)
    if options.ab:
        alt = replace(
            base,
            leader_cmd=with_backend(base.leader_cmd, options.ab, base.engine),
            worker_cmd=with_backend(base.worker_cmd, options.ab, base.engine),
        )
        return [("current", base), (options.ab, alt)]
    other = transport_flip(plan, base.engine)
    return [("current", base), (other, replace(base, env=with_transport(base.env, other)))]


def transport_flip(plan: dict[str, Any], engine: str) -> str:
    """The other GIN transport of the plan's, where the same image can run both."""
    from packaging.version import Version

    from epdoctor.knowledge import stack

    inp = plan.get("input") or {}
    current = str(inp.get("transport") or "")
    if current not in ("gin-proxy", "efa-gda"):
        raise EpdoctorError("--ab-transport needs a plan (--plan) on gin-proxy or efa-gda")
    other = "efa-gda" if current == "gin-proxy" else "gin-proxy"
    eng = stack.engines().get(engine)
    if eng is None or other not in eng.transports:
        raise EpdoctorError(f"--ab-transport: {engine} does not run on {other} (E501)")
    need = stack.transports()["efa-gda"].nccl_min
    nccl = str(plan.get("nccl") or "")
    try:
        ok = bool(nccl) and Version(nccl) >= Version(need)
    except ValueError:
        ok = False
    if not ok:
        raise EpdoctorError(
            f"--ab-transport: the image's NCCL {nccl or '(unknown)'} has no NCCL_GIN_TYPE=5 "
            f"(EFA-GDA needs >= {need}, T101); plan with --nccl {need} so one image runs both arms"
        )
    return other


def bench_levels(options: BenchOptions) -> list[int]:
    levels = [int(c) for c in options.concurrency.split(",") if c.strip()]
    if not levels or any(c < 1 for c in levels):
        raise EpdoctorError(
            f"--concurrency: positive integers expected, got {options.concurrency!r}"
        )
    return levels


def _first_address(nodes: list[Any]) -> str:
    """The rendezvous address: the first node's, as the others reach it."""
    return str(getattr(nodes[0], "address", None) or "127.0.0.1")


def prepare_smoke(request: LaunchRequest, plan: dict[str, Any], nodes: list[Any],
                  resolve: bool) -> Launch:  # fmt: skip
    """The smoke request, exactly as it will be sent. ``resolve``: ask the server which model
    it serves now when no --model is given (a dry run and the terminal app contact nothing:
    the plan's model, or the first model /v1/models names when the session runs)."""
    from epdoctor.launch import smoke
    from epdoctor.launch.prepared import Launch

    o = request.options
    assert isinstance(o, SmokeOptions)
    planned = str((plan.get("input") or {}).get("model") or "")
    model = o.model or (smoke.first_model(o.url) if resolve else "") or planned
    if resolve and not model:
        raise EpdoctorError(f"no model: {o.url}/v1/models answered nothing; pass --model")
    if model:
        request = replace(request, options=replace(o, model=model))
        line = f"POST {o.url}/v1/chat/completions {json.dumps(smoke.payload(model, o.max_tokens))}"
    else:
        line = (
            f"POST {o.url}/v1/chat/completions (model: the first model /v1/models names, "
            f"max_tokens {o.max_tokens})"
        )
    return Launch("smoke", [line], request, plan, None, nodes)


def prepare(request: LaunchRequest, plan: dict[str, Any], nodes: list[Any]) -> Launch:
    """The launch on these nodes with its exact commands, as `epdoctor run` shows them."""
    from epdoctor.launch.prepared import Launch

    what, o = request.what, request.options
    if isinstance(o, KernelTestOptions) and o.isolate and len(nodes) < 2:
        raise EpdoctorError(
            "--isolate needs several nodes (SSH hosts or Kubernetes pods); this launch has one"
        )
    if isinstance(o, KernelTestOptions) and o.isolate:
        from epdoctor.launch import isolate as iso
        from epdoctor.launch.kernel_test import describe

        pairs = iso.pair_plan([n.name for n in nodes])
        by_name = {n.name: n for n in nodes}
        sample = kernel_config(isolate_options(o), plan, [by_name[p] for p in pairs[0]])
        lines = [
            f"{len(pairs)} pair runs (half-splits first from {iso.HALVES_FROM} nodes), each:",
            *describe(sample),
        ]
        return Launch(what, lines, request, plan, sample, nodes)
    if isinstance(o, KernelTestOptions):
        from epdoctor.launch.kernel_test import describe

        cfg = kernel_config(o, plan, nodes)
        return Launch(what, describe(cfg), request, plan, cfg, nodes)
    if isinstance(o, ServeOptions):
        from epdoctor.launch.serve import describe as serve_lines

        cfg = serve_config(o, plan, nodes)
        return Launch(what, serve_lines(cfg), request, plan, cfg, nodes)
    if isinstance(o, BenchOptions):
        levels = bench_levels(o)
        arms = bench_arms(o, plan, nodes)
        lines = [
            f"serve: bash -c {c.leader_cmd!r}, then the sweep, then stop"
            for _, c in arms
            if c is not None
        ]
        lines.append(
            f"warm-up {o.warmup}, then per level {levels}: "
            f"{o.requests_per_level or '5 x level'} requests to {o.url} "
            f"(max_tokens {o.max_tokens}, ignore_eos, unique prefixes)"
        )
        return Launch(what, lines, request, plan, arms, nodes)
    raise EpdoctorError(f"epdoctor run {what}: nothing to prepare")
