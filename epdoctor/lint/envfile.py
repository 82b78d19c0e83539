"""Env files, shell exports and Dockerfile ENV: the env contract, as diagnose applies it.

There is one implementation of the env contract, ``epdoctor.checks.env.env_findings``;
this module only turns a file into the mapping it takes and the findings it
returns into lines. Findings about a variable that is set (a dead knob, a GIN
type, a non-EFA provider) are reported wherever the variable is set. Findings
about a variable that is *missing* (NCCL_SOCKET_IFNAME, EP_REUSE_NCCL_COMM) are
reported only for a file that is a transport contract, i.e. that sets transport
variables itself: a registry/region env file or a script that exports one knob
is not expected to carry the whole contract.

``contract_findings`` is the entry point for other linters (Kubernetes manifests
hand it a container's env with line numbers).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath

from epdoctor.checks.registry import detector
from epdoctor.lint.base import LintContext, LintFinding, RecipeFile, finding, linter
from epdoctor.lint.dockerfile import is_dockerfile, parse
from epdoctor.lint.shell import exports, is_shell_script
from epdoctor.model import Status

TRANSPORT_PREFIXES = (
    "NCCL_",
    "FI_",
    "OFI_NCCL_",
    "EP_",
    "NVSHMEM_",
    "DEEP_EP_",
    "TLLM_",
    "TRTLLM_",
)
REPORTED = (Status.WARN, Status.FAIL)
_LINE_RE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$")
_EVIDENCE_VAR_RE = re.compile(r"\b([A-Z_][A-Z0-9_]*)=")
_ENV_NAME_RE = re.compile(
    r"(^|/)(\.env[^/]*|[^/]*\.env(\.[a-z]+)?|env_vars[^/]*|env\.(example|sample|template|dist|local))$"
)


def is_env_file(path: Path, head: str) -> bool:
    return bool(_ENV_NAME_RE.search(path.as_posix()))


def parse_env_file(text: str) -> dict[str, tuple[str, int]]:
    """KEY=VALUE / export KEY=VALUE lines -> name -> (value, line). Quotes removed."""
    out: dict[str, tuple[str, int]] = {}
    for n, raw in enumerate(text.splitlines(), start=1):
        if raw.lstrip().startswith("#"):
            continue
        m = _LINE_RE.match(raw)
        if not m:
            continue
        value = m.group(2).strip()
        try:
            parts = shlex.split(value, comments=True)
            value = parts[0] if parts else ""
        except ValueError:
            value = value.strip("\"'")
        out[m.group(1)] = (value, n)
    return out


# Variables only an EP-over-GIN contract sets; a file with one of them is that contract.
CONTRACT_MARKERS = ("NCCL_GIN_", "EP_", "DEEP_EP_", "NCCL_NET_PLUGIN", "OFI_NCCL_GIN")
_DEFAULT_RE = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*:?[-=]([^}$]*)\}$")


def is_contract(env: Mapping[str, object]) -> bool:
    return any(k.startswith(CONTRACT_MARKERS) for k in env)


def resolve(value: str) -> str | None:
    """A value as the shell would see it where that is knowable: `${X:-d}` -> d; else None."""
    m = _DEFAULT_RE.match(value)
    if m:
        return m.group(1)
    return None if "$" in value or "`" in value else value


def engines_in(ctx: LintContext) -> set[str]:
    """Which engines the recipe folder runs, from how its files launch them."""
    if "engines" in ctx.cache:
        return ctx.cache["engines"]  # type: ignore[return-value]
    found: set[str] = set()
    for f in ctx.files:
        if not f.kinds:
            continue
        t = f.text
        if "dynamo.vllm" in t:
            found.add("dynamo")
        if re.search(r"all2all[-_]backend[= ]+deepep_v2", t):
            found.add("vllm")
        if "trtllm-serve" in t:
            found.add("tensorrt-llm")
    ctx.cache["engines"] = found
    return found


def engines_launched(text: str) -> set[str]:
    """Engines a script itself starts (a kernel-test script starts none)."""
    found = set()
    if "dynamo.vllm" in text:
        found.add("dynamo")
    if re.search(r"\bvllm\s+serve\b", text):
        found.add("vllm")
    if "trtllm-serve" in text:
        found.add("tensorrt-llm")
    return found


def contract_findings(
    file: RecipeFile,
    env: Mapping[str, tuple[str, int]],
    ctx: LintContext,
    contract: bool | None = None,
    default_line: int = 1,
    engines: Iterable[str] | None = None,
) -> list[LintFinding]:
    """The env contract on `env` (name -> (value, line)), as lint findings for `file`.

    `engines` are those the env is for; by default the engines the folder runs.
    """
    from epdoctor.checks.env import DEAD_KNOBS, env_findings

    resolved = {k: resolve(v) for k, (v, _) in env.items()}
    # A value only known at run time is passed as set (dead knobs need no value) but its
    # value findings are dropped: `NCCL_GIN_TYPE=$GIN` is not "not a GIN type".
    unresolved = {k for k, v in resolved.items() if v is None}
    values = {k: (v if v is not None else env[k][0]) for k, v in resolved.items()}
    contract = is_contract(values) if contract is None else contract
    engines = engines_in(ctx) if engines is None else set(engines)
    out: list[LintFinding] = []
    seen: set[tuple[str, int]] = set()
    for f in env_findings(values, engines=engines, where=file.rel):
        if f.status not in REPORTED:
            continue
        names = [n for e in f.evidence for n in _EVIDENCE_VAR_RE.findall(e)]
        present = [n for n in names if n in env]
        if any(n in unresolved for n in present) and f.code not in DEAD_KNOBS.values():
            continue
        if present:
            line = env[present[0]][1]
        elif contract:
            line = default_line
        else:
            continue  # about a missing variable, in a file that is not the whole contract
        if (f.code, line) in seen:
            continue
        seen.add((f.code, line))
        out.append(finding(file, line, f.code, f.title))
    return out


@linter("envfile", is_env_file)
def lint_env_file(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    yield from contract_findings(file, parse_env_file(file.text), ctx)


@linter("shell", is_shell_script)
def lint_script_exports(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    env = exports(file.text)
    contract = _is_launcher(file) and is_contract(env)
    yield from contract_findings(file, env, ctx, contract, engines=engines_launched(file.text))
    yield from _kernel_test_matches_serve(file, env, ctx)


def _is_launcher(file: RecipeFile) -> bool:
    return bool(re.search(r"serve|launch|run-|start", file.name))


def _dockerfile_env(file: RecipeFile) -> dict[str, tuple[str, int]]:
    env: dict[str, tuple[str, int]] = {}
    for ins in parse(file.text):
        if ins.keyword != "ENV":
            continue
        try:
            words = shlex.split(ins.args)
        except ValueError:
            words = ins.args.split()
        if words and "=" not in words[0]:
            env[words[0]] = (" ".join(words[1:]), ins.line)  # legacy `ENV NAME value`
            continue
        for w in words:
            name, eq, value = w.partition("=")
            if eq:
                env[name] = (value, ins.line)
    return env


@linter("dockerfile", is_dockerfile)
def lint_dockerfile_env(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    # Image ENV is a default the launchers override, never the whole contract.
    yield from contract_findings(file, _dockerfile_env(file), ctx, contract=False)


SELECTS_TRANSPORT = ("NCCL_", "FI_", "OFI_NCCL_", "NVSHMEM_")


def _transport(env: Mapping[str, tuple[str, int]]) -> dict[str, tuple[str, int]]:
    """Variables that choose interface, provider or GIN type; dead knobs choose nothing."""
    from epdoctor.checks.env import DEAD_KNOBS

    return {k: v for k, v in env.items() if k.startswith(SELECTS_TRANSPORT) and k not in DEAD_KNOBS}


@detector("C401", domain="recipe")
def _kernel_test_matches_serve(
    file: RecipeFile, env: Mapping[str, tuple[str, int]], ctx: LintContext
) -> Iterable[LintFinding]:
    if not re.search(r"kernel[-_]test", file.name):
        return
    here = PurePosixPath(file.rel).parent
    serves = [
        f
        for f in ctx.of_kind("shell")
        if PurePosixPath(f.rel).parent == here and re.search(r"serve", f.name)
    ]
    mine = _transport(env)
    for serve in serves:
        theirs = _transport(exports(serve.text))
        for name, (value, _line) in sorted(theirs.items()):
            if name not in mine:
                yield finding(
                    file,
                    1,
                    "C401",
                    f"{serve.name} exports {name}={value}; this kernel test does not",
                )
            elif mine[name][0] != value:
                yield finding(
                    file,
                    mine[name][1],
                    "C401",
                    f"{name}={mine[name][0]} here but {name}={value} in {serve.name}",
                )
