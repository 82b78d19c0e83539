"""The terminal app's own output under hostile names: a bundle whose target name carries OSC 0
(the window title), OSC 52 (the clipboard), OSC 8 (a hyperlink), CSI and rich markup. The app
runs as a user runs it (`python -m epdoctor tui --bundle B`) on a real pseudo-terminal; every
byte it writes is read back, and none of the attacker's sequences may be among them."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import sys
import time
from pathlib import Path

from test_inputs import BUNDLE, _manifest, _members, _tar_gz

REPO = Path(__file__).resolve().parents[2]
MARK = "PWN3D"
HOSTILE_NAME = (
    f"n0\x1b]0;{MARK}-title\x07\x1b]52;c;UFdOM0Q=\x07\x1b]8;;https://{MARK}.example/\x07x"
    f"\x1b]8;;\x07[/][link=https://{MARK}.example/]y[/link]\x1b[31m\x9d0;{MARK}\x9c"
)
# what the attacker's bytes look like on the wire: none may reach the terminal
FORBIDDEN = (b"\x1b]0;" + MARK.encode(), b"\x1b]52;", b"\x1b]8;;https://" + MARK.encode(),
             b"\x1b]8;id=", b"\x9d0;")  # fmt: skip


def hostile_bundle(tmp: Path) -> Path:
    good = _members(BUNDLE)
    entry = {"name": HOSTILE_NAME, "kind": "local", "dir": "targets/0", "detail": {}}
    path = tmp / "hostile-names.tar.gz"
    path.write_bytes(_tar_gz({"manifest.json": _manifest([entry]),
                              "targets/0/probe.json": good["targets/0/probe.json"]}))  # fmt: skip
    return path


def run_on_pty(argv: list[str], seconds: float, keys: list[tuple[float, bytes]]) -> bytes:
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app on the terminal
        env = {**os.environ, "TERM": "xterm-256color", "PYTHONPATH": str(REPO), "COLUMNS": "120",
               "LINES": "32"}  # fmt: skip
        os.chdir(REPO)
        os.execve(sys.executable, [sys.executable, "-m", "epdoctor", *argv], env)
    out = bytearray()
    t0 = time.monotonic()
    pending = sorted(keys)
    try:
        while time.monotonic() - t0 < seconds:
            while pending and time.monotonic() - t0 >= pending[0][0]:
                os.write(fd, pending.pop(0)[1])
            r, _, _ = select.select([fd], [], [], 0.1)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                out += chunk
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        os.close(fd)
    return bytes(out)


def test_a_hostile_target_name_never_reaches_the_terminal_raw(tmp_path):
    bundle = hostile_bundle(tmp_path)
    out = run_on_pty(["tui", "--bundle", str(bundle)], 25, [(18.0, b"q")])
    assert b"n0" in out, out[-400:]  # the app drew the target
    leaked = [f for f in FORBIDDEN if f in out]
    assert not leaked, leaked
