"""The rules behind a verdict. Each is a detector of the plan domain (checks/registry.py): it
takes the resolved context and yields Reasons (Findings in the plan's words) tied to trap codes; the facts they test (which engine runs on which
transport, which instance has completion counters, which pin carries a fix)
come from data/, so the rules only say how those facts combine."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from packaging.version import Version

from epdoctor.checks.registry import detector, detectors
from epdoctor.knowledge import stack
from epdoctor.knowledge.stack import Engine, Instance, Transport
from epdoctor.plan.model import Experts, Level, PlanInput, Reason
from epdoctor.plan.versions import vllm_commit


@dataclass(frozen=True)
class Ctx:
    inp: PlanInput
    engine: Engine
    transport: Transport
    instance: Instance
    gpus: int
    world: int
    serve_ep: int
    mode: str
    nccl: Version | None
    vllm_pin: str
    experts: Experts


def evaluate(ctx: Ctx) -> list[Reason]:
    out: list[Reason] = []
    for d in detectors("plan"):
        out.extend(d.fn(ctx))
    if any(r.code == "E501" for r in out):
        # Preconditions of a transport the engine cannot use are noise.
        out = [r for r in out if r.level is not Level.INFO or r.code.startswith("D50")]
    return out


def _r(code: str, level: Level, message: str) -> Reason:
    return Reason(code, level.status, message)


@detector("E501", domain="plan")
def engine_runs_on_transport(c: Ctx) -> Iterator[Reason]:
    if c.transport.key not in c.engine.transports:
        why = stack.unsupported().get(f"{c.engine.key}/{c.transport.key}", "")
        runs = ", ".join(c.engine.transports)
        yield _r(
            "E501",
            Level.BLOCKER,
            f"{c.engine.label} does not run its EP all-to-all on {c.transport.label} "
            f"(it runs on: {runs}). {why}".strip(),
        )


@detector("H125", domain="plan")
def completion_counters(c: Ctx) -> Iterator[Reason]:
    if c.transport.needs_comp_counters and not c.instance.efa_comp_counters:
        yield _r(
            "H125",
            Level.BLOCKER,
            f"{c.instance.type} ({c.instance.gpu}) has no EFA completion counters, which "
            "EFA-GDA needs; aws-ofi-nccl enables it only on p5en, p6-b200 and p6-b300. "
            "Use --transport gin-proxy here.",
        )


@detector("T101", "T102", "L505", "E104", "L101", "C510", domain="plan")
def nccl_version(c: Ctx) -> Iterator[Reason]:
    if not c.transport.gin or c.nccl is None:
        return
    v = c.nccl
    if c.transport.key == "efa-gda" and v < Version(c.transport.nccl_min):
        yield _r(
            "T101",
            Level.BLOCKER,
            f"NCCL {v} has no NCCL_GIN_TYPE={c.transport.gin_type} (EFA_GDA arrives in "
            f"{c.transport.nccl_min}); the plan does not write the reference recipe's pre-release type "
            f"{c.transport.legacy_gin_type}.",
        )
        yield _r("T102", Level.INFO, c.transport.legacy_note)
    if c.engine.nccl_hold:
        hold = Version(c.engine.nccl_hold)
        if v > hold:
            yield _r(
                "L505",
                Level.BLOCKER,
                f"NCCL {v} with prebuilt libnccl_ep {c.engine.nccl_ep_prebuilt}: it is compiled "
                f"against the {hold} device API and ncclDevComm is not append-only in "
                f"{c.engine.nccl_abi_change} (fields "
                f"shift mid-struct), the fails-quietly case diagnose reports as E103. Hold NCCL at {hold}.",
            )
        elif v < hold:
            yield _r(
                "E104",
                Level.BLOCKER,
                f"NCCL {v} is below TensorRT-LLM's _MIN_NCCL_RUNTIME_VERSION {hold}: NcclEP "
                "raises 'nccl-ep is not installed.'",
            )
        else:
            yield _r(
                "L505",
                Level.INFO,
                f"NCCL held at {hold} for prebuilt libnccl_ep {c.engine.nccl_ep_prebuilt}; bump "
                "only with a "
                "libnccl_ep rebuilt on the newer device API, then re-run the kernel probe.",
            )
    elif c.engine.uses_deepep and v < stack.floor("nccl_deepep_v2"):
        yield _r(
            "L101",
            Level.BLOCKER,
            f"NCCL {v} is below what vLLM's DeepEP-V2 manager needs "
            f"({stack.floor('nccl_deepep_v2')}; ncclGetLsaDevicePointer from "
            f"{stack.floor('nccl_lsa')}).",
        )
    base = c.transport.nccl_base
    if c.transport.key == "gin-proxy" and v < Version(base) and not c.engine.nccl_hold:
        yield _r(
            "C510",
            Level.INFO,
            f"Planned on NCCL {v}, the version the reference recipes ran the CPU proxy on end to end; "
            f"aws-ofi-nccl's gin-getting-started now names NCCL >= {base} as its base "
            f"(pass --nccl {base} to follow it; NCCL_GIN_TYPE=2 is unchanged).",
        )


@detector("H111", "H124", "N104", "H122", "H103", "C108", "N102", domain="plan")
def node_preconditions(c: Ctx) -> Iterator[Reason]:
    if not c.transport.gin:
        return
    yield _r(
        "H111",
        Level.INFO,
        f"Node precondition: host gdrdrv and libgdrapi >= {stack.floor('gdrcopy')} "
        "(GIN's forced-PCIe copy); check with `epdoctor diagnose`.",
    )
    if c.transport.key == "efa-gda":
        t = c.transport
        installer = stack.floor("efa_installer")
        yield _r("H124", Level.INFO, f"Node precondition: EFA installer >= {installer}.")
        yield _r(
            "N104",
            Level.INFO,
            f"Node precondition: libfabric >= {t.libfabric_min}, rdma-core >= 64.",
        )
        yield _r(
            "H122", Level.INFO, f"Node precondition: efa.ko >= {t.efa_driver_min} on the host."
        )
        yield _r(
            "H103",
            Level.INFO,
            'Node precondition: nvidia module option NVreg_RegistryDwords="PeerMappingOverride=1", '
            "in effect after a driver reload.",
        )
        yield _r(
            "C108",
            Level.INFO,
            "OFI_NCCL_GDAKI_EFA_HW_COUNTER stays unset (auto, aws-ofi-nccl 1.21.x's default): off "
            "refuses GDAKI on every domain at 1.21.1, on is a bring-up override that fails where "
            "the EFA has no completion counter, and 0/1 are invalid values.",
        )
    yield _r(
        "N102",
        Level.INFO,
        "The GIN plugin is the EFA installer's bundled aws-ofi-nccl 1.21.1, not a source build: "
        "the vLLM reference recipe moved to it (https://github.com/awslabs/awsome-distributed-ai/pull/1230, "
        "review round 3) where the Dynamo and TensorRT-LLM recipes still build v1.21.1 from source "
        "(pull/1256, pull/1240); the Dockerfile gates it on its GIN export and on GDRCopy.",
    )


@detector("E503", domain="plan")
def execution_mode(c: Ctx) -> Iterator[Reason]:
    if c.mode != "graphs":
        return
    commit = vllm_commit(c.vllm_pin)
    if commit is None:
        yield _r(
            "E503",
            Level.UNKNOWN,
            f"CUDA-graph mode needs a vLLM at or after the #52632 merge (14617c2b); the plan "
            f"cannot place vLLM {c.vllm_pin} relative to it. Use --mode eager or a known pin.",
        )
    elif not commit.has_52632:
        yield _r(
            "E503",
            Level.BLOCKER,
            f"vLLM {commit.sha} predates the #52632 merge: CUDA-graph mode hits the empty "
            "ExpertTokensMetadata path. Use --mode eager or --vllm-pin 14617c2b.",
        )
    else:
        yield _r(
            "E503",
            Level.CAVEAT,
            f"vLLM {commit.sha} carries #52632, so CUDA graphs are expected to work; the "
            "reference recipes' published tables are eager and non-eager was not re-measured at this pin.",
        )


@detector("E502", domain="plan")
def trtllm_single_node_serve(c: Ctx) -> Iterator[Reason]:
    if c.engine.key != "tensorrt-llm" or c.inp.nodes < 2:
        return
    where = (
        "on VPC-CNI pods mpirun's out-of-band bootstrap cannot reach across /32 pod networks"
        if c.inp.target == "kubernetes"
        else "a node-spanning trtllm-serve needs an mpirun bootstrap the reference recipes never ran"
    )
    yield _r(
        "E502",
        Level.CAVEAT,
        f"trtllm-serve cannot span nodes here ({where}): the plan serves EP{c.gpus} on each "
        f"node and proves the {c.world}-rank cross-node path with the torchrun NcclEP probe.",
    )


@detector("D504", domain="plan")
def deepep_on_sm103(c: Ctx) -> Iterator[Reason]:
    if c.engine.uses_deepep and c.instance.sm == "10.3":
        yield _r(
            "D504",
            Level.CAVEAT,
            f"{c.instance.type} is sm_103: DeepEP's JIT maps every major-10 GPU to sm_100f and "
            "ptxas (CUDA 13.0) rejected the PTX at the reference recipes' DeepEP pin; build the in-pod "
            "_C.so and run the kernel test before serving.",
        )


@detector("M509", domain="plan")
def single_node(c: Ctx) -> Iterator[Reason]:
    if c.inp.nodes == 1:
        yield _r(
            "M509",
            Level.CAVEAT,
            "One node: the EP all-to-all stays on NVLink, so this plan proves nothing about EFA.",
        )


@detector("M508", domain="plan")
def measured(c: Ctx) -> Iterator[Reason]:
    if c.transport.key not in c.engine.transports:
        return
    pair = (c.transport.key, c.instance.type)
    if c.engine.key == "vllm" and pair == ("efa-gda", "p5en.48xlarge"):
        yield _r(
            "M508",
            Level.CAVEAT,
            "The GDAKI reference recipe (https://github.com/awslabs/awsome-distributed-ai/pull/1231) "
            "ran vLLM GPU-initiated end to end on 2 and 4 p5en.48xlarge, on a pre-release stack: "
            "NCCL_GIN_TYPE=3 with rdma-core post-#1701, libfabric post-#12591 and aws-ofi-nccl "
            "a3d2680 built --enable-gdaki (T102). This plan's released stack (NCCL_GIN_TYPE=5, "
            "NCCL 2.31.2, the installer-bundled aws-ofi-nccl 1.21.1) was not run by it: run every gate.",
        )
    elif pair not in c.engine.measured:
        ran = "; ".join(f"{t} on {i}" for t, i in c.engine.measured) or "nothing in detail"
        yield _r(
            "M508",
            Level.CAVEAT,
            f"No reference recipe ran {c.engine.label} over {c.transport.label} on {c.instance.type} end to "
            f"end (they ran: {ran}); planned from the mechanism, so run every gate.",
        )
    if c.engine.key == "sglang" and pair in c.engine.measured:
        how = "pods" if c.inp.target == "kubernetes" else "the plan's scripts"
        yield _r(
            "M508",
            Level.CAVEAT,
            "The SGLang DeepEP sample ran its containers with `docker run` on the hosts (host "
            "network, --device /dev/infiniband --device /dev/gdrdrv, unprivileged: only its "
            "UCCL variant is --privileged; DeepSeek-R1 at TP16/EP16); in "
            f"{how} the EFA devices come from the device plugin and /dev/gdrdrv from a "
            "privileged pod (no gdrdrv device plugin assumed), which it did not run: the gates, "
            "not the sample, are the evidence.",
        )
    if c.engine.key in ("vllm", "dynamo") and pair in c.engine.measured:
        yield _r(
            "M508",
            Level.INFO,
            "The reference recipes' end-to-end runs used an earlier substrate, and no recipe "
            "built this combination (installer-bundled plugin, DeepEP fork 97d8f9bc, vLLM "
            "e2f993dc4) as one image: the image gate and the kernel test, before serve, are "
            "the evidence.",
        )


PLACEHOLDER_REGISTRY = "REPLACE_WITH_YOUR_REGISTRY"


def image_is_placeholder(image: str) -> bool:
    return image.startswith(PLACEHOLDER_REGISTRY) or "REPLACE_WITH" in image


def your_image(image: str) -> str:
    """The placeholder image under the operator's registry, as a shell word: "$REGISTRY/..."."""
    return '"$REGISTRY' + image[len(PLACEHOLDER_REGISTRY) :] + '"'


