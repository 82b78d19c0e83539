"""The lint framework: recipe-folder discovery, linters keyed by file kind, suppressions.

A linter is a function ``(file, ctx) -> Iterable[LintFinding]`` registered for a
file *kind* with a *matcher* that decides which files are of that kind::

    register_linter("manifest", yaml_manifest_matcher, lint_manifest)

The functions that raise trap codes (a linter, or the rule functions it calls) are also
detectors (``@detector("B402", domain="recipe")``, epdoctor/checks/registry.py): that is where
``epdoctor explain`` finds them. A LintFinding is a Finding with a location.

Linter modules live in this package and register themselves on import;
``load_linters()`` imports every module here, so adding a file kind touches
no shared file. A file may be of several kinds (a YAML file is a manifest;
an ``.env`` file is an env file); every matching linter runs on it.

Suppressions are per line and need a reason::

    RUN pip install x  # epdoctor: ignore[B404] re-pinned again in the next layer

A suppression comment on a comment-only line applies to the next line too,
which is the only form a Dockerfile allows (it has no trailing comments).
A suppression without a reason suppresses nothing and is itself a finding
(S400), so every silenced rule carries its justification in the file.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
import pkgutil
import re
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from epdoctor import knowledge
from epdoctor.checks.registry import detector
from epdoctor.model import Finding, Location, Status
from epdoctor.redact import redact_text

# Folders no recipe keeps its files in; walking them would only cost time.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        ".venv",
        "venv",
        "node_modules",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".tox",
        "build",
        "dist",
    }
)
MAX_FILE_BYTES = 2_000_000  # a recipe file bigger than this is data, not a recipe
SUPPRESSION_CODE = "S400"

_SUPPRESS_RE = re.compile(r"#\s*epdoctor:\s*ignore\[([A-Za-z0-9_,\s]+)\]\s*(.*)$")


class Unparseable(Exception):
    """Raised by a linter for a file it cannot read as its kind (a templated YAML with
    ${VARS}, a Dockerfile fragment): the file is reported as skipped, which is not an error."""


@dataclass(frozen=True)
class LintFinding(Finding):
    """A Finding at a place in a recipe file: ``location`` is relative to the folder linted.

    Only lint's names for its parts are added (path, line, column, message, level()), so the
    renderers and the SARIF/JUnit writers read like the formats they write.
    """

    @property
    def path(self) -> str:
        return self.location.path if self.location else ""

    @property
    def line(self) -> int:
        return self.location.line if self.location else 0

    @property
    def column(self) -> int:
        return (self.location.column if self.location else None) or 1

    @property
    def message(self) -> str:
        return self.title

    def level(self) -> str:
        return self.status.value

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "code": self.code,
            "severity": self.level(),
            "message": self.message,
        }
        if self.suppressed is not None:
            out["suppressed"] = self.suppressed
        return out


def default_status(code: str) -> Status:
    """The catalogue's status for a code; WARN for a code it lacks."""
    try:
        return knowledge.get(code).default_status
    except KeyError:
        return Status.WARN


@dataclass
class RecipeFile:
    """A file found in a recipe folder; text is read once, on first use."""

    path: Path
    rel: str
    kinds: tuple[str, ...] = ()
    _text: str | None = field(default=None, repr=False)

    @property
    def text(self) -> str:
        if self._text is None:
            # Redacted as it is read: no linter, message, YAML error or SARIF result can
            # repeat a secret (masking keeps the file's lines, so line numbers hold).
            self._text = redact_text(self.path.read_text(encoding="utf-8", errors="replace"))
        return self._text

    @property
    def raw(self) -> str:
        """The text as written, for a parser only: redacting first would change what is
        parsed (``Bearer [REDACTED]`` inside a YAML flow sequence is a nested list, or no YAML
        at all). Whatever is parsed from it is redacted as whole values before any use."""
        return self.path.read_text(encoding="utf-8", errors="replace")

    @property
    def lines(self) -> list[str]:
        return self.text.splitlines()

    @property
    def name(self) -> str:
        return self.path.name


@dataclass
class LintContext:
    """What a linter may need beyond its own file: the folder and its other files."""

    root: Path
    files: list[RecipeFile]
    cache: dict[str, object] = field(default_factory=dict)  # per-run values linters share

    def of_kind(self, kind: str) -> list[RecipeFile]:
        return [f for f in self.files if kind in f.kinds]

    def find(self, rel: str) -> RecipeFile | None:
        for f in self.files:
            if f.rel == rel:
                return f
        return None


Matcher = Callable[[Path, str], bool]  # (path, first 4 KiB of text) -> is this kind
LinterFn = Callable[[RecipeFile, LintContext], Iterable[LintFinding]]


@dataclass(frozen=True)
class Linter:
    kind: str
    matcher: Matcher
    fn: LinterFn


LINTERS: list[Linter] = []


def register_linter(kind: str, matcher: Matcher, fn: LinterFn) -> LinterFn:
    """Run `fn` on every file for which `matcher(path, head)` is true."""
    LINTERS.append(Linter(kind, matcher, fn))
    return fn


