"""The one registry of detectors: every function that can raise a trap code, in every domain.

A detector is registered where it is defined, with the codes it can raise and the domain of
what it reads::

    @check("L101")                        # run_checks calls it with (facts, ctx)
    def nccl_gin_floor(node, ctx): ...

    @detector("K201", domain="kube")      # its own framework calls it (manifest rules, lint
    def rule_headless_http(objs): ...     # rules, plan rules, launch gates)

Domains: ``node`` (a node's probe facts), ``kube`` (pods, nodes and manifests as the API
shapes them), ``kube-job`` (a node probe run as a Job), ``logs``, ``fleet`` (drift between
nodes), ``recipe`` (files of a recipe folder, by ``epdoctor lint``), ``plan`` and ``launch``
(the gates of a kernel test, serve, smoke or benchmark run).

A check that only runs other detectors (the log analyzer, the manifest rules on a live pod)
registers no code of its own. Each trap's TOML lists its detectors by ``module:function``
(``detectors = ["epdoctor.checks.nccl:nccl_gin_floor"]``); tests/test_catalogue.py checks that
the registry and the catalogue agree both ways, and ``epdoctor explain CODE`` reads the TOML's
list to show where each detector lives, without importing it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

DOMAINS = ("node", "kube", "kube-job", "logs", "fleet", "recipe", "plan", "launch", "image")

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Detector:
    codes: tuple[str, ...]
    fn: Callable[..., Any]
    domain: str
    check: bool  # run_checks calls it with (facts, ctx); else its own framework does

    @property
    def ref(self) -> str:
        """``module:function``, as a trap's TOML names it."""
        return f"{self.fn.__module__}:{self.fn.__qualname__}"


DETECTORS: list[Detector] = []


def _register(codes: tuple[str, ...], domain: str, check: bool) -> Callable[[F], F]:
    if domain not in DOMAINS:
        raise ValueError(f"unknown detector domain {domain!r} (one of {', '.join(DOMAINS)})")

    def deco(fn: F) -> F:
        DETECTORS.append(Detector(tuple(codes), fn, domain, check))
        return fn

    return deco


def detector(*codes: str, domain: str) -> Callable[[F], F]:
    """Register a function that raises these trap codes, called by its own framework."""
    return _register(codes, domain, check=False)


def check(*codes: str, domain: str = "node") -> Callable[[F], F]:
    """Register a check: ``run_checks(facts, ctx, domain)`` calls it with (facts, ctx)."""
    return _register(codes, domain, check=True)


def detectors(domain: str | None = None) -> list[Detector]:
    """Registered detectors (of one domain), in the order they were defined."""
    return [d for d in DETECTORS if domain is None or d.domain == domain]


def for_code(code: str) -> list[Detector]:
    return [d for d in DETECTORS if code in d.codes]
