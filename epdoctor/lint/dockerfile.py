"""Dockerfile rules: parse traps, mutable bases, the EFA installer's NGC branch,
the NCCL re-pin order, the build context, and build steps that hide their logs.

The parser follows the Dockerfile reference where it matters for these rules:
comments are only whole lines starting with ``#`` (a ``#`` later on a line is
an argument), a trailing backslash continues an instruction (comment lines
inside a continuation are dropped), and the ``# escape=`` directive changes
the continuation character. RUN bodies are handed to the shell rules.
"""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from epdoctor.checks.registry import detector
from epdoctor.lint.base import LintContext, LintFinding, RecipeFile, finding, linter
from epdoctor.lint.shell import (
    Command,
    ShellState,
    build_step_findings,
    inline_shell,
    shell_text_findings,
)

_NCCL_PIN_RE = re.compile(r"nvidia-nccl-cu1\d\s*==")
_PIP_INSTALL_RE = re.compile(r"\b(pip3?|uv\s+pip|python3?(\.\d+)?\s+-m\s+pip)\s+install\b")
_PIP_UPGRADE_RE = re.compile(
    r"\bpip3?\s+install\b[^&;|]*(-U|--upgrade)\b[^&;|]*\bpip\b|\bensurepip\b|get-pip\.py"
)
_VAR_RE = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
ENV_FILE_NAMES = re.compile(r"(^|/)(\.env[^/]*|[^/]*\.env|env_vars[^/]*|env\.sh|secrets?[^/]*)$")
TEMPLATE_SUFFIXES = (".example", ".sample", ".template", ".tmpl", ".dist")


def is_dockerfile(path: Path, head: str) -> bool:
    n = path.name
    return (
        n == "Dockerfile"
        or n.startswith("Dockerfile.")
        or n.endswith((".Dockerfile", ".dockerfile"))
    )


@dataclass(frozen=True)
class Instruction:
    line: int  # first physical line
    keyword: str  # upper case
    args: str  # text after the keyword, continuations joined with newlines


def parse(text: str) -> list[Instruction]:
    lines = text.split("\n")
    escape = "\\"
    for raw in lines:  # parser directives come first, before any instruction or comment
        m = re.match(r"^\s*#\s*escape\s*=\s*(\S)\s*$", raw, re.I)
        if m:
            escape = m.group(1)
            break
        if not re.match(r"^\s*#\s*\w+\s*=", raw):
            break
    out: list[Instruction] = []
    i = 0
    while i < len(lines):
        raw = lines[i]
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            i += 1
            continue
        start = i + 1
        parts = [raw]
        while parts[-1].rstrip().endswith(escape) and i + 1 < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            i += 1
            while i < len(lines) and lines[i].strip().startswith("#"):
                i += 1  # comment lines inside a continuation are removed by the parser
            if i < len(lines):
                parts.append(lines[i])
        i += 1
        body = "\n".join(parts).strip()
        keyword, _, args = body.partition(" ")
        if "\t" in keyword:
            keyword, _, rest = keyword.partition("\t")
            args = rest + " " + args
        out.append(Instruction(start, keyword.upper(), args.strip()))
    return out


# ---- stages and base images --------------------------------------------------------------


@dataclass
class Stage:
    index: int
    line: int
    image: str  # as written, after ARG substitution where it could be resolved
    name: str | None
    root: str  # the external image at the bottom of this stage's FROM chain
    parent: int | None  # index of the stage this one builds FROM, if any


def _substitute(value: str, args: dict[str, str]) -> str:
    return _VAR_RE.sub(lambda m: args.get(m.group(1), m.group(0)), value)


def stages(instrs: list[Instruction]) -> list[Stage]:
    global_args: dict[str, str] = {}
    out: list[Stage] = []
    for ins in instrs:
        if ins.keyword == "ARG" and not out:
            for word in ins.args.split():
                name, eq, default = word.partition("=")
                if eq:
                    global_args[name] = default.strip("\"'")
        if ins.keyword != "FROM":
            continue
        words = [w for w in ins.args.split() if not w.startswith("--")]
        if not words:
            continue
        image = _substitute(words[0], global_args)
        name = words[2] if len(words) >= 3 and words[1].lower() == "as" else None
        parent = next((s.index for s in out if s.name and s.name == image), None)
        root = out[parent].root if parent is not None else image
        out.append(Stage(len(out), ins.line, image, name, root, parent))
    return out


def _stage_of(line: int, sts: list[Stage]) -> Stage | None:
    cur = None
    for s in sts:
        if s.line <= line:
            cur = s
    return cur


def _descends(child: Stage, ancestor: Stage, sts: list[Stage]) -> bool:
    s: Stage | None = child
    while s is not None:
        if s.index == ancestor.index:
            return True
        s = sts[s.parent] if s.parent is not None else None
    return False


