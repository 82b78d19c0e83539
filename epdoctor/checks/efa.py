"""EFA checks: devices and driver, completion-counter floors, hw_counters, installer."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from epdoctor.checks.base import Context, check, finding
from epdoctor.checks.transport_ctx import floor_verdict, transport_for
from epdoctor.facts.node import NodeFacts
from epdoctor.facts.versions import parse_version
from epdoctor.knowledge import stack
from epdoctor.knowledge.stack import instance_spec
from epdoctor.model import Finding, Status

EFA_GDA_DRIVER = Version(stack.transport("efa-gda").efa_driver_min)
INSTALLER_FLOOR = stack.floor("efa_installer")


def _efa_module(node: NodeFacts):
    f = node.modules.get("efa")
    return f.value if f and f.known else None


@check("H121")
def efa_present(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    devs = node.efa_devices()
    mod = _efa_module(node)
    if not node.rdma.known and mod is None:
        yield finding(
            "H121",
            Status.UNKNOWN,
            "cannot see /sys/class/infiniband or /sys/module",
            [node.rdma.reason],
        )
        return
    ev = [
        f"/sys/class/infiniband: {', '.join(d.name for d in (node.rdma.value or [])) or '(empty)'}"
    ]
    ev.append(
        f"/sys/module/efa: {'loaded ' + (mod.version or '') if mod and mod.loaded else 'absent'}"
    )
    if devs:
        yield finding("H121", Status.PASS, f"{len(devs)} EFA device(s)", ev)
    else:
        yield finding(
            "H121",
            Status.FAIL,
            "no EFA device" + ("" if mod and mod.loaded else " and no efa kernel module"),
            ev,
        )


def _efa_driver_version(node: NodeFacts) -> tuple[Version | None, str]:
    mod = _efa_module(node)
    if mod and mod.loaded and mod.version:
        return parse_version(mod.version), f"/sys/module/efa/version = {mod.version}"
    for d in node.efa_devices():
        if d.driver_version:
            return parse_version(
                d.driver_version
            ), f"{d.name} driver module version {d.driver_version}"
    return None, ""


@check("H122")
def efa_driver_floor(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    if not node.efa_devices() and not (_efa_module(node) and _efa_module(node).loaded):
        return  # H121 covers a node without EFA
    v, ev = _efa_driver_version(node)
    transport = transport_for(ctx, node.env.values)
    ok = None if v is None else v >= EFA_GDA_DRIVER
    yield floor_verdict(
        "H122",
        ["efa-gda"],
        transport,
        ok,
        f"efa.ko {v or '?'} is below {EFA_GDA_DRIVER}",
        [ev or "efa driver version not readable"],
        f"efa.ko {v}",
    )


@check("H123")
def hw_counters(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    devs = node.efa_devices()
    if not devs:
        return
    ports = [(d, p) for d in devs for p in d.ports]
    missing = [
        f"{d.name}/ports/{p.name}/hw_counters absent" for d, p in ports if p.hw_counters is None
    ]
    no_rdma = [
        f"{d.name}/ports/{p.name}: no rdma_write_bytes/rdma_read_bytes"
        for d, p in ports
        if p.hw_counters is not None
        and not {"rdma_write_bytes", "rdma_read_bytes"} & set(p.hw_counters)
    ]
    if not ports or len(missing) == len(ports):
        yield finding(
            "H123",
            Status.UNKNOWN,
            "EFA hw_counters absent: traffic on EFA is unverifiable by bytes",
            (missing or [f"{d.name}: no ports listed" for d in devs])[:6],
        )
    elif missing or no_rdma:
        yield finding(
            "H123",
            Status.UNKNOWN,
            "some EFA ports lack RDMA byte counters",
            (missing + no_rdma)[:6],
        )
    else:
        yield finding(
            "H123",
            Status.PASS,
            f"hw_counters with RDMA byte counters on {len(ports)} EFA port(s)",
            [
                f"{ports[0][0].name}/ports/{ports[0][1].name}/hw_counters: {len(ports[0][1].hw_counters or ())} counters"
            ],
        )


@check("H124")
def installer(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    transport = transport_for(ctx, node.env.values)
    if not node.installer.known:
        absent = "absent" in node.installer.reason
        if absent:
            yield finding(
                "H124",
                Status.WARN,
                "no EFA installer manifest: the installer did not run here",
                [node.installer.reason],
            )
        elif node.efa_devices():
            yield finding(
                "H124",
                Status.UNKNOWN,
                f"EFA installer version unknown: {node.installer.reason}",
                [node.installer.reason],
            )
        return
    v = parse_version(node.installer.value.version)  # type: ignore[union-attr]
    ok = None if v is None else v >= INSTALLER_FLOOR
    ev = list(node.installer.evidence)
    if ok is False and transport != "efa-gda":
        yield finding(
            "H124",
            Status.WARN,
            f"EFA installer {v}: no bundled GIN plugin (needs >= {INSTALLER_FLOOR}; EFA-GDA requires it)",
            ev,
        )
    else:
        yield floor_verdict(
            "H124",
            ["gin-proxy", "efa-gda"],
            transport,
            ok,
            f"EFA installer {v} is older than {INSTALLER_FLOOR}",
            ev,
            f"EFA installer {v}",
        )


@check("H125")
def gda_instance(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    transport = transport_for(ctx, node.env.values)
    itype = node.instance_type.value if node.instance_type.known else (ctx.instance or None)
    spec = instance_spec(itype)
    if itype is None:
        if transport == "efa-gda":
            yield finding(
                "H125", Status.UNKNOWN, f"instance type unknown: {node.instance_type.reason}"
            )
        return
    ev = [f"instance type {itype}"]
    ok = None if spec is None else spec.efa_comp_counters
    yield floor_verdict(
        "H125",
        ["efa-gda"],
        transport,
        ok,
        f"{itype} has no EFA completion counters: EFA-GDA impossible",
        ev,
        f"{itype} supports EFA-GDA",
    )


@check("H126")
def efa_count(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    itype = node.instance_type.value if node.instance_type.known else ctx.instance
    spec = instance_spec(itype)
    devs = node.efa_devices()
    if spec is None or not node.rdma.known:
        return
    ev = [
        f"{itype}: {spec.efa} EFA interfaces expected",
        f"{len(devs)} EFA device(s) visible",
    ]
    if len(devs) >= spec.efa:
        yield finding("H126", Status.PASS, f"all {spec.efa} EFA devices visible", ev)
    elif devs:
        yield finding(
            "H126",
            Status.WARN,
            f"{len(devs)} of {spec.efa} EFA devices visible on {itype}",
            ev,
        )
