#!/usr/bin/env python3
"""epdoctor node probe: gather everything epdoctor needs from one node in ONE run.

Self-contained on purpose: python3 standard library only (3.6+), nothing to
install on the target. It is fed on stdin (`python3 - ARGS`) by every epdoctor
target (local, SSH, Kubernetes exec) and prints one JSON document on stdout.

Read-only: it opens files for reading, lists directories and runs read-only
commands (nvidia-smi, ldconfig -p, fi_info, rpm; dpkg-query only when dpkg's
status file cannot be read), started together so their waits overlap. Every command has
its own timeout and the whole probe a deadline, so one wedged tool cannot hang
it. A missing tool is recorded as missing, not as an error. Secrets in
environment values are redacted here, at the source, so they never leave the
node.
"""

import glob
import json
import mmap
import os
import re
import struct
import subprocess
import sys
import time

PROBE_VERSION = 1
START = time.time()
DEADLINE = [START + 60.0]

# ---------------------------------------------------------------- helpers ---


_PROC_PID = re.compile(r"^/proc(/(\d+|self)(/|$)|/?$)")
ROOT = [""]  # --root DIR: read the node's files under DIR (a mounted host root or image)


def fs(path):
    """Where to read `path`: under --root, except /proc/PID (processes are this kernel's)."""
    if ROOT[0] and path.startswith("/") and not _PROC_PID.match(path):
        return ROOT[0] + path
    return path


def unfs(path):
    r = ROOT[0]
    return path[len(r) :] if r and path.startswith(r + "/") else path


def isdir(p):
    return os.path.isdir(fs(p))


def exists(p):
    return os.path.exists(fs(p))


def realpath(p):
    return unfs(os.path.realpath(fs(p)))


def getsize(p):
    return os.path.getsize(fs(p))


def gglob(pattern):
    return [unfs(x) for x in glob.glob(fs(pattern))]


def walk(top):
    for dirpath, dirs, files in os.walk(fs(top)):
        yield unfs(dirpath), dirs, files


def left():
    return max(0.5, DEADLINE[0] - time.time())


STARTED = {}  # tuple(argv) -> (Popen, t0, timeout): commands prestart() launched early


def spawn(argv, timeout=10.0):
    """Start a read-only command now; run() with the same argv collects it later."""
    key = tuple(argv)
    if key in STARTED:
        return
    try:
        # Own session, so a timeout kills the tool and anything it started.
        p = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    except (OSError, ValueError):
        return  # run() tries again and records why
    STARTED[key] = (p, time.time(), timeout)


def run(argv, timeout=10.0):
    """Run a read-only command (or collect the one prestart() began); never raises.

    Missing tools give missing=True.
    """
    started = STARTED.pop(tuple(argv), None)
    if started:
        p, t0, timeout = started
        timeout = max(0.0, min(timeout - (time.time() - t0), left()))
    else:
        timeout = min(timeout, left())
        t0 = time.time()
        try:
            p = subprocess.Popen(
                argv,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except (OSError, ValueError) as exc:
            return {"argv": argv, "missing": True, "error": str(exc)}
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, 9)
        except OSError:
            p.kill()
        out, err = p.communicate()
        return {
            "argv": argv,
            "timeout": True,
            "rc": None,
            "stdout": _text(out)[-200000:],
            "stderr": _text(err)[-4000:],
            "elapsed_s": round(time.time() - t0, 3),
        }
    return {
        "argv": argv,
        "rc": p.returncode,
        "stdout": _text(out)[-400000:],
        "stderr": _text(err)[-4000:],
        "elapsed_s": round(time.time() - t0, 3),
    }


def reap_started():
    """Kill and collect whatever prestart() began that no section asked for."""
    for p, _, _ in STARTED.values():
        try:
            os.killpg(p.pid, 9)
        except OSError:
            pass
        p.communicate()
    STARTED.clear()


def _text(b):
    return b.decode("utf-8", "replace") if isinstance(b, bytes) else (b or "")


def read(path, limit=262144):
    """File text, or None when absent/unreadable (with the reason in errors)."""
    try:
        with open(fs(path), "rb") as f:
            return _text(f.read(limit))
    except OSError as exc:
        ERRORS[path] = exc.strerror or str(exc)
        return None


def listdir(path):
    try:
        return sorted(os.listdir(fs(path)))
    except OSError as exc:
        ERRORS[path] = exc.strerror or str(exc)
        return None


ERRORS = {}


def which(name, extra_dirs=()):
    dirs = os.environ.get("PATH", "").split(os.pathsep) + list(extra_dirs)
    for d in dirs:
        p = os.path.join(d, name)
        if d and os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