def replan_command(inp: PlanInput, image: str) -> str:
    """The `epdoctor plan` line that makes this same plan with `image` (a shell word already;
    scripts, not prompts)."""
    import shlex

    args = ["epdoctor", "plan", "--no-input", "--engine", inp.engine, "--transport", inp.transport]
    args += ["--instance", inp.instance, "--nodes", str(inp.nodes), "--model", inp.model]
    if inp.target and inp.target != "kubernetes":
        args += ["--target", inp.target]
    for h in inp.hosts:
        args += ["--host", h]
    if inp.namespace and inp.namespace != "default":
        args += ["-n", inp.namespace]
    return " ".join(shlex.quote(str(a)) for a in args) + f" --image {image}"


# what a checkpoint's name says about its weights' quantization (Hugging Face naming)
QUANTIZED_NAME = re.compile(
    r"(?i)(?:^|[-_/.])(?:fp8|fp4|nvfp4|mxfp4|int8|int4|w4a16|w8a8|w4a8|awq|gptq|bnb|[48]bit)"
    r"(?:$|[-_.])"
)


@detector("E411", domain="plan")
def trtllm_quantized(c: Ctx) -> Iterator[Reason]:
    """NcclEP v0.1 carries no quantized MoE layer: a quantized checkpoint cannot serve on it."""
    if c.engine.key != "tensorrt-llm" or not QUANTIZED_NAME.search(c.inp.model):
        return
    yield _r(
        "E411",
        Level.BLOCKER,
        f"{c.inp.model} is a quantized checkpoint and NcclEP v0.1 refuses quantized MoE "
        "communication (the serve fails building its MoE layers): serve the BF16 checkpoint, as "
        f"the recipe does (--model {c.engine.default_model or 'Qwen/Qwen3-30B-A3B'}).",
    )


