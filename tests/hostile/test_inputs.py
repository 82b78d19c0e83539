"""Hostile input through the real CLI: every bad input ends in one clear line and exit 2.

Each case runs ``python -m epdoctor ...`` as a subprocess with a deadline (a hang fails the case
instead of stalling the suite) and checks: the exit code, one line on stderr naming the
problem, no ``Traceback`` anywhere, and, where the input is a bomb, the child's peak memory.
The inputs are made here: broken and oversized bundles, FIFOs, sockets, devices, directories and
unreadable files where a log or a bundle is expected, YAML alias bombs, markup and escape codes
in names that came from a bundle or a path, a Kubernetes API that answers HTML, half a JSON
object, the wrong type or nothing (tests/kube_emulator.py, hostile mode), SSH hosts that say
nothing or junk, and output paths that are missing, unwritable, full, taken or symbolic links.

With ``EPD_HOSTILE_TALLY=FILE`` each case appends one JSON line (id and what went wrong: a
traceback, a hang, the wrong exit code, no one-line reason) to FILE, so a run can be counted as
tried / traceback / hung / wrong exit.
"""

from __future__ import annotations

import contextlib
import ctypes
import gzip
import io
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUNDLE = REPO / "tests" / "fixtures" / "h200-run" / "h200-bundle.tar.gz"
PR_CAPBSET_DROP = 24
GiB = 1 << 30


# ---- running the CLI -------------------------------------------------------------------------


@dataclass
class Run:
    rc: int | None
    out: str
    err: str
    seconds: float
    rss_mb: float
    hung: bool


def _preexec(unprivileged: bool, fsize: int | None) -> Callable[[], None]:
    def setup() -> None:
        os.setsid()
        if fsize is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
        if unprivileged:
            # root without CAP_DAC_OVERRIDE / CAP_DAC_READ_SEARCH: a mode-000 file is unreadable
            libc = ctypes.CDLL(None, use_errno=True)
            for cap in (1, 2):
                if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                    raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")

    return setup


def epd(
    *argv: str,
    timeout: float = 20.0,
    unprivileged: bool = False,
    fsize: int | None = None,
    env: dict[str, str] | None = None,
    cwd: Path = REPO,
) -> Run:
    """Run the CLI; its peak RSS comes from wait4, a hang is killed with its process group."""
    full_env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO), **(env or {})}
    if env and "FORCE_COLOR" in env:
        full_env.pop("NO_COLOR", None)
    p = subprocess.Popen(
        [sys.executable, "-m", "epdoctor", *argv],
        cwd=cwd,
        env=full_env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=_preexec(unprivileged, fsize),
    )
    bufs: dict[str, bytes] = {}

    def drain(name: str, stream: io.BufferedReader) -> None:
        bufs[name] = stream.read()

    readers = [
        threading.Thread(target=drain, args=(n, s), daemon=True)
        for n, s in (("out", p.stdout), ("err", p.stderr))
    ]
    for t in readers:
        t.start()
    waited: list[tuple[int, int, object]] = []
    waiter = threading.Thread(target=lambda: waited.append(os.wait4(p.pid, 0)), daemon=True)
    t0 = time.monotonic()
    waiter.start()
    waiter.join(timeout)
    hung = not waited
    if hung:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        waiter.join(10)
    seconds = time.monotonic() - t0
    for t in readers:
        t.join(10)
    p.returncode = 0  # reaped by wait4 above: keep Popen from waiting again
    rc = None
    rss = 0.0
    if waited:
        _, status, usage = waited[0]
        rc = os.waitstatus_to_exitcode(status)
        rss = usage.ru_maxrss / 1024  # type: ignore[attr-defined]
    out = bufs.get("out", b"").decode("utf-8", "replace")
    err = bufs.get("err", b"").decode("utf-8", "replace")
    return Run(None if hung else rc, out, err, seconds, rss, hung)


@dataclass
class Expect:
    code: int | tuple[int, ...] = 2
    says: str = ""  # a regex one stderr line must match (case-insensitive)
    out_says: str = ""  # a regex stdout must match
    one_line: bool = True  # stderr is that one line
    max_s: float | None = None
    max_rss_mb: float | None = None
    absent: tuple[str, ...] = ()  # strings that must not reach stdout or stderr
    check: Callable[[Run], str] | None = None  # more: returns what is wrong, or ""


