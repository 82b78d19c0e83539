"""Kubernetes manifests: the manifest rules (checks/kube_rules.py) and the env contract.

The rules are the same functions `epdoctor diagnose --pod` applies to the live
objects; this module only turns a YAML file into API-shaped objects, keeps the
line of every field so a finding points at it, and collects the comments of
each document (some rules are about a note that is missing).

Codes this linter emits: K201 headless Service publishing HTTP on workers,
K202 rendezvous Service without publishNotReadyAddresses, K203 hugepages
without a pre-allocation note, K204 privileged plus IPC_LOCK, K205 large
emptyDir on node ephemeral storage, K206 mutable tag under IfNotPresent, K207
EFA/GPU requests against the instance, K208 self-matching pgrep probes, K209
QoS not Guaranteed; plus the env contract's own codes on container env, and B415
(placeholder images, epdoctor/lint/placeholder.py) on every `image:` field.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from epdoctor.checks import kube_rules
from epdoctor.lint.base import (
    LintContext,
    LintFinding,
    RecipeFile,
    Unparseable,
    finding,
    is_yaml,
    linter,
)
from epdoctor.lint.envfile import REPORTED, is_contract
from epdoctor.lint.placeholder import manifest_images

CODES = ("K201", "K202", "K203", "K204", "K205", "K206", "K207", "K208", "K209")
_KIND = re.compile(r"^kind:\s*\S", re.M)
_API = re.compile(r"^apiVersion:\s*\S", re.M)
_COMMENT = re.compile(r"(?:^|\s)#(.*)$")


def is_manifest(path: Path, head: str) -> bool:
    return is_yaml(path, head) and bool(_KIND.search(head)) and bool(_API.search(head))


@dataclass
class Document:
    obj: dict[str, Any]
    lines: dict[tuple[Any, ...], int] = field(default_factory=dict)  # field path -> 1-based line
    first: int = 1
    last: int = 1

    def line_of(self, path: tuple[Any, ...]) -> int:
        while path and path not in self.lines:
            path = path[:-1]
        return self.lines.get(path, self.first)


MAX_NODES = 100_000  # nodes built per file, aliases expanded: a real manifest has a few thousand
MAX_DEPTH = 100


class TooBig(Unparseable):
    """A YAML document whose aliases (or nesting) expand past the limits: an alias bomb."""


def parse_documents(text: str) -> list[Document]:
    """Every mapping document in a YAML stream, with the line of each field.

    YAML's aliases let a few hundred bytes name billions of nodes; composing keeps them
    shared, and building counts every node it expands against MAX_NODES."""
    import yaml

    docs: list[Document] = []
    budget = [MAX_NODES]
    for node in yaml.compose_all(text, Loader=yaml.SafeLoader):
        if not isinstance(node, yaml.MappingNode):
            continue
        lines: dict[tuple[Any, ...], int] = {}
        obj = _build(node, (), lines, budget)
        if isinstance(obj, dict) and obj.get("kind"):
            docs.append(Document(obj, lines, node.start_mark.line + 1, node.end_mark.line + 1))
    return docs


def _build(
    node: Any, path: tuple[Any, ...], lines: dict[tuple[Any, ...], int], budget: list[int]
) -> Any:
    import yaml

    budget[0] -= 1
    if budget[0] < 0:
        raise TooBig(f"YAML aliases expand beyond {MAX_NODES} nodes (an alias bomb?)")
    if len(path) > MAX_DEPTH:
        raise TooBig(f"YAML nested deeper than {MAX_DEPTH} levels")
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k, v in node.value:
            key = str(k.value)
            lines[(*path, key)] = k.start_mark.line + 1
            out[key] = _build(v, (*path, key), lines, budget)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_build(v, (*path, i), lines, budget) for i, v in enumerate(node.value)]
    return _scalar_loader().construct_object(node)  # ints, bools, nulls as YAML resolves them


@functools.cache
def _scalar_loader() -> Any:
    import yaml

    return yaml.SafeLoader("")


def _notes(text_lines: list[str], docs: list[Document]) -> list[str]:
    """Comment text for each document: from the end of the previous one to its own end."""
    out, start = [], 0
    for d in docs:
        chunk = text_lines[start : d.last]
        out.append(" ".join(m.group(1).strip() for ln in chunk if (m := _COMMENT.search(ln))))
        start = d.last
    return out


@linter("manifest", is_manifest)
def lint_manifest(file: RecipeFile, ctx: LintContext) -> Iterable[LintFinding]:
    import yaml

    if "{{" in file.text:
        return  # a Helm/Go template: not YAML until rendered
    from epdoctor.redact import redact_obj, redact_text

    try:
        # parsed as written, then redacted as whole values (redact-then-parse corrupts YAML)
        docs = parse_documents(file.raw)
    except RecursionError:
        raise TooBig("YAML nested too deeply to compose") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        raise ValueError(f"not valid YAML at line {line}: {redact_text(str(exc))}") from None
    for d in docs:
        d.obj = redact_obj(d.obj)
    if not docs:
        return
    objs = kube_rules.Objects([d.obj for d in docs], notes=_notes(file.lines, docs))
    for hit in kube_rules.manifest_hits(objs):
        line = docs[hit.obj].line_of(hit.path)
        yield finding(file, line, hit.code, hit.message, status=hit.level or hit.status)
    yield from _env_contract(file, docs, objs, ctx)
    yield from manifest_images(file, docs)


def _env_contract(
    file: RecipeFile, docs: list[Document], objs: kube_rules.Objects, ctx: LintContext
) -> Iterable[LintFinding]:
    """The env contract (checks/env.py) on each container's literal env values."""
    from epdoctor.checks.env import env_findings
    from epdoctor.lint.envfile import engines_in

    seen: set[tuple[str, int]] = set()
    for i, cpath, cname, env in kube_rules.container_envs(objs):
        values = {k: v for k, (v, _) in env.items()}
        container = _at(docs[i].obj, cpath)
        # the container's own command, else what the folder runs: as a script's env is judged
        engines = kube_rules.engines_of(container) or engines_in(ctx)
        for f in env_findings(values, engines=engines, where=f"{file.rel} container {cname}"):
            if f.status not in REPORTED:
                continue
            named = [n for e in f.evidence for n in re.findall(r"\b([A-Z_][A-Z0-9_]*)=", e)]
            present = [n for n in named if n in env]
            if not present and not is_contract(values):
                continue  # a missing variable, in an env that is not the whole transport contract
            path = env[present[0]][1] if present else (*cpath, "env")
            line = docs[i].line_of(path)
            if (f.code, line) in seen:
                continue
            seen.add((f.code, line))
            yield finding(file, line, f.code, f"container {cname}: {f.title}")


def _at(obj: Any, path: tuple[Any, ...]) -> Any:
    for p in path:
        obj = obj[p]
    return obj
