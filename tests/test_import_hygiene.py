"""The headless paths load no UI toolkit and no transport client (they must run on a Python
that has only rich and packaging, as on a GPU node that cannot install anything)."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("textual", "questionary", "paramiko", "kubernetes", "prompt_toolkit", "yaml")


def loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(' '.join(sorted(m.split('.')[0] for m in sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def test_cli_help_and_local_diagnose_imports_stay_light():
    mods = loaded_after(
        "from epdoctor import cli\n"
        "p = cli.build_parser()\n"
        "import epdoctor.diagnose, epdoctor.reports.text, epdoctor.reports.json_report, epdoctor.reports.markdown\n"
        "import epdoctor.bundle, epdoctor.targets.local, epdoctor.targets.replay\n"
        "from epdoctor.checks import load_all; load_all()\n"
    )
    assert not mods & set(HEAVY), mods & set(HEAVY)


def test_explain_imports_no_transport_or_ui():
    mods = loaded_after("from epdoctor import cli\ncli.main(['explain', 'H111'])")
    assert not mods & set(HEAVY), mods & set(HEAVY)


def _ran(argv: list[str]) -> set[str]:
    """The top-level modules loaded after `epdoctor ARGV` ran to its end (its output dropped)."""
    code = (
        "import contextlib, io\n"
        "from epdoctor import cli\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):\n"
        f"    cli.main({argv!r})\n"
    )
    return loaded_after(code)


def test_diagnose_logs_explain_and_lint_never_load_the_app_toolkits(tmp_path):
    from pathlib import Path

    fixtures = Path(__file__).parent / "fixtures"
    root = tmp_path / "root"
    root.mkdir()
    runs = {
        "diagnose": ["diagnose", "--json", "--root", str(root)],
        "diagnose --bundle": [
            "diagnose",
            "--bundle",
            str(fixtures / "h200-run" / "h200-bundle.tar.gz"),
        ],
        "logs": ["logs", str(fixtures / "logs" / "composed-16rank-mixed.log")],
        "explain": ["explain", "L101"],
        "traps": ["traps"],
        "lint": ["lint", str(fixtures / "lint" / "recipe-good")],
    }
    for name, argv in runs.items():
        ui = _ran(argv) & {"textual", "questionary", "prompt_toolkit"}
        assert not ui, f"epdoctor {name} loaded {sorted(ui)}"
