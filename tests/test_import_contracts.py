"""The import contracts, checked on the layout the wheel installs.

From a checkout, probes/ and screens/ sit beside the package (epdoctor/__init__.py adds the
checkout root to its path at run time), so the static graph of `lint-imports` run there holds
no epdoctor.screens module and a contract about the app holds vacuously. Here the tree is laid
out as pyproject.toml's force-include installs it (probes/ and screens/ inside epdoctor/) and
lint-imports runs on that copy with the repository's configuration: the contracts hold, and a
screen that imports a command breaks the app's contract.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LINT = Path(sys.executable).parent / "lint-imports"
APP_CONTRACT = "The terminal app does not drive the command line"
FLAGS_CONTRACT = "Only the command line and the flags module parse flags"

pytestmark = pytest.mark.skipif(not LINT.exists(), reason="import-linter is not installed")


def installed_copy(dest: Path) -> Path:
    """The package as the wheel lays it out: epdoctor/ with probes/ and screens/ inside."""
    ignore = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "epdoctor", dest / "epdoctor", ignore=ignore)
    for part in ("probes", "screens"):
        shutil.copytree(ROOT / part, dest / "epdoctor" / part, ignore=ignore)
    return dest


def lint(site: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(site))
    return subprocess.run(
        [str(LINT), str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=site,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.slow
def test_the_contracts_hold_on_the_installed_layout_and_see_the_app(tmp_path):
    site = installed_copy(tmp_path)
    got = lint(site)
    assert got.returncode == 0, got.stdout + got.stderr
    assert f"{APP_CONTRACT} KEPT" in got.stdout
    # the app is in the graph this time: its modules were analyzed
    screens = len(list((site / "epdoctor" / "screens").glob("*.py")))
    probes = len(list((site / "epdoctor" / "probes").glob("*.py")))
    assert screens > 5 and probes > 1
    total = int(got.stdout.split("Analyzed ", 1)[1].split(" files", 1)[0])
    here = len(list((ROOT / "epdoctor").rglob("*.py")))
    assert total >= here + screens + probes, got.stdout


@pytest.mark.slow
def test_a_screen_that_imports_a_command_breaks_the_contract(tmp_path):
    site = installed_copy(tmp_path)
    launch = site / "epdoctor" / "screens" / "launch.py"
    launch.write_text(launch.read_text() + "\nfrom epdoctor.commands import run  # noqa\n")
    (site / "epdoctor" / "screens" / "flags.py").write_text("import argparse  # noqa\n")
    got = lint(site)
    assert got.returncode != 0
    assert f"{APP_CONTRACT} BROKEN" in got.stdout and f"{FLAGS_CONTRACT} BROKEN" in got.stdout
    assert "epdoctor.screens.launch -> epdoctor.commands.run" in got.stdout
    assert "epdoctor.screens.flags -> argparse" in got.stdout


@pytest.mark.slow
def test_probes_stand_alone_and_the_front_ends_sit_side_by_side(tmp_path):
    site = installed_copy(tmp_path)
    got = lint(site)
    for name in ("The probes stand alone", "The probes are read as data, never imported"):
        assert f"{name} KEPT" in got.stdout, got.stdout
    assert "Core layers point one way KEPT (1 ignored import)" in got.stdout
    pkg = site / "epdoctor"
    # a probe that leans on the package, the package importing a probe, a command that
    # reaches into a screen outside the one deferred `epdoctor tui` import
    probe = pkg / "probes" / "hw_counters.py"
    probe.write_text(probe.read_text() + "\nfrom epdoctor.model import Status  # noqa\n")
    (pkg / "launch" / "probe_import.py").write_text(
        "from epdoctor.probes import ep_routing  # noqa\n"
    )
    (pkg / "commands" / "peek.py").write_text("from epdoctor.screens import keyhelp  # noqa\n")
    got = lint(site)
    assert got.returncode != 0
    assert "The probes stand alone BROKEN" in got.stdout
    assert "The probes are read as data, never imported BROKEN" in got.stdout
    assert "Core layers point one way BROKEN" in got.stdout
    assert "epdoctor.commands.peek -> epdoctor.screens.keyhelp" in got.stdout
