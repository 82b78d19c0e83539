"""`epdoctor tui` in a real terminal (tmux): a bundle plus a real loopback sshd host.

The app runs as a user runs it (`python -m epdoctor tui FLAGS` on a tmux pty), is driven
with send-keys and read back with capture-pane: the screen a person over SSH would see.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = str(ROOT / "tests" / "fixtures" / "tui" / "three-nodes.tar.gz")

pytestmark = [
    pytest.mark.sshd,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed"),
]


class Tmux:
    def __init__(self, name: str, cmd: str, width: int = 120, height: int = 32) -> None:
        self.name = name
        env = {**os.environ, "PYTHONPATH": str(ROOT), "TERM": "xterm-256color"}
        subprocess.run(["tmux", "kill-session", "-t", name], capture_output=True)
        subprocess.run(
            ["tmux", "new-session", "-d", "-s", name, "-x", str(width), "-y", str(height), cmd],
            check=True,
            env=env,
            cwd=ROOT,
        )

    def screen(self) -> str:
        p = subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True
        )
        return p.stdout

    def keys(self, *keys: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)

    def wait(self, *texts: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if all(t in screen for t in texts):
                return screen
            time.sleep(0.2)
        raise AssertionError(f"{texts} not on the screen:\n{screen}")

    def alive(self) -> bool:
        return (
            subprocess.run(["tmux", "has-session", "-t", self.name], capture_output=True).returncode
            == 0
        )

    def kill(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], capture_output=True)


def test_tui_in_tmux_against_a_bundle_and_a_real_sshd_host(ssh_lab, tmp_path):
    host = ssh_lab.start_host("tui-ssh")
    flags = [
        "--bundle",
        BUNDLE,
        *ssh_lab.cli_args(host.spec),
        "--remote-python",
        "/usr/bin/python3",
    ]
    done = tmp_path / "exit-code"
    cmd = (
        f"{shlex.quote(sys.executable)} -m epdoctor tui {shlex.join(flags)}; "
        f"echo $? > {shlex.quote(str(done))}"
    )
    t = Tmux("epdoctor-tui-test", cmd)
    try:
        # the header names the targets; the bundle's nodes and the real SSH host are diagnosed
        screen = t.wait("4 targets", "p5en-b", "127.0.0.1", "failing finding", timeout=90)
        assert "≠2.4" in screen, screen  # the drifted gdrdrv is marked
        assert "FAIL (" in screen and "H111" in screen
        # traps screen, search with the keyboard
        t.keys("F3")
        t.wait("traps · Enter explains")
        time.sleep(0.5)  # a person's pace: the screen settles its focus first
        t.keys("/")
        time.sleep(0.3)
        t.keys("-l", "gdrdrv")
        t.wait("matching traps")
        t.keys("Enter")
        screen = t.wait("H113")
        assert "H111" in screen and "H112" in screen
        # Enter explains the highlighted trap; Escape comes back
        time.sleep(0.3)
        t.keys("Enter")
        screen = t.wait("Symptom", "Why", "Fix")
        t.keys("Escape")
        t.wait("Enter explains")
        # the tour shows the first node's live facts for the gdrcopy layer
        t.keys("F6")
        t.wait("GPU and driver")
        time.sleep(0.5)
        t.keys("n")
        screen = t.wait("gdrdrv and GDRCopy", "FAIL H111 on p5en-b")
        t.keys("C-q")
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and not done.exists():
            time.sleep(0.1)
        assert done.read_text().strip() == "0"
    finally:
        t.kill()