def linter(kind: str, matcher: Matcher) -> Callable[[LinterFn], LinterFn]:
    """Decorator form of register_linter."""

    def deco(fn: LinterFn) -> LinterFn:
        return register_linter(kind, matcher, fn)

    return deco


@functools.cache
def load_linters() -> None:
    """Import every linter module in this package once (they register on import)."""
    import epdoctor.lint as pkg

    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name not in {"base", "render", "run", "config"} and not mod.name.startswith("_"):
            importlib.import_module(f"epdoctor.lint.{mod.name}")


def finding(
    file: RecipeFile,
    line: int,
    code: str,
    message: str,
    column: int = 1,
    status: Status | None = None,
) -> LintFinding:
    """A finding at `line` of `file`; its status is the catalogue's unless the rule says."""
    return LintFinding(
        code, status or default_status(code), message, location=Location(file.rel, line, column)
    )


# ---- discovery ---------------------------------------------------------------------------


def _walk(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _head(path: Path) -> tuple[str | None, str]:
    """(first 4 KiB as text, "") or (None, why the file is skipped).

    Only a regular file is opened (a FIFO would block, a device never ends)."""
    try:
        st = path.stat()
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        return None, f"not a regular file ({_kind(st.st_mode)})"
    if st.st_size > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // 1_000_000} MB: data, not a recipe"
    try:
        with path.open("rb") as fh:
            raw = fh.read(4096)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    if b"\0" in raw:
        return None, "binary"
    return raw.decode("utf-8", errors="replace"), ""


def _unclaimed_why(path: Path) -> str:
    if path.suffix.lower() in {".yaml", ".yml"}:
        return "YAML without apiVersion and kind: not a Kubernetes manifest"
    return "no linter reads this kind of file"


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a directory" if stat.S_ISDIR(mode) else "a special file"


def excluded_by(rel: str, exclude: Sequence[str]) -> str | None:
    """The --exclude glob that matches this file (its path under the root, or its name)."""
    import fnmatch

    name = rel.rsplit("/", 1)[-1]
    for g in exclude:
        g = g.rstrip("/")
        if fnmatch.fnmatch(rel, g) or fnmatch.fnmatch(name, g) or rel.startswith(g + "/"):
            return g
    return None


def discover(
    paths: Sequence[str | Path], exclude: Sequence[str] = (), not_linted: list[str] | None = None
) -> tuple[Path, list[RecipeFile], list[str]]:
    """Files under `paths` with the kinds that claim them, the common root, and the files
    skipped (unreadable, binary, too large, not regular) as "path: why" lines. Files no
    linter reads, or that `exclude` names, go to `not_linted` ("path: why").

    A folder is walked; a file named directly is linted even if no matcher
    would find it by walking (its kinds are still decided by the matchers). A path named
    directly that is neither a folder nor a regular file is refused (BadInput).
    """
    from epdoctor.safeio import BadInput, check_source

    load_linters()
    for p in paths:
        if str(p) == "":
            raise BadInput("lint: a path is empty")
        if not os.path.isdir(p) and os.path.exists(p):
            check_source(str(p), "recipe file")  # a FIFO or a device: one line, not a hang
    resolved = [Path(p).resolve() for p in paths]
    for p in resolved:
        if not p.exists():
            raise FileNotFoundError(str(p))
    root = Path(os.path.commonpath([p if p.is_dir() else p.parent for p in resolved]))
    seen: set[Path] = set()
    files: list[RecipeFile] = []
    skipped: list[str] = []
    for p in resolved:
        for path in _walk(p) if p.is_dir() else [p]:
            if path in seen or path.is_symlink():
                continue
            seen.add(path)
            rel = path.relative_to(root).as_posix()
            glob = excluded_by(rel, exclude)
            if glob is not None:
                if not_linted is not None:
                    not_linted.append(f"{rel}: excluded by {glob!r}")
                continue
            head, why = _head(path)
            if head is None:
                skipped.append(f"{rel}: {why}")
                continue
            kinds = tuple(dict.fromkeys(lt.kind for lt in LINTERS if lt.matcher(path, head)))
            if not kinds and not_linted is not None:
                not_linted.append(f"{rel}: {_unclaimed_why(path)}")
            files.append(RecipeFile(path, rel, kinds))
    return root, files, skipped


# ---- suppressions ------------------------------------------------------------------------


@dataclass(frozen=True)
class Suppression:
    line: int
    codes: frozenset[str]
    reason: str
    own_line: bool  # the comment is alone on its line: it covers the next line too


def suppressions(text: str) -> list[Suppression]:
    out = []
    for i, line in enumerate(text.splitlines(), start=1):
        m = _SUPPRESS_RE.search(line)
        if not m:
            continue
        codes = frozenset(c.strip().upper() for c in m.group(1).split(",") if c.strip())
        own = line[: m.start()].strip() == ""
        out.append(Suppression(i, codes, m.group(2).strip(), own))
    return out


@detector(SUPPRESSION_CODE, domain="recipe")
def apply_suppressions(file: RecipeFile, found: Iterable[LintFinding]) -> list[LintFinding]:
    """Mark findings silenced by a reasoned comment; report reasonless ones (S400)."""
    sups = suppressions(file.text) if "epdoctor:" in file.text else []
    out: list[LintFinding] = []
    by_line: dict[int, list[Suppression]] = {}
    for s in sups:
        if not s.reason:
            out.append(
                finding(
                    file,
                    s.line,
                    SUPPRESSION_CODE,
                    f"suppression of {', '.join(sorted(s.codes))} gives no reason; "
                    "write `# epdoctor: ignore[CODE] why it is safe here`",
                )
            )
            continue
        by_line.setdefault(s.line, []).append(s)
        if s.own_line:
            by_line.setdefault(s.line + 1, []).append(s)
    for f in found:
        hit = next((s for s in by_line.get(f.line, []) if f.code in s.codes), None)
        if hit is not None:
            f = dataclasses.replace(f, suppressed=hit.reason)
        out.append(f)
    return out


# ---- running -----------------------------------------------------------------------------


@dataclass
class LintReport:
    root: Path
    files: list[RecipeFile]
    findings: list[LintFinding]
    errors: list[str] = field(default_factory=list)  # a linter that crashed on a file
    skipped: list[str] = field(default_factory=list)  # files not read, or not parsed, and why
    checked: int = -1  # recipe files at least one linter read through (-1: not counted)
    not_linted: list[str] = field(default_factory=list)  # excluded or of no kind, and why
    config: str | None = None  # the settings file read (lint/config.py)

    @property
    def active(self) -> list[LintFinding]:
        return [f for f in self.findings if f.suppressed is None]

    @property
    def suppressed(self) -> list[LintFinding]:
        return [f for f in self.findings if f.suppressed is not None]


def lint_paths(
    paths: Sequence[str | Path],
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    exclude: Sequence[str] = (),
) -> LintReport:
    """Lint files and folders; `select` keeps only codes with these prefixes, `ignore` drops
    them; files matching an `exclude` glob are not read (and listed in not_linted)."""
    not_linted: list[str] = []
    root, files, skipped = discover(paths, exclude, not_linted)
    ctx = LintContext(root, files)
    prefixes = tuple(s.upper() for s in select)
    findings: list[LintFinding] = []
    errors: list[str] = []
    checked = 0
    for f in files:
        found: list[LintFinding] = []
        ran = False
        for lt in LINTERS:
            if lt.kind not in f.kinds:
                continue
            try:
                found.extend(lt.fn(f, ctx))
                ran = True
            except Unparseable as exc:
                skipped.append(f"{f.rel}: not read as {lt.kind}: {exc}")
            except OSError as exc:  # unreadable after discovery: listed, the run goes on
                skipped.append(f"{f.rel}: cannot read: {exc.strerror or exc}")
            except Exception as exc:  # one broken linter must not hide the others' findings
                errors.append(f"{f.rel}: {lt.kind} linter failed: {type(exc).__name__}: {exc}")
        checked += ran
        findings.extend(apply_suppressions(f, found))
    if prefixes:
        findings = [f for f in findings if f.code.startswith(prefixes)]
    dropped = tuple(s.upper() for s in ignore)
    if dropped:
        findings = [f for f in findings if not f.code.startswith(dropped)]
    by_rel = {f.rel: f for f in files}
    findings = [_placed(by_rel.get(f.path), f) for f in findings]
    findings.sort(key=lambda f: (f.path, f.line, f.column, f.code))
    return LintReport(root, files, findings, errors, skipped, checked, not_linted)


_WORD = re.compile(r"[A-Za-z0-9_./:=@+-]{3,}")
_NOT_A_TOKEN = frozenset({"container", "the", "and", "not", "with", "for", "from", "that", "this"})


def _placed(file: RecipeFile | None, f: LintFinding) -> LintFinding:
    """Give a finding a real column where its rule left column 1: the first word of its
    message that its line holds (the variable, the image, the flag), else the line's first
    non-blank character, as editors and CI annotations expect."""
    if file is None or f.column != 1 or not f.location or f.line < 1:
        return f
    try:
        text = file.lines[f.line - 1]
    except IndexError:
        return f
    col = len(text) - len(text.lstrip()) + 1
    quoted = re.findall(r"`([^`]+)`", f.title)  # what the rule quotes comes first
    words = [w for q in quoted for w in (q, q.split()[0])]
    words += [m.group(0).strip(".:,;=") for m in _WORD.finditer(f.title.replace("`", " "))]
    for word in words:
        if len(word) < 2 or word.lower() in _NOT_A_TOKEN:
            continue
        if (at := text.find(word)) >= 0:
            col = at + 1
            break
    if col == 1:
        return f
    return dataclasses.replace(f, location=dataclasses.replace(f.location, column=col))


# ---- matchers shared by linter modules --------------------------------------------------


def by_suffix(*suffixes: str) -> Matcher:
    """A matcher for file names ending in one of `suffixes` (case-insensitive)."""
    lowered = tuple(s.lower() for s in suffixes)
    return lambda path, head: path.name.lower().endswith(lowered)


def is_yaml(path: Path, head: str) -> bool:
    return path.suffix.lower() in {".yaml", ".yml"}
