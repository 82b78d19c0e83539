"""The seeds' honest benchmark method, as a library.

* an unmeasured warm-up before the sweep (the first level must not absorb
  first-request initialisation);
* N requests per concurrency level (default 5 x the level);
* a unique prompt prefix per request, from one index that never resets between
  levels (prefix caching cannot serve a request from an earlier one);
* ``ignore_eos`` with a fixed ``max_tokens``, and completion_tokens checked
  against it;
* percentiles over successes only (linear interpolation); a 200 without
  ``usage`` is a failure, not a zero-token success;
* exit 0 only if every request at every level succeeded.
"""

from __future__ import annotations

import concurrent.futures as cf
import csv
import io
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from epdoctor.checks.registry import detector
from epdoctor.launch.gates import Gate
from epdoctor.launch.http import Fetch, Reply, http_fetch
from epdoctor.model import Status

BASE_PROMPT = (
    "Write a detailed explanation of how expert parallelism routes tokens between "
    "GPUs in a Mixture-of-Experts transformer."
)


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default); None when empty."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Outcome:
    ok: bool
    latency_s: float
    completion_tokens: int = 0
    reason: str = ""  # why a failure failed


def classify(r: Reply, max_tokens: int) -> Outcome:
    if r.status is None:
        return Outcome(False, r.elapsed_s, reason=r.error or "no answer")
    if r.status != 200:
        return Outcome(False, r.elapsed_s, reason=f"HTTP {r.status}")
    usage = r.json.get("usage")
    if not isinstance(usage, dict) or not isinstance(usage.get("completion_tokens"), int):
        return Outcome(False, r.elapsed_s, reason="HTTP 200 without usage")
    n = usage["completion_tokens"]
    if n <= 0:
        return Outcome(False, r.elapsed_s, reason="HTTP 200 with 0 completion tokens")
    if n != max_tokens:
        return Outcome(
            False,
            r.elapsed_s,
            n,
            reason=f"completion_tokens {n} != max_tokens {max_tokens} with ignore_eos",
        )
    return Outcome(True, r.elapsed_s, n)


@dataclass
class Level:
    concurrency: int
    outcomes: list[Outcome] = field(default_factory=list)
    wall_s: float = 0.0

    @property
    def n(self) -> int:
        return len(self.outcomes)

    @property
    def ok(self) -> int:
        return sum(o.ok for o in self.outcomes)

    def stats(self) -> dict[str, Any]:
        lat = [o.latency_s for o in self.outcomes if o.ok]
        toks = sum(o.completion_tokens for o in self.outcomes if o.ok)
        reasons: dict[str, int] = {}
        for o in self.outcomes:
            if not o.ok:
                reasons[o.reason] = reasons.get(o.reason, 0) + 1
        return {
            "concurrency": self.concurrency,
            "n": self.n,
            "ok": self.ok,
            "failed": self.n - self.ok,
            "failures": reasons,
            "wall_s": round(self.wall_s, 3),
            "tok_s": round(toks / self.wall_s, 2) if self.wall_s and toks else 0.0,
            "p50_s": _r(percentile(lat, 50)),
            "p90_s": _r(percentile(lat, 90)),
            "p99_s": _r(percentile(lat, 99)),
            "mean_s": _r(sum(lat) / len(lat) if lat else None),
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


@dataclass
class BenchResult:
    label: str
    levels: list[Level]
    warmup: int
    max_tokens: int
    model: str

    @property
    def all_ok(self) -> bool:
        return bool(self.levels) and all(lv.ok == lv.n and lv.n > 0 for lv in self.levels)

    @detector("M701", domain="launch")
    def gate(self) -> Gate:
        failed = [lv for lv in self.levels if lv.ok != lv.n]
        if not self.levels:
            return Gate("bench", Status.UNKNOWN, "no level ran", code="M701")
        if failed:
            ev = tuple(
                f"c={lv.concurrency}: {lv.n - lv.ok} of {lv.n} failed "
                f"({', '.join(f'{k} x{v}' for k, v in lv.stats()['failures'].items())})"
                for lv in failed
            )
            return Gate(
                "bench",
                Status.FAIL,
                f"{sum(lv.n - lv.ok for lv in failed)} requests failed at "
                f"{len(failed)} of {len(self.levels)} levels",
                ev,
                "M701",
            )
        total = sum(lv.n for lv in self.levels)
        return Gate(
            "bench", Status.PASS, f"all {total} requests at {len(self.levels)} levels succeeded"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "model": self.model,
            "warmup": self.warmup,
            "max_tokens": self.max_tokens,
            "all_ok": self.all_ok,
            "levels": [lv.stats() for lv in self.levels],
            **{"gate": self.gate().to_json()},
        }

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"label": self.label, **{k: v for k, v in lv.stats().items() if k != "failures"}}
            for lv in self.levels
        ]


