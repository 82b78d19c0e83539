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
