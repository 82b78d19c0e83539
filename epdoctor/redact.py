"""Redaction, epdoctor's second layer (the probe already redacts at the source).

Everything that leaves epdoctor (reports, bundles, its own argv echoed in a
report) goes through here, so a secret that slipped past the probe (a token
pasted into a log line, a key in a command line) is still masked.
"""

from __future__ import annotations

import re
from typing import Any

MASK = "[REDACTED]"

# Names whose values are secret (HF_TOKEN, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
# *_PASSWORD, *_API_KEY, ...). NCCL_IB_GID_INDEX and similar are not keys: the
# bare word KEY only counts as its own underscore-separated part.
SECRET_NAME = re.compile(
    r"(?i)(token|secret|passw(or)?d|passwd|credential|api[_-]?key|(^|_)key($|_)|private)"
)

_VALUE_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"hf_[A-Za-z0-9]{20,}"), MASK),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), MASK),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]{16,}"), r"\1" + MASK),
    (re.compile(r"(://[^/\s:@]+:)[^@\s/]+@"), r"\1" + MASK + "@"),
    (
        re.compile(
            r"(?i)((?:token|secret|password|passwd|api[_-]?key|access[_-]?key)[\"']?\s*[=:]\s*[\"']?)"
            r"[^\s\"',;]{6,}"
        ),
        r"\1" + MASK,
    ),
    (
        re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"),
        MASK,
    ),
]


def redact_text(text: str) -> str:
    for rx, repl in _VALUE_PATTERNS:
        text = rx.sub(repl, text)
    return text


def redact_env(env: dict[str, str]) -> dict[str, str]:
    return {k: (MASK if SECRET_NAME.search(k) else redact_text(v)) for k, v in env.items()}


def redact_obj(obj: Any) -> Any:
    """Deep-redact a JSON-shaped value; dict keys that name secrets lose their values."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, list):
        return [redact_obj(v) for v in obj]
    if isinstance(obj, dict):
        out: dict[str, Any] = {}
        for k, v in obj.items():
            if isinstance(v, str) and SECRET_NAME.search(str(k)) and v and v != MASK:
                out[k] = MASK
            else:
                out[k] = redact_obj(v)
        return out
    return obj