def to_csv(results: Sequence[BenchResult]) -> str:
    rows = [r for res in results for r in res.rows()]
    if not rows:
        return ""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def write_results(folder: str, doc: dict[str, Any], results: Sequence[BenchResult]) -> None:
    """bench.json (the report) and bench.csv (one row per level) in `folder`."""
    import json
    import os

    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "bench.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
    with open(os.path.join(folder, "bench.csv"), "w", encoding="utf-8") as f:
        f.write(to_csv(results))


class Prompts:
    """Unique prefixes from one index that never resets across levels."""

    def __init__(self, base: str = BASE_PROMPT, run_id: str | None = None) -> None:
        self.base = base
        self.run_id = run_id or uuid.uuid4().hex[:8]
        self.index = 0

    def next(self) -> str:
        self.index += 1
        return f"[{self.run_id}-{self.index:06d}] {self.base}"


Send = Callable[[str], Reply]


def http_sender(base_url: str, model: str, max_tokens: int, timeout_s: float) -> Send:
    return fetch_sender(http_fetch(base_url), model, max_tokens, timeout_s)


def fetch_sender(fetch: Fetch, model: str, max_tokens: int, timeout_s: float) -> Send:
    """Requests of the sweep through ``fetch`` (HTTP, or the API server's proxy)."""

    def send(prompt: str) -> Reply:
        return fetch(
            "/v1/chat/completions",
            {
                "model": model,
                "max_tokens": max_tokens,
                "temperature": 0,
                "ignore_eos": True,
                "messages": [{"role": "user", "content": prompt}],
            },
            timeout_s,
        )

    return send


def run_bench(
    send: Send,
    levels: Sequence[int],
    max_tokens: int,
    requests_per_level: int | None,
    warmup: int = 1,
    label: str = "",
    model: str = "",
    on_level: Callable[[Level], None] | None = None,
    prompts: Prompts | None = None,
) -> BenchResult:
    prompts = prompts or Prompts()
    for _ in range(warmup):  # unmeasured: results are not kept
        send(prompts.next())
    out: list[Level] = []
    for c in levels:
        n = requests_per_level or 5 * c
        lv = Level(c)
        batch = [prompts.next() for _ in range(n)]
        t0 = time.monotonic()
        with cf.ThreadPoolExecutor(max_workers=c) as pool:
            for reply in pool.map(send, batch):
                lv.outcomes.append(classify(reply, max_tokens))
        lv.wall_s = time.monotonic() - t0
        out.append(lv)
        if on_level:
            on_level(lv)
    return BenchResult(label, out, warmup, max_tokens, model)


# Each engine's own switch for its MoE all-to-all backend: vLLM (and dynamo.vllm, which
# forwards it to vLLM's engine args) --all2all-backend; SGLang --moe-a2a-backend; TensorRT-LLM
# reads the communication method from TRTLLM_FORCE_COMM_METHOD, it has no serve flag.
BACKEND_FLAG = {"vllm": "--all2all-backend", "dynamo": "--all2all-backend",
                "sglang": "--moe-a2a-backend"}  # fmt: skip
TRTLLM_COMM_ENV = "TRTLLM_FORCE_COMM_METHOD"


def with_backend(cmd: str, backend: str, engine: str = "vllm") -> str:
    """The serve command with the engine's all-to-all backend set to `backend`."""
    import re
    import shlex

    if not cmd:
        return cmd
    if engine == "tensorrt-llm":
        return f"export {TRTLLM_COMM_ENV}={shlex.quote(backend)}; {cmd}"
    flag = BACKEND_FLAG.get(engine, "--all2all-backend")
    pat = re.compile(rf"{re.escape(flag)}(?:=|\s+)\S+")
    if pat.search(cmd):
        return pat.sub(f"{flag} {shlex.quote(backend)}", cmd)
    return f"{cmd} {flag} {shlex.quote(backend)}"


def with_transport(env: dict[str, str], transport: str) -> dict[str, str]:
    """The env of the same pods and image on the other GIN transport: an env flip only
    (NCCL_GIN_TYPE 2 = CPU proxy, 5 = EFA-GDA with NCCL_SYM_GIN_KERNELS_ENABLE=0)."""
    out = dict(env)
    if transport == "efa-gda":
        out.update(NCCL_GIN_TYPE="5", NCCL_SYM_GIN_KERNELS_ENABLE="0")
    else:
        out["NCCL_GIN_TYPE"] = "2"
        out.pop("NCCL_SYM_GIN_KERNELS_ENABLE", None)
    return out