def _tag_and_digest(image: str) -> tuple[str | None, str | None]:
    ref, _, digest = image.partition("@")
    last = ref.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else None
    return tag, digest or None


# ---- rules -------------------------------------------------------------------------------


def _arg_comment(ins: Instruction) -> str | None:
    if ins.keyword != "ARG" or "#" not in ins.args:
        return None
    tail = ins.args[ins.args.index("#") :]
    return tail if "==" in tail else None


@detector("B402", "B403", domain="recipe")
def _base_rules(file: RecipeFile, sts: list[Stage]) -> Iterable[LintFinding]:
    for s in sts:
        if s.parent is not None or s.image == "scratch":
            continue
        if "$" in s.image:
            continue  # an ARG with no default: the base is chosen at build time
        tag, digest = _tag_and_digest(s.image)
        if digest:
            continue
        if tag is None or tag == "latest":
            what = "untagged (means :latest)" if tag is None else ":latest"
            yield finding(file, s.line, "B402", f"base image {s.image} is {what}; pin an exact tag")
        else:
            yield finding(
                file, s.line, "B403", f"base image {s.image} is pinned by tag, not digest"
            )


@detector("B404", domain="recipe")
def _installer_rule(file: RecipeFile, instrs: list[Instruction], sts: list[Stage]):
    for ins in instrs:
        if ins.keyword != "RUN" or "efa_installer.sh" not in ins.args:
            continue
        st = _stage_of(ins.line, sts)
        if st is None or not st.root.startswith("nvcr.io/"):
            continue
        if "--disable-ngc" not in ins.args:
            yield finding(
                file,
                ins.line,
                "B404",
                f"efa_installer.sh on {st.root} without --disable-ngc: the installer detects "
                "/opt/nvidia/nvidia_entrypoint.sh and installs its NGC plugin branch",
            )


@detector("B405", domain="recipe")
def _repin_rule(file: RecipeFile, instrs: list[Instruction], sts: list[Stage]):
    runs = [i for i in instrs if i.keyword == "RUN"]
    for k, ins in enumerate(runs):
        if not (_NCCL_PIN_RE.search(ins.args) and _PIP_INSTALL_RE.search(ins.args)):
            continue
        st = _stage_of(ins.line, sts)
        for later in runs[k + 1 :]:
            lst = _stage_of(later.line, sts)
            same_line = st is None or lst is None or _descends(lst, st, sts)
            if (
                same_line
                and _PIP_INSTALL_RE.search(later.args)
                and not _NCCL_PIN_RE.search(later.args)
            ):
                yield finding(
                    file,
                    ins.line,
                    "B405",
                    f"NCCL re-pin is followed by another pip install on line {later.line}, "
                    "which may resolve nvidia-nccl back down; keep the re-pin the LAST pip layer",
                )
                break


@detector("B408", domain="recipe")
def _break_system_packages_rule(file: RecipeFile, instrs: list[Instruction], sts: list[Stage]):
    upgraded: set[int] = set()
    for ins in instrs:
        if ins.keyword != "RUN":
            continue
        st = _stage_of(ins.line, sts)
        key = st.index if st else -1
        if _PIP_UPGRADE_RE.search(ins.args.split("--break-system-packages")[0]):
            upgraded.add(key)
        if "--break-system-packages" not in ins.args or key in upgraded:
            continue
        root = (st.root if st else "").lower()
        if re.search(r"ubuntu-?22\.04|jammy|ubuntu:22\.04|ubuntu20\.04|focal", root):
            yield finding(
                file,
                ins.line,
                "B408",
                f"--break-system-packages on {st.root if st else 'this base'}: its pip (22.0.2 "
                "on Ubuntu 22.04) has no such option and the build stops",
            )


def _shell_rules(file: RecipeFile, instrs: list[Instruction]) -> Iterable[LintFinding]:
    pipefail = errexit = False
    for ins in instrs:
        if ins.keyword == "SHELL":
            # The default /bin/sh -c has neither; SHELL ["/bin/bash", "-o", "pipefail", "-c"] adds it.
            pipefail = "pipefail" in ins.args
            errexit = bool(re.search(r'"-\w*e\w*"|errexit', ins.args))
            continue
        if ins.keyword not in ("RUN", "HEALTHCHECK", "CMD", "ENTRYPOINT"):
            continue
        body = ins.args
        if ins.keyword == "HEALTHCHECK":
            body = body.split("CMD", 1)[1] if "CMD" in body else ""
        if body.lstrip().startswith("["):
            # Exec form runs no shell, unless it names one: ["bash", "-c", "script"].
            body = _exec_form_script(body)
            if body is None:
                continue
        while body.startswith("--"):  # RUN --mount=... flags
            body = body.split(None, 1)[1] if " " in body else ""
        state = ShellState(errexit=errexit, pipefail=pipefail)
        hits = shell_text_findings(body, ins.line, state)
        if ins.keyword == "RUN":
            hits += build_step_findings(body, ins.line, file.text)
        for h in hits:
            yield finding(file, ins.line, h.code, h.message)