@detector("B415", domain="plan")
def placeholder_image(c: Ctx) -> Iterator[Reason]:
    """The engine's default image names no registry: say so, with the commands that fix it."""
    image = c.inp.image or c.engine.image
    if not image_is_placeholder(image):
        return
    mine = your_image(image) if image.startswith(PLACEHOLDER_REGISTRY) else '"$IMAGE"'
    if c.engine.key == "sglang":  # its image is the sample's Dockerfile (D804): none written
        build = (f"build the SGLang sample's Dockerfile (D804) and push it (docker build -t "
                 f"{mine} SAMPLE_DIR && docker push {mine})")  # fmt: skip
    else:
        build = (f"build the written Dockerfile and push it (docker build -t {mine} DIR && "
                 f"docker push {mine})")  # fmt: skip
    yield _r(
        "B415",
        Level.INFO,  # the stack is not in question: the verdict stays; lint still fails on it
        f"The image {image} is a placeholder: no node can pull it and `epdoctor lint` fails on "
        f"it. With REGISTRY set to your registry, {build}, then plan again with it: "
        f"{replan_command(c.inp, mine)} -o DIR --force",
    )


@detector("M508", "E401", domain="plan")
def vllm_pin_served(c: Ctx) -> Iterator[Reason]:
    if not c.vllm_pin:
        return
    commit = vllm_commit(c.vllm_pin)
    if commit is None:
        yield _r(
            "M508",
            Level.CAVEAT,
            f"vLLM {c.vllm_pin} is not a pin the plan knows; no reference recipe served at it.",
        )
    elif commit.served and c.mode == "eager" and c.engine.vllm_graphs_pin:
        yield _r(
            "E401",
            Level.INFO,
            f"Planned on vLLM {commit.sha}, the pin both reference recipes served eager at; the vLLM "
            f"recipe now ships {c.engine.vllm_graphs_pin} (the #52632 merge, 0.26 line), "
            f"verified at interface level only: --vllm-pin {c.engine.vllm_graphs_pin} follows "
            "it as a caveat"
            + (
                " (the Dynamo recipe saw that line fault with CUDA_ERROR_LAUNCH_FAILED, 719, "
                "under ai-dynamo 1.4.2 on its earlier substrate, unmeasured on the current one; "
                "ai-dynamo 1.3.1 targets vLLM 0.23)."
                if c.engine.key == "dynamo"
                else "."
            ),
        )
    elif not commit.served:
        yield _r(
            "E401",
            Level.CAVEAT,
            f"vLLM {commit.sha} ({commit.version}) is on the 0.26 line: verified at interface "
            "level only, and the Dynamo reference recipe ruled that line out on this substrate (CUDA launch "
            "fault). --vllm-pin e2f993dc4 is the pin both reference recipes served eager at.",
        )


