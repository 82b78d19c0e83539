"""What the image gate (probes/image_gate.py) expects of a plan's image, and the files a
plan ships into its image: the gate itself, its expectations, the in-pod DeepEP build and
the probe the TensorRT-LLM kernel test runs.

The expectations are data written beside the Dockerfile (image/image-gate.json); the same
file drives the Dockerfile's last layer, the pod's check after the in-pod DeepEP build and
`epdoctor verify-image` run by hand in a pod of the image.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from epdoctor.knowledge import stack
from epdoctor.plan.launch import DEEPEP_ROOT, NCCL_EP_PROBE
from epdoctor.plan.model import Plan

RECIPE_DIR = NCCL_EP_PROBE.rsplit("/", 1)[0]
BUILD_DEEPEP = f"{RECIPE_DIR}/build_deepep.sh"
GATE = f"{RECIPE_DIR}/image_gate.py"
GATE_EXPECT = f"{RECIPE_DIR}/image-gate.json"
PLUGIN = "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
# TensorRT-LLM v1.3.0rc24: the factory create_strategy() lives here; GA v1.2.1 has no NcclEP.
TRTLLM_FACTORY = "tensorrt_llm._torch.modules.fused_moe.communication.communication_factory"
NCCL_EP_LIB = "nccl/ep/lib/libnccl_ep.so"


def pin(plan: Plan, component: str) -> str:
    return next((p.value for p in plan.pins if p.component == component), "")


def gate_command(stage: str) -> str:
    return f"python3 {GATE} --expect {GATE_EXPECT} --stage {stage}"


def expectations(plan: Plan) -> dict[str, Any]:
    """The image-gate expectation document for this plan (probes/image_gate.py reads it)."""
    engine = plan.input.engine
    eng = stack.engines()[engine]
    x: dict[str, Any] = {"gate": 1, "engine": engine, "transport": plan.input.transport}
    if plan.nccl:
        x["nccl"] = plan.nccl
        x["nccl_code"] = "L505" if engine == "tensorrt-llm" else "L101"
    if plan.gin_type is not None:
        x["plugin"] = PLUGIN
        x["plugin_symbol"] = "ncclGinPlugin_v14" if plan.gin_type == 5 else "ncclGinPlugin_v13"
    versions: list[list[str]] = []
    files: list[list[str]] = []
    if eng.uses_deepep and plan.gin_type is not None:
        x["deepep"] = {
            "root": DEEPEP_ROOT,
            "commit": stack.image_pin("deepep_commit"),
            "build_script": BUILD_DEEPEP,
        }
        versions.append(["nvidia-nvshmem-cu13", pin(plan, "nvidia-nvshmem-cu13"), "L103", "equals"])
        files.append([f"{DEEPEP_ROOT}/tests/elastic/test_ep.py", "B417", "the DeepEP kernel test"])
    if plan.vllm_pin:
        versions.append(["vllm", "+g" + plan.vllm_pin[:9], "B416", "contains"])
    if engine in ("vllm", "dynamo"):
        versions.append(["torch", stack.image_pin("torch"), "B416", "equals"])
    if engine == "dynamo":
        dyn = pin(plan, "ai-dynamo, ai-dynamo-runtime")
        versions += [
            ["ai-dynamo", dyn, "B416", "equals"],
            ["ai-dynamo-runtime", dyn, "B416", "equals"],
        ]
    if engine == "tensorrt-llm":
        x["trtllm"] = {
            "factory_module": TRTLLM_FACTORY,
            "factory_file": TRTLLM_FACTORY.replace(".", "/") + ".py",
            "nccl_ep_lib": NCCL_EP_LIB,
        }
        versions.append(["tensorrt_llm", stack.image_pin("trtllm"), "B416", "equals"])
        versions.append(["nccl4py", pin(plan, "nccl4py").split()[0], "B416", "equals"])
        files += [
            [f"{RECIPE_DIR}/probe_nccl_ep.py", "B417", "the NcclEP kernel-test probe"],
            [f"{RECIPE_DIR}/ep_routing.py", "B417", "the probe's routing oracle"],
        ]
    x["versions"] = versions
    x["files"] = files
    return x


def _probe(name: str) -> str:
    return (resources.files("epdoctor.probes") / name).read_text(encoding="utf-8")


def build_deepep_script() -> str:
    """The one DeepEP build, in the pod on first boot (the reference recipes' choice)."""
    return "\n".join(
        [
            "#!/usr/bin/env bash",
            "# Written by `epdoctor plan`: the one DeepEP build, in the pod on first boot, as the",
            "# reference recipes do (https://github.com/awslabs/awsome-distributed-ai/pull/1230).",
            "# Idempotent: a pod that already imports deep_ep with ElasticBuffer skips the build.",
            "set -euo pipefail",
            f'DEEPEP_DIR="${{DEEPEP_DIR:-{DEEPEP_ROOT}}}"',
            "if python3 -c \"import deep_ep; assert hasattr(deep_ep, 'ElasticBuffer')\" 2>/dev/null; then",
            '  echo "deep_ep already built"; exit 0',
            "fi",
            "# The torch cu130 ABI needs a CUDA 13 toolkit; ninja device-links the extension.",
            '/usr/local/cuda/bin/nvcc --version | grep -c "release 13" >/dev/null '
            '|| { echo "FATAL: /usr/local/cuda is not CUDA 13" >&2; exit 3; }',
            'python3 -c "import ninja" || { echo "FATAL: ninja missing from the image" >&2; exit 3; }',
            "# nvidia.nvshmem is a namespace package: find its lib dir through find_spec. The",
            "# wheel ships only the versioned libnvshmem_host.so.3; the vLLM recipe's",
            "# build_deepep.sh adds the unversioned name because DeepEP's final link may ask",
            "# for it (-l:libnvshmem_host.so; pull/1230). Upstream DeepEP's setup.py links the",
            "# versioned one; the fork's is not verified here, so the link is made either way.",
            "NVSHMEM_LIB=\"$(python3 -c 'import importlib.util, os; "
            's = importlib.util.find_spec("nvidia.nvshmem"); '
            'print(os.path.join(s.submodule_search_locations[0], "lib"))\')"',
            'ls "$NVSHMEM_LIB"/libnvshmem_host.so.* >/dev/null '
            '|| { echo "FATAL: no libnvshmem_host.so.* in $NVSHMEM_LIB" >&2; exit 4; }',
            '[ -e "$NVSHMEM_LIB/libnvshmem_host.so" ] '
            '|| ln -s libnvshmem_host.so.3 "$NVSHMEM_LIB/libnvshmem_host.so"',
            'cd "$DEEPEP_DIR"',
            "rm -rf build/temp.* deep_ep/_C*.so",
            "# The full log stays in the file: a tail would cut nvcc's diagnostic (B407).",
            'CUDA_HOME=/usr/local/cuda PATH="/usr/local/cuda/bin:$PATH" \\',
            '  LIBRARY_PATH="$NVSHMEM_LIB:/usr/local/cuda/lib64:${LIBRARY_PATH:-}" \\',
            '  LD_LIBRARY_PATH="$NVSHMEM_LIB:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}" \\',
            '  TORCH_CUDA_ARCH_LIST="${DEEPEP_ARCH_LIST:-9.0}" MAX_JOBS="$(nproc)" \\',
            "  python3 setup.py build_ext --inplace > /tmp/deepep-build.log 2>&1 \\",
            '  || { echo "FATAL: DeepEP build failed; full log: /tmp/deepep-build.log" >&2; exit 5; }',
            "# Register the source tree on sys.path (pip -e would rebuild in an isolated env).",
            "SITE=\"$(python3 -c 'import site; print(site.getsitepackages()[0])')\"",
            'echo "$DEEPEP_DIR" > "$SITE/deep_ep_src.pth"',
            'LD_LIBRARY_PATH="$NVSHMEM_LIB:${LD_LIBRARY_PATH:-}" python3 -c '
            "\"import deep_ep; assert hasattr(deep_ep, 'ElasticBuffer'); print('ElasticBuffer: OK')\"",
            "",
        ]
    )


def image_files(plan: Plan) -> dict[str, str]:
    """Files under image/ in the plan directory, COPY'd into RECIPE_DIR by the Dockerfile."""
    import json

    files = {
        "image/image_gate.py": _probe("image_gate.py"),
        "image/image-gate.json": json.dumps(expectations(plan), indent=2) + "\n",
    }
    eng = stack.engines()[plan.input.engine]
    if eng.uses_deepep and plan.gin_type is not None:
        files["image/build_deepep.sh"] = build_deepep_script()
    if plan.input.engine == "tensorrt-llm":
        files["image/probe_nccl_ep.py"] = _probe("trtllm_nccl_ep_probe.py")
        files["image/ep_routing.py"] = _probe("ep_routing.py")
    return files