def _exec_form_script(body: str) -> str | None:
    try:
        argv = json.loads(body)
    except ValueError:
        return None
    if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
        return None
    return shlex.join(argv) if inline_shell(Command(argv, 1)) else None


@detector("B406", domain="recipe")
def _dockerignore_rule(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    # The build context is the Dockerfile's folder (the seeds' build-push.sh runs `docker build .`
    # from the sample root, where the Dockerfile sits).
    cdir = PurePosixPath(file.rel).parent
    prefix = "" if str(cdir) == "." else f"{cdir}/"
    ignore = ctx.find(f"{prefix}.dockerignore")
    patterns = _ignore_patterns(ignore.text) if ignore else []
    leaks = []
    for f in ctx.files:
        if not f.rel.startswith(prefix):
            continue
        inner = f.rel[len(prefix) :]
        target = inner.removesuffix(_tsuffix(inner))  # a template's filled-in copy sits beside it
        if ENV_FILE_NAMES.search(target) and not any(_ignored(target, p) for p in patterns):
            leaks.append(target)
    if not leaks:
        return
    leaks = sorted(set(leaks))
    named = ", ".join(leaks[:3]) + (f" and {len(leaks) - 3} more" if len(leaks) > 3 else "")
    if ignore is None:
        what = f"build context {cdir}/ has no .dockerignore"
    else:
        what = f"{prefix}.dockerignore does not exclude them"
    yield finding(
        file,
        1,
        "B406",
        f"{named} may hold a token and {what}: uploaded with every docker build",
    )


def _tsuffix(rel: str) -> str:
    return next((s for s in TEMPLATE_SUFFIXES if rel.endswith(s)), "")


def _ignore_patterns(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def _ignored(rel: str, pattern: str) -> bool:
    if pattern.startswith("!"):
        return False
    p = pattern.lstrip("/").rstrip("/")
    if p in ("*", "**", "."):
        return True
    p = p.replace("**/", "*").replace("/**", "/*")
    return fnmatch.fnmatch(rel, p) or rel.startswith(p + "/") or fnmatch.fnmatch(rel, p + "/*")


_VLLM_PIN_RE = re.compile(r"^(VLLM_SHA|VLLM_COMMIT)=([0-9a-f]{7,40})$")
_WHEEL_SHA_RE = re.compile(r"wheels\.vllm\.ai/([0-9a-f]{7,40})\b|\+g([0-9a-f]{7,40})\b")


@detector("B414", domain="recipe")
def _vllm_wheel_rule(file: RecipeFile, instrs: list[Instruction]) -> Iterable[LintFinding]:
    pins = {}
    for ins in instrs:
        if ins.keyword == "ARG":
            for word in ins.args.split():
                m = _VLLM_PIN_RE.match(word.strip("\"'"))
                if m:
                    pins[m.group(1)] = m.group(2)
    if not pins:
        return
    for ins in instrs:
        if ins.keyword not in ("RUN", "ARG", "ENV"):
            continue
        for m in _WHEEL_SHA_RE.finditer(ins.args):
            sha = m.group(1) or m.group(2)
            if not any(pin.startswith(sha) or sha.startswith(pin) for pin in pins.values()):
                name, pin = next(iter(pins.items()))
                yield finding(
                    file,
                    ins.line,
                    "B414",
                    f"the vLLM wheel names commit {sha}, but {name}={pin[:12]}: a second copy "
                    "of the pin; derive the wheel from the ARG",
                )
                break  # one finding per instruction


@detector("B401", domain="recipe")
@linter("dockerfile", is_dockerfile)
def lint_dockerfile(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    instrs = parse(file.text)
    sts = stages(instrs)
    for ins in instrs:
        tail = _arg_comment(ins)
        if tail:
            yield finding(
                file,
                ins.line,
                "B401",
                f"ARG has an inline comment containing '==' ({tail.strip()[:40]!r}): a Dockerfile "
                "has no trailing comments and the build fails with 'ARG names can not be blank'",
            )
    yield from _base_rules(file, sts)
    yield from _installer_rule(file, instrs, sts)
    yield from _repin_rule(file, instrs, sts)
    yield from _break_system_packages_rule(file, instrs, sts)
    yield from _shell_rules(file, instrs)
    yield from _dockerignore_rule(file, ctx)
    yield from _vllm_wheel_rule(file, instrs)
