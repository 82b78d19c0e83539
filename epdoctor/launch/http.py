"""Small HTTP client for the engine's OpenAI-compatible endpoints (standard library only)."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


class DefaultURL(str):
    """A ``--url`` the operator did not give (the flag's default): a Kubernetes rollout then
    reaches the engine through the API server instead."""


@dataclass(frozen=True)
class Reply:
    status: int | None  # None: no HTTP answer (refused, timeout)
    body: Any  # parsed JSON, or the text when it was not JSON
    elapsed_s: float
    error: str = ""

    @property
    def json(self) -> dict[str, Any]:
        return self.body if isinstance(self.body, dict) else {}


def request(url: str, payload: dict[str, Any] | None = None, timeout_s: float = 10.0) -> Reply:
    data = json.dumps(payload).encode() if payload is not None else None
    req = urllib.request.Request(
        url,
        data=data,
        method="POST" if data else "GET",
        headers={"content-type": "application/json"},
    )
    t0 = time.monotonic()
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            raw = resp.read()
            status = resp.status
    except urllib.error.HTTPError as exc:
        raw, status = exc.read(), exc.code
    except (urllib.error.URLError, OSError, TimeoutError) as exc:
        reason = getattr(exc, "reason", exc)
        return Reply(None, None, time.monotonic() - t0, f"{type(exc).__name__}: {reason}")
    return json_reply(status, raw, time.monotonic() - t0)


# How a launch reaches the engine: (path, JSON payload or None for GET, timeout) -> Reply.
# Directly over HTTP (http_fetch), or through the Kubernetes API server's proxy to a pod.
Fetch = Callable[[str, "dict[str, Any] | None", float], Reply]


def http_fetch(base_url: str) -> Fetch:
    base = base_url.rstrip("/")

    def fetch(path: str, payload: dict[str, Any] | None = None, timeout_s: float = 10.0) -> Reply:
        return request(base + path, payload, timeout_s=timeout_s)

    return fetch


def json_reply(status: int | None, raw: bytes, elapsed_s: float, error: str = "") -> Reply:
    """A Reply from a status and raw body (the body parsed as JSON where it is)."""
    if status is None:
        return Reply(None, None, elapsed_s, error)
    text = raw.decode("utf-8", "replace")
    try:
        body: Any = json.loads(text) if text.strip() else None
    except ValueError:
        body = text
    return Reply(status, body, elapsed_s)
