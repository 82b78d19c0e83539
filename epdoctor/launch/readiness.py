"""Readiness as each engine really signals it.

* vLLM: GET /health 200, then GET /v1/models lists at least one model.
* Dynamo: GET /health 200 AND a non-empty ``endpoints`` array; dynamo.frontend
  answers 200 as soon as its HTTP server binds, before any engine registered
  (the Dynamo reference recipe's "why /health alone lies"), so the status code alone is not
  ready; then /v1/models.
* TensorRT-LLM (trtllm-serve) and SGLang: GET /health 200 (SGLang answers 503 while its
  server is starting; trtllm-serve 503 once its executor hit a fatal error), /v1/models, then
  GET /health_generate 200: both generate one token there, which /health does not. SGLang's
  non-leader nodes serve a stand-in /health that is always 200, so only the leader is probed.
  A server without /health_generate (404) is judged on the first two.

``fetch`` says how the engine is reached: directly over HTTP, or through the Kubernetes API
server's proxy to the leader pod (epdoctor/launch/http.py ``Fetch``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from epdoctor.checks.registry import detector
from epdoctor.launch.gates import Gate
from epdoctor.launch.http import Fetch, http_fetch
from epdoctor.model import Status

ENGINES = ("vllm", "dynamo", "tensorrt-llm", "sglang")
GENERATES_ON_HEALTH = ("tensorrt-llm", "sglang")  # engines with /health_generate


@dataclass
class Probe:
    """One readiness look: ready or not, and the stage it stopped at."""

    ready: bool
    stage: str  # "connect", "health", "endpoints", "models", "ready"
    detail: str
    models: list[str] = field(default_factory=list)


def probe_once(
    base_url: str, engine: str, timeout_s: float = 5.0, fetch: Fetch | None = None
) -> Probe:
    get = fetch or http_fetch(base_url)
    h = get("/health", None, timeout_s)
    if h.status is None:
        return Probe(False, "connect", h.error)
    if h.status != 200:
        return Probe(False, "health", f"/health answered {h.status}")
    if engine == "dynamo":
        eps = h.json.get("endpoints")
        if not isinstance(eps, list) or not eps:
            return Probe(
                False,
                "endpoints",
                "/health 200 but the endpoints array is empty: no engine registered yet",
            )
    m = get("/v1/models", None, timeout_s)
    if m.status != 200:
        return Probe(False, "models", f"/v1/models answered {m.status or m.error}")
    ids = [str(d.get("id")) for d in (m.json.get("data") or []) if isinstance(d, dict)]
    if not ids:
        return Probe(False, "models", "/v1/models lists no model")
    if engine in GENERATES_ON_HEALTH:
        g = get("/health_generate", None, max(timeout_s, 30.0))
        if g.status not in (200, 404):
            return Probe(
                False, "generate", f"/health_generate answered {g.status or g.error}", ids
            )
    return Probe(True, "ready", f"serving {', '.join(ids)}", ids)


@dataclass
class Waiter:
    """Non-blocking readiness polling with a startup budget (step() from a run loop)."""

    base_url: str
    engine: str
    budget_s: float
    poll_s: float = 2.0
    t0: float = field(default_factory=time.monotonic)
    fetch: Fetch | None = None  # None: HTTP to base_url
    last: Probe | None = None
    _next: float = 0.0
    health_ok_since: float | None = None

    def step(self) -> Probe | None:
        now = time.monotonic()
        if now < self._next:
            return self.last
        self._next = now + self.poll_s
        self.last = probe_once(self.base_url, self.engine, fetch=self.fetch)
        if self.last.stage in ("endpoints", "models", "generate", "ready") and (
            self.health_ok_since is None
        ):
            self.health_ok_since = now
        return self.last

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.t0

    @property
    def expired(self) -> bool:
        return self.elapsed > self.budget_s

    @detector("E701", "E702", domain="launch")
    def gate(self) -> Gate:
        p = self.last
        if p and p.ready:
            return Gate("ready", Status.PASS, f"{p.detail} after {self.elapsed:.0f}s")
        detail = p.detail if p else "never probed"
        if p and p.stage == "endpoints" and self.health_ok_since is not None:
            return Gate(
                "ready",
                Status.FAIL,
                f"not ready within {self.budget_s:.0f}s: /health was 200 for "
                f"{time.monotonic() - self.health_ok_since:.0f}s with no endpoint registered",
                (detail,),
                "E701",
            )
        return Gate(
            "ready", Status.FAIL, f"not ready within {self.budget_s:.0f}s", (detail,), "E702"
        )


def wait_ready(
    base_url: str,
    engine: str,
    budget_s: float,
    poll_s: float = 2.0,
    on_probe: Callable[[Probe, float], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Gate:
    w = Waiter(base_url, engine, budget_s, poll_s)
    while True:
        p = w.step()
        if on_probe and p:
            on_probe(p, w.elapsed)
        if p and p.ready:
            return w.gate()
        if w.expired or (should_stop and should_stop()):
            return w.gate()
        time.sleep(min(poll_s, 0.2))