# -------------------------------------------------------------- redaction ---

# The same rules as epdoctor/redact.py, copied verbatim (the probe runs without
# epdoctor); tests/hostile/test_secrets.py fails when the copies differ.
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


# Only the environment that can matter to this stack leaves the node.
ENV_PREFIXES = (
    "NCCL_",
    "OFI_",
    "FI_",
    "EP_",
    "DEEP_EP",
    "VLLM_",
    "TRTLLM_",
    "TLLM_",
    "NVSHMEM_",
    "CUDA",
    "NVIDIA_",
    "LD_",
    "HF_",
    "HUGGING",
    "PYTHON",
    "TORCH",
    "SGLANG",
    "SGL_",
    "DYN_",
    "GDRCOPY",
    "UCX_",
    "RDMAV_",
    "MASTER_",
    "AWS_",
    "KUBERNETES_",
    "NV_",
)
ENV_NAMES = ("PATH", "WORLD_SIZE", "RANK", "LOCAL_RANK", "NODE_RANK", "HOSTNAME", "HOME")


def pick_env(env):
    keep = {}
    for k, v in env.items():
        if k.startswith(ENV_PREFIXES) or k in ENV_NAMES:
            keep[k] = v
    return redact_env(keep)


# ------------------------------------------------------------------- ELF ---

PLUGIN_SYM = re.compile(r"^nccl(Net|Gin|Rma|Tuner|CollNet|Profiler|Env)Plugin_v\d+$")
NCCL_SYMS = (
    "ncclGetLsaDevicePointer",
    "ncclDevCommCreate",
    "ncclGetVersion",
    "ncclCommWindowRegister",
)


def elf_dynsyms(path):
    """Names of defined dynamic symbols, read from the ELF file (no binutils needed)."""
    with open(fs(path), "rb") as f:
        ident = f.read(16)
        if ident[:4] != b"\x7fELF":
            raise ValueError("not an ELF file")
        is64 = ident[4] == 2
        end = "<" if ident[5] == 1 else ">"
        if is64:
            hdr = struct.unpack(end + "HHIQQQIHHHHHH", f.read(48))
            shoff, shentsize, shnum = hdr[5], hdr[10], hdr[11]
        else:
            hdr = struct.unpack(end + "HHIIIIIHHHHHH", f.read(36))
            shoff, shentsize, shnum = hdr[5], hdr[10], hdr[11]
        sections = []
        for i in range(shnum):
            f.seek(shoff + i * shentsize)
            raw = f.read(shentsize)
            if is64:
                s = struct.unpack(end + "IIQQQQIIQQ", raw[:64])
                sections.append((s[1], s[4], s[5], s[6], s[9]))  # type, offset, size, link, entsize
            else:
                s = struct.unpack(end + "IIIIIIIIII", raw[:40])
                sections.append((s[1], s[4], s[5], s[6], s[9]))
        names = []
        for stype, off, size, link, entsize in sections:
            if stype != 11 or not entsize:  # SHT_DYNSYM
                continue
            _, stroff, strsize, _, _ = sections[link]
            f.seek(stroff)
            strtab = f.read(strsize)
            f.seek(off)
            data = f.read(size)
            for j in range(0, size - entsize + 1, entsize):
                ent = data[j : j + entsize]
                if is64:
                    name_off, info, _, shndx = struct.unpack(end + "IBBH", ent[:8])
                else:
                    name_off, _, _, info, _, shndx = struct.unpack(end + "IIIBBH", ent[:16])
                if shndx == 0:  # undefined: imported, not exported
                    continue
                if (info >> 4) not in (1, 2):  # STB_GLOBAL, STB_WEAK
                    continue
                e = strtab.find(b"\0", name_off)
                names.append(strtab[name_off:e].decode("ascii", "replace"))
        return names


def scan_bytes(path, patterns):
    """Search a (possibly large) binary with mmap; returns {name: first match or None}."""
    found = {}
    with open(fs(path), "rb") as f:
        try:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (ValueError, OSError):
            return {k: None for k in patterns}
        try:
            for key, rx in patterns.items():
                m = rx.search(mm)
                found[key] = _text(m.group(0)) if m else None
        finally:
            mm.close()
    return found


NCCL_VERSION_RX = re.compile(rb"NCCL version \d+\.\d+\.\d+[+\w.]*")
GDR_MISSING = re.compile(rb"GDRCopy support not available at compile time")
OFI_VERSION_RX = re.compile(rb"aws-ofi-nccl[ -]v?\d+\.\d+\.\d+[\w.-]*")
NCCL_EP_RX = re.compile(rb"NCCL EP version \d+\.\d+\.\d+[+\w.]*")
NVSHMEM_RX = re.compile(rb"NVSHMEM v\d+\.\d+\.\d+")