def problems(r: Run, e: Expect) -> list[str]:
    """What went wrong, each a short tag first: hung, traceback, exit, message, time, memory."""
    out: list[str] = []
    if r.hung:
        return [f"hung: still running after {r.seconds:.0f}s"]
    both = r.out + r.err
    if "Traceback (most recent call last)" in both:
        out.append("traceback: " + both.strip().splitlines()[-1][:200])
    if r.rc not in (e.code if isinstance(e.code, tuple) else (e.code,)):
        out.append(f"exit: {r.rc}, expected {e.code}")
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    if e.says:
        if not any(re.search(e.says, ln, re.I) for ln in lines):
            out.append(f"message: no stderr line matches {e.says!r}: {r.err.strip()[-300:]!r}")
        elif e.one_line and len(lines) != 1:
            out.append(f"message: {len(lines)} stderr lines, expected one: {r.err[-300:]!r}")
    if e.out_says and not re.search(e.out_says, r.out, re.I):
        out.append(f"message: stdout does not match {e.out_says!r}: {r.out[-300:]!r}")
    for s in e.absent:
        if s in both:
            out.append(f"escape: {s!r} reached the output")
    if e.max_s is not None and r.seconds > e.max_s:
        out.append(f"time: {r.seconds:.1f}s, bound {e.max_s}s")
    if e.max_rss_mb is not None and r.rss_mb > e.max_rss_mb:
        out.append(f"memory: {r.rss_mb:.0f} MB, bound {e.max_rss_mb} MB")
    if e.check is not None and (why := e.check(r)):
        out.append(why)
    return out


def judge(case_id: str, r: Run, e: Expect) -> None:
    found = problems(r, e)
    tally = os.environ.get("EPD_HOSTILE_TALLY")
    if tally:
        with open(tally, "a") as f:
            f.write(json.dumps({"id": case_id, "problems": found}) + "\n")
    assert not found, "\n".join(found)


def judge_all(cases: list[tuple[str, Callable[[], Run], Expect]]) -> None:
    """Several cases in one test: every one is run and counted before the test fails."""
    failed = []
    for cid, run, e in cases:
        try:
            judge(cid, run(), e)
        except AssertionError as exc:
            failed.append(f"{cid}: {exc}")
    assert not failed, "\n".join(failed)


# ---- the hostile lab: files, a socket, an emulator, listeners ---------------------------------


