"""Shell-script rules: strict-mode pitfalls, probe self-match, gates that cannot pass.

The rules work on commands, not on raw text: a script is cut into logical
lines (backslash continuations joined, quotes that span lines kept whole),
command substitutions ``$(...)`` are lifted out and analysed as commands of
their own, and each logical line is tokenized with :mod:`shlex` (POSIX mode,
shell punctuation) into lists ``a && b | c`` -> pipelines -> commands. That
is enough structure for these rules and never executes anything.

``shell_text_findings`` is the entry point other linters reuse for shell
embedded elsewhere (Dockerfile RUN lines, command strings in manifests).
"""

from __future__ import annotations

import functools
import json
import re
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from epdoctor.checks.registry import detector
from epdoctor.lint.base import LintContext, LintFinding, RecipeFile, finding, linter

SHELLS = ("sh", "bash", "dash", "ksh", "zsh")
OPERATORS = {"|", "||", "&&", ";", "&", ";;", "|&", "(", ")", "\n"}
LIST_SEPARATORS = {"||", "&&", ";", "&", ";;", "\n", "(", ")"}
_ASSIGN_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_CMDSUB = "__EPD_CMDSUB_{}__"
_HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_CMDSUB_RE = re.compile(r"__EPD_CMDSUB_(\d+)__")
BUILD_WORDS = {
    "setup.py",
    "build_ext",
    "make",
    "cmake",
    "ninja",
    "nvcc",
    "configure",
    "./configure",
}
TEST_EP_RE = re.compile(r"tests/elastic/test_ep\.py|\btest_ep\.py\b")
_SHA_RE = re.compile(r"[0-9a-f]{40}")
PASS_RE = re.compile(r"pass|success|all tests? ok", re.IGNORECASE)


def is_shell_script(path: Path, head: str) -> bool:
    if path.suffix in {".sh", ".bash"}:
        return True
    first = head.split("\n", 1)[0]
    return first.startswith("#!") and any(re.search(rf"\b{s}\b", first) for s in SHELLS)


# ---- structure ---------------------------------------------------------------------------


@dataclass
class Command:
    words: list[str]
    line: int
    subs: list[str] = field(default_factory=list)  # command substitutions inside the words

    @property
    def name(self) -> str:
        for w in self.words:
            if not _ASSIGN_RE.match(w):
                return w.rsplit("/", 1)[-1]
        return ""

    def args(self) -> list[str]:
        i = next((k for k, w in enumerate(self.words) if not _ASSIGN_RE.match(w)), len(self.words))
        return self.words[i + 1 :]

    @property
    def only_assignments(self) -> bool:
        return bool(self.words) and all(_ASSIGN_RE.match(w) for w in self.words)


@dataclass
class Pipeline:
    commands: list[Command]
    line: int
    before: str = ""  # operator that precedes it in its list ("", "&&", "||", ";", keyword)
    after: str = ""  # operator that follows it
    prefix: str = ""  # "if"/"while"/"until"/"!" when the pipeline is a condition


@dataclass
class ShellState:
    errexit: bool = False
    pipefail: bool = False

    def apply_set(self, args: list[str]) -> None:
        it = iter(args)
        for a in it:
            if a in ("-o", "+o"):
                opt = next(it, "")
                on = a == "-o"
                if opt == "errexit":
                    self.errexit = on
                elif opt == "pipefail":
                    self.pipefail = on
            elif a.startswith(("-", "+")) and not a.startswith("--"):
                on = a[0] == "-"
                letters = a[1:]
                if "e" in letters:
                    self.errexit = on
                if "o" in letters and letters.endswith("o"):
                    opt = next(it, "")
                    if opt == "pipefail":
                        self.pipefail = on
                    elif opt == "errexit":
                        self.errexit = on


