"""`python3 -m epdoctor` from a checkout: one line, not a traceback, when a dependency is missing."""

import sys

# What pyproject.toml's dependencies install, by import name.
DEPENDENCIES = {
    "rich", "re2", "packaging", "tomli", "textual", "questionary", "paramiko", "kubernetes",
    "yaml", "bashlex",
}  # fmt: skip

try:
    from epdoctor.cli import main

    code = main()
except ModuleNotFoundError as exc:
    if (exc.name or "").split(".")[0] not in DEPENDENCIES:
        raise
    print(
        f"epdoctor: {exc} (a dependency of epdoctor is not installed). Install epdoctor "
        "(README: Set up), or run `python3 probes/node_probe.py > node.json` here, needing "
        "nothing but python3, and `epdoctor diagnose --bundle node.json` where epdoctor is "
        "installed (docs/getting-started.md).",
        file=sys.stderr,
    )
    code = 2
raise SystemExit(code)
