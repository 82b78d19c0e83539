"""A newcomer's first hour, as they meet it: the README's two set-up commands in a fresh clone
with the system python, the last line of the report saying what the exit status means, and
getting-started's way to diagnose a node that cannot install anything.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nodefs import FakeNode, have_gcc, p5en_node

REPO = Path(__file__).resolve().parent.parent
needs_gcc = pytest.mark.skipif(not have_gcc(), reason="gcc builds the test ELF libraries")


def epdoctor(*args: str, env: dict[str, str] | None = None, timeout: int = 120):
    full_env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=REPO,
        timeout=timeout,
    )


def last_line(out: str) -> str:
    return out.rstrip("\n").splitlines()[-1]


@pytest.fixture
def node(tmp_path) -> FakeNode:
    return p5en_node(tmp_path / "root")


# --- the report ends with what its exit status means ---------------------------------------


@needs_gcc
def test_a_report_with_failures_says_exit_1_means_failures(node):
    node.gdrdrv("2.4")
    r = epdoctor("diagnose", "--root", str(node.root), env=node.env)
    assert r.returncode == 1
    assert last_line(r.stdout) == (
        "exit 1: failures found (see above); 0 = none, 2 = could not check"
    )


@needs_gcc
def test_a_clean_report_says_exit_0_and_what_the_others_mean(node):
    node.gdrdrv("2.5")
    r = epdoctor("diagnose", "--root", str(node.root), env=node.env)
    assert r.returncode == 0, r.stdout
    assert last_line(r.stdout) == "exit 0: no failures; 1 = failures found, 2 = could not check"


@needs_gcc
def test_fail_on_warn_names_its_level_in_the_last_line(node):
    node.gdrdrv("2.5")
    r = epdoctor("diagnose", "--root", str(node.root), "--fail-on", "warn", env=node.env)
    assert r.returncode == 1
    assert last_line(r.stdout).startswith("exit 1: findings at warn or worse (see above)")


def test_an_unreachable_target_says_exit_2_means_could_not_check():
    r = epdoctor("diagnose", "--ssh", "nobody@127.0.0.1:1", "--timeout", "5")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "could not diagnose" in r.stdout
    assert last_line(r.stdout).startswith("exit 2: could not check (see above)")


@needs_gcc
def test_machine_readable_reports_carry_no_exit_line(node):
    for fmt in ("--json", "--markdown"):
        r = epdoctor("diagnose", "--root", str(node.root), fmt, env=node.env)
        assert "exit 0:" not in r.stdout and "exit 1:" not in r.stdout