def describe_lib(path, kind):
    info = {"path": path, "kind": kind}
    try:
        real = realpath(path)
        info["realpath"] = real
        info["size"] = getsize(real)
    except OSError as exc:
        info["error"] = str(exc)
        return info
    try:
        syms = elf_dynsyms(real)
        if kind == "nccl":
            info["symbols"] = [s for s in NCCL_SYMS if s in set(syms)]
            info["nccl_exports"] = sum(1 for s in syms if s.startswith("nccl"))
        elif kind == "plugin":
            info["symbols"] = sorted(s for s in syms if PLUGIN_SYM.match(s))
        else:
            info["symbol_count"] = len(syms)
    except (OSError, ValueError, struct.error, IndexError) as exc:
        info["elf_error"] = str(exc)
    pats = {}
    if kind == "nccl":
        pats["version"] = NCCL_VERSION_RX
    elif kind == "plugin":
        pats["gdrcopy_missing"] = GDR_MISSING
        pats["version"] = OFI_VERSION_RX
    elif kind == "nvshmem":
        pats["version"] = NVSHMEM_RX
    if pats and left() > 2:
        try:
            info.update(scan_bytes(real, pats))
        except OSError as exc:
            info["scan_error"] = str(exc)
    return info


# ------------------------------------------------------------- collectors ---


def system():
    u = os.uname()
    out = {
        "hostname": u.nodename,
        "kernel": u.release,
        "machine": u.machine,
        "os_release": read("/etc/os-release"),
        "product_name": (read("/sys/class/dmi/id/product_name") or "").strip() or None,
        "sys_vendor": (read("/sys/class/dmi/id/sys_vendor") or "").strip() or None,
        "cpu_count": os.cpu_count(),
        "python": sys.version.split()[0],
        "euid": os.geteuid(),
        "in_container": exists("/.dockerenv") or bool(os.environ.get("KUBERNETES_SERVICE_HOST")),
    }
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
        out["memlock"] = {"soft": soft, "hard": hard, "unlimited": resource.RLIM_INFINITY}
    except (ImportError, ValueError, OSError):
        out["memlock"] = None
    out["hugepages"] = {
        d: (read("/sys/kernel/mm/hugepages/%s/nr_hugepages" % d) or "").strip()
        for d in (listdir("/sys/kernel/mm/hugepages") or [])
    }
    return out


def smi_argv():
    smi = which("nvidia-smi", ["/usr/local/nvidia/bin", "/usr/bin"])
    if not smi:
        return None
    return [
        smi,
        "--query-gpu=index,name,driver_version,compute_cap,pci.bus_id,memory.total",
        "--format=csv,noheader",
    ]


def gpus():
    argv = smi_argv()
    out = {"nvidia_smi_path": argv[0] if argv else None}
    if argv:
        out["query"] = run(argv, timeout=20)
    out["proc_version"] = read("/proc/driver/nvidia/version")
    out["proc_params"] = read("/proc/driver/nvidia/params")
    modprobe = {}
    for p in sorted(gglob("/etc/modprobe.d/*.conf")) + sorted(gglob("/lib/modprobe.d/*.conf")):
        text = read(p, 65536)
        if text and "nvidia" in text:
            modprobe[p] = text
    out["modprobe_d"] = modprobe
    return out


MODULES = ("nvidia", "nvidia_peermem", "efa", "efa_nv_peermem", "gdrdrv", "ib_core", "ib_uverbs")


def modules():
    out = {}
    for m in MODULES:
        base = "/sys/module/" + m
        out[m] = {
            "present": isdir(base),
            "version": ((read(base + "/version") or "").strip() or None) if isdir(base) else None,
        }
    out["proc_modules"] = read("/proc/modules")
    return out


COUNTERS = (
    "tx_bytes",
    "rx_bytes",
    "rdma_write_bytes",
    "rdma_read_bytes",
    "rdma_write_recv_bytes",
    "rdma_read_resp_bytes",
    "send_bytes",
    "recv_bytes",
    "retrans_pkts",
    "retrans_timeout_events",
    "unresponsive_remote_events",
    "impaired_remote_conn_events",
    "rx_drops",
)


