"""Engine checks that a node can show: TensorRT-LLM's NcclEP backend and its libraries."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from epdoctor.checks.base import Context, check, finding
from epdoctor.checks.stack import consumers
from epdoctor.facts.node import NodeFacts
from epdoctor.facts.python_env import PythonEnv
from epdoctor.facts.versions import parse_version
from epdoctor.knowledge import stack
from epdoctor.model import Finding, Status

_TRTLLM = stack.engine("tensorrt-llm")
TRTLLM_NCCL_FLOOR = Version(_TRTLLM.nccl_floor)  # nccl_ep_utils.py _MIN_NCCL_RUNTIME_VERSION
NCCL_EP_PREBUILT = Version(_TRTLLM.nccl_ep_prebuilt)
ABI_CHANGED = Version(_TRTLLM.nccl_abi_change)


def _trtllm_envs(node: NodeFacts) -> list[PythonEnv]:
    return [p for p in node.python if p.has("tensorrt-llm")]


@check("E101")
def trtllm_backend(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    for env in _trtllm_envs(node):
        ev = [f"{env.site_packages}: tensorrt-llm {env.version('tensorrt-llm')}"]
        if env.trtllm_nccl_ep_module is None:
            yield finding(
                "E101", Status.UNKNOWN, "TensorRT-LLM's fused_moe package was not found", ev
            )
        elif env.trtllm_nccl_ep_module:
            yield finding(
                "E101",
                Status.PASS,
                "TensorRT-LLM ships the NcclEP backend",
                [*ev, "communication/nccl_ep.py present"],
            )
        else:
            yield finding(
                "E101",
                Status.FAIL,
                f"tensorrt-llm {env.version('tensorrt-llm')} has no NcclEP backend",
                [*ev, "communication/nccl_ep.py absent"],
            )


def _env_nccl(node: NodeFacts, env: PythonEnv) -> Version | None:
    for c in consumers(node):
        if (
            c.lib
            and c.lib.version.known
            and (
                env.site_packages in (c.path or "")
                or "LD_PRELOAD" in c.how
                or c.how.startswith("mapped")
            )
        ):
            return c.lib.version.value
    return None


@check("E102", "E103", "E104")
def nccl_ep_library(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    for env in _trtllm_envs(node):
        if not env.trtllm_nccl_ep_module:
            continue  # E101 already says there is no NcclEP here
        where = env.site_packages
        if env.nccl_ep_lib is None:
            nccl4py = env.version("nccl4py")
            yield finding(
                "E102",
                Status.FAIL,
                f"no nccl/ep/lib/libnccl_ep.so (nccl4py {nccl4py or 'not installed'})",
                [where],
            )
        else:
            yield finding(
                "E102", Status.PASS, f"libnccl_ep {env.nccl_ep_version or '?'}", [env.nccl_ep_lib]
            )
        nccl = _env_nccl(node, env)
        if nccl is None:
            yield finding(
                "E104", Status.UNKNOWN, "the NCCL this TensorRT-LLM env loads is unknown", [where]
            )
            continue
        if nccl < TRTLLM_NCCL_FLOOR:
            yield finding(
                "E104",
                Status.FAIL,
                f"NCCL {nccl} < {TRTLLM_NCCL_FLOOR}: `nccl-ep is not installed.`",
                [where],
            )
        else:
            yield finding("E104", Status.PASS, f"NCCL {nccl} meets NcclEP's floor", [where])
        ep = parse_version(env.nccl_ep_version)
        if ep is not None and ep <= NCCL_EP_PREBUILT and nccl >= ABI_CHANGED:
            yield finding(
                "E103",
                Status.WARN,
                f"libnccl_ep {env.nccl_ep_version} (built for NCCL 2.30) on NCCL {nccl}",
                [f"{env.nccl_ep_lib}: {env.nccl_ep_version}", f"NCCL {nccl}"],
            )
