"""Redaction: the one set of rules every secret-bearing input passes through.

Where it runs (docs/secrets.md): at the source in the node probe, which carries a
verbatim copy of the rule block below (it runs on nodes without epdoctor;
tests/hostile/test_secrets.py fails when the two copies differ), and again where
data enters epdoctor's core: the probe document and a target's side facts and
errors (epdoctor/facts/probe_doc.py, epdoctor/diagnose.py), recipe files before
a linter reads them (epdoctor/lint/base.py), launch stream lines before a pane
sees them (epdoctor/launch/streams.py) and log lines before the log facts hold
them. Renderers and screens only ever see redacted data; the JSON and Markdown
writers and the bundle writer run one more (idempotent) pass as a safety net.

What is masked, by name and by shape, is listed in docs/secrets.md.
"""

from __future__ import annotations

import re
from typing import Any

# The rule block below is copied verbatim into probes/node_probe.py (python 3.6+,
# standard library only). Edit both together; the test compares the text.
# ---- redaction rules: begin ----
MASK = "[REDACTED]"

# A name is secret when it contains one of these anywhere (any case, camelCase too).
# `token` is not `tokens` / `tokenizer` (max_num_batched_tokens stays readable).
_NAME_WORDS = re.compile(
    r"token(?!s|iz)|secret|passw(?:or)?d|passphrase|credential|api[_.-]?key|apikey"
    r"|access[_.-]?key|private[_.-]?key|authorization|signature|cookie",
    re.I,
)
# ... or when one of its parts is one of these (HF_AUTH, DB_PASS, EP_NIC_KEY, GITHUB_PAT).
# No NCCL, libfabric, aws-ofi-nccl or NVSHMEM knob has such a part (NCCL_IB_PKEY's part is
# PKEY), so the stack's knobs stay readable; tests/hostile/test_secrets.py checks the ones
# epdoctor knows.
_NAME_PARTS = frozenset(("key", "pass", "pwd", "auth", "creds", "cred", "pat"))
# The shell's working directories; a bare `key` names a label, toleration or secretKeyRef
# entry in Kubernetes objects (node affinity checks read it), not a secret; `rank_key` is the
# log report's own field (a rank's host:pid).
_NOT_SECRET = frozenset(("PWD", "OLDPWD", "KEY", "KEYS", "RANK_KEY"))


def is_secret_name(name):
    """True when a variable, key, header or flag called `name` holds a secret."""
    name = str(name).strip().lstrip("-")
    if not name or name.upper() in _NOT_SECRET:
        return False
    if _NAME_WORDS.search(name):
        return True
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    return any(p in _NAME_PARTS for p in re.split(r"[^a-z0-9]+", snake))


def _masked(value):
    return value.lstrip("\"'").startswith("[REDACTED")


_B64 = "A-Za-z0-9+/="
# A PEM private key: the markers stay, every base64 run between them is masked, so
# the block keeps its lines (line numbers), YAML list items and JSON escapes.
_PEM = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----)"
    r"([A-Za-z0-9+/=\s\\\"',:.-]*?)"
    r"(-----END [A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|(?![A-Za-z0-9+/=\s\\\"',:.-]))"
)
_PEM_RUN = re.compile(r"(?<!\\)[A-Za-z0-9+/=]+")
_KEEP_RUNS = frozenset(("true", "false", "null"))


def _pem_run(m):
    run = m.group(0)
    return run if run.isdigit() or run in _KEEP_RUNS else MASK


def _pem(m):
    return m.group(1) + _PEM_RUN.sub(_pem_run, m.group(2)) + m.group(3)


_AUTH_HEADER = re.compile(
    r"(?i)\b((?:proxy-)?authorization[\"']?\s*[:=]\s*[\"']?)"
    r"(?!(?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+\[REDACTED\])"
    r"((?:bearer|basic|token|digest|negotiate|aws4-hmac-sha256)\s+)?"
    r"(?!\[REDACTED\])[^\s\"',;]+"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)(?!\[REDACTED\])[A-Za-z0-9._~+/=-]{8,}")