def rdma_devices():
    out = {
        "dev_gdrdrv": exists("/dev/gdrdrv"),
        "dev_infiniband": listdir("/dev/infiniband"),
    }
    devs = {}
    for name in listdir("/sys/class/infiniband") or []:
        base = "/sys/class/infiniband/" + name
        drv = None
        try:
            drv = os.path.basename(realpath(base + "/device/driver"))
        except OSError:
            pass
        ports = {}
        for port in listdir(base + "/ports") or []:
            pbase = "%s/ports/%s" % (base, port)
            hc_dir = pbase + "/hw_counters"
            names = listdir(hc_dir) if isdir(hc_dir) else None
            values = {}
            for c in names or []:
                if c in COUNTERS:
                    v = (read(hc_dir + "/" + c) or "").strip()
                    values[c] = v
            ports[port] = {
                "rate": (read(pbase + "/rate") or "").strip() or None,
                "state": (read(pbase + "/state") or "").strip() or None,
                "link_layer": (read(pbase + "/link_layer") or "").strip() or None,
                "hw_counters": names,
                "counters": values,
            }
        devs[name] = {
            "driver": drv,
            "driver_version": (read(base + "/device/driver/module/version") or "").strip() or None,
            "p2p": (read(base + "/device/p2p") or "").strip()
            if exists(base + "/device/p2p")
            else None,
            "hw_ver": (read(base + "/hw_rev") or "").strip() or None,
            "ports": ports,
        }
    out["devices"] = devs
    return out


EFA_BIN = ("/opt/amazon/efa/bin",)


DPKG_PATTERNS = (
    "libfabric*",
    "libnccl*",
    "*gdrcopy*",
    "libgdrapi*",
    "efa*",
    "rdma-core",
    "ibverbs-providers",
    "libnccl-ofi*",
    "*nvshmem*",
)


def fi_info_argvs():
    fi = which("fi_info", EFA_BIN)
    return [[fi, "--version"], [fi, "-p", "efa"]] if fi else []


def dpkg_argv():
    if not which("dpkg-query"):
        return None
    admin = ["--admindir=" + fs("/var/lib/dpkg")] if ROOT[0] else []
    return ["dpkg-query", *admin, "-W", "-f=${Package} ${Version}\\n", *DPKG_PATTERNS]


def rpm_argv():
    if not which("rpm"):
        return None
    root = ["--root", ROOT[0]] if ROOT[0] else []
    return ["rpm", *root, "-qa", "--qf", "%{NAME} %{VERSION}-%{RELEASE}\\n"]


# dpkg's status file states in which a package's files are on disk (dpkg-query(1) "Status")
DPKG_ON_DISK = (
    "installed",
    "half-installed",
    "unpacked",
    "half-configured",
    "triggers-awaited",
    "triggers-pending",
)


def dpkg_status():
    """The dpkg-query -W answer read straight from dpkg's status database.

    Same "name version" lines as DPKG_PATTERNS through dpkg-query, without starting it (the
    file is what dpkg-query reads). Only packages whose files are on disk: a package removed
    with its config files kept is not reported as installed. None when the file is unreadable.
    """
    path = "/var/lib/dpkg/status"
    try:
        with open(fs(path), "rb") as f:
            data = b"\n" + f.read()
    except OSError:
        return None
    # dpkg writes Package first in every stanza: one regex finds the wanted stanzas' heads
    names = "|".join(re.escape(p).replace(r"\*", "[^\n]*") for p in DPKG_PATTERNS)
    head = re.compile(("\nPackage: (%s)\n" % names).encode())
    lines = []
    for m in head.finditer(data):
        end = data.find(b"\n\n", m.end())
        fields = {}
        for line in data[m.end() : end if end != -1 else len(data)].split(b"\n"):
            key, sep, value = line.partition(b": ")
            if sep and key in (b"Status", b"Version"):
                fields[key] = _text(value).strip()
        state = fields.get(b"Status", "").split()
        if state and state[-1] in DPKG_ON_DISK:
            lines.append("%s %s" % (_text(m.group(1)).strip(), fields.get(b"Version", "")))
    text = "".join(line + "\n" for line in lines)
    return {"argv": ["read", path], "source": path, "rc": 0, "stdout": text}


def efa_userspace():
    out = {"installed_packages": read("/opt/amazon/efa_installed_packages")}
    fis = fi_info_argvs()
    out["fi_info_path"] = fis[0][0] if fis else None
    if fis:
        out["fi_info_version"] = run(fis[0], timeout=10)
        out["fi_info_efa"] = run(fis[1], timeout=15)
    pkgs = {}
    dpkg = dpkg_status()
    if dpkg is None and dpkg_argv():
        dpkg = run(dpkg_argv(), timeout=15)
    if dpkg is not None:
        pkgs["dpkg"] = dpkg
    if rpm_argv():
        pkgs["rpm"] = run(rpm_argv(), timeout=20)
    out["packages"] = pkgs
    return out


