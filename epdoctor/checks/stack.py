"""What the software stack on a node is made of: who loads which NCCL, which engines are present.

Helpers for checks (pure functions over NodeFacts); they emit no findings.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from packaging.version import Version

from epdoctor.facts.env import EffectiveEnv
from epdoctor.facts.libs import NcclLib
from epdoctor.facts.node import NodeFacts

ENGINE_DISTS = {
    "vllm": "vllm",
    "ai-dynamo": "dynamo",
    "ai-dynamo-runtime": "dynamo",
    "tensorrt-llm": "tensorrt-llm",
    "sglang": "sglang",
}


@dataclass(frozen=True)
class Consumer:
    """Something that loads libnccl.so.2, and the file it gets."""

    who: str
    path: str | None
    how: str
    lib: NcclLib | None


def find_lib(node: NodeFacts, path: str) -> NcclLib | None:
    for lib in node.nccl:
        if path in (lib.path, lib.realpath, *lib.aliases):
            return lib
    base = os.path.basename(path)
    # A mapped path from /proc/PID/maps is already a real path.
    for lib in node.nccl:
        if lib.realpath.endswith("/" + base) and os.path.dirname(lib.realpath) == os.path.dirname(
            path
        ):
            return lib
    return None


def _preload(env: EffectiveEnv) -> str | None:
    for p in (env.get("LD_PRELOAD") or "").replace(":", " ").split():
        if "libnccl.so" in os.path.basename(p):
            return p
    return None


def consumers(node: NodeFacts) -> list[Consumer]:
    """Who gets which NCCL. A running process (--pid) is the truth; otherwise infer."""
    out: list[Consumer] = []
    mapped = [p for p in node.processes if p.mapped is not None]
    if mapped:
        for proc in mapped:
            for path in proc.mapped or ():
                if "/libnccl.so" in path:
                    out.append(
                        Consumer(
                            f"pid {proc.pid}",
                            path,
                            "mapped in /proc/PID/maps",
                            find_lib(node, path),
                        )
                    )
        return out
    pre = _preload(node.env)
    if pre:
        return [Consumer("every process (LD_PRELOAD)", pre, "LD_PRELOAD", find_lib(node, pre))]
    # LD_LIBRARY_PATH comes before a library's DT_RUNPATH (torch's nvidia/nccl/lib) and the
    # ldconfig cache in the loader's search (ld.so(8)): a NCCL found there wins for everyone.
    for d in (node.env.get("LD_LIBRARY_PATH") or "").split(":"):
        if not d.strip():
            continue
        lib = find_lib(node, os.path.join(d.strip(), "libnccl.so.2"))
        if lib is not None:
            return [Consumer("every process (LD_LIBRARY_PATH)", lib.path, "LD_LIBRARY_PATH", lib)]
    for env in node.python:
        if not env.has("torch"):
            continue
        wheel = os.path.join(env.site_packages, "nvidia", "nccl", "lib", "libnccl.so.2")
        lib = find_lib(node, wheel)
        if lib is not None:
            out.append(
                Consumer(
                    f"torch {env.version('torch')} in {env.site_packages}",
                    wheel,
                    "nvidia-nccl wheel",
                    lib,
                )
            )
    root = node.env.get("EP_NCCL_ROOT_DIR") or node.env.get("NCCL_DIR")
    if root:
        for sub in ("lib", "lib64"):
            lib = find_lib(node, os.path.join(root, sub, "libnccl.so.2"))
            if lib:
                out.append(
                    Consumer("DeepEP build (EP_NCCL_ROOT_DIR)", lib.path, "EP_NCCL_ROOT_DIR", lib)
                )
                break
    if node.ldconfig.known:
        paths = (node.ldconfig.value or {}).get("libnccl.so.2") or []
        if paths:
            out.append(
                Consumer(
                    "everything else (ldconfig)", paths[0], "ldconfig -p", find_lib(node, paths[0])
                )
            )
    return out


def consumer_nccl_version(node: NodeFacts) -> Version | None:
    """The NCCL version the workload most likely runs (first known consumer)."""
    for c in consumers(node):
        if c.lib is not None and c.lib.version.known:
            return c.lib.version.value
    return None


def engines_present(node: NodeFacts, env: EffectiveEnv | None = None) -> list[str]:
    found = {ENGINE_DISTS[d] for p in node.python for d in p.dists if d in ENGINE_DISTS}
    return sorted(found)


def deepep_installed(node: NodeFacts) -> bool:
    return any(p.has("deep-ep") or p.deep_ep_markers for p in node.python) or any(
        isinstance(v, dict) and v.get("built") for v in node.deepep_sources.values()
    )


def deepep_flavour(node: NodeFacts) -> str | None:
    for p in node.python:
        f = p.deep_ep_flavour()
        if f:
            return f
    for src in node.deepep_sources.values():
        if not isinstance(src, dict):
            continue
        markers = src.get("markers") or {}
        if "amazon-contributing" in str(src.get("remote") or "") or "EP_HYBRID_KERNEL" in markers:
            return "amazon-contributing"
        if "capping num_allocated_qps" in markers:
            return "deepseek-ai+PR612"
    return None
