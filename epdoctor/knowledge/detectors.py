"""Where a trap's detectors live: file and line, read from the package's source.

A trap's TOML names its detectors as ``module:function`` (the registry's ``Detector.ref``).
``epdoctor explain`` shows them as ruff's ``rule`` command shows a rule's source: this module
finds each function's ``def`` line and its registering decorator by parsing the module's
source, without importing it (explain stays fast and loads no detector's dependencies).
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent.parent  # .../epdoctor


@dataclass(frozen=True)
class Located:
    ref: str  # module:function, as the TOML names it
    path: str  # relative to the folder that holds the package: epdoctor/checks/nccl.py
    line: int | None  # the def line; None when the source or the function is not there
    domain: str  # from its decorator: @check (node unless domain= says) or @detector(domain=)

    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else f"{self.path} (not found)"

    def to_json(self) -> dict[str, object]:
        return {"function": self.ref, "path": self.path, "line": self.line, "domain": self.domain}


def locate(ref: str) -> Located:
    module, _, qualname = ref.partition(":")
    parts = module.split(".")[1:]  # below "epdoctor"
    file = _PACKAGE.joinpath(*parts).with_suffix(".py")
    if not file.is_file():
        file = _PACKAGE.joinpath(*parts, "__init__.py")
    rel = Path(_PACKAGE.name, file.relative_to(_PACKAGE)).as_posix()
    node = _find(_tree(file), qualname.split(".")) if file.is_file() else None
    if node is None:
        return Located(ref, rel, None, "")
    return Located(ref, rel, node.lineno, _domain(node))


@functools.cache
def _tree(file: Path) -> ast.Module:
    return ast.parse(file.read_text(encoding="utf-8"))


def _find(scope: ast.AST, names: list[str]) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for node in getattr(scope, "body", []):
        if getattr(node, "name", None) != names[0]:
            continue
        if len(names) == 1 and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
        if len(names) > 1 and isinstance(node, ast.ClassDef):
            return _find(node, names[1:])
    return None


def _domain(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    for deco in fn.decorator_list:
        if not isinstance(deco, ast.Call):
            continue
        name = getattr(deco.func, "id", getattr(deco.func, "attr", ""))
        if name not in ("check", "detector"):
            continue
        for kw in deco.keywords:
            if kw.arg == "domain" and isinstance(kw.value, ast.Constant):
                return str(kw.value.value)
        return "node" if name == "check" else ""
    return ""