PLUGIN_DIRS = (
    "/opt/amazon/ofi-nccl/lib",
    "/opt/amazon/ofi-nccl/lib64",
    "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu",
    "/opt/amazon/aws-ofi-nccl/lib",
    "/opt/aws-ofi-nccl/lib",
    "/usr/local/lib",
    "/usr/lib/x86_64-linux-gnu",
)
PLUGIN_NAME = re.compile(
    r"^libnccl-(net|gin|ofi|tuner|net-ofi|net-aws-ofi|tuner-aws-ofi|tuner-ofi|ofi-tuner)[\w.-]*\.so"
)


def resolve_plugin_name(value, env):
    """Where NCCL would look for NCCL_NET_PLUGIN=value (bare names: X, then libnccl-net-X.so)."""
    if "/" in value:
        return [value] if exists(value) else []
    cands = [value, "libnccl-net-%s.so" % value]
    dirs = [d for d in env.get("LD_LIBRARY_PATH", "").split(":") if d] + list(PLUGIN_DIRS)
    return [os.path.join(d, c) for c in cands for d in dirs if exists(os.path.join(d, c))]


def plugins(env):
    seen = {}
    for d in PLUGIN_DIRS:
        for name in listdir(d) or []:
            if PLUGIN_NAME.match(name):
                seen.setdefault(os.path.join(d, name), "dir")
    requested = {}
    for var in ("NCCL_NET_PLUGIN", "NCCL_GIN_PLUGIN", "NCCL_TUNER_PLUGIN"):
        if env.get(var):
            paths = resolve_plugin_name(env[var], env)
            requested[var] = {"value": env[var], "resolved": paths}
            for p in paths:
                seen.setdefault(p, var)
    libs = []
    done = set()
    for path in sorted(seen):
        real = realpath(path)
        if real in done:
            libs.append({"path": path, "realpath": real, "alias_of": real})
            continue
        done.add(real)
        libs.append(describe_lib(path, "plugin"))
    # Only the stack's names: a plugin directory may be /usr/lib/x86_64-linux-gnu (thousands of
    # names, most of the document, and nothing reads them).
    return {
        "dirs": {
            d: [n for n in listdir(d) or [] if is_stack_lib(n)] for d in PLUGIN_DIRS if isdir(d)
        },
        "libs": libs,
        "requested": requested,
    }


LIB_DIRS = (
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/local/lib",
    "/usr/local/cuda/lib64",
    "/usr/local/nccl/lib",
    "/opt/nccl/lib",
    "/opt/nccl/build/lib",
    "/opt/amazon/efa/lib",
    "/opt/amazon/efa/lib64",
    "/usr/local/nvidia/lib64",
    "/opt/gdrcopy/lib",
    "/usr/local/gdrcopy/lib",
)
LIB_KINDS = (
    ("nccl", re.compile(r"^libnccl\.so\.2(\.\d+)*$")),
    ("gdrapi", re.compile(r"^libgdrapi\.so(\.\d+)*$")),
    ("nvshmem", re.compile(r"^libnvshmem_host\.so(\.\d+)*$")),
    ("fabric", re.compile(r"^libfabric\.so(\.\d+)*$")),
)

# The stack's libraries as the loader names them: what `ldconfig -p` is kept for. The rest of
# the cache (hundreds of unrelated libraries) is counted, not sent.
STACK_LIB = re.compile(
    r"^lib(?:nccl|fabric|efa|ibverbs|rdmacm|mlx5|gdrapi|nvshmem|cuda|cudart|nvidia-ml|ucp|ucs|uct"
    r"|nixl)\b"
)


def is_stack_lib(name):
    return bool(STACK_LIB.match(name) or PLUGIN_NAME.match(name))


def stack_ldconfig(text):
    lines = text.splitlines()
    kept = [ln for ln in lines[1:] if is_stack_lib(ln.strip())]
    head = [*lines[:1], "\t(%d other entries not kept)" % (len(lines) - 1 - len(kept))]
    return "\n".join(head + kept) + "\n"


def site_packages_dirs(pythons):
    dirs = []
    for prefix in pythons:
        for pat in (
            "lib/python3*/site-packages",
            "lib/python3*/dist-packages",
            "local/lib/python3*/dist-packages",
        ):
            dirs.extend(gglob(os.path.join(prefix, pat)))
    dirs.extend(gglob("/usr/lib/python3/dist-packages"))
    out = []
    for d in dirs:
        r = realpath(d)
        if r not in out and isdir(r):
            out.append(r)
    return out


