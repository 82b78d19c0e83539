"""The one boundary for files epdoctor is handed: plan.json and a model's config.json.

Both are untrusted input: a plan may be edited by hand, copied from a ticket, or be a link to
/dev/zero. They are read here only: a regular file (a FIFO, a device or a directory is refused
before any read, so nothing blocks), at most a few MiB, JSON with a nesting limit, then checked
field by field against bounds (``PLAN_FIELDS``): counts are integers in range (``nodes:
100000`` is refused before any API call), names are DNS-1123 labels matched to the end
(``\\Z``, so a trailing newline is no name), pins are hex SHAs or versions, text is bounded and
free of control characters. Anything else is ``BadInput`` (exit 2) with one line naming the
field. Fields not listed are kept as they are: the launch path reads only the ones listed.

Standard library only (with epdoctor.safeio), so every layer may use it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from epdoctor.safeio import BadInput, check_source, loads_json, read_capped

MAX_PLAN_BYTES = 4 << 20
MAX_CONFIG_BYTES = 1_000_000

DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?\Z")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}\Z")
# a vLLM pin: a commit (hex SHA prefix) or a wheel version (PEP 440, +g<sha> local part)
PIN = re.compile(
    r"(?:[0-9a-f]{7,40}|\d{1,4}(?:\.\d{1,6}){1,3}(?:(?:a|b|rc)\d{1,4})?(?:\.post\d{1,6})?"
    r"(?:\.dev\d{1,8})?(?:\+[A-Za-z0-9.]{1,64})?)\Z"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_NL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]|\n")

MAX_NODES = 64  # nodes of one plan (epdoctor plan --nodes, plan.json's nodes)
MAX_GPUS = 16
MAX_EFA = 64
# a StatefulSet's pods are NAME-<index> with a controller-revision-hash label NAME-<hash>
MAX_NAME = 40


def read_json(path: str, what: str, cap: int) -> Any:
    """A JSON file that is a regular file of at most ``cap`` bytes; one-line errors."""
    check_source(path, what)
    try:
        with open(path, "rb") as fh:
            data = read_capped(fh, cap, f"{what} {path}")
    except OSError as exc:
        raise BadInput(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BadInput(f"{what} {path} is not UTF-8 text") from None
    return loads_json(text, f"{what} {path}")


# ---- field checks: each returns the value or raises BadInput naming the field ------------------


def _show(value: Any) -> str:
    return repr(value)[:60] + ("..." if len(repr(value)) > 60 else "")


def integer(lo: int, hi: int) -> Callable[[Any, str], int]:
    def check(value: Any, field: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise BadInput(f"{field} must be an integer {lo}..{hi}, not {_show(value)}")
        return value

    return check


def label(max_len: int = 63) -> Callable[[Any, str], str]:
    def check(value: Any, field: str) -> str:
        if not isinstance(value, str) or len(value) > max_len or not DNS_LABEL.match(value):
            raise BadInput(
                f"{field} must be a DNS-1123 label of at most {max_len} characters (lowercase "
                f"letters, digits and '-'), not {_show(value)}"
            )
        return value

    return check


def text(max_len: int, lines: bool = False) -> Callable[[Any, str], str]:
    """A string of at most ``max_len`` characters with no control characters (newlines and
    tabs allowed only with ``lines``: a command)."""
    bad = _CONTROL if lines else _CONTROL_NL

    def check(value: Any, field: str) -> str:
        if not isinstance(value, str) or len(value) > max_len:
            raise BadInput(f"{field} must be text of at most {max_len} characters, not "
                           f"{_show(value)}")  # fmt: skip
        if bad.search(value):
            raise BadInput(f"{field} holds control characters (terminal escapes?); refused")
        return value

    return check


_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")


def token(value: Any, field: str) -> str:
    """A word from a fixed vocabulary (an engine, a transport, an instance type, a mode)."""
    if not isinstance(value, str) or not _TOKEN.match(value):
        raise BadInput(f"{field} must be a single word (letters, digits, '.', '_', '-'), not "
                       f"{_show(value)}")  # fmt: skip
    return value


def pin(value: Any, field: str) -> str:
    if not isinstance(value, str) or not PIN.match(value):
        raise BadInput(f"{field} must be a commit (7-40 hex digits) or a version, not "
                       f"{_show(value)}")  # fmt: skip
    return value


def one_of(*choices: str) -> Callable[[Any, str], str]:
    def check(value: Any, field: str) -> str:
        if value not in choices:
            raise BadInput(f"{field} must be one of {', '.join(choices)}, not {_show(value)}")
        return str(value)

    return check


def _env(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > 256:
        raise BadInput(f"{field} must be a list of at most 256 entries")
    for i, e in enumerate(value):
        if not isinstance(e, dict):
            raise BadInput(f"{field}[{i}] must be an object with a name and a value")
        env_name(e.get("name"), f"{field}[{i}].name")
        if "value" in e:
            text(8192)(e["value"], f"{field}[{i}].value")
    return value


def env_name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not ENV_NAME.match(value):
        raise BadInput(f"{field} must be an environment variable name, not {_show(value)}")
    return value


def _commands(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict) or len(value) > 64:
        raise BadInput(f"{field} must be an object of at most 64 commands")
    for k, v in value.items():
        if v is not None:
            text(65536, lines=True)(v, f"{field}.{k}")
    return value


def _hosts(value: Any, field: str) -> list[Any]:
    if not isinstance(value, list) or len(value) > MAX_NODES:
        raise BadInput(f"{field} must be a list of at most {MAX_NODES} hosts")
    for i, h in enumerate(value):
        text(253)(h, f"{field}[{i}]")
    return value


INPUT_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "engine": token,
    "transport": token,
    "target": one_of("kubernetes", "bare"),
    "instance": token,
    "nodes": integer(1, MAX_NODES),
    "gpus_per_node": integer(1, MAX_GPUS),
    "model": text(256),
    "namespace": label(63),
    "name": label(MAX_NAME),
    "image": text(512),
    "nccl": token,
    "vllm_pin": pin,
    "hosts": _hosts,
    "num_experts": integer(1, 1 << 20),
    "hf_cache": text(4096),
    "cache_host_path": text(4096),
}

PLAN_FIELDS: dict[str, Callable[[Any, str], Any]] = {
    "verdict": one_of("supported", "supported with caveats", "not supported"),
    "name": label(MAX_NAME),
    "nodes": integer(1, MAX_NODES),
    "gpus_per_node": integer(1, MAX_GPUS),
    "efa_per_node": integer(0, MAX_EFA),
    "world": integer(1, MAX_NODES * MAX_GPUS),
    "serve_ep": integer(1, MAX_NODES * MAX_GPUS),
    "instance": token,
    "mode": one_of("eager", "graphs", "n/a"),
    "nccl": token,
    "vllm_pin": pin,
    "image": text(512),
    "env": _env,
    "commands": _commands,
}


def check_plan(doc: Any, where: str) -> dict[str, Any]:
    """plan.json checked against PLAN_FIELDS and INPUT_FIELDS; a field that is absent, null or
    the empty string (unset) is left to the reader's default."""
    if not isinstance(doc, dict):
        raise BadInput(f"{where} is not a plan (expected a JSON object)")
    for key, check in PLAN_FIELDS.items():
        if doc.get(key) not in (None, ""):
            check(doc[key], f"{where}: {key}")
    inp = doc.get("input")
    if inp is not None:
        if not isinstance(inp, dict):
            raise BadInput(f"{where}: input must be an object")
        for key, check in INPUT_FIELDS.items():
            if inp.get(key) not in (None, ""):
                check(inp[key], f"{where}: input.{key}")
    return doc


def load_plan_file(path: str) -> dict[str, Any]:
    """plan.json from ``path``: bounded, regular, JSON, checked."""
    return check_plan(read_json(path, "plan", MAX_PLAN_BYTES), path)
