"""NCCL runtime checks: the GIN floor, duplicate runtimes, the nvshmem downgrade."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from epdoctor.checks.base import Context, check, finding
from epdoctor.checks.stack import consumers
from epdoctor.checks.transport_ctx import transport_for
from epdoctor.facts.node import NodeFacts
from epdoctor.knowledge import stack
from epdoctor.model import Finding, Status

PROXY_FLOOR = stack.floor("nccl_deepep_v2")  # vLLM's DeepEPV2All2AllManager requirement
GDA_FLOOR = Version(stack.transport("efa-gda").nccl_min)  # NCCL_GIN_TYPE=5 (EFA_GDA) arrives
NVSHMEM_PIN = stack.floor("nvshmem")


@check("L101")
def nccl_gin_floor(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    transport = transport_for(ctx, node.env.values)
    cons = consumers(node)
    if not cons:
        yield finding(
            "L101",
            Status.UNKNOWN,
            "no libnccl.so.2 found where the probe looks (system prefixes, site-packages); "
            "pass --pid of the workload to see the NCCL it loaded",
        )
        return
    for c in cons:
        where = f"{c.who}: {c.path} ({c.how})"
        if c.lib is None:
            yield finding("L101", Status.UNKNOWN, f"{c.who}: {c.path} was not readable", [where])
            continue
        v = c.lib.version.value if c.lib.version.known else None
        lsa = c.lib.has_lsa.value if c.lib.has_lsa.known else None
        ev = [where, f"version: {v if v else 'unknown'}", f"exports ncclGetLsaDevicePointer: {lsa}"]
        floor = GDA_FLOOR if transport == "efa-gda" else PROXY_FLOOR
        if lsa is False or (v is not None and v < floor):
            why = "no ncclGetLsaDevicePointer" if lsa is False else f"needs >= {floor}"
            yield finding(
                "L101",
                Status.FAIL,
                f"{c.who} gets NCCL {v or '?'}: below the GIN floor ({why})",
                ev,
            )
        elif v is None or lsa is None:
            yield finding(
                "L101", Status.UNKNOWN, f"{c.who}: NCCL version or symbols unreadable", ev
            )
        elif transport is None and v < GDA_FLOOR:
            yield finding(
                "L101",
                Status.PASS,
                f"{c.who} gets NCCL {v}: CPU-proxy floor met (EFA-GDA needs >= {GDA_FLOOR})",
                ev,
            )
        else:
            yield finding("L101", Status.PASS, f"{c.who} gets NCCL {v}", ev)


@check("L102")
def nccl_duplicates(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    versions: dict[str, list[str]] = {}
    for lib in node.nccl:
        key = str(lib.version.value) if lib.version.known else "unknown"
        versions.setdefault(key, []).append(lib.realpath)
    if not versions:
        return
    ev = [f"NCCL {v}: {', '.join(paths)}" for v, paths in sorted(versions.items())]
    ev += [f"{c.who} -> {c.path}" for c in consumers(node)]
    if len(versions) > 1:
        yield finding(
            "L102",
            Status.WARN,
            f"{len(versions)} different NCCL runtimes on this node: {', '.join(sorted(versions))}",
            ev,
        )
    else:
        yield finding(
            "L102", Status.PASS, f"one NCCL version on this node ({next(iter(versions))})", ev
        )


@check("L103")
def nvshmem_downgrade(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    for env in node.python:
        wheel = env.nvshmem_wheel()
        if wheel is None:
            continue
        name, ver = wheel
        try:
            v = Version(ver)
        except ValueError:
            yield finding(
                "L103", Status.UNKNOWN, f"unparseable {name} version {ver}", [env.site_packages]
            )
            continue
        ev = [f"{env.site_packages}: {name}=={ver}"]
        nccl = env.nccl_wheel()
        if nccl:
            ev.append(f"{env.site_packages}: {nccl[0]}=={nccl[1]}")
        if v < NVSHMEM_PIN:
            yield finding(
                "L103",
                Status.WARN,
                f"{name} {ver} (< {NVSHMEM_PIN}): the resolver-downgrade signature",
                ev,
            )
        else:
            yield finding("L103", Status.PASS, f"{name} {ver}", ev)


@check("L104")
def process_duplicate_nccl(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    for proc in node.processes:
        if proc.mapped is None:
            if proc.exists:
                yield finding(
                    "L104",
                    Status.UNKNOWN,
                    f"pid {proc.pid}: /proc/{proc.pid}/maps not readable (need root?)",
                )
            else:
                yield finding("L104", Status.UNKNOWN, f"pid {proc.pid} does not exist")
            continue
        nccl = sorted({p for p in proc.mapped if "/libnccl.so" in p})
        ev = [f"pid {proc.pid} maps {p}" for p in nccl]
        if len(nccl) > 1:
            yield finding(
                "L104", Status.FAIL, f"pid {proc.pid} has {len(nccl)} libnccl.so.2 mapped", ev
            )
        elif nccl:
            yield finding("L104", Status.PASS, f"pid {proc.pid} maps one libnccl", ev)