# Kubernetes/compose env entries: name: HF_TOKEN <newline> value: ... (YAML, flow, JSON).
_NAME_VALUE = re.compile(
    r"(\bname[\"']?\s*[:=]\s*[\"']?([A-Za-z_][A-Za-z0-9_.-]*)[\"']?\s*,?[ \t]*"
    r"(?:\r?\n[ \t-]*)?[\"']?value[\"']?\s*[:=]\s*)"
    r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s,}\]]+)"
)
# NCCL INFO NAME set by environment to VALUE
_NCCL_ENV = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)( set by environment to )(\S+)")
# Dockerfile ENV/ARG in the space form: ENV HF_TOKEN hf_xxx
_DOCKER_ENV = re.compile(
    r"(?im)^([ \t]*(?:ENV|ARG)[ \t]+)([A-Za-z_][A-Za-z0-9_]*)([ \t]+)([^=\s].*)$"
)
# --api-key KEY, --api-key=KEY, --hf_token "x"
_FLAG = re.compile(
    r"(?<![\w-])(--?[A-Za-z][A-Za-z0-9_.-]*)(=|[ \t]+)(?!-)"
    r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"']+)"
)
# NAME=VALUE, NAME: VALUE, "name": "value", export NAME="value", name = value
_ASSIGN = re.compile(
    r"(?<![A-Za-z0-9_./-])([\"']?)([A-Za-z_][A-Za-z0-9_.-]*)\1([ \t]*[=:][ \t]*)"
    r"(\"[^\"\n]*\"|'[^'\n]*'|[^\s\"',;&|)}\]]+)"
)
_JSON_LITERAL = re.compile(r"^(?:-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null)$")
# mysql -u root -pSECRET (a glued -p; -p8000 is a port, -pthread a compiler flag)
_GLUED_P = re.compile(r"(?<![\w-])(-p)([^\s\"'-]\S*)")
_P_CLIENTS = re.compile(
    r"\b(?:mysql|mysqldump|mysqladmin|mariadb|mariadb-dump)\b|(?<![\w-])-u\s*\S"
)
_URL_USERPASS = re.compile(
    r"(?i)\b([a-z][a-z0-9+.-]*:/{1,2})([^\s/:@\"'<>]*):(?!\[REDACTED\])([^\s/@\"'<>]+)@"
)
_URL_TOKEN = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*:/{1,2})(?!\[REDACTED\])([^\s/:@\"'<>]{16,})@")
_SHAPES = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}"
    r"|\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bglpat-[A-Za-z0-9_-]{20,}"
    r"|\bsk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA)[0-9A-Z]{16}\b"
    r"|\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"
)
# Bare key material: a long base64 run (a PEM body line, an AWS secret key) or a padded one.
_B64_RUN = re.compile(
    r"(?<![A-Za-z0-9+/=_.-])(?:[A-Za-z0-9+/]{40,}={0,2}|[A-Za-z0-9+/]{16,}={1,2})(?![A-Za-z0-9+/=_.-])"
)
_TRIGGERS = (
    "token", "secret", "passw", "passphrase", "credential", "key", "auth", "pass", "pwd",
    "cred", "_pat", "pat_", "-pat", "pat=", "pat:", "pat\"", "pat'", "signature", "cookie",
    "hf_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "glpat", "sk-", "xox", "bearer", ":/",
    "eyj", "mysql", "mariadb", "-u", "private",
    "akia", "asia", "agpa", "aida", "aroa", "aipa", "anpa", "anva", "apka",
)  # fmt: skip
# One search decides whether a text can hold anything to mask: a trigger word (any case) or
# a run long enough to be key material. Most text (paths, versions, numbers) has neither.
# (An alternation searched in the lowered text is several times faster than `(?i)` or one
# `in` test per word.)
_TRIGGER_WORDS = re.compile("|".join(re.escape(t) for t in _TRIGGERS))
_LONG_RUN = re.compile(r"[A-Za-z0-9+/]{40}|[A-Za-z0-9+/]{16}=")


def _b64_run(m):
    run = m.group(0)
    core = run.rstrip("=")
    if m.string[max(0, m.start() - 7) : m.start()] == "SHA256:" and len(core) == 43:
        return run  # a key's fingerprint as OpenSSH prints it: public, meant to be compared
    if run.startswith("/") or not (
        re.search(r"[a-z]", core) and re.search(r"[A-Z]", core) and re.search(r"[0-9]", core)
    ):
        return run
    if len(core) < 40 and run == core:
        return run
    if max(len(s) for s in core.split("/")) < 16:
        return run  # a path (DeepEP2/csrc/kernels/...), not key material
    return MASK


def _auth_header(m):
    return m.group(1) + (m.group(2) or "") + MASK


def _name_value(m):
    if not is_secret_name(m.group(2)) or _masked(m.group(3)):
        return m.group(0)
    return m.group(1) + _quoted_mask(m.group(3))


def _quoted_mask(value):
    if len(value) >= 2 and value[0] in "\"'" and value[-1] == value[0]:
        return value[0] + MASK + value[0]
    return MASK


