"""make_plan(PlanInput) -> Plan: validate, resolve defaults, apply the rules."""

from __future__ import annotations

import dataclasses
import re

from epdoctor.knowledge import stack
from epdoctor.plan import contract, launch, rules
from epdoctor.plan.experts import find_experts, validate_model
from epdoctor.plan.model import (
    DEFAULT_MODEL,
    ENGINES,
    MODES,
    TARGETS,
    TRANSPORTS,
    Level,
    Plan,
    PlanInput,
    PlanInputError,
    Reason,
    Verdict,
)
from epdoctor.plan.versions import nccl as parse_nccl
from epdoctor.schema import MAX_NODES, PIN  # one vLLM-pin shape and node limit, plan.json's too

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
HOST = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?\Z")
# repository[:tag][@sha256:digest]; the tag must not be a moving one.
IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]*?(:[\w][\w.-]{0,127})?(@sha256:[0-9a-f]{64})?\Z", re.I)
MOVING_TAGS = {"latest", "main", "master", "nightly", "stable", "dev", "edge"}


ALIASES = {
    "trtllm": "tensorrt-llm",
    "trt-llm": "tensorrt-llm",
    "nvidia-dynamo": "dynamo",
    "gdaki": "efa-gda",
    "gda": "efa-gda",
    "proxy": "gin-proxy",
    "k8s": "kubernetes",
    "cuda-graphs": "graphs",
    "non-eager": "graphs",
}


def _choice(value: str, allowed: tuple[str, ...] | list[str], what: str) -> str:
    v = (value or "").strip().lower()
    v = ALIASES.get(v, v)
    if v not in allowed:
        raise PlanInputError(f"unknown {what} {value!r}; choose one of: {', '.join(allowed)}")
    return v


def validate_image(image: str) -> str:
    image = image.strip()
    if not IMAGE.match(image) or ("@" not in image and ":" not in image.rsplit("/", 1)[-1]):
        raise PlanInputError(
            f"image {image!r} needs an immutable tag or digest (registry/name:v1-20260916 or @sha256:...)"
        )
    tag = image.rsplit("/", 1)[-1].split("@", 1)[0].partition(":")[2]
    if tag.lower() in MOVING_TAGS:
        raise PlanInputError(
            f"image tag :{tag} moves; with imagePullPolicy IfNotPresent nodes keep whatever they "
            "cached first. Use a dated or versioned tag, or a digest"
        )
    return image


def default_name(engine: str) -> str:
    return {"vllm": "vllm-deepep", "dynamo": "dynamo-deepep", "tensorrt-llm": "trtllm-ncclep",
            "sglang": "sglang-deepep"}[engine]  # fmt: skip


