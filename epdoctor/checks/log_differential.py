"""Differential diagnosis: one log line that fits several causes.

Some upstream lines name a failure but not its cause: NVSHMEM's `init failed for transport:
IBGDA` follows a NIC that is not mlx5 (D811), a DEVX UAR that could not be allocated (D812) or
a missing peer-memory module (D801); NCCL's `Duplicate GPU detected` follows two ranks on one
GPU (E801) or two hosts that share a hostname (H814). A [[log]] rule lists those other causes
(``candidates``); each trap's ``[discriminator]`` says which read-only command tells them apart,
which other lines of a log make it likelier, and which node fact confirms or rules it out.

``expand`` turns one finding into at most ``MAX_CANDIDATES``, ranked: a cause the node's facts
rule out is dropped (``epdoctor diagnose --log`` on a node, a pod or a bundle knows them), one
they confirm ranks first, then the causes the log's own lines point at, then the rule's order.
Pure: facts in, findings out.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from epdoctor import knowledge
from epdoctor.model import Finding

MAX_CANDIDATES = 3
MAX_EVIDENCE = 8
NodeView = Mapping[str, "bool | None"]
Keyed = tuple[str, Finding]


def node_predicates(node: Any) -> dict[str, bool | None]:
    """What a node's facts (facts.node.NodeFacts) say of each discriminator predicate;
    None where the probe could not see it."""
    rdma = node.rdma.value if node.rdma.known else None
    memlock = node.memlock.value if node.memlock.known else None
    gdrdrv = node.modules.get("gdrdrv")
    return {
        "efa": None if rdma is None else any(d.is_efa for d in rdma),
        "mlx5": None if rdma is None else any(d.name.startswith("mlx5") for d in rdma),
        "gdrdrv_module": None if gdrdrv is None else gdrdrv.known and gdrdrv.value is not None,
        "dev_gdrdrv": node.dev_gdrdrv,
        "memlock_unlimited": None if memlock is None else memlock == "unlimited",
        "in_container": node.in_container,
        "root": None if node.euid is None else node.euid == 0,
    }


def _node_says(code: str, node: NodeView) -> tuple[bool | None, str]:
    """(True confirmed, False ruled out, None unknown) and the fact that says so."""
    d = knowledge.get(code).discriminator
    if d is None or not d.node:
        return None, ""
    want = not d.node.startswith("!")
    pred = d.node.lstrip("!")
    have = node.get(pred)
    if have is None:
        return None, ""
    fact = f"node fact: {pred} is {'true' if have else 'false'}"
    return have == want, fact


def rank(
    primary: str, others: tuple[str, ...], hints: Mapping[str, list[str]], node: NodeView
) -> list[tuple[str, bool | None, str]]:
    """The candidate causes, best first: (code, node verdict, node fact); ruled-out dropped
    unless every one is (then the rule's order stands: the log alone cannot decide)."""
    scored = []
    for i, code in enumerate(dict.fromkeys((primary, *others))):
        says, fact = _node_says(code, node)
        score = (2 if says else 0) + (1 if hints.get(code) else 0) + (0.5 if i == 0 else 0)
        scored.append((score, -i, code, says, fact))
    kept = [s for s in scored if s[3] is not False] or scored
    kept.sort(reverse=True)
    return [(code, says, fact) for _, _, code, says, fact in kept[:MAX_CANDIDATES]]


def expand(
    key: str, f: Finding, rule_id: str, hints: Mapping[str, list[str]], node: NodeView
) -> list[Keyed]:
    """The finding, or one finding per candidate cause when its line fits several."""
    rule = next((r for r in knowledge.log_rules() if r.id == rule_id), None)
    if rule is None or not rule.candidates:
        return [(key, f)]
    ranked = rank(f.code, rule.candidates, hints, node)
    if len(ranked) == 1 and ranked[0][0] == f.code:
        code, says, fact = ranked[0]
        if says:
            f = dataclasses.replace(f, evidence=(*f.evidence, fact)[:MAX_EVIDENCE])
        return [(key, f)]
    quote = f.title[f.title.find(": `") :] if ": `" in f.title else ""
    n = len(ranked)
    out: list[Keyed] = []
    for i, (code, says, fact) in enumerate(ranked, 1):
        t = knowledge.get(code)
        how = t.discriminator.command if t.discriminator else ""
        lead = f.title[: f.title.find(": `")] if (code == f.code and quote) else t.title
        title = f"{lead}{quote} (cause {i} of {n} this line fits"
        if says:
            title += "; the node's facts confirm it"
        title += f"; tell them apart: `{how}`)" if how else ")"
        ev = list(f.evidence)
        ev += [h for h in hints.get(code, []) if h not in ev]
        if fact:
            ev.append(fact)
        g = dataclasses.replace(f, code=code, title=title, evidence=tuple(ev[:MAX_EVIDENCE]))
        if code != f.code:
            g = dataclasses.replace(g, fix=t.fix_text() or f.fix)
        out.append((key if code == f.code else f"{code}:cand:{key}", g))
    return out