def ldconfig_argv():
    ld = which("ldconfig", ["/sbin", "/usr/sbin"])
    if not ld:
        return None
    return [ld, "-p", "-C", fs("/etc/ld.so.cache")] if ROOT[0] else [ld, "-p"]


def prestart():
    """Start the node's slow read-only tools at once so their waits overlap.

    nvidia-smi, fi_info and rpm can each take hundreds of milliseconds on a GPU node; run one
    after another they would add up. The sections collect them with run() as before.
    """
    argvs = [(smi_argv(), 20), (ldconfig_argv(), 10), (rpm_argv(), 20)]
    fis = fi_info_argvs()
    if fis:
        argvs += [(fis[0], 10), (fis[1], 15)]
    for argv, timeout in argvs:
        if argv:
            spawn(argv, timeout)


def libraries(env, sp_dirs):
    dirs = list(LIB_DIRS)
    for var in ("LD_LIBRARY_PATH",):
        dirs += [d for d in env.get(var, "").split(":") if d]
    for var in ("NCCL_HOME", "EP_NCCL_ROOT_DIR", "NCCL_DIR", "NCCL_ROOT"):
        if env.get(var):
            dirs += [os.path.join(env[var], "lib"), os.path.join(env[var], "lib64"), env[var]]
    for sp in sp_dirs:
        dirs += [os.path.join(sp, "nvidia", sub, "lib") for sub in ("nccl", "nvshmem", "gdrcopy")]
        dirs += [os.path.join(sp, "torch", "lib"), os.path.join(sp, "nccl", "ep", "lib")]
    files = {}
    seen_dirs = set()
    for d in dirs:
        rd = realpath(d)
        if rd in seen_dirs or not isdir(rd):
            continue
        seen_dirs.add(rd)
        for name in listdir(rd) or []:
            for kind, rx in LIB_KINDS:
                if rx.match(name):
                    files.setdefault(os.path.join(d, name), kind)
    ld = ldconfig_argv()
    ldc = run(ld, timeout=10) if ld else {"missing": True}
    # What the loader resolves is a consumer too: add those paths (often /lib/... aliases of
    # /usr/lib/... on merged-/usr systems) so they are matched to the file they point at.
    for line in (ldc.get("stdout") or "").splitlines():
        name, _, target = line.strip().partition(" => ")
        for kind, rx in LIB_KINDS:
            if rx.match(name.split(" ")[0]) and target:
                files.setdefault(target.strip(), kind)
    if ldc.get("stdout"):
        ldc = dict(ldc, stdout=stack_ldconfig(ldc["stdout"]))
    libs = []
    described = {}
    for path in sorted(files):
        real = realpath(path)
        if real in described:
            libs.append({"path": path, "kind": files[path], "realpath": real, "alias_of": real})
            continue
        described[real] = True
        libs.append(describe_lib(path, files[path]))
    return {
        "ldconfig": ldc,
        "libs": libs,
        "ld_so_conf_d": {p: read(p, 4096) for p in sorted(gglob("/etc/ld.so.conf.d/*.conf"))},
    }


PYTHON_DISTS = re.compile(
    r"^(torch|nvidia[-_]nccl[-_]cu\d+|nvidia[-_]nvshmem[-_]cu\d+|nccl4py|vllm|deep[-_]ep|"
    r"tensorrt[-_]llm|sglang|ai[-_]dynamo([-_]runtime)?|nixl|flashinfer[-_]python|triton|"
    r"nvidia[-_]gdrcopy[-_]cu\d+|transformers|deep[-_]gemm|uccl)$",
    re.I,
)


def python_prefixes(env):
    prefixes = [sys.prefix, sys.base_prefix]
    for d in env.get("PATH", "").split(os.pathsep):
        if d.endswith("/bin") and (
            exists(os.path.join(d, "python3")) or exists(os.path.join(d, "python"))
        ):
            prefixes.append(d[: -len("/bin")] or "/")
    for pat in (
        "/opt/*/venv",
        "/opt/*/.venv",
        "/opt/venv",
        "/opt/conda",
        "/opt/conda/envs/*",
        "/usr/local",
        "/usr",
        "/root/.venv",
        "/workspace/.venv",
        "/app/.venv",
    ):
        prefixes.extend(gglob(pat))
    out = []
    for p in prefixes:
        r = realpath(p)
        if r not in out and isdir(os.path.join(r, "lib")):
            out.append(r)
    return out