def _nccl_env(m):
    if not is_secret_name(m.group(1)) or _masked(m.group(3)):
        return m.group(0)
    return m.group(1) + m.group(2) + MASK


def _docker_env(m):
    if not is_secret_name(m.group(2)) or _masked(m.group(4)):
        return m.group(0)
    return m.group(1) + m.group(2) + m.group(3) + MASK


def _flag(m):
    if not is_secret_name(m.group(1)) or _masked(m.group(3)):
        return m.group(0)
    return m.group(1) + m.group(2) + _quoted_mask(m.group(3))


def _assign(m):
    quote, name, sep, value = m.group(1), m.group(2), m.group(3), m.group(4)
    if not is_secret_name(name) or _masked(value) or name.lower().endswith("authorization"):
        return m.group(0)  # an Authorization header was masked whole, scheme kept
    if quote and value[0] not in "\"'" and _JSON_LITERAL.match(value):
        return m.group(0)  # "max_token": 5 in JSON text: a number, and a bare MASK breaks JSON
    if ":" in sep and value.startswith("//"):
        return m.group(0)  # token://... is a URL scheme, not an assignment
    return quote + name + quote + sep + _quoted_mask(value)


def _glued_p(m):
    value = m.group(2)
    if value.isdigit() or _masked(value):
        return m.group(0)
    return m.group(1) + MASK


def redact_text(text):
    """Mask every secret in a free text (a log line, a file, a message). Idempotent."""
    if not text:
        return text
    low = text.lower()
    if not _TRIGGER_WORDS.search(low) and not _LONG_RUN.search(text):
        return text
    if "-----BEGIN" in text:
        text = _PEM.sub(_pem, text)
    text = _AUTH_HEADER.sub(_auth_header, text)
    text = _BEARER.sub(lambda m: m.group(1) + MASK, text)
    if "value" in low:
        text = _NAME_VALUE.sub(_name_value, text)
    if "set by environment" in low:
        text = _NCCL_ENV.sub(_nccl_env, text)
    if "env" in low or "arg" in low:
        text = _DOCKER_ENV.sub(_docker_env, text)
    if "-" in text:
        text = _FLAG.sub(_flag, text)
    if "=" in text or ":" in text:
        text = _ASSIGN.sub(_assign, text)
    if "-p" in text and _P_CLIENTS.search(text):
        text = _GLUED_P.sub(_glued_p, text)
    if ":/" in text:  # also a URL in a path, normalised to scheme:/host
        text = _URL_USERPASS.sub(lambda m: m.group(1) + m.group(2) + ":" + MASK + "@", text)
        text = _URL_TOKEN.sub(lambda m: m.group(1) + MASK + "@", text)
    text = _SHAPES.sub(MASK, text)
    return _B64_RUN.sub(_b64_run, text)


def redact_argv(argv):
    """A command line as its words (/proc/PID/cmdline): `--api-key KEY` masks the next word."""
    words = [str(a) for a in argv]
    mysql = any(_P_CLIENTS.search(w) for w in words) or "-u" in words
    out = []
    secret_next = False
    for w in words:
        if secret_next and not w.startswith("-"):
            out.append(MASK)
            secret_next = False
            continue
        secret_next = w.startswith("-") and "=" not in w and is_secret_name(w)
        if mysql and w.startswith("-p") and len(w) > 2 and not w[2:].isdigit():
            out.append("-p" + MASK)
            continue
        out.append(redact_text(w))
    return out


def redact_env(env):
    """An environment: secret names lose their values, every other value is redact_text'ed."""
    return dict((k, MASK if (is_secret_name(k) and v) else redact_text(v)) for k, v in env.items())


def redact_obj(obj):
    """Deep-redact a JSON-shaped value: keys that name secrets lose their (string) values,
    {"name": SECRET, "value": X} entries lose X, lists of words are read as command lines."""
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(v, str) for v in obj):
            return redact_argv(obj)
        return [redact_obj(v) for v in obj]
    if isinstance(obj, dict):
        pair = isinstance(obj.get("name"), str) and is_secret_name(obj["name"])
        out = {}
        for k, v in obj.items():
            key = redact_text(k) if isinstance(k, str) else k
            if (
                isinstance(v, str)
                and v
                and not _masked(v)
                and (is_secret_name(k) or (pair and k == "value"))
            ):
                out[key] = MASK
            else:
                out[key] = redact_obj(v)
        return out
    return obj


# ---- redaction rules: end ----


def redact_lines(lines: Any) -> list[str]:
    """Lines redacted as one text, so a private key split over several lines is masked whole."""
    return redact_text("\n".join(lines)).split("\n")
