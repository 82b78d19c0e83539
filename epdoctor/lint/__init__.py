"""`epdoctor lint`: the traps a reviewer catches by reading a recipe folder.

One module per file kind (dockerfile.py, shell.py, envfile.py, manifest.py);
each registers its linter with ``register_linter(kind, matcher, fn)`` from
base.py. Codes are trap codes from the catalogue, so `epdoctor explain CODE`
explains a lint finding exactly as it explains a diagnose finding.
"""

from epdoctor.lint.base import (
    LINTERS,
    LintContext,
    LintFinding,
    LintReport,
    RecipeFile,
    Unparseable,
    finding,
    lint_paths,
    linter,
    load_linters,
    register_linter,
)

__all__ = [
    "LINTERS",
    "LintContext",
    "LintFinding",
    "LintReport",
    "RecipeFile",
    "Unparseable",
    "finding",
    "lint_paths",
    "linter",
    "load_linters",
    "register_linter",
]