def python_stacks(sp_dirs):
    stacks = []
    for sp in sp_dirs:
        dists = {}
        for name in listdir(sp) or []:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            meta_name = "METADATA" if name.endswith(".dist-info") else "PKG-INFO"
            meta = read(os.path.join(sp, name, meta_name), 8192)
            if not meta:
                continue
            m_name = re.search(r"^Name:\s*(.+)$", meta, re.M)
            m_ver = re.search(r"^Version:\s*(.+)$", meta, re.M)
            if not m_name or not m_ver or not PYTHON_DISTS.match(m_name.group(1).strip()):
                continue
            entry = {"version": m_ver.group(1).strip(), "dist_info": name}
            direct = read(os.path.join(sp, name, "direct_url.json"), 8192)
            if direct:
                try:
                    entry["direct_url"] = json.loads(direct).get("url")
                except ValueError:
                    pass
            dists[m_name.group(1).strip()] = entry
        extra = {}
        de = os.path.join(sp, "deep_ep")
        if isdir(de):
            extra["deep_ep_dir"] = de
            extra["deep_ep_fork_markers"] = grep_tree(
                de, ("EP_HYBRID_KERNEL", "capping num_allocated_qps")
            )
        # TensorRT-LLM's NcclEP backend: the module exists only in releases that carry it
        # (absent in GA 1.2.1), and its kernels come from nccl4py's prebuilt libnccl_ep.
        trt = os.path.join(sp, "tensorrt_llm", "_torch", "modules", "fused_moe")
        if isdir(trt):
            extra["trtllm_nccl_ep_module"] = exists(
                os.path.join(trt, "communication", "nccl_ep.py")
            )
            extra["trtllm_nccl_ep_utils"] = exists(os.path.join(trt, "nccl_ep_utils.py"))
        ep_lib = os.path.join(sp, "nccl", "ep", "lib", "libnccl_ep.so")
        if exists(ep_lib):
            found = scan_bytes(ep_lib, {"version": NCCL_EP_RX}) if left() > 2 else {}
            extra["nccl_ep_lib"] = {"path": ep_lib, "version": found.get("version")}
        elif isdir(os.path.join(sp, "nccl")):
            extra["nccl_ep_lib"] = None
        for pth in gglob(os.path.join(sp, "*.pth")) + gglob(os.path.join(sp, "*.egg-link")):
            text = read(pth, 4096) or ""
            if "DeepEP" in text or "deep_ep" in text.lower():
                extra.setdefault("deep_ep_paths", []).append(text.strip())
        if dists or extra:
            stacks.append({"site_packages": sp, "dists": dists, "extra": extra})
    return stacks


def grep_tree(root, needles, max_files=400):
    hits = {}
    n = 0
    for dirpath, _, files in walk(root):
        for fn in files:
            if not fn.endswith(".py"):
                continue
            n += 1
            if n > max_files:
                return hits
            text = read(os.path.join(dirpath, fn), 1 << 20) or ""
            for nd in needles:
                if nd in text:
                    hits.setdefault(nd, os.path.join(dirpath, fn))
    return hits


def deepep_sources():
    """In-pod DeepEP builds (setup.py build_ext --inplace) live outside site-packages."""
    out = {}
    for d in ("/opt/DeepEP", "/workspace/DeepEP", "/opt/deepep", "/DeepEP"):
        if not isdir(d):
            continue
        git = read(os.path.join(d, ".git", "config"), 8192) or ""
        m = re.search(r"url\s*=\s*(\S+)", git)
        out[d] = {
            "remote": m.group(1) if m else None,
            "head": (read(os.path.join(d, ".git", "HEAD"), 256) or "").strip() or None,
            "built": bool(
                gglob(os.path.join(d, "deep_ep", "*.so")) or gglob(os.path.join(d, "*.so"))
            ),
            "markers": grep_tree(
                os.path.join(d, "deep_ep"), ("EP_HYBRID_KERNEL", "capping num_allocated_qps")
            ),
        }
    return out


def nccl_conf(env):
    out = {}
    for p in (
        "/etc/nccl.conf",
        os.path.expanduser("~/.nccl.conf"),
        env.get("NCCL_CONF_FILE") or "",
    ):
        if p:
            text = read(p, 65536)
            if text is not None:
                out[p] = redact_text(
                    "\n".join(
                        (k + "=" + (MASK if is_secret_name(k.strip()) else v))
                        if "=" in line and not line.lstrip().startswith("#")
                        else line
                        for line in text.splitlines()
                        for k, _, v in [line.partition("=")]
                    )
                )
    return out


