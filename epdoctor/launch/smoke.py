"""The smoke request: one chat completion at temperature 0 through the leader.

Passes only with HTTP 200, a ``usage`` object with completion tokens, a
non-empty message and a sane finish reason (stop or length); a reply that is
one token repeated is flagged as degenerate. Shows the reply and the latency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from epdoctor.checks.registry import detector
from epdoctor.launch.gates import Gate
from epdoctor.launch.http import Fetch, Reply, http_fetch
from epdoctor.model import Status

PROMPT = "In one sentence, what is expert parallelism in a Mixture-of-Experts model?"
SANE_FINISH = ("stop", "length")


@dataclass
class SmokeResult:
    gate: Gate
    reply: str
    latency_s: float
    usage: dict[str, Any] | None
    finish_reason: str | None
    status: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            **self.gate.to_json(),
            "reply": self.reply,
            "latency_s": round(self.latency_s, 3),
            "usage": self.usage,
            "finish_reason": self.finish_reason,
            "http_status": self.status,
        }


def payload(model: str, max_tokens: int = 64, prompt: str = PROMPT) -> dict[str, Any]:
    return {
        "model": model,
        "max_tokens": max_tokens,
        "temperature": 0,
        "messages": [{"role": "user", "content": prompt}],
    }


def degenerate(text: str) -> str | None:
    """Why a reply looks broken, or None. Tokens are whitespace-separated words."""
    words = text.split()
    if not words:
        return "empty message"
    if len(words) >= 8 and len(set(words)) == 1:
        return f"one token repeated {len(words)} times ({words[0][:20]!r})"
    if len(words) >= 16 and len(set(words)) / len(words) < 0.1:
        return f"only {len(set(words))} distinct tokens in {len(words)}"
    return None


@detector("E703", "E704", domain="launch")
def judge(r: Reply) -> SmokeResult:
    body = r.json
    choice = (body.get("choices") or [{}])[0] if isinstance(body.get("choices"), list) else {}
    msg = (choice.get("message") or {}).get("content") if isinstance(choice, dict) else None
    text = msg if isinstance(msg, str) else ""
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    usage = body.get("usage") if isinstance(body.get("usage"), dict) else None
    ev = [f"HTTP {r.status if r.status is not None else r.error}", f"latency {r.elapsed_s:.2f}s"]
    if usage:
        ev.append(f"usage {usage}")
    ev.append(f"finish_reason {finish!r}")

    def res(status: Status, summary: str, code: str | None = None) -> SmokeResult:
        return SmokeResult(
            Gate("smoke", status, summary, tuple(ev), code),
            text,
            r.elapsed_s,
            usage,
            finish,
            r.status,
        )

    if r.status != 200:
        return res(Status.FAIL, f"no completion: HTTP {r.status if r.status else r.error}", "E704")
    if (
        not usage
        or not isinstance(usage.get("completion_tokens"), int)
        or usage["completion_tokens"] <= 0
    ):
        return res(Status.FAIL, "HTTP 200 without usage (or zero completion tokens)", "E703")
    bad = degenerate(text)
    if bad:
        return res(Status.FAIL, f"degenerate reply: {bad}", "E704")
    if finish not in SANE_FINISH:
        return res(Status.FAIL, f"finish reason {finish!r} (expected stop or length)", "E704")
    return res(
        Status.PASS, f"{usage['completion_tokens']} tokens in {r.elapsed_s:.2f}s, finish {finish}"
    )


def smoke(
    base_url: str,
    model: str,
    max_tokens: int = 64,
    timeout_s: float = 300.0,
    fetch: Fetch | None = None,
) -> SmokeResult:
    post = fetch or http_fetch(base_url)
    return judge(post("/v1/chat/completions", payload(model, max_tokens), timeout_s))


def first_model(base_url: str, fetch: Fetch | None = None) -> str | None:
    m = (fetch or http_fetch(base_url))("/v1/models", None, 10)
    data = m.json.get("data") if m.status == 200 else None
    if isinstance(data, list) and data and isinstance(data[0], dict):
        return str(data[0].get("id"))
    return None
