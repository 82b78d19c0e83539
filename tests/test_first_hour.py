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


# --- the README's two set-up commands --------------------------------------------------------


def readme_setup_commands() -> list[str]:
    """The sh blocks of README.md's "Set up" section, in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```sh\n(.*?)```", section, re.S)]


def system_python() -> str | None:
    """The distribution's python3 (Debian/Ubuntu's is externally managed), else PATH's."""
    return "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else shutil.which("python3")


def venv_unavailable(python: str) -> str | None:
    probe = subprocess.run(
        [python, "-c", "import venv, ensurepip"], capture_output=True, text=True, timeout=60
    )
    if probe.returncode != 0:
        return (
            f"`{python} -m venv` is unavailable here (install python3-venv): {probe.stderr[-200:]}"
        )
    return None


def clean_env(bin_dir: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "NO_COLOR")
    }
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def test_readme_set_up_is_two_commands_and_ci_runs_the_same_tests():
    install, tests = readme_setup_commands()
    assert install.count("\n") == 0 and tests.count("\n") == 0, "one line each"
    assert install.startswith("python3 -m venv .venv && ") and "epdoctor diagnose" in install
    pip, pytest_cmd = (part.strip() for part in tests.split("&&"))
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    # CI's venv is activated: the same commands without the .venv/bin/ prefix.
    extra = pip.removeprefix(".venv/bin/pip install ")
    assert extra == "'.[test]'", pip
    assert any(re.fullmatch(rf"pip install (-q )?{re.escape(extra)}", line) for line in ci)
    assert pytest_cmd.removeprefix(".venv/bin/") in [line.strip() for line in ci]


def test_readme_names_the_files_whose_tests_skip_without_torch():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Set up\n", 1)[1].split("\n## ", 1)[0]
    skipping = {
        p.name
        for p in (REPO / "tests").glob("test_*.py")
        if re.search(r"^@needs_torch$", p.read_text(encoding="utf-8"), re.M)
    }
    assert skipping, "the kernel-test tests are marked needs_torch"
    named = set(re.findall(r"tests/(test_\w+\.py)", section))
    assert named == skipping


@pytest.mark.slow
def test_readme_commands_work_in_a_fresh_clone_with_the_system_python(tmp_path):
    """Both README lines, literally, in a `git clone` of this repository, with the python3 of
    the distribution (on Debian/Ubuntu: PEP 668 externally managed). Needs PyPI (pip's cache
    helps); the second line runs one test file (PYTEST_ADDOPTS), not the whole suite again."""
    python = system_python()
    if python is None:
        pytest.skip("no python3 on this machine")
    if why := venv_unavailable(python):
        pytest.skip(why)
    clone = tmp_path / "epdoctor"
    subprocess.run(["git", "clone", "-q", str(REPO), str(clone)], check=True, timeout=120)
    bin_dir = tmp_path / "bin"  # `python3` in the commands is the system python
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(python)
    env = clean_env(bin_dir)
    install, tests = readme_setup_commands()

    first = subprocess.run(
        ["bash", "-c", install], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert first.returncode in (0, 1), first.stdout[-2000:] + first.stderr[-3000:]
    assert re.match(r"exit [01]: ", last_line(first.stdout)), first.stdout[-2000:]
    assert (clone / ".venv" / "bin" / "epdoctor").exists()

    env["PYTEST_ADDOPTS"] = "tests/test_docs.py -p no:cacheprovider"
    second = subprocess.run(
        ["bash", "-c", tests], cwd=clone, env=env, capture_output=True, text=True, timeout=600
    )
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    assert re.search(r"\d+ passed", second.stdout)


# --- a node that cannot install anything -----------------------------------------------------


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A python with nothing installed: a venv of the system python without pip."""
    python = system_python()
    if python is None:
        pytest.skip("no python3 on this machine")
    where = tmp_path_factory.mktemp("bare")
    made = subprocess.run(
        [python, "-m", "venv", "--without-pip", str(where)], capture_output=True, text=True
    )
    if made.returncode != 0:
        pytest.skip(f"`{python} -m venv` is unavailable here: {made.stderr[-200:]}")
    return str(where / "bin" / "python")


def test_python_m_epdoctor_without_dependencies_says_what_is_missing(bare_python):
    r = subprocess.run(
        [bare_python, "-m", "epdoctor", "diagnose"],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=60,
    )
    assert r.returncode == 2
    assert "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert "\n" not in line and "No module named" in line
    assert "probes/node_probe.py > node.json" in line and "--bundle node.json" in line


@needs_gcc
def test_the_probe_on_a_bare_python_replays_where_epdoctor_is_installed(
    bare_python, node, tmp_path
):
    """getting-started: `python3 probes/node_probe.py > node.json` on the node, then
    `epdoctor diagnose --bundle node.json` elsewhere gives the node's own findings."""
    node.gdrdrv("2.4")
    probe = subprocess.run(
        [bare_python, "probes/node_probe.py", "--root", str(node.root)],
        capture_output=True,
        cwd=REPO,
        env={**os.environ, **node.env},
        timeout=60,
    )
    assert probe.returncode == 0, probe.stderr
    doc = tmp_path / "node.json"
    doc.write_bytes(probe.stdout)

    replay = epdoctor("diagnose", "--bundle", str(doc), "--json")
    live = epdoctor("diagnose", "--root", str(node.root), "--json", env=node.env)
    assert replay.returncode == live.returncode == 1, replay.stderr

    def findings(out: str) -> list[tuple[str, str]]:
        import json

        return sorted((f["code"], f["severity"]) for f in json.loads(out)["findings"])

    assert findings(replay.stdout) == findings(live.stdout)
    assert ("H111", "fail") in findings(replay.stdout)
    text = epdoctor("diagnose", "--bundle", str(doc))
    assert "(bundle:local)" in text.stdout and "gdrdrv 2.4" in text.stdout


def test_bundle_refuses_json_that_is_not_probe_output(tmp_path):
    other = tmp_path / "report.json"
    other.write_text('{"schema": "epdoctor.report/1"}')
    r = epdoctor("diagnose", "--bundle", str(other))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "neither node probe output" in r.stderr
