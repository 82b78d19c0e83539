"""Host checks: GPUs and driver, PeerMappingOverride, gdrdrv/GDRCopy, memlock."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from epdoctor.checks.base import Context, check, finding
from epdoctor.checks.transport_ctx import floor_verdict, transport_for
from epdoctor.facts.node import NodeFacts
from epdoctor.facts.versions import parse_version
from epdoctor.knowledge import stack
from epdoctor.model import Finding, Status

GDRCOPY_FLOOR = stack.floor("gdrcopy")
DRIVER_FLOOR = stack.floor("nvidia_driver").major  # GDR_PIN_FLAG_FORCE_PCIE needs r570+


@check("H101")
def gpus_visible(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    if node.gpus.known and node.gpus.value:
        g = node.gpus.value
        yield finding(
            "H101",
            Status.PASS,
            f"{len(g)} GPU(s): {g[0].name}, driver {g[0].driver}",
            node.gpus.evidence[:4],
        )
    else:
        yield finding(
            "H101", Status.FAIL, f"no NVIDIA GPU visible: {node.gpus.reason}", [node.gpus.reason]
        )


@check("H102")
def driver_floor(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    if not node.driver.known:
        return  # H101 already says there is no driver to judge
    major = parse_version(node.driver.value)
    ok = None if major is None else major.major >= DRIVER_FLOOR
    ev = [f"NVIDIA driver {node.driver.value}", *node.driver.evidence]
    if ok is None:
        yield finding("H102", Status.UNKNOWN, f"unparseable driver version {node.driver.value}", ev)
    elif ok:
        yield finding(
            "H102", Status.PASS, f"NVIDIA driver {node.driver.value} (>= r{DRIVER_FLOOR})", ev
        )
    else:
        yield finding(
            "H102",
            Status.FAIL,
            f"NVIDIA driver {node.driver.value} is older than r{DRIVER_FLOOR}",
            ev,
        )


@check("H103")
def peer_mapping_override(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    if not node.driver.known:
        return
    transport = transport_for(ctx, node.env.values)
    eff, conf = node.peer_mapping_effective, node.peer_mapping_configured
    ev = [*(eff.evidence or [eff.reason]), *(conf.evidence or [conf.reason])]
    ok = eff.value if eff.known else None
    title = "PeerMappingOverride=1 not in effect in the loaded NVIDIA driver"
    if ok is False and conf.known and conf.value:
        title += " (configured in /etc/modprobe.d: reload the driver or reboot)"
    yield floor_verdict(
        "H103", ["efa-gda"], transport, ok, title, ev, "PeerMappingOverride=1 in effect"
    )


def _gdrdrv_version(node: NodeFacts) -> tuple[Version | None, bool | None, str]:
    mod = node.modules.get("gdrdrv")
    if mod is None or not mod.known:
        return None, None, "gdrdrv module state unknown"
    m = mod.value
    return (m.parsed, m.loaded, mod.evidence[0] if mod.evidence else "")  # type: ignore[union-attr]


@check("H111")
def gdrdrv_floor(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    transport = transport_for(ctx, node.env.values)
    ver, loaded, ev = _gdrdrv_version(node)
    if loaded is None:
        yield finding("H111", Status.UNKNOWN, "cannot see /sys/module (gdrdrv state unknown)", [ev])
        return
    if not loaded:
        yield floor_verdict(
            "H111",
            ["gin-proxy", "efa-gda"],
            transport,
            False,
            "gdrdrv kernel module not loaded",
            [ev],
        )
        return
    ok = None if ver is None else ver >= GDRCOPY_FLOOR
    yield floor_verdict(
        "H111",
        ["gin-proxy", "efa-gda"],
        transport,
        ok,
        f"gdrdrv {ver} is older than {GDRCOPY_FLOOR}",
        [ev],
        f"gdrdrv {ver} loaded",
    )


@check("H112")
def gdrcopy_pair(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    drv, loaded, ev = _gdrdrv_version(node)
    libs = [lib for lib in node.gdrapi if lib.version is not None]
    if not loaded or not libs:
        return  # H111 covers a missing driver; no libgdrapi means GDRCopy cannot be used at all
    rt = max(lib.version for lib in libs)  # type: ignore[type-var]
    evidence = [ev, *[f"{lib.realpath} ({lib.version})" for lib in libs]]
    if drv is None:
        yield finding("H112", Status.UNKNOWN, "gdrdrv reports no version", evidence)
        return
    low = min(rt, drv)  # type: ignore[type-var]
    if low < GDRCOPY_FLOOR:
        yield finding(
            "H112",
            Status.FAIL,
            f"min(libgdrapi {rt}, gdrdrv {drv}) = {low} < {GDRCOPY_FLOOR}",
            evidence,
        )
    else:
        yield finding("H112", Status.PASS, f"libgdrapi {rt} with gdrdrv {drv}", evidence)


@check("H113")
def dev_gdrdrv(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    _, loaded, ev = _gdrdrv_version(node)
    if not loaded or node.dev_gdrdrv is None:
        return
    if node.dev_gdrdrv:
        yield finding("H113", Status.PASS, "/dev/gdrdrv present", [ev, "/dev/gdrdrv exists"])
    else:
        yield finding("H113", Status.FAIL, evidence=[ev, "/dev/gdrdrv missing"])


@check("H127")
def memlock(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    if not node.memlock.known:
        yield finding("H127", Status.UNKNOWN, node.memlock.reason)
    elif node.memlock.value == "unlimited":
        yield finding("H127", Status.PASS, "memlock unlimited", ["RLIMIT_MEMLOCK soft = unlimited"])
    else:
        yield finding(
            "H127",
            Status.WARN,
            f"memlock limited to {node.memlock.value} bytes",
            [f"RLIMIT_MEMLOCK soft = {node.memlock.value}"],
        )
