"""The EP-divisibility preflight: how many routed experts a model has.

Read from config.json only: a local model directory, else the Hugging Face
cache, else (only when asked, `--hub`) the Hub over HTTP with a short
timeout. The plan never needs the network; when no config can be read the
count is unknown and the plan says so rather than pass.
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

HF_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}\Z")


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
    """A model's config.json through the one input boundary (epdoctor.schema): a regular file
    (a cache entry linked to /dev/zero or a FIFO is refused), at most MAX_CONFIG_BYTES."""
    from epdoctor.safeio import BadInput
    from epdoctor.schema import read_json

    try:
        return read_json(str(path), "config.json", MAX_CONFIG_BYTES)
    except BadInput as exc:
        raise PlanInputError(str(exc)) from None


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


HUB_TIMEOUT_S = 5.0
MAX_CONFIG_BYTES = 1_000_000


def hub_config(model: str, timeout: float = HUB_TIMEOUT_S) -> tuple[Any, str]:
    """(parsed config.json, url) from the Hub, or (None, why not). HF_ENDPOINT and
    HF_TOKEN as huggingface_hub reads them; HF_HUB_OFFLINE=1 forbids the lookup."""
    import urllib.error
    import urllib.request

    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co").rstrip("/")
    url = f"{endpoint}/{model}/resolve/main/config.json"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        return None, "HF_HUB_OFFLINE is set"
    if not url.startswith(("https://", "http://")):
        return None, f"HF_ENDPOINT {endpoint!r} is not an http(s) URL"
    req = urllib.request.Request(url, headers={"User-Agent": "epdoctor-plan"})
    token = os.environ.get("HF_TOKEN")
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read(MAX_CONFIG_BYTES + 1)
    except urllib.error.HTTPError as exc:
        return None, f"{url} answered HTTP {exc.code}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return None, f"{url} unreachable ({reason})"
    if len(raw) > MAX_CONFIG_BYTES:
        raise PlanInputError(f"{url} is larger than a config.json can be")
    try:
        return json.loads(raw.decode("utf-8")), url
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise PlanInputError(f"{url} is not valid JSON: {exc}") from exc


def find_experts(
    model: str, num_experts: int | None, hf_cache: str | None = None, hub: bool = False
) -> Experts:
    if num_experts is not None:
        if num_experts < 1:
            raise PlanInputError(f"--num-experts must be positive, not {num_experts}")
        return Experts(count=num_experts, source="--num-experts")
    if model.startswith(("/", "./", "../", "~")):
        path = Path(model).expanduser() / "config.json"
    else:
        found = cached_config(model, hf_cache)
        if found is None:
            if not hub:
                return Experts(
                    count=None,
                    source=f"no config.json for {model} in the Hugging Face cache (the Hub "
                    "is asked only with --hub); pass --num-experts N",
                )
            config, where = hub_config(model)
            if config is None:
                return Experts(
                    count=None,
                    source=f"no cached config.json for {model} and the Hub lookup failed: "
                    f"{where}; pass --num-experts N",
                )
            return _experts_of(config, where)
        path = found
    return _experts_of(read_config(path), str(path))


def _experts_of(config: Any, where: str) -> Experts:
    try:
        count, key = routed_experts(config)
    except ValueError as exc:
        raise PlanInputError(f"{where}: {exc}") from exc
    if count is None:
        return Experts(count=None, source=where, key=key, dense=True)
    return Experts(count=count, source=where, key=key)