def make_plan(inp: PlanInput) -> Plan:
    engine_key = _choice(inp.engine, ENGINES, "engine")
    transport_key = _choice(
        inp.transport or stack.default_transport(engine_key), TRANSPORTS, "transport"
    )
    target = _choice(inp.target, TARGETS, "target")
    instance = stack.resolve_instance(inp.instance or "")
    if instance is None:
        known = ", ".join(stack.instances())
        raise PlanInputError(f"unknown instance type {inp.instance!r}; known: {known}")
    engine = stack.engines()[engine_key]
    transport = stack.transports()[transport_key]
    if not inp.model:  # the engine's recipe model where the common default cannot run (E411)
        inp = dataclasses.replace(inp, model=engine.default_model or DEFAULT_MODEL)

    if not isinstance(inp.nodes, int) or not 1 <= inp.nodes <= MAX_NODES:
        raise PlanInputError(f"--nodes must be 1..{MAX_NODES}, not {inp.nodes!r}")
    gpus = instance.gpus if inp.gpus_per_node is None else inp.gpus_per_node
    if not isinstance(gpus, int) or not 1 <= gpus <= instance.gpus:
        raise PlanInputError(
            f"--gpus-per-node must be 1..{instance.gpus} on {instance.type}, not {gpus!r}"
        )
    if engine.modes:
        mode = _choice(inp.mode or engine.default_mode, MODES, "mode")
    elif inp.mode and inp.mode != "n/a":
        raise PlanInputError(f"{engine.label} has no eager / CUDA-graph choice; drop --mode")
    else:
        mode = "n/a"
    if not DNS_LABEL.match(inp.namespace or "") or len(inp.namespace) > 63:
        raise PlanInputError(f"namespace {inp.namespace!r} is not a DNS-1123 label")
    name = inp.name or default_name(engine_key)
    # StatefulSet pods are <name>-<index> and carry a controller-revision-hash
    # label <name>-<hash>: keep room under the 63-character label limit.
    if not DNS_LABEL.match(name) or len(name) > 40:
        raise PlanInputError(f"name {name!r} must be a DNS-1123 label of at most 40 characters")
    for host in inp.hosts:
        if not HOST.match(host):
            raise PlanInputError(f"host {host!r} is not a hostname or address")
    if inp.hosts and target != "bare":
        raise PlanInputError("--host names bare nodes; use it with --target bare")
    if inp.hosts and len(inp.hosts) != inp.nodes:
        raise PlanInputError(f"{len(inp.hosts)} hosts given for --nodes {inp.nodes}")
    if inp.cache_host_path is not None and (
        not inp.cache_host_path.startswith("/") or ".." in inp.cache_host_path.split("/")
    ):
        raise PlanInputError(f"--cache-host-path {inp.cache_host_path!r} must be an absolute path")
    validate_model(inp.model)
    # each transport builds its own image (another NCCL, another GIN table): its own name, so
    # an IfNotPresent pull never takes one for the other (the GDAKI recipe names its image apart)
    default = (
        engine.image.replace("-efa:", "-gdaki-efa:") if transport_key == "efa-gda" else engine.image
    )
    image = validate_image(inp.image or default)

    nccl_text = inp.nccl or (engine.nccl_hold if transport.gin and engine.nccl_hold else "")
    nccl_text = nccl_text or (transport.default_nccl if transport.gin else "")
    nccl = parse_nccl(nccl_text) if nccl_text else None
    default_pin = engine.vllm_graphs_pin if mode == "graphs" else engine.vllm_pin
    vllm_pin = (inp.vllm_pin or default_pin) if engine.vllm_pin else ""
    if inp.vllm_pin and not engine.vllm_pin:
        raise PlanInputError(f"{engine.label} does not run on vLLM; drop --vllm-pin")
    if inp.vllm_pin and not PIN.match(inp.vllm_pin):
        raise PlanInputError(
            f"--vllm-pin {inp.vllm_pin[:80]!r} is neither a commit (7-40 hex digits) nor a "
            "version (0.11.0, 0.11.1rc2.dev5+g1a2b3c4)"
        )

    inp = dataclasses.replace(
        inp,
        engine=engine_key,
        transport=transport_key,
        target=target,
        instance=instance.type,
        gpus_per_node=gpus,
        mode=mode,
        nccl=str(nccl) if nccl else None,
        vllm_pin=vllm_pin or None,
        image=image,
        name=name,
    )
    world = inp.nodes * gpus
    serve_ep = gpus if engine.serve_ep == "node" else world
    experts = find_experts(inp.model, inp.num_experts, inp.hf_cache, inp.hub)
    ctx = rules.Ctx(
        inp=inp, engine=engine, transport=transport, instance=instance, gpus=gpus,
        world=world, serve_ep=serve_ep, mode=mode, nccl=nccl, vllm_pin=vllm_pin, experts=experts,
    )  # fmt: skip
    reasons = tuple(rules.evaluate(ctx))
    gin_type = transport.gin_type if transport.gin else None
    env = contract.env_contract(engine_key, transport_key, gin_type)
    forbidden = contract.must_not_set(transport_key, env)
    bad = contract.contract_violations({e.name: e.value for e in env}, forbidden)
    if bad:  # a data error in env.toml, not the operator's
        raise AssertionError(f"env contract sets what it forbids: {bad}")
    return Plan(
        input=inp,
        instance=instance.type,
        gpus_per_node=gpus,
        efa_per_node=instance.efa,
        world=world,
        serve_ep=serve_ep,
        mode=mode,
        nccl=str(nccl) if nccl else "",
        gin_type=gin_type,
        vllm_pin=vllm_pin,
        image=image,
        name=name,
        verdict=verdict_of(reasons),
        reasons=tuple(sorted(reasons, key=lambda r: -r.level.rank)),
        experts=experts,
        env=env,
        forbidden=forbidden,
        pins=contract.pin_table(engine_key, transport_key, str(nccl or ""), vllm_pin),
        commands=launch.commands(
            engine_key, inp.model, world, gpus, inp.nodes, mode, experts.count, transport_key
        ),
        extra={"engine_label": engine.label, "transport_label": transport.label,
               "gpu": instance.gpu, "sm": instance.sm, "target": target,
               "ep_kernel": engine.ep_kernel, "cpu_request": instance.cpu_request,
               "memory_request": instance.memory_request},
    )  # fmt: skip


def verdict_of(reasons: tuple[Reason, ...] | list[Reason]) -> Verdict:
    levels = {r.level for r in reasons}
    if Level.BLOCKER in levels:
        return Verdict.NOT_SUPPORTED
    if Level.CAVEAT in levels or Level.UNKNOWN in levels:
        return Verdict.CAVEATS
    return Verdict.SUPPORTED
