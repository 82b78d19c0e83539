"""Which transport's requirements apply, and how a transport-specific verdict is phrased."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from epdoctor.checks.base import Context, finding
from epdoctor.model import Finding, Status

NAMES = {"gin-proxy": "the GIN CPU proxy", "efa-gda": "EFA-GDA (GPU-initiated)"}


def transport_for(ctx: Context, env: Mapping[str, str]) -> str | None:
    """The operator's --transport, else what NCCL_GIN_TYPE in the workload env implies."""
    if ctx.transport:
        return ctx.transport
    gin = (env.get("NCCL_GIN_TYPE") or "").strip()
    if gin == "2":
        return "gin-proxy"
    if gin in ("3", "4", "5"):
        return "efa-gda"
    return None


def floor_verdict(
    code: str,
    needed_by: Iterable[str],
    transport: str | None,
    ok: bool | None,
    bad_title: str,
    evidence: Iterable[str],
    good_title: str | None = None,
) -> Finding:
    """PASS/FAIL for the chosen transport; SKIP when it does not need this; WARN when
    no transport was chosen and only some transports need it; UNKNOWN without evidence."""
    needed = set(needed_by)
    ev = list(evidence)
    if transport is not None and transport not in needed:
        return finding(code, Status.SKIP, f"not needed for {NAMES.get(transport, transport)}", ev)
    if ok is None:
        return finding(code, Status.UNKNOWN, f"cannot tell: {bad_title}", ev)
    if ok:
        return finding(code, Status.PASS, good_title or f"ok: {bad_title}", ev)
    if transport is None and needed != set(NAMES):
        who = " and ".join(NAMES[t] for t in sorted(needed) if t in NAMES)
        others = " and ".join(NAMES[t] for t in sorted(set(NAMES) - needed))
        return finding(
            code, Status.WARN, f"{bad_title} (needed for {who}; {others} has no such floor)", ev
        )
    return finding(code, Status.FAIL, bad_title, ev)