def _tar_gz(members: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _members(path: Path) -> dict[str, bytes]:
    with tarfile.open(path) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def _manifest(targets: object, **extra: object) -> bytes:
    return json.dumps({"format": "epdoctor-bundle/1", "targets": targets, **extra}).encode()


def _bomb(path: Path, member: str, size: int, manifest: bytes) -> None:
    """A .tar.gz whose `member` is `size` zero bytes: about size/1000 bytes on disk."""
    info = tarfile.TarInfo(member)
    info.size = size
    head = info.tobuf(format=tarfile.GNU_FORMAT)
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    with open(path, "wb") as f:
        m = tarfile.TarInfo("manifest.json")
        m.size = len(manifest)
        f.write(z.compress(m.tobuf(format=tarfile.GNU_FORMAT) + manifest))
        f.write(z.compress(b"\0" * (-len(manifest) % 512)))
        f.write(z.compress(head))
        for _ in range(size >> 20):
            f.write(z.compress(block))
        f.write(z.compress(b"\0" * 1024))
        f.write(z.flush())


@dataclass
class Lab:
    d: Path
    good: dict[str, bytes] = field(default_factory=dict)
    kubeconfig: Path | None = None
    silent_kubeconfig: Path | None = None
    silent_port: int = 0
    garbage_port: int = 0

    def p(self, name: str) -> str:
        return str(self.d / name)


def _listener(talk: bytes | None) -> tuple[socket.socket, int]:
    """A loopback port that accepts and says nothing (talk None) or writes junk and waits."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)
            if talk:
                with contextlib.suppress(OSError):
                    conn.sendall(talk)

    threading.Thread(target=serve, daemon=True).start()
    return srv, srv.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> Iterator[Lab]:
    d = tmp_path_factory.mktemp("hostile")
    d.chmod(0o755)
    lab = Lab(d)
    good = lab.good = _members(BUNDLE)
    probe = good["targets/0/probe.json"]
    entry = {"name": "n0", "kind": "local", "dir": "targets/0", "detail": {}}
    raw = BUNDLE.read_bytes()
    files: dict[str, bytes] = {
        "truncated.tar.gz": raw[: len(raw) // 2],
        "corrupt.tar.gz": b"\x1f\x8b\x08\x00" + bytes(range(256)) * 8,
        "text.tar.gz": b"this is not an archive\n" * 40,
        "gz-not-tar.tar.gz": gzip.compress(b"plain text, gzipped, not a tar\n" * 40),
        "manifest-list.tar.gz": _tar_gz({"manifest.json": b"[1, 2, 3]"}),
        "targets-dict.tar.gz": _tar_gz({"manifest.json": _manifest({"a": 1})}),
        "entry-str.tar.gz": _tar_gz({"manifest.json": _manifest(["targets/0"])}),
        "detail-list.tar.gz": _tar_gz(
            {
                "manifest.json": _manifest([{**entry, "detail": [1, 2]}]),
                "targets/0/probe.json": probe,
            }
        ),
        "probe-list.tar.gz": _tar_gz(
            {"manifest.json": _manifest([entry]), "targets/0/probe.json": b"[1, 2]"}
        ),
        "deep-manifest.tar.gz": _tar_gz({"manifest.json": b"[" * 200_000 + b"]" * 200_000}),
        "deep-probe.tar.gz": _tar_gz(
            {
                "manifest.json": _manifest([entry]),
                "targets/0/probe.json": b'{"a":' * 5000 + b"1" + b"}" * 5000,
            }
        ),
        "markup.tar.gz": _tar_gz(
            {
                "manifest.json": _manifest(
                    [
                        {
                            **entry,
                            "name": "[link=https://evil.example/]n0[/link] [/] \x1b[31mred"
                            "\x1b]8;;https://evil.example/\x07x\x1b]8;;\x07 \x9b31m",
                            "detail": {"note": "[bold]x[/] \x1b[2J"},
                        }
                    ]
                ),
                "targets/0/probe.json": probe,
            }
        ),
        # cut in half (the whole stream of such a repetitive log is about 200 bytes)
        "trunc.log.gz": (lambda z: z[: len(z) // 2])(gzip.compress(b"NCCL INFO hello\n" * 5000)),
        "ok.log": b"host:1:1 [0] NCCL INFO NET/OFI Selected provider is efa\n",
        "taken.tar.gz": b"keep me\n",
        "bomb.yaml": (
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata:\n"
            b"  a: &a [x, x, x, x, x, x, x, x, x]\n"
            b"  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
            b"  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
            b"  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
            b"  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
            b"  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
            b"  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
            b"  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
            b"  i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]\n"
        ),
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    (d / "plan-taken").mkdir()
    (d / "plan-taken" / "plan.json").write_text("{}\n")
    (d / "plan-link").mkdir()
    (d / "elsewhere.json").write_text("not yours\n")
    (d / "plan-link" / "plan.json").symlink_to(d / "elsewhere.json")
    (d / "out-link.tar.gz").symlink_to(d / "elsewhere.json")
    (d / "adir").mkdir()
    (d / "[").mkdir()
    (d / "[" / "]").mkdir()
    bracket = d / "[" / "]"  # with the folder above: a path holding "[/]"
    (bracket / "x.log").write_bytes(files["ok.log"])
    shutil.copyfile(BUNDLE, bracket / "b.tar.gz")
    os.mkfifo(d / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(d / "sock"))
    secret = d / "secret.log"
    secret.write_bytes(files["ok.log"])
    secret.chmod(0o000)  # unreadable once the case drops root's DAC override
    # lint folders
    mixed = d / "recipe-mixed"
    mixed.mkdir()
    (mixed / "run.sh").write_text("#!/bin/sh\necho hi\n")
    os.mkfifo(mixed / "pipe.sh")
    sk = socket.socket(socket.AF_UNIX)
    sk.bind(str(mixed / "sock.sh"))
    (mixed / "blob.sh").write_bytes(b"#!/bin/sh\n\0\1\2binary")
    (mixed / "huge.env").write_bytes(b"A=1\n" * 600_000)
    (mixed / "locked.sh").write_text("#!/bin/sh\necho locked\n")
    (mixed / "locked.sh").chmod(0o000)
    (d / "recipe-bomb").mkdir()
    (d / "recipe-bomb" / "bomb.yaml").write_bytes(files["bomb.yaml"])
    (d / "recipe-empty").mkdir()
    # bombs: a sparse tar (kilobytes on disk, 2 GiB unpacked) and a gzip bomb (1 GiB)
    man = _manifest([entry])
    if shutil.which("tar"):
        sp = d / "sparse-src"
        (sp / "targets" / "0").mkdir(parents=True)
        (sp / "manifest.json").write_bytes(man)
        with open(sp / "targets" / "0" / "probe.json", "wb") as f:
            f.truncate(2 * GiB)
        subprocess.run(
            ["tar", "--sparse", "-cf", str(d / "sparse.tar"), "-C", str(sp), "."], check=True
        )
    _bomb(d / "bomb.tar.gz", "targets/0/probe.json", GiB, man)
    for p in d.rglob("*"):
        if p.is_dir() and not p.is_symlink():
            p.chmod(0o755)
    # Kubernetes: the emulator in hostile mode, and an API server that accepts and never answers
    servers = []
    with contextlib.ExitStack() as stack:
        try:
            from kube_emulator import running, running_pod
        except ImportError:
            running = None
        if running is not None:
            emu = stack.enter_context(running(d))
            for name in ("k-html", "k-trunc", "k-shape", "k-stall", "k-noexec", "k-drop"):
                emu.put(running_pod(name, "default"))
            emu.emulator.hostile.update(
                {
                    r"/pods/k-html$": "html",
                    r"/pods/k-trunc$": "truncated",
                    r"/pods/k-shape$": "shape",
                    r"/pods/k-stall(/log)?$": "stall",
                    r"/pods/k-drop/exec$": "exec-drop",
                }
            )
            emu.emulator.forbid_exec.add(("default", "k-noexec"))
            lab.kubeconfig = emu.kubeconfig
            lab.kubeconfig.chmod(0o644)
        from kube_emulator import kubeconfig_text

        srv, lab.silent_port = _listener(None)
        servers.append(srv)
        lab.silent_kubeconfig = d / "silent-kubeconfig"
        lab.silent_kubeconfig.write_text(kubeconfig_text(f"http://127.0.0.1:{lab.silent_port}"))
        srv2, lab.garbage_port = _listener(b"HTTP/1.1 400 Bad Request\r\n\r\n" + b"junk\r\n" * 200)
        servers.append(srv2)
        yield lab
        for s in servers:
            s.close()
        sock.close()
        sk.close()


def _no_escape(r: Run) -> str:
    bad = [s for s in ("\x1b]8;", "\x1b[31mred", "\x1b[2J", "\x9b", "\x07") if s in r.out + r.err]
    return f"escape: {bad!r} reached the terminal" if bad else ""


def _left_alone(path: str, text: str) -> Callable[[Run], str]:
    def check(r: Run) -> str:
        got = Path(path).read_bytes() if os.path.exists(path) else None
        return "" if got == text.encode() else f"lost: {path} now holds {got[:40]!r}"

    return check


def _no_partial(folder: str) -> Callable[[Run], str]:
    def check(r: Run) -> str:
        left = [p.name for p in Path(folder).iterdir() if p.name.startswith((".", "full"))]
        return f"lost: partial files left behind: {left}" if left else ""

    return check


# ---- the cases -------------------------------------------------------------------------------

ROOT = os.geteuid() == 0
BUNDLE_CASES: list[tuple[str, str, str]] = [
    ("truncated-gzip", "truncated.tar.gz", r"bundle .*(truncated|corrupt)"),
    ("corrupt-gzip", "corrupt.tar.gz", r"bundle .*(truncated|corrupt|not a)"),
    ("not-an-archive", "text.tar.gz", r"bundle .*not a (tar|gzip)"),
    ("gzip-not-tar", "gz-not-tar.tar.gz", r"bundle .*not a tar"),
    ("manifest-a-list", "manifest-list.tar.gz", r"manifest\.json .*(object|list)"),
    ("targets-a-dict", "targets-dict.tar.gz", r"manifest\.json .*targets"),
    ("target-a-string", "entry-str.tar.gz", r"manifest\.json .*target"),
    ("detail-a-list", "detail-list.tar.gz", r"manifest\.json .*detail"),
    ("probe-a-list", "probe-list.tar.gz", r"probe\.json .*(object|list)"),
    ("deep-manifest", "deep-manifest.tar.gz", r"manifest\.json .*nest"),
    ("deep-probe", "deep-probe.tar.gz", r"probe\.json .*nest"),
    ("a-directory", "adir", r"is a directory"),
    ("a-fifo", "fifo", r"FIFO|named pipe"),
    ("a-socket", "sock", r"socket"),
    ("dev-zero", "/dev/zero", r"device"),
]


@pytest.mark.parametrize(("cid", "name", "says"), BUNDLE_CASES, ids=[c[0] for c in BUNDLE_CASES])
def test_bad_bundle(lab: Lab, cid: str, name: str, says: str) -> None:
    path = name if name.startswith("/") else lab.p(name)
    judge(f"bundle/{cid}", epd("diagnose", "--bundle", path), Expect(says=says, max_s=15))


def test_bundle_empty_path(lab: Lab) -> None:
    judge("bundle/empty-path", epd("diagnose", "--bundle", ""), Expect(says=r"empty"))


def test_bundle_unreadable(lab: Lab) -> None:
    r = epd("diagnose", "--bundle", lab.p("secret.log"), unprivileged=ROOT)
    judge("bundle/unreadable", r, Expect(says=r"permission denied|not readable"))


@pytest.mark.parametrize("name", ["sparse.tar", "bomb.tar.gz"])
def test_bundle_bombs_are_capped(lab: Lab, name: str) -> None:
    if not os.path.exists(lab.p(name)):
        pytest.skip("no GNU tar to make a sparse archive")
    r = epd("diagnose", "--bundle", lab.p(name), timeout=30)
    judge(f"bundle/{name}", r, Expect(says=r"larger than|too large", max_rss_mb=400, max_s=25))


def test_bundle_markup_and_escape_codes_are_shown_as_text(lab: Lab) -> None:
    b = lab.p("markup.tar.gz")
    judge_all(
        [
            (
                "bundle/markup",
                lambda: epd("diagnose", "--bundle", b, env={"FORCE_COLOR": "1"}),
                Expect(code=1, out_says=r"\[/\]", check=_no_escape),
            ),
            (
                "bundle/markup-verbose",
                lambda: epd("diagnose", "-v", "--bundle", b, env={"FORCE_COLOR": "1"}),
                Expect(code=1, check=_no_escape),
            ),
            (
                "bundle/markup-md",
                lambda: epd("diagnose", "--markdown", "--bundle", b),
                Expect(code=1, check=_no_escape),
            ),
        ]
    )


def test_a_bracket_folder_is_a_path_not_markup(lab: Lab) -> None:
    bracket = str(lab.d / "[" / "]")
    color = {"FORCE_COLOR": "1"}
    judge_all(
        [
            (
                "markup/bracket-bundle",
                lambda: epd("diagnose", "--bundle", f"{bracket}/b.tar.gz", env=color),
                Expect(code=1),
            ),
            (
                "markup/bracket-log",
                lambda: epd("logs", f"{bracket}/x.log", env=color),
                Expect(code=0),
            ),
            (
                "markup/bracket-root",
                lambda: epd("diagnose", "--root", bracket, env=color, timeout=60),
                Expect(code=(0, 1)),  # findings or none: it ran, on a path holding "[/]"
            ),
        ]
    )


NOT_FILES = [
    ("fifo", r"FIFO|named pipe"),
    ("sock", r"socket"),
    ("adir", r"is a directory"),
    ("/dev/zero", r"device"),
    ("trunc.log.gz", r"truncated|corrupt|end of"),
]
LOG_COMMANDS = {
    "logs": lambda p: ["logs", p],
    "logs-follow": lambda p: ["logs", "-f", "--timeout", "3", p],
    "diagnose-log": lambda p: ["diagnose", "--bundle", str(BUNDLE), "--log", p],
    "collect-log": lambda p: [
        *("collect", "--bundle", str(BUNDLE), "--log", p),
        *("-o", "/tmp/epdoctor-hostile-never-written.tar.gz", "--force"),
    ],
}


@pytest.mark.parametrize("cmd", list(LOG_COMMANDS))
@pytest.mark.parametrize(("name", "says"), NOT_FILES, ids=[n for n, _ in NOT_FILES])
def test_a_log_that_is_not_a_file(lab: Lab, cmd: str, name: str, says: str) -> None:
    if name.endswith(".gz") and cmd in ("collect-log", "logs-follow"):
        pytest.skip("collect stores a .gz as it is; a follow reads what it can")
    path = name if name.startswith("/") else lab.p(name)
    r = epd(*LOG_COMMANDS[cmd](path), timeout=15)
    judge(f"log/{cmd}/{name}", r, Expect(says=says, max_s=12))


@pytest.mark.parametrize("cmd", list(LOG_COMMANDS))
def test_an_unreadable_log(lab: Lab, cmd: str) -> None:
    argv = LOG_COMMANDS[cmd](lab.p("secret.log"))
    r = epd(*argv, unprivileged=ROOT, timeout=15)
    judge(f"log/{cmd}/unreadable", r, Expect(says=r"permission denied|not readable"))


def test_logs_from_stdin_still_work(lab: Lab) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "epdoctor", "logs", "-"],
        input=lab.good and (lab.d / "ok.log").read_bytes(),
        capture_output=True,
        cwd=REPO,
        timeout=20,
    )
    assert p.returncode == 0, p.stderr


# ---- lint --------------------------------------------------------------------------------------


def test_lint_alias_bomb_is_skipped_in_bounded_time(lab: Lab) -> None:
    r = epd("lint", lab.p("recipe-bomb"), timeout=20)
    # one line on stderr names the file and why it was not read; nothing on stdout
    e = Expect(says=r"nothing to lint .*bomb\.yaml: not read .*alias", max_s=10)
    judge("lint/alias-bomb", r, Expect(**{**e.__dict__, "max_rss_mb": 300}))


def test_lint_lists_what_it_skipped(lab: Lab) -> None:
    r = epd("lint", lab.p("recipe-mixed"), timeout=20, unprivileged=ROOT)
    want = ["pipe.sh", "sock.sh", "blob.sh", "huge.env"] + (["locked.sh"] if ROOT else [])
    missing = [n for n in want if not re.search(rf"skipped: {re.escape(n)}\b", r.out)]
    judge(
        "lint/skipped-listed",
        r,
        Expect(
            code=0, check=lambda _: f"message: not listed as skipped: {missing}" if missing else ""
        ),
    )


@pytest.mark.parametrize(
    ("cid", "name", "says"),
    [
        ("fifo", "fifo", r"FIFO|named pipe"),
        ("dev-zero", "/dev/zero", r"device"),
        ("empty-folder", "recipe-empty", r"empty folder: nothing to lint"),
    ],
)
def test_lint_refuses_what_it_cannot_read(lab: Lab, cid: str, name: str, says: str) -> None:
    path = name if name.startswith("/") else lab.p(name)
    judge(f"lint/{cid}", epd("lint", path, timeout=15), Expect(says=says, max_s=10))


# ---- Kubernetes ------------------------------------------------------------------------------

KUBE_CASES = [
    ("html", "k-html", r"pod default/k-html: .*HTML"),
    ("truncated-json", "k-trunc", r"pod default/k-trunc: .*(truncated|not (valid )?JSON)"),
    ("wrong-shape", "k-shape", r"pod default/k-shape: .*(list|object)"),
    ("stalled-body", "k-stall", r"pod default/k-stall: .*(timed out|did not)"),
    ("exec-forbidden", "k-noexec", r"k-noexec: .*forbidden.*probe"),
    ("exec-dropped", "k-drop", r"k-drop: .*probe"),
]


@pytest.mark.parametrize(("cid", "pod", "says"), KUBE_CASES, ids=[c[0] for c in KUBE_CASES])
def test_hostile_kube_api(lab: Lab, cid: str, pod: str, says: str) -> None:
    if lab.kubeconfig is None:
        pytest.skip("no kmock")
    argv = ["diagnose", "--pod", pod, "--kubeconfig", str(lab.kubeconfig)]
    r = epd(*argv, "--request-timeout", "2", "--timeout", "20", timeout=30)
    judge(f"kube/{cid}", r, Expect(says=says, max_s=15))


def test_hanging_api_server_is_bounded_by_request_timeout(lab: Lab) -> None:
    argv = ["diagnose", "--pod", "x", "--kubeconfig", str(lab.silent_kubeconfig)]
    r = epd(*argv, "--request-timeout", "1.5", timeout=30)
    judge("kube/hanging-server", r, Expect(says=r"pod default/x: .*timed out", max_s=6))


@pytest.mark.parametrize(("cid", "pod", "says"), KUBE_CASES[:4], ids=[c[0] for c in KUBE_CASES[:4]])
def test_logs_pod_against_a_hostile_api(lab: Lab, cid: str, pod: str, says: str) -> None:
    if lab.kubeconfig is None:
        pytest.skip("no kmock")
    argv = ["logs", "--pod", pod, "--kubeconfig", str(lab.kubeconfig), "--request-timeout", "2"]
    r = epd(*argv, timeout=30)
    judge(f"kube/logs-{cid}", r, Expect(says=r"k-" + pod[2:] + r".*", max_s=12))


# ---- SSH -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["silent", "garbage"])
def test_ssh_host_that_is_not_sshd(lab: Lab, kind: str) -> None:
    port = lab.silent_port if kind == "silent" else lab.garbage_port
    argv = ["diagnose", "--ssh", f"u@127.0.0.1:{port}", "--connect-timeout", "1.5"]
    argv += ["--known-hosts", lab.p("known_hosts")]
    r = epd(*argv, timeout=30)
    # The reason is the target's line of the report (stdout); stderr stays clean.
    says = r"banner|not an SSH server|protocol"
    e = Expect(
        out_says=says, max_s=15, check=lambda r: f"stderr: {r.err[-200:]!r}" if r.err else ""
    )
    judge(f"ssh/{kind}", r, e)


def test_ssh_log_that_is_not_a_file(lab: Lab, ssh_lab) -> None:
    h = ssh_lab.start_host("hostile-logs")
    base = ["logs", "-i", str(ssh_lab.key), "--known-hosts", str(ssh_lab.known_hosts)]
    judge_all(
        [
            (
                f"ssh/log-{name}",
                lambda path=path: epd(*base, "--ssh", f"{h.spec}:{path}", timeout=30),
                Expect(says=says, max_s=20),
            )
            for name, path, says in [
                ("dir", "/etc", r"directory|not a regular file"),
                ("dev-zero", "/dev/zero", r"device|not a regular file"),
            ]
        ]
    )


# ---- output locations --------------------------------------------------------------------------


def test_output_locations(lab: Lab) -> None:
    col = ["collect", "--bundle", str(BUNDLE), "-o"]
    cases = [
        (
            "collect/missing-dir",
            [*col, lab.p("no/such/dir/b.tar.gz")],
            {},
            r"does not exist|No such",
        ),
        ("collect/unwritable", [*col, "/proc/epdoctor-b.tar.gz"], {}, r"cannot write"),
        ("collect/taken", [*col, lab.p("taken.tar.gz")], {}, r"exists.*--force"),
        ("collect/symlink", [*col, lab.p("out-link.tar.gz"), "--force"], {}, r"symbolic link"),
        (
            "collect/full",
            [*col, lab.p("full.tar.gz")],
            {"fsize": 4096},
            r"cannot write|too large|space",
        ),
        ("collect/a-device", [*col, "/dev/full", "--force"], {}, r"not a regular file"),
    ]
    plan = ["plan", "--no-input", "-o"]
    cases += [
        ("plan/unwritable", [*plan, "/proc/epdoctor-plan"], {}, r"cannot write"),
        ("plan/taken", [*plan, lab.p("plan-taken")], {}, r"exists.*--force"),
        ("plan/symlink", [*plan, lab.p("plan-link"), "--force"], {}, r"symbolic link"),
        ("plan/a-file", [*plan, lab.p("ok.log")], {}, r"not a directory|exists"),
        ("plan/full", [*plan, lab.p("plan-full")], {"fsize": 64}, r"cannot write|too large|space"),
    ]
    failed = []
    for cid, argv, kw, says in cases:
        r = epd(*argv, timeout=20, **kw)
        check = None
        if cid == "collect/taken":
            check = _left_alone(lab.p("taken.tar.gz"), "keep me\n")
        elif cid.endswith("symlink"):
            check = _left_alone(lab.p("elsewhere.json"), "not yours\n")
        elif cid == "collect/full":
            check = _no_partial(str(lab.d))
        try:
            judge(f"output/{cid}", r, Expect(says=says, check=check))
        except AssertionError as exc:
            failed.append(f"{cid}: {exc}")
    assert not failed, "\n".join(failed)
