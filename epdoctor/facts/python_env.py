"""Python stacks: which versions of torch, NCCL/nvshmem wheels, engines and DeepEP each env holds."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from epdoctor.model import Fact


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class PythonEnv:
    site_packages: str
    dists: dict[str, str]  # canonical name -> version
    direct_urls: dict[str, str] = field(default_factory=dict)
    deep_ep_markers: dict[str, str] = field(default_factory=dict)
    trtllm_nccl_ep_module: bool | None = None  # None: TensorRT-LLM's fused_moe tree absent
    nccl_ep_lib: str | None = None  # path of nccl4py's libnccl_ep.so, if shipped
    nccl_ep_version: str | None = None  # "0.1.0+cuda13.3" from its version string
    nccl4py_dir: bool = False  # site-packages has an nccl/ package

    def has(self, name: str) -> bool:
        return canonical(name) in self.dists

    def version(self, name: str) -> str | None:
        return self.dists.get(canonical(name))

    def nccl_wheel(self) -> tuple[str, str] | None:
        for n, v in sorted(self.dists.items()):
            if re.fullmatch(r"nvidia-nccl-cu\d+", n):
                return n, v
        return None

    def nvshmem_wheel(self) -> tuple[str, str] | None:
        for n, v in sorted(self.dists.items()):
            if re.fullmatch(r"nvidia-nvshmem-cu\d+", n):
                return n, v
        return None

    def deep_ep_flavour(self) -> str | None:
        """'amazon-contributing' when its source markers or install URL show the fork."""
        if not self.has("deep-ep") and not self.deep_ep_markers:
            return None
        url = self.direct_urls.get("deep-ep", "")
        if "amazon-contributing" in url or "EP_HYBRID_KERNEL" in self.deep_ep_markers:
            return "amazon-contributing"
        if "capping num_allocated_qps" in self.deep_ep_markers:
            return "deepseek-ai+PR612"
        return "upstream-or-unknown"


def python_envs(section: object) -> list[PythonEnv]:
    if not isinstance(section, list):
        return []
    out = []
    for s in section:
        if not isinstance(s, dict):
            continue
        dists = {}
        urls = {}
        raw = s.get("dists") if isinstance(s.get("dists"), dict) else {}
        for name, d in raw.items():
            if isinstance(d, dict) and d.get("version"):
                dists[canonical(name)] = str(d["version"])
                if d.get("direct_url"):
                    urls[canonical(name)] = str(d["direct_url"])
        extra = s.get("extra") if isinstance(s.get("extra"), dict) else {}
        markers = extra.get("deep_ep_fork_markers")
        markers = {str(k): str(v) for k, v in markers.items()} if isinstance(markers, dict) else {}
        trt = extra.get("trtllm_nccl_ep_module")
        ep = extra.get("nccl_ep_lib")
        ep_ver = None
        if isinstance(ep, dict) and isinstance(ep.get("version"), str):
            m = re.search(r"NCCL EP version (\S+)", ep["version"])
            ep_ver = m.group(1) if m else None
        out.append(
            PythonEnv(
                str(s.get("site_packages")),
                dists,
                urls,
                dict(markers),
                trtllm_nccl_ep_module=trt if isinstance(trt, bool) else None,
                nccl_ep_lib=str(ep.get("path")) if isinstance(ep, dict) else None,
                nccl_ep_version=ep_ver,
                nccl4py_dir="nccl_ep_lib" in extra,
            )
        )
    return out


def parse_pip_list_json(text: str | None) -> Fact[dict[str, str]]:
    """`python3 -m pip list --format=json` -> {canonical name: version}."""
    if not text:
        return Fact.unknown("pip list gave no output")
    start = text.find("[")
    if start < 0:
        return Fact.unknown("pip list output has no JSON array")
    try:
        data = json.loads(text[start : text.rfind("]") + 1])
    except ValueError:
        return Fact.unknown("pip list output is not valid JSON")
    if not isinstance(data, list):
        return Fact.unknown("pip list JSON is not a list")
    out = {}
    for item in data:
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            out[canonical(item["name"])] = str(item.get("version", ""))
    return Fact.of(out)