MAP_RX = re.compile(
    r"(libnccl[\w.-]*\.so[\w.]*|libfabric\.so[\w.]*|libgdrapi\.so[\w.]*|libnvshmem[\w.-]*\.so[\w.]*|libefa\.so[\w.]*|libibverbs\.so[\w.]*|libnccl_ep\.so[\w.]*|_C\.[\w.-]*\.so)$"
)


def process(pid):
    base = "/proc/%d" % pid
    maps = read(base + "/maps", 16 << 20)
    out = {"pid": pid, "exists": isdir(base)}
    if maps is not None:
        libs = []
        for line in maps.splitlines():
            parts = line.split(None, 5)
            if len(parts) == 6 and MAP_RX.search(parts[5]) and parts[5] not in libs:
                libs.append(parts[5])
        out["mapped"] = libs
    raw_env = read(base + "/environ", 1 << 20)
    if raw_env is not None:
        env = dict(kv.partition("=")[::2] for kv in raw_env.split("\0") if "=" in kv)
        out["env"] = pick_env(env)
    cmd = read(base + "/cmdline", 65536)
    if cmd is not None:
        out["cmdline"] = redact_argv([a for a in cmd.split("\0") if a])
    return out


def describe_mapped(procs, libs):
    """Libraries a process really loaded but the directory scan did not find (its truth)."""
    if not isinstance(procs, list) or not isinstance(libs, dict):
        return []
    known = set()
    for e in libs.get("libs") or []:
        known.add(e.get("path"))
        known.add(e.get("realpath"))
    out = []
    for proc in procs:
        for path in proc.get("mapped") or []:
            base = os.path.basename(path)
            kind = next((k for k, rx in LIB_KINDS if rx.match(base)), None)
            if kind and path not in known:
                known.add(path)
                out.append(describe_lib(path, kind))
    return out


def nccl_pids():
    pids = []
    for d in listdir("/proc") or []:
        if not d.isdigit() or int(d) == os.getpid():
            continue
        maps = None
        try:
            with open("/proc/%s/maps" % d, "rb") as f:
                maps = f.read(32 << 20)
        except OSError:
            continue
        if b"libnccl" in maps:
            pids.append(int(d))
    ERRORS.pop("/proc", None)
    return pids[:64]


# ------------------------------------------------------------------- main ---


def main(argv):
    pids, all_pids = [], False
    i = 0
    while i < len(argv):
        a = argv[i]
        if a == "--pid" and i + 1 < len(argv):
            pids.append(int(argv[i + 1]))
            i += 1
        elif a == "--all-pids":
            all_pids = True
        elif a == "--root" and i + 1 < len(argv):
            ROOT[0] = os.path.abspath(argv[i + 1]).rstrip("/")
            i += 1
        elif a == "--deadline" and i + 1 < len(argv):
            DEADLINE[0] = START + float(argv[i + 1])
            i += 1
        i += 1
    env = dict(os.environ)
    sections = {}
    timings = {}

    def section(name, fn, *args):
        t0 = time.time()
        try:
            sections[name] = fn(*args)
        except Exception as exc:  # a probe bug in one section must not lose the rest
            sections[name] = {"probe_error": "%s: %s" % (type(exc).__name__, exc)}
        timings[name] = round(time.time() - t0, 3)

    prestart()
    section("system", system)
    section("gpus", gpus)
    section("modules", modules)
    section("rdma", rdma_devices)
    section("efa", efa_userspace)
    section("plugins", plugins, env)
    prefixes = python_prefixes(env)
    sp_dirs = site_packages_dirs(prefixes)
    section("libraries", libraries, env, sp_dirs)
    section("python", python_stacks, sp_dirs)
    section("deepep_src", deepep_sources)
    section("nccl_conf", nccl_conf, env)
    sections["env"] = pick_env(env)
    if all_pids:
        pids = pids + [p for p in nccl_pids() if p not in pids]
    section("processes", lambda: [process(p) for p in pids])
    section("mapped_libs", describe_mapped, sections.get("processes"), sections.get("libraries"))
    reap_started()
    doc = {
        "probe": "epdoctor-node-probe",
        "probe_version": PROBE_VERSION,
        "started": START,
        "elapsed_s": round(time.time() - START, 3),
        "deadline_hit": time.time() >= DEADLINE[0],
        "timings": timings,
        "errors": {k: v for k, v in ERRORS.items() if not k.startswith("/proc/")},
        "sections": sections,
    }
    sys.stdout.write(json.dumps(doc, sort_keys=True))
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
