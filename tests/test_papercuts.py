"""What a user hits in the first hour, each fixed: a mistyped flag gets a "did you mean", kubectl's
`-o json|yaml|wide` is understood, every flag has help, `explain` lists every code near what was
typed, the plan wraps at words, Ctrl-C in the plan's questions says one line."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from epdoctor.cli import build_parser

REPO = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_a_mistyped_flag_gets_the_closest_one():
    r = cli("diagnose", "--jsno")
    assert r.returncode == 2
    assert "unrecognized arguments: --jsno (did you mean --json?)" in r.stderr
    r = cli("logs", "--folow", "x.log")
    assert "(did you mean --follow?)" in r.stderr


@pytest.mark.parametrize(
    "args,check",
    [
        (("traps", "-o", "json"), lambda r: json.loads(r.stdout)[0]["code"]),
        (("explain", "H101", "-ojson"), lambda r: json.loads(r.stdout)["code"] == "H101"),
        (("traps", "--output=json"), lambda r: json.loads(r.stdout)),
    ],
)
def test_o_json_as_kubectl_users_type_it(args, check):
    r = cli(*args)
    assert r.returncode == 0, r.stderr
    assert check(r)


def test_o_yaml_and_unknown_formats_say_what_works():
    r = cli("traps", "-o", "yaml")
    assert r.returncode == 2 and "epdoctor writes JSON" in r.stderr and "Traceback" not in r.stderr
    r = cli("traps", "-o", "wide")
    assert r.returncode == 2 and "traps takes -o json" in r.stderr
    # a command whose -o is its own keeps it: plan -o DIR
    assert any("-o" in a.option_strings for a in _sub("plan")._actions)


def _sub(name: str) -> argparse.ArgumentParser:
    p = build_parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


def test_every_flag_has_help_text():
    missing = []

    def walk(p: argparse.ArgumentParser, path: list[str]) -> None:
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for n, sp in a.choices.items():
                    walk(sp, [*path, n])
            elif a.option_strings and not a.help:
                missing.append(f"{' '.join(path)} {a.option_strings[0]}")

    walk(build_parser(), [])
    assert not missing, missing


def test_explain_lists_every_code_near_what_was_typed():
    r = cli("explain", "H1")
    assert r.returncode == 2
    assert "H127" in r.stderr and "H101" in r.stderr  # none cut off
    r = cli("explain", "H11")
    assert "codes starting H11: H111 H112 H113" in r.stderr


def test_plan_text_wraps_at_words_at_80_columns():
    from epdoctor.plan import PlanInput, make_plan
    from epdoctor.plan.text import render_text

    text = render_text(make_plan(PlanInput()), 79)
    prose = text.split("Env contract")[0]
    assert all(len(line) <= 79 for line in prose.splitlines()), prose
    words = set(render_text(make_plan(PlanInput())).split())
    assert set(prose.split()) <= words, "a word was cut"


def test_ctrl_c_in_the_plan_questions_is_one_line(capsys):
    from epdoctor.commands.plan import ask

    with create_pipe_input() as pipe:
        pipe.send_text("\x03")
        assert ask({}, input=pipe, output=DummyOutput()) is None
    out = capsys.readouterr()
    assert "Cancelled" not in out.out + out.err  # the command prints its own one line


def test_smoke_dry_run_contacts_no_server():
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    srv.settimeout(0.2)
    port = srv.getsockname()[1]
    hits: list[int] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except OSError:
                continue
            hits.append(1)
            conn.close()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        r = cli("run", "smoke", "--dry-run", "--url", f"http://127.0.0.1:{port}")
    finally:
        stop.set()
        t.join(2)
        srv.close()
    assert r.returncode == 0, r.stderr
    assert "dry run: nothing started" in r.stdout + r.stderr
    assert not hits, "the dry run connected to the server"


def test_kernel_test_dry_run_says_what_this_host_lacks(tmp_path):
    """A Python without torch, on a host without a GPU: the dry run says both, exits 0."""
    import shutil as sh

    if sh.which("nvidia-smi"):
        pytest.skip("this host has a GPU")
    bare = tmp_path / "python"
    bare.write_text("#!/bin/sh\nexit 1\n")  # a Python that finds no torch
    bare.chmod(0o755)
    r = cli("run", "kernel-test", "--dry-run", "--python", str(bare))
    assert r.returncode == 0, r.stderr
    out = " ".join((r.stdout + r.stderr).split())
    assert "dry run: nothing started" in out
    assert "no NVIDIA GPU on this host" in out and "has no torch" in out
