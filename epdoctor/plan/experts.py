"""The EP-divisibility preflight: how many routed experts a model has.

Read from config.json only: a local model directory, else the Hugging Face
cache. There is no network lookup here (the plan runs offline); when neither
has a config the count is unknown and the plan says so rather than pass.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from epdoctor.plan.model import Experts, PlanInputError

# Keys real MoE configs use for the routed-expert count (not top-k, which is
# num_experts_per_tok / moe_topk): Qwen2/3-MoE num_experts, DeepSeek-V2/V3
# n_routed_experts, Mixtral / GPT-OSS / Llama-4 num_local_experts, others.
EXPERT_KEYS = (
    "n_routed_experts",
    "num_experts",
    "num_local_experts",
    "moe_num_experts",
    "n_experts",
)
# Multimodal and wrapper configs keep the language model's fields nested.
NESTED_KEYS = ("text_config", "language_config", "llm_config", "thinker_config")

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")


def validate_model(model: str) -> None:
    """A Hugging Face id (org/name) or a local directory holding config.json."""
    if not model or not model.strip():
        raise PlanInputError("--model is empty: give a Hugging Face id (org/name) or a local path")
    if model.startswith(("/", "./", "../", "~")):
        path = Path(model).expanduser()
        if not path.is_dir():
            raise PlanInputError(f"model path {model} is not a directory")
        if not (path / "config.json").is_file():
            raise PlanInputError(f"model path {model} has no config.json")
        return
    if not HF_ID.match(model) or ".." in model or model.endswith((".", "-")):
        raise PlanInputError(
            f"model {model!r} is neither a Hugging Face id (org/name) nor a local path "
            "(start a path with /, ./ or ~)"
        )


def routed_experts(config: Any) -> tuple[int | None, str]:
    """(count, key) from a parsed config.json; (None, "") when it has no routed experts."""
    if not isinstance(config, dict):
        raise ValueError("config.json is not a JSON object")
    for scope in (config, *[config.get(k) for k in NESTED_KEYS]):
        if not isinstance(scope, dict):
            continue
        for key in EXPERT_KEYS:
            value = scope.get(key)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"config.json {key} is {value!r}, not an integer")
            if value > 1:
                return value, key
            # num_experts: 0/1 marks a dense variant in some families.
            return None, key
    return None, ""


def read_config(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanInputError(f"cannot read {path}: {exc}") from exc
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise PlanInputError(f"{path} is not valid JSON: {exc}") from exc


def cache_roots(hf_cache: str | None = None) -> list[Path]:
    """Where huggingface_hub keeps snapshots, in its own order of precedence."""
    roots = []
    if hf_cache:
        roots.append(Path(hf_cache).expanduser())
    if os.environ.get("HF_HUB_CACHE"):
        roots.append(Path(os.environ["HF_HUB_CACHE"]).expanduser())
    if os.environ.get("HF_HOME"):
        roots.append(Path(os.environ["HF_HOME"]).expanduser() / "hub")
    roots.append(Path("~/.cache/huggingface/hub").expanduser())
    return roots


def cached_config(model: str, hf_cache: str | None = None) -> Path | None:
    folder = "models--" + model.replace("/", "--")
    for root in cache_roots(hf_cache):
        snaps = root / folder / "snapshots"
        if not snaps.is_dir():
            continue
        candidates = sorted(snaps.glob("*/config.json"), key=lambda p: p.stat().st_mtime)
        if candidates:
            return candidates[-1]
    return None


def find_experts(model: str, num_experts: int | None, hf_cache: str | None = None) -> Experts:
    if num_experts is not None:
        if num_experts < 1:
            raise PlanInputError(f"--num-experts must be positive, not {num_experts}")
        return Experts(count=num_experts, source="--num-experts")
    if model.startswith(("/", "./", "../", "~")):
        path = Path(model).expanduser() / "config.json"
    else:
        found = cached_config(model, hf_cache)
        if found is None:
            return Experts(
                count=None,
                source=f"no config.json for {model} in the Hugging Face cache and no "
                "network lookup here; pass --num-experts N",
            )
        path = found
    config = read_config(path)
    try:
        count, key = routed_experts(config)
    except ValueError as exc:
        raise PlanInputError(f"{path}: {exc}") from exc
    if count is None:
        return Experts(count=None, source=str(path), key=key, dense=True)
    return Experts(count=count, source=str(path), key=key)