def logical_lines(text: str, first_line: int = 1) -> Iterator[tuple[int, str]]:
    """(start line, text) per logical line: continuations joined, open quotes carried."""
    buf = ""
    pending = 0  # physical lines in buf
    start = first_line
    heredoc: str | None = None
    for n, raw in enumerate(text.split("\n"), start=first_line):
        if heredoc is not None:
            # A here-document body is data, not commands: skip to its delimiter.
            if raw.strip() == heredoc:
                heredoc = None
            continue
        if not pending:
            start = n
        pending += 1
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            buf += raw[:-1] + " "  # backslash-newline vanishes in the shell
            continue
        buf += raw
        if _balanced(buf) or pending > 200:
            yield start, buf
            m = _HEREDOC_RE.search(buf)
            heredoc = m.group(2) if m else None
            buf, pending = "", 0
        else:
            buf += "\n"  # a quoted string spans the newline
    if pending:
        yield start, buf


def _balanced(s: str) -> bool:
    if not any(q in s for q in "'\"`(\\"):
        return True  # nothing that can open a multi-line construct
    try:
        shlex.split(_lift_subs(s)[0], comments=True)
    except ValueError:
        return False
    return True


def _lift_subs(s: str) -> tuple[str, list[str]]:
    """Replace $(...) and `...` outside single quotes with placeholders; return the bodies."""
    out: list[str] = []
    subs: list[str] = []
    i, n, quote = 0, len(s), ""
    while i < n:
        c = s[i]
        if quote == "'":
            out.append(c)
            quote = "" if c == "'" else quote
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            out.append(s[i : i + 2])
            i += 2
            continue
        if c == "'" and not quote:
            quote = "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        if c == "$" and s.startswith("$(", i) and not s.startswith("$((", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if s[j] == "(":
                    depth += 1
                elif s[j] == ")":
                    depth -= 1
                j += 1
            subs.append(s[i + 2 : j - 1])
            out.append(_CMDSUB.format(len(subs) - 1))
            i = j
            continue
        if c == "`":
            j = s.find("`", i + 1)
            if j > i:
                subs.append(s[i + 1 : j])
                out.append(_CMDSUB.format(len(subs) - 1))
                i = j + 1
                continue
        out.append(c)
        i += 1
    return "".join(out), subs


def _tokens(s: str) -> list[str]:
    lex = shlex.shlex(s, posix=True, punctuation_chars=";&|()<>")
    lex.whitespace = " \t\r"  # newlines separate commands
    lex.commenters = "#"
    lex.whitespace_split = True
    toks: list[str] = []
    try:
        for t in lex:
            toks.append(t)
    except ValueError:
        toks = s.split()
    return toks


KEYWORDS_COND = {"if", "elif", "while", "until", "!"}
KEYWORDS_SKIP = {"then", "do", "else", "fi", "done", "{", "}", "esac", "time"}


@functools.lru_cache(maxsize=2048)
def pipelines(text: str, first_line: int = 1) -> tuple[Pipeline, ...]:
    """Every pipeline in `text`, including those inside command substitutions.

    Several rules walk the same script; the parse is cached (treat the result as read-only).
    """
    return tuple(_pipelines(text, first_line))


def _pipelines(text: str, first_line: int) -> Iterator[Pipeline]:
    for line, logical in logical_lines(text, first_line):
        lifted, subs = _lift_subs(logical)
        toks = _tokens(lifted)
        yield from _split(toks, subs, line)
        for body in subs:
            for p in _pipelines(body, line):
                p.prefix = p.prefix or "$()"
                yield p


def _split(toks: list[str], subs: list[str], line: int) -> Iterator[Pipeline]:
    cur: list[Command] = []
    words: list[str] = []
    before, prefix = "", ""

    def close_cmd() -> None:
        nonlocal words
        if words:
            used = [subs[int(m)] for w in words for m in _CMDSUB_RE.findall(w)]
            cur.append(Command(words, line, used))
        words = []

    pending: list[Pipeline] = []
    skip_target = False
    for t in toks:
        if skip_target:
            skip_target = False
            continue
        if t[:1] in ("<", ">") or t in (">&", "&>", "&>>"):
            # A redirection: drop it, its target and a bare fd number before it (2>&1).
            if words and words[-1].isdigit():
                words.pop()
            skip_target = True
            continue
        if t in OPERATORS or (set(t) <= set(";&|()") and t):
            close_cmd()
            if t in ("|", "|&"):
                continue
            if cur:
                pending.append(Pipeline(cur, line, before, t, prefix))
            cur, prefix = [], ""
            before = t
            continue
        if not words and not cur and t in KEYWORDS_COND:
            prefix = t
            continue
        if not words and t in KEYWORDS_SKIP:
            continue
        words.append(t)
    close_cmd()
    if cur:
        pending.append(Pipeline(cur, line, before, "", prefix))
    yield from pending


def _short_flags(words: list[str]) -> set[str]:
    out: set[str] = set()
    for w in words:
        if w.startswith("-") and not w.startswith("--") and len(w) > 1:
            out.update(w[1:])
    return out


def _first_operand(args: list[str], with_value: set[str] = frozenset()) -> str | None:
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a == "--":
            continue
        if a.startswith("-") and len(a) > 1:
            if a in with_value:
                skip = True
            continue
        return a
    return None


def grep_patterns(cmd: Command) -> list[str]:
    args = cmd.args()
    pats = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-e", "--regexp")]
    pats += [a.split("=", 1)[1] for a in args if a.startswith("--regexp=")]
    if pats:
        return pats
    first = _first_operand(args, {"-m", "-A", "-B", "-C", "-f", "--max-count"})
    return [first] if first is not None else []


# ---- rules -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    line: int
    code: str
    message: str


def shell_text_findings(
    text: str, first_line: int = 1, state: ShellState | None = None
) -> list[Hit]:
    """Command-level rules on a shell snippet (S401, S402, S405, S406, B407, B409).

    Rules that need the whole script (S403 guards, S404 markers) live in the
    script linter. `state` carries set -e / pipefail from the caller.
    """
    state = state or ShellState()
    hits: list[Hit] = []
    for p in pipelines(text, first_line):
        hits += _pipeline_rules(p, state)
    return hits


def inline_shell(c: Command) -> tuple[str, ShellState] | None:
    """The script of `bash -c SCRIPT` (also `sh -ec`, `bash -lc`), with the options it sets."""
    # The shell may be the command or a word of it (`kubectl exec POD -- bash -c ...`, `env X=1 sh -c`).
    at = next((i for i, w in enumerate(c.words) if Path(w).name in SHELLS), None)
    if at is None:
        return None
    args = c.words[at + 1 :]
    for i, a in enumerate(args[:-1]):
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            st = ShellState()
            st.apply_set([a.replace("c", "") or "-"] if a != "-c" else [])
            if "o" in a[1:]:
                return None  # `-o opt -c`: rare; leave it alone rather than misparse
            return args[i + 1], st
    return None


@detector("B407", "B409", "B411", "S401", "S402", "S405", "S406", "S408", domain="recipe")
def _pipeline_rules(p: Pipeline, state: ShellState) -> list[Hit]:
    hits: list[Hit] = []
    names = [c.name for c in p.commands]
    for c in p.commands:
        inner = inline_shell(c)
        if inner is not None:
            # A new shell: it inherits no set -e / pipefail, only its own flags.
            hits += script_findings(inner[0], c.line, inner[1])
        if c.name == "set":
            state.apply_set(c.args())
        if c.name in ("pgrep", "pkill") and "f" in _short_flags(c.args()):
            pat = _first_operand(c.args(), {"-u", "-g", "-P", "-s", "-t", "-U", "-G", "--signal"})
            if pat and not pat.startswith("["):
                fixed = f"[{pat[0]}]{pat[1:]}"
                hits.append(
                    Hit(
                        c.line,
                        "S401",
                        f"`{c.name} -f {pat!r}` also matches the shell running it; "
                        f"write the pattern as {fixed!r}",
                    )
                )
        if c.name in ("grep", "egrep", "fgrep"):
            for pat in grep_patterns(c):
                if re.search(r"selected\s+provider", pat, re.I) and "efa" not in pat.lower():
                    hits.append(
                        Hit(
                            c.line,
                            "S405",
                            f"grep {pat!r} accepts any libfabric provider (tcp;ofi_rxm too); "
                            "require 'Selected provider is efa'",
                        )
                    )
        for opt, value in _rendezvous_values(c):
            if _IPV4_RE.fullmatch(value.split(":")[0]) and not value.startswith("127."):
                hits.append(
                    Hit(
                        c.line,
                        "S408",
                        f"{opt}{value}: a pod IP changes when the pod restarts; use the leader's "
                        "headless-Service DNS name",
                    )
                )
        if c.name == "torchrun":
            joined = " ".join(c.words)
            if TEST_EP_RE.search(joined):
                nproc = _option_value(c.args(), ("--nproc-per-node", "--nproc_per_node"))
                if nproc is not None and nproc != "1":
                    hits.append(
                        Hit(
                            c.line,
                            "S406",
                            f"torchrun --nproc-per-node={nproc} around test_ep.py, which spawns "
                            "its own ranks; use --nproc-per-node=1 and --num-processes",
                        )
                    )
        if c.name == "git" and {"fetch", "pull"} & set(c.words):
            refs = [w for w in c.words if re.search(r"(^|/)pull/\d+/(head|merge)\b", w)]
            if refs and not any(_SHA_RE.fullmatch(w.split(":")[0]) for w in c.words):
                hits.append(
                    Hit(
                        c.line,
                        "B411",
                        f"`git fetch ... {refs[0]}` follows the PR branch, which moves; "
                        "fetch the exact commit SHA",
                    )
                )
    if len(p.commands) > 1:
        last = p.commands[-1]
        quiet = "q" in _short_flags(last.args()) or "--quiet" in last.args()
        if state.pipefail and last.name in ("grep", "egrep", "fgrep") and quiet:
            producer = p.commands[-2].name
            if producer not in ("echo", "printf"):
                hits.append(
                    Hit(
                        last.line,
                        "S402",
                        f"`{producer} | grep -q` under pipefail: grep exits at the first match, "
                        f"{producer} gets SIGPIPE and the pipeline fails with 141",
                    )
                )
        if "tail" in names[1:]:
            k = names.index("tail", 1)
            tail = p.commands[k]
            if _tail_limits(tail) and any(_is_build(c) for c in p.commands[:k]):
                hits.append(
                    Hit(
                        tail.line,
                        "B407",
                        f"`{' '.join(tail.words)}` keeps only the end of the build log (and "
                        "without pipefail hides its exit status); log to a file instead",
                    )
                )
        if names[0] == "ldconfig" and "p" in _short_flags(p.commands[0].args()):
            for c in p.commands[1:]:
                pats = grep_patterns(c) if c.name in ("grep", "egrep") else c.args()
                for pat in pats:
                    if re.search(r"\.so[\w.\\]*\s*=>", pat):
                        hits.append(
                            Hit(
                                c.line,
                                "B409",
                                f"pattern {pat!r} can never match: ldconfig -p prints "
                                "'name (libc6,x86-64) => path'",
                            )
                        )
    return hits


RENDEZVOUS_OPTS = ("--data-parallel-address", "--master-addr", "--master_addr", "--rdzv-endpoint")
RENDEZVOUS_VARS = ("MASTER_ADDR", "LEADER_ADDR", "LEADER_IP")
_IPV4_RE = re.compile(r"(\d{1,3}\.){3}\d{1,3}")


def _rendezvous_values(c: Command) -> list[tuple[str, str]]:
    out = []
    for w in c.words:
        name, eq, value = w.partition("=")
        if eq and name in RENDEZVOUS_VARS and (c.name == "export" or _ASSIGN_RE.match(w)):
            out.append((name + "=", value))
    args = c.args()
    for opt in RENDEZVOUS_OPTS:
        v = _option_value(args, (opt, opt.replace("-", "_")))
        if v is not None:
            out.append((opt + " ", v))
    return out


def _option_value(args: list[str], names: tuple[str, ...]) -> str | None:
    for i, a in enumerate(args):
        for n in names:
            if a == n and i + 1 < len(args):
                return args[i + 1]
            if a.startswith(n + "="):
                return a.split("=", 1)[1]
    return None


def _tail_limits(tail: Command) -> bool:
    args = tail.args()
    return any(re.fullmatch(r"-n?\d+", a) or a in ("-n", "--lines") for a in args) or any(
        a.startswith("--lines=") for a in args
    )


def _is_build(c: Command) -> bool:
    words = {Path(w).name for w in c.words}
    if words & BUILD_WORDS:
        return True
    return (c.name in ("pip", "pip3", "uv") and ("install" in c.words or "wheel" in c.words)) or (
        c.name.startswith("python") and "pip" in c.words and "install" in c.words
    )


# ---- whole-script rules ------------------------------------------------------------------


def _state_from_shebang(text: str) -> ShellState:
    st = ShellState()
    first = text.split("\n", 1)[0]
    if first.startswith("#!"):
        st.apply_set([w for w in first.split()[1:] if w.startswith(("-", "+"))])
    return st


GUARD_WINDOW = 6  # logical lines after an assignment in which a test of it counts as its guard


def _guard_re(var: str) -> re.Pattern[str]:
    v = re.escape(var)
    return re.compile(
        rf"(\[\[?|\btest)\s+(!\s+)?-[zn]\s+\"?\$\{{?{v}\b|\$\{{{v}:?\?|\"?\$\{{?{v}\}}?\"?\s*(==|!=|=)"
    )


def script_findings(text: str, first_line: int = 1, state: ShellState | None = None) -> list[Hit]:
    """Every shell rule that needs only the script itself."""
    state = state or _state_from_shebang(text)
    hits: list[Hit] = []
    lines = list(logical_lines(text, first_line))
    for idx, (line, logical) in enumerate(lines):
        lifted, subs = _lift_subs(logical)
        for p in _split(_tokens(lifted), subs, line):
            errexit_before = state.errexit
            hits += _pipeline_rules(p, state)
            # The guard may follow on the same line (`V=$(...); [ -n "$V" ]`) or below it.
            window = [(line, logical), *lines[idx + 1 : idx + 1 + GUARD_WINDOW]]
            hits += _errexit_assignment(p, errexit_before, state, window, subs)
        for body in subs:
            for p in pipelines(body, line):
                hits += _pipeline_rules(p, ShellState(state.errexit, state.pipefail))
    return hits


# Commands that succeed on any input: a pipeline made only of these cannot fail, and without
# pipefail one ending in them cannot fail either (`... | head -1`, `... | wc -l`).
NEVER_FAILS = {"head", "tail", "awk", "sed", "cut", "tr", "sort", "uniq", "cat", "wc", "xargs"}
NEVER_FAILS |= {"echo", "printf", "true", ":", "basename", "dirname"}


@detector("S403", domain="recipe")
def _errexit_assignment(
    p: Pipeline,
    errexit: bool,
    state: ShellState,
    window: list[tuple[int, str]],
    subs: list[str],
) -> list[Hit]:
    # A condition (if/while/!) or the left side of || / && is exempt from errexit.
    if not errexit or p.prefix or p.after in ("||", "&&"):
        return []
    if len(p.commands) != 1 or not p.commands[0].only_assignments or not p.commands[0].subs:
        return []
    hits = []
    for word in p.commands[0].words:
        name, _, value = word.partition("=")
        m = _CMDSUB_RE.search(value)
        if not m or int(m.group(1)) >= len(subs):
            continue
        body = subs[int(m.group(1))]
        if not _can_fail(body, state.pipefail):
            continue
        guard = _guard_re(name)
        g = next((ln for ln, txt in window if guard.search(txt)), None)
        if g is not None:
            where = "after it on this line" if g == p.line else f"on line {g}"
            hits.append(
                Hit(
                    p.line,
                    "S403",
                    f"under set -e a failing $(...) exits on this line, so the check of ${name} "
                    f"{where} never runs; write {name}=$(... || true)",
                )
            )
    return hits


def _can_fail(body: str, pipefail: bool) -> bool:
    """Whether a command substitution's status can be non-zero."""
    top = [q for q in pipelines(body) if q.prefix != "$()"]
    if not top:
        return True
    if any(q.before == "||" for q in top):
        return False  # `$(cmd || echo unknown)`, `$(cmd || true)`: the fallback decides
    final = top[-1]
    names = [c.name for c in final.commands]
    if all(n in NEVER_FAILS for n in names):
        return False
    # Without pipefail the pipeline's status is its last command's.
    return pipefail or names[-1] not in NEVER_FAILS


def _echoes(f: RecipeFile, ctx: LintContext) -> list[str]:
    key = f"echoes:{f.rel}"
    if key not in ctx.cache:
        ctx.cache[key] = [
            " ".join(c.args())
            for p in pipelines(f.text)
            for c in p.commands
            if c.name in ("echo", "printf")
        ]
    return ctx.cache[key]  # type: ignore[return-value]


def _printed_markers(file: RecipeFile, ctx: LintContext) -> list[str]:
    """What the scripts this one runs print (echo/printf): where its gate's marker may come from."""
    out: list[str] = []
    here = PurePosixPath(file.rel).parent
    for f in ctx.of_kind("shell"):
        if f.rel == file.rel or f.name not in file.text:
            continue
        if not _related(here, PurePosixPath(f.rel).parent):
            continue
        if re.search(rf"(^|[\s/]){re.escape(f.name)}\b", file.text):
            out += _echoes(f, ctx)
    return out


@detector("S404", domain="recipe")
def _marker_findings(file: RecipeFile, ctx: LintContext) -> list[Hit]:
    if not TEST_EP_RE.search(file.text):
        return []
    printed = None
    hits = []
    for p in pipelines(file.text):
        for c in p.commands:
            if c.name not in ("grep", "egrep"):
                continue
            for pat in grep_patterns(c):
                if not PASS_RE.search(pat):
                    continue
                if printed is None:
                    printed = _printed_markers(file, ctx)
                flags = re.I if "i" in _short_flags(c.args()) else 0
                try:
                    rx = re.compile(pat.replace("\\b", r"\b"), flags)
                except re.error:
                    rx = re.compile(re.escape(pat), flags)
                if not any(rx.search(s) for s in printed):
                    hits.append(
                        Hit(
                            c.line,
                            "S404",
                            f"gate greps for {pat!r}, which test_ep.py never prints and no "
                            "script here echoes; gate on the test's exit status",
                        )
                    )
    return hits


@detector("E407", domain="recipe")
def _all2all_findings(text: str) -> list[Hit]:
    if re.search(r"all2all[-_]backend|VLLM_ALL2ALL_BACKEND", text):
        return []
    hits = []
    for p in pipelines(text):
        for c in p.commands:
            is_vllm = c.name == "vllm" and "serve" in c.words
            is_dynamo = c.name.startswith("python") and "dynamo.vllm" in c.words
            if (is_vllm or is_dynamo) and "--enable-expert-parallel" in c.words:
                hits.append(
                    Hit(
                        c.line,
                        "E407",
                        "expert parallel without --all2all-backend: vLLM uses its default "
                        "allgather_reducescatter, not DeepEP-V2",
                    )
                )
    return hits


OFI_CONFIGURE_UNKNOWN = ("--with-nccl-headers", "--with-nccl")


@detector("B412", "B413", domain="recipe")
def build_step_findings(text: str, first_line: int = 1, context: str | None = None) -> list[Hit]:
    """Rules that need the surrounding file: configure options (B412) and patches (B413).

    `context` is the whole file when `text` is one RUN of a Dockerfile.
    """
    context = text if context is None else context
    ofi = re.search(r"aws-ofi-nccl|ofi-nccl", context, re.I) is not None
    checked = re.search(r"git\s+apply\b[^\n]*--check", context) is not None
    hits: list[Hit] = []
    for p in pipelines(text, first_line):
        for c in p.commands:
            args = c.args()
            if ofi and c.name == "configure":
                bad = [a for a in args if a.split("=", 1)[0] in OFI_CONFIGURE_UNKNOWN]
                if bad:
                    hits.append(
                        Hit(
                            c.line,
                            "B412",
                            f"aws-ofi-nccl's configure defines no {bad[0].split('=')[0]}; autoconf "
                            "ignores it with only a warning",
                        )
                    )
            if c.name == "patch" and not _strict_patch(args):
                hits.append(
                    Hit(
                        c.line,
                        "B413",
                        "`patch` applies hunks with fuzz and offsets and still succeeds; a patch "
                        "that no longer fits rots silently (upstream it, or --fuzz=0 after --dry-run)",
                    )
                )
            if c.name == "git" and "apply" in args and "--check" not in args and not checked:
                hits.append(
                    Hit(
                        c.line,
                        "B413",
                        "`git apply` with no `git apply --check` gate: an empty or stale patch "
                        "is not caught before the build continues",
                    )
                )
    return hits


def _strict_patch(args: list[str]) -> bool:
    joined = " ".join(args)
    return "--dry-run" in args or bool(re.search(r"(^| )(-F ?0|--fuzz[= ]0)( |$)", joined))


def exports(text: str) -> dict[str, tuple[str, int]]:
    """Variables a script exports to the processes it starts: name -> (value, line)."""
    out: dict[str, tuple[str, int]] = {}
    for p in pipelines(text):
        if p.prefix == "$()":
            continue
        for c in p.commands:
            if c.name != "export":
                continue
            for w in c.args():
                if _ASSIGN_RE.match(w):
                    name, _, value = w.partition("=")
                    out[name] = (value, c.line)
    return out


@detector("S407", domain="recipe")
@linter("shell", is_shell_script)
def lint_shell(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    hits = script_findings(file.text) + _marker_findings(file, ctx) + _all2all_findings(file.text)
    hits += build_step_findings(file.text)
    for h in hits:
        yield finding(file, h.line, h.code, h.message)
    if file.text.startswith("#!") and not _executable(file.path):
        user = _started_by_path(file, ctx)
        if user is not None:
            yield finding(
                file,
                1,
                "S407",
                f"has a shebang but no execute bit, and {user} uses it by path (not `bash "
                f"{file.name}`): it fails with Permission denied (COPY keeps the mode)",
            )


WRAPPERS = {"exec", "nohup", "env", "time", "timeout", "srun", "sudo", "setsid", "stdbuf"}


def _related(a: PurePosixPath, b: PurePosixPath) -> bool:
    """Same folder, or one inside the other: a sibling sample's file of the same name is another file."""
    return a == b or a in b.parents or b in a.parents


def runs_by_path(text: str, name: str) -> bool:
    """Whether a shell text executes a file called `name` by path (`./x.sh`, `exec /opt/x.sh`)."""
    for p in pipelines(text):
        for c in p.commands:
            words = [w for w in c.words if not _ASSIGN_RE.match(w)]
            while words and Path(words[0]).name in WRAPPERS:
                words = [w for w in words[1:] if not (w.startswith("-") or w.isdigit())]
            if words and Path(words[0]).name == name:
                return True
            inner = inline_shell(c)
            if inner is not None and runs_by_path(inner[0], name):
                return True
    return False


def _yaml_runs_by_path(text: str, name: str) -> bool:
    # A YAML scalar that *starts* with the script's path (command: ["/opt/x.sh"], - ./x.sh).
    rx = re.compile(
        rf"(?:^|[\[,:]|^\s*-)\s*[\"']?[\w./${{}}-]*/{re.escape(name)}[\"']?\s*(?:$|[,\]#])", re.M
    )
    return rx.search(text) is not None


def _started_by_path(file: RecipeFile, ctx: LintContext) -> str | None:
    """The first related recipe file that executes this script by path."""
    from epdoctor.lint.dockerfile import parse

    here = PurePosixPath(file.rel).parent
    for other in ctx.files:
        if other.rel == file.rel or file.name not in other.text:
            continue
        if not _related(here, PurePosixPath(other.rel).parent):
            continue
        if "shell" in other.kinds and runs_by_path(other.text, file.name):
            return other.rel
        if "dockerfile" in other.kinds:
            for ins in parse(other.text):
                if ins.keyword not in ("RUN", "CMD", "ENTRYPOINT"):
                    continue
                body = ins.args
                if body.lstrip().startswith("["):
                    try:
                        argv = json.loads(body)
                        body = shlex.join(argv) if isinstance(argv, list) else ""
                    except (ValueError, TypeError):
                        body = ""
                if runs_by_path(body, file.name):
                    return other.rel
        if other.path.suffix in (".yaml", ".yml") and _yaml_runs_by_path(other.text, file.name):
            return other.rel
    return None


def _executable(path: Path) -> bool:
    try:
        return bool(path.stat().st_mode & 0o111)
    except OSError:
        return True  # cannot tell: no finding
