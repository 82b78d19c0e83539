"""The commands a plan runs, per role, exactly as the launcher will run them.

They read two variables the environment provides: LEADER_ADDR (the leader
node's address) and NODE_RANK (0 on the leader). The manifests and the bare
scripts both set them, so one command string serves both.
"""

from __future__ import annotations

import json
import shlex

from epdoctor.plan.model import Commands

PORT = 8000
DP_RPC_PORT = 13345
TORCH_PORT = 29500
DEEPEP_TEST_PORT = 8361
SGLANG_DIST_PORT = 5757
DEEPEP_ROOT = "/opt/DeepEP"
NCCL_EP_PROBE = "/opt/recipe/probe_nccl_ep.py"
PROVIDER_PROOF = "efa-direct|Selected Provider is efa"
SMOKE_PROMPT = "In one sentence, what is expert parallelism in a Mixture-of-Experts model?"


# The reference recipes' serve sizing and model pin (awslabs/awsome-distributed-ai#1256,
# examples/inference/nvidia-dynamo/deepep-v2-efa/recipe/serve.sh @30d4730c: SERVE_MAX_MODEL_LEN,
# SERVE_MAX_NUM_SEQS, SERVE_MAX_BATCHED_TOKENS, SERVE_GPU_MEM_UTIL, SERVE_MODEL_REVISION; the same
# text as the vLLM sample's). The measured runs served with these; 0.70 leaves GPU memory beside
# vLLM's own for DeepEP-V2's buffers.
RECIPE_SIZING = (
    "--tensor-parallel-size", "1",
    "--max-model-len", "4096",
    "--max-num-seqs", "16",
    "--max-num-batched-tokens", "256",
    "--gpu-memory-utilization", "0.70",
    "--dtype", "bfloat16",
)  # fmt: skip
RECIPE_MODEL = "Qwen/Qwen3-30B-A3B-FP8"
RECIPE_REVISION = "d206ba732169f29bb77fbf80fc2c4b81d4d30782"


def _vllm_args(model: str, world: int, gpus: int, nodes: int, mode: str) -> list[str]:
    args = [
        "--enable-expert-parallel",
        "--all2all-backend", "deepep_v2",
        "--data-parallel-size", str(world),
        "--data-parallel-size-local", str(gpus),
        "--data-parallel-backend", "mp",
    ]  # fmt: skip
    if nodes > 1:
        args += [
            "--data-parallel-address", '"$LEADER_ADDR"',
            "--data-parallel-rpc-port", str(DP_RPC_PORT),
        ]  # fmt: skip
    if mode == "eager":
        args.append("--enforce-eager")
    args += RECIPE_SIZING
    if model == RECIPE_MODEL:  # the measured commit of the recipes' model; any other as given
        args += ["--revision", RECIPE_REVISION]
    return args


def _q(model: str) -> str:
    return shlex.quote(model)