@detector(
    "D405", "E404", "E406", "E701", "K205", "E408", "M702", "D803", "D804", "D805", domain="plan"
)
def engine_notes(c: Ctx) -> Iterator[Reason]:
    """Known traps the plan's own output already avoids, named so they can be looked up."""
    if c.transport.key not in c.engine.transports:
        return
    if c.engine.uses_deepep and c.transport.gin:
        yield _r(
            "D405",
            Level.INFO,
            "The image's CUDA toolkit and the DeepEP fork pin go together (st.bulk and ptxas "
            "13.0.88); the reference recipes built on CUDA 13.0, the canonical benchmark on 13.1.2.",
        )
    if c.engine.key == "tensorrt-llm":
        yield _r(
            "E404",
            Level.INFO,
            "NcclEP is reachable only with attention DP and MoE TP 1: the plan serves with "
            "enable_attention_dp: true and --tp_size = --ep_size.",
        )
        yield _r(
            "E406",
            Level.INFO,
            "NcclEP runs LOW_LATENCY + RANK_MAJOR at 1.3.0rc24: the probe's dispatch/combine "
            "numerics, not a green import, are the gate.",
        )
    if c.engine.key == "dynamo" and c.inp.target == "kubernetes":
        yield _r(
            "E701",
            Level.INFO,
            "Dynamo's /health is 200 before the engine registers: the leader probe also "
            "requires a non-empty endpoints array.",
        )
    if c.inp.target == "kubernetes" and not c.inp.cache_host_path:
        yield _r(
            "K205",
            Level.INFO,
            "Cluster precondition: the model cache is an emptyDir, so kubelet's root must be on "
            "the instance-store NVMe; otherwise pass --cache-host-path DIR on the instance store.",
        )
    if c.inp.target == "kubernetes" and c.inp.nodes > 1:
        yield _r(
            "E408",
            Level.INFO,
            f"{c.inp.nodes} pods pull the weights at once: set HF_TOKEN or pre-stage the "
            "model, or expect a 429 restart.",
        )
    if c.engine.key == "sglang":
        yield _r(
            "D804",
            Level.INFO,
            "Build the image from the SGLang DeepEP sample's Dockerfile at the plan's pins "
            "(https://github.com/awslabs/awsome-distributed-ai/pull/1215; epdoctor writes none for "
            "SGLang): it removes the base image's IBGDA deep_ep, which would shadow the EFA build. "
            "The kernel test runs DeepEP's tests/ from $DEEPEP_SRC (default /opt/DeepEP): set it "
            "to where that image keeps the DeepEP source (not verified here: the sample's "
            "Dockerfile is not in the public store). With no image of epdoctor's, no image gate "
            "runs in the pods: run the sample's recipe/verify-image.sh on the built image first "
            "(deep_ep from its venv, NVSHMEM 3.7.0 everywhere, the plugin by NCCL's name).",
        )
        yield _r(
            "D803",
            Level.INFO,
            "The pods preload the NVSHMEM 3.7.0 host library (LD_PRELOAD) so torch's pip 3.4.5 "
            "copy cannot load first: DeepEP's device code is built against 3.7.0. The path is "
            "under the sample's /opt/nvshmem (its verify-image.sh); the file's exact place in "
            "that tree is not verified here.",
        )
        yield _r(
            "D805",
            Level.INFO,
            "CUDA VMM follows DeepEP's kernel regime: the kernel test (normal kernels) runs with "
            "NVSHMEM_DISABLE_CUDA_VMM=1, the serve (--deepep-mode auto) must not set it.",
        )
    if c.engine.key in ("vllm", "dynamo"):
        also = (
            " On EFA-GDA, also compare with the CPU proxy on the same pods and image, an env "
            "flip only, as pull/1231 measured (epdoctor run bench --ab-transport)."
            if c.transport.key == "efa-gda"
            else ""
        )
        yield _r(
            "M702",
            Level.INFO,
            "Benchmark deepep_v2 against allgather_reducescatter on the same pods "
            "(epdoctor run bench --ab allgather_reducescatter) before calling it faster." + also,
        )


@detector("D506", "D507", domain="plan")
def ep_divisibility(c: Ctx) -> Iterator[Reason]:
    e = c.experts
    if e.dense:
        yield _r(
            "D506",
            Level.BLOCKER,
            f"{c.inp.model} is not a routed MoE ({e.source} has no routed-expert count): "
            "there is nothing to expert-parallelise.",
        )
    elif e.count is None:
        yield _r(
            "D507",
            Level.UNKNOWN,
            f"EP divisibility not checked: {e.source}.",
        )
    elif e.count % c.serve_ep:
        yield _r(
            "D506",
            Level.BLOCKER,
            f"{e.count} routed experts do not divide over EP{c.serve_ep} "
            f"({e.count} % {c.serve_ep} = {e.count % c.serve_ep}); pick an EP that divides "
            f"{e.count}.",
        )
    else:
        yield _r(
            "D506",
            Level.INFO,
            f"{e.count} routed experts over EP{c.serve_ep}: {e.count // c.serve_ep} per rank "
            f"({e.key or 'given'} from {e.source}).",
        )
