"""Placeholder images and registries left in a recipe: B415.

A template's `REPLACE_WITH_YOUR_REGISTRY/...`, `<your-registry>/...` or an account of
x's in an image reference pulls nothing: the pods sit in
ErrImagePull (or a build's FROM fails) long after the recipe looked finished. Read where
an image is named: a manifest's `image:` fields (any object: pods, StatefulSets, Jobs,
LeaderWorkerSets), a Dockerfile's FROM / `COPY --from=` and the defaults of its ARG / ENV
image and registry variables, and an env file's image and registry variables (not in an
env template such as `env_vars.example`, whose placeholders are there to be filled).

Codes this linter emits: B415.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from epdoctor.checks.registry import detector
from epdoctor.lint.base import LintContext, LintFinding, RecipeFile, finding, linter
from epdoctor.lint.dockerfile import TEMPLATE_SUFFIXES, is_dockerfile, parse
from epdoctor.lint.envfile import is_env_file, parse_env_file

CODE = "B415"
# What templates put where the operator's registry goes. A value with ${VAR} is chosen
# at build or apply time and is not a placeholder.
PLACEHOLDER = re.compile(
    r"replace[_-]?(with|me)|change[_-]?me|your[_-]?(own[_-]?)?(registry|account|repo|org|image)"
    r"|<[^<>\s]*>|\bx{12}\b|(^|/)(aws[_-]?)?account[_-]?id\b"
    r"|(^|[./])example\.(com|org|net)(/|:|$)",
    re.IGNORECASE,
)
# Variables that hold an image or a registry (IMAGE, BASE_IMAGE, ECR_REGISTRY, REPO, ...).
IMAGE_VAR = re.compile(r"(^|_)(IMAGE|IMG|REGISTRY|REPO|REPOSITORY|ECR)(_|$)", re.IGNORECASE)


def placeholder(value: str) -> str | None:
    """The placeholder part of an image reference or registry, or None."""
    if not isinstance(value, str) or "$" in value:
        return None
    m = PLACEHOLDER.search(value)
    return m.group(0) if m else None


def _message(what: str, value: str, part: str) -> str:
    return (
        f"{what} {value} is a placeholder ({part}): nothing can pull it; push the image to "
        "your registry and name it here"
    )


@detector("B415", domain="recipe")
def manifest_images(file: RecipeFile, docs: list[Any]) -> Iterator[LintFinding]:
    """B415 on the parsed documents of a manifest (the manifest linter parses once and calls
    this, so a file it cannot parse is skipped or reported once, by it)."""
    for doc in docs:
        for path, value in _images(doc.obj, ()):
            part = placeholder(value)
            if part:
                where = f"{doc.obj.get('kind', 'object')} image"
                yield finding(file, doc.line_of(path), CODE, _message(where, value, part))


def _images(obj: Any, path: tuple[Any, ...]) -> Iterator[tuple[tuple[Any, ...], str]]:
    """Every `image: <string>` field in a manifest object, with its path."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            if k == "image" and isinstance(v, str):
                yield (*path, k), v
            else:
                yield from _images(v, (*path, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _images(v, (*path, i))


@detector("B415", domain="recipe")
@linter("dockerfile", is_dockerfile)
def lint_dockerfile_images(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    for ins in parse(file.text):
        words = ins.args.split()
        if ins.keyword == "FROM":
            image = next((w for w in words if not w.startswith("--")), "")
            if part := placeholder(image):
                yield finding(file, ins.line, CODE, _message("base image", image, part))
        elif ins.keyword in ("COPY", "ADD"):
            for w in words:
                if w.startswith("--from=") and (part := placeholder(w[7:])):
                    yield finding(file, ins.line, CODE, _message("COPY --from", w[7:], part))
        elif ins.keyword in ("ARG", "ENV"):
            for w in words:
                name, eq, value = w.partition("=")
                value = value.strip("\"'")
                if eq and IMAGE_VAR.search(name) and (part := placeholder(value)):
                    yield finding(
                        file, ins.line, CODE, _message(f"{ins.keyword} {name}", value, part)
                    )


@detector("B415", domain="recipe")
@linter("envfile", is_env_file)
def lint_env_images(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    if file.name.lower().endswith(TEMPLATE_SUFFIXES):
        return  # env_vars.example and the like: a template is where the placeholder belongs
    for name, (value, line) in parse_env_file(file.text).items():
        if IMAGE_VAR.search(name) and (part := placeholder(value)):
            yield finding(file, line, CODE, _message(name, value, part))