def serve_commands(
    engine: str, model: str, world: int, gpus: int, nodes: int, mode: str
) -> tuple[str, str]:
    """(leader, worker); worker is "" when there is only one node."""
    m = _q(model)
    if engine in ("vllm", "dynamo"):
        common = _vllm_args(model, world, gpus, nodes, mode)
        start = ["--data-parallel-start-rank", f'"$((NODE_RANK * {gpus}))"', "--headless"]
        if engine == "vllm":
            leader = " ".join(
                ["vllm", "serve", m, "--host", "0.0.0.0", "--port", str(PORT), *common]
            )
            worker = " ".join(["vllm", "serve", m, *common, *start])
        else:
            # The Dynamo recipe's leader: the frontend in the background, checked alive after
            # its start, then the engine with the planes that need no NATS or etcd; its workers
            # are `dynamo.vllm --headless` (vLLM's run_headless: no discovery).
            planes = [
                "--discovery-backend",
                "file",
                "--request-plane",
                "tcp",
                "--event-plane",
                "zmq",
                "--kv-events-config",
                "'{\"enable_kv_cache_events\": false}'",
            ]
            leader = (
                f"python3 -m dynamo.frontend --discovery-backend file --http-host 0.0.0.0 "
                f"--http-port {PORT} & FRONTEND_PID=$!; sleep 6; "
                'kill -0 "$FRONTEND_PID" || { echo "FATAL: dynamo.frontend exited during '
                'startup" >&2; exit 4; }; '
                + " ".join(["exec", "python3", "-m", "dynamo.vllm", "--model", m, *planes,
                            *common])
            )  # fmt: skip
            worker = " ".join(["python3", "-m", "dynamo.vllm", "--model", m, *start, *common])
        return leader, worker if nodes > 1 else ""
    if engine == "tensorrt-llm":
        serve = (
            "printf 'enable_attention_dp: true\\n' > /tmp/extra-llm-api.yaml && "
            f"trtllm-serve {m} --host 0.0.0.0 --port {PORT} --backend pytorch "
            f"--tp_size {gpus} --ep_size {gpus} --extra_llm_api_options /tmp/extra-llm-api.yaml"
        )
        # Every node serves its own EP group: trtllm-serve does not span nodes here (E502).
        return serve, serve if nodes > 1 else ""
    if engine == "sglang":
        # The SGLang DeepEP sample's colocated serve: TP = EP = every GPU, DeepEP picking its
        # kernels per batch (auto). SGLang's own defaults otherwise (the radix cache stays on:
        # the benchmark's prompts do not share a prefix, M403).
        serve = " ".join(
            ["python3", "-m", "sglang.launch_server", "--model-path", m, "--trust-remote-code",
             "--tp-size", str(world), "--ep-size", str(world),
             "--moe-a2a-backend", "deepep", "--deepep-mode", "auto",
             "--nnodes", str(nodes), "--node-rank", '"$NODE_RANK"',
             "--dist-init-addr", f'"$LEADER_ADDR:{SGLANG_DIST_PORT}"',
             "--host", "0.0.0.0", "--port", str(PORT), "--mem-fraction-static", "0.85"]
        )  # fmt: skip
        return serve, serve if nodes > 1 else ""
    raise ValueError(engine)


KERNEL_LOG = "/tmp/epdoctor-kernel-test.log"


# NCCL's default debug mask is INIT|BOOTSTRAP|ENV (NVIDIA/nccl@v2.28.9-1:src/debug.cc:48): the
# efa-direct banner is INIT|NET (aws-ofi-nccl@v1.21.1:src/nccl_ofi_net.cpp:644) but the GDAKI
# context line is NET only (src/rdma/gin/nccl_ofi_gin_gdaki.cpp:883), so the kernel test asks
# for NET too, as aws-ofi-nccl's GIN guide does.
DEBUG = "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV,NET"

# What proves GPU-initiated GIN ran (aws-ofi-nccl doc/gin-getting-started.md): the proxy prints
# the efa-direct banner too, so EFA-GDA also needs the GDAKI context line
GDAKI_PROOF = "gin GDAKI: createContext done"


def kernel_test_command(
    engine: str, nodes: int, gpus: int, world: int, experts: int, transport: str = ""
) -> str:
    """One process per node; passes only on exit 0 AND the EFA provider banner (and, for
    EFA-GDA, the GDAKI context line; for SGLang, DeepEP's `passed`)."""
    run = kernel_run_command(engine, nodes, gpus, world, experts, bounded=True)
    # the recipes' own check of the provider banner: `grep -qiE "efa-direct|Selected Provider is
    # efa"` (vLLM run-kernel-test.sh, #1230; TensorRT-LLM's, #1240); DeepEP's V1 tests print
    # `passed` for their correctness checks (the SGLang sample's README, #1215)
    proofs = [] if nodes == 1 else ["-iE " + shlex.quote(PROVIDER_PROOF)]
    if engine == "sglang":
        proofs.append("-w passed")
    if transport == "efa-gda":
        proofs.append(shlex.quote(GDAKI_PROOF))
    checks = "".join(f" && grep -q {p} {KERNEL_LOG}" for p in proofs)
    # braces: a run of several commands (cd, then each test) writes all of its output there
    return f"{{ {run}; }} > {KERNEL_LOG} 2>&1{checks}"


# A kernel test whose peer never comes waits forever: the operator's scripts bound it, as the
# vLLM recipe's run-kernel-test.sh does (`timeout ${KERNEL_TEST_TIMEOUT:-600}`,
# awslabs/awsome-distributed-ai#1230). timeout(1) signals its whole process group, so the
# test's worker processes end with it; -k KILLs what ignores the TERM.
BOUND = 'timeout -k 30 "${KERNEL_TEST_TIMEOUT:-600}" '


def kernel_run_command(
    engine: str, nodes: int, gpus: int, world: int, experts: int, bounded: bool = False
) -> str:
    """The kernel test itself on one node (NODE_RANK and LEADER_ADDR set), output on stdout;
    `bounded`: under `timeout` (the scripts the plan writes; the launch runner has its own)."""
    t = BOUND if bounded else ""
    if engine in ("vllm", "dynamo"):
        run = (
            f'MASTER_ADDR="$LEADER_ADDR" MASTER_PORT={DEEPEP_TEST_PORT} WORLD_SIZE={nodes} '
            f'RANK="$NODE_RANK" {DEBUG} {t}python3 {DEEPEP_ROOT}/tests/elastic/test_ep.py '
            f"--num-processes {gpus} --num-experts {experts}"
        )
    elif engine == "sglang":
        # The sample's run-kernel-test.sh: internode (the normal kernels, CUDA VMM off), then
        # low_latency (the kernels --deepep-mode auto serves decode with, VMM as the serve has
        # it, D805). WORLD_SIZE is the node count; each test spawns one process per GPU.
        rdv = f'MASTER_ADDR="$LEADER_ADDR" WORLD_SIZE={nodes} RANK="$NODE_RANK" {DEBUG}'
        run = (
            f'cd "${{DEEPEP_SRC:-{DEEPEP_ROOT}}}" && {rdv} MASTER_PORT={DEEPEP_TEST_PORT} '
            "NVSHMEM_DISABLE_CUDA_VMM=1 "
            f"{t}python3 tests/test_internode.py --num-processes {gpus} && "
            f"{rdv} MASTER_PORT={DEEPEP_TEST_PORT + 1} "
            f"{t}python3 tests/test_low_latency.py --num-processes {gpus}"
        )
    else:
        run = (
            f"{DEBUG} {t}torchrun --nnodes {nodes} --nproc-per-node {gpus} "
            f'--node-rank "$NODE_RANK" --master-addr "$LEADER_ADDR" --master-port {TORCH_PORT} '
            f"{NCCL_EP_PROBE}"
        )
    return run


# TensorRT-LLM's recipe asks a question with one right answer: "a correct 391 pins routing
# correctness, not mere fluency" (awslabs/awsome-distributed-ai#1240, nccl-ep-efa/README.md).
ROUTING_PROMPT = ("What is 17 multiplied by 23? Reply with only the number", "391")


def smoke_command(model: str, served_name: str | None = None, engine: str = "") -> str:
    prompt, answer = ROUTING_PROMPT if engine == "tensorrt-llm" else (SMOKE_PROMPT, "")
    body = json.dumps(
        {
            "model": served_name or model,
            "max_tokens": 32,
            "temperature": 0,
            "messages": [{"role": "user", "content": prompt}],
        },
        separators=(",", ":"),
    )
    curl = (
        f'curl -sf --max-time 300 "http://${{LEADER_ADDR:-127.0.0.1}}:{PORT}/v1/chat/completions" '
        f"-H 'content-type: application/json' -d {shlex.quote(body)}"
    )
    # a here-string, not a pipe: grep -q ending early must not fail the line under pipefail.
    # HTTP 200 without a usage object is a failure, as the vLLM recipe's probe counts it (E703).
    check = (
        f'grep -q {answer} <<<"$reply" || {{ echo "FAIL: the reply does not say {answer}: expert '
        'routing is wrong" >&2; exit 1; }'
        if answer
        else 'grep -q \'"completion_tokens"\' <<<"$reply" || { echo "FAIL: HTTP 200 without a '
        'usage object" >&2; exit 1; }'
    )
    return f'reply="$({curl})" && printf \'%s\\n\' "$reply" && {check}'


def kernel_test_experts(world: int, model_experts: int | None) -> int:
    """A synthetic expert count the kernel test can split over every rank."""
    if model_experts and model_experts % world == 0:
        return model_experts
    if 256 % world == 0:
        return 256
    return world * 8


def commands(
    engine: str,
    model: str,
    world: int,
    gpus: int,
    nodes: int,
    mode: str,
    experts: int | None,
    transport: str = "",
) -> Commands:
    leader, worker = serve_commands(engine, model, world, gpus, nodes, mode)
    kexperts = kernel_test_experts(world, experts)
    return Commands(
        leader=leader,
        worker=worker,
        kernel_test=kernel_test_command(engine, nodes, gpus, world, kexperts, transport),
        smoke=smoke_command(model, engine=engine),
        kernel_run=kernel_run_command(engine, nodes, gpus, world, kexperts),
    )
