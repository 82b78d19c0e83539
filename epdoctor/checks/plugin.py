"""aws-ofi-nccl plugin and libfabric checks."""

from __future__ import annotations

from collections.abc import Iterable

from packaging.version import Version

from epdoctor.checks.base import Context, check, finding
from epdoctor.checks.transport_ctx import transport_for
from epdoctor.facts.libs import PluginLib
from epdoctor.facts.node import NodeFacts, libfabric_version
from epdoctor.knowledge import stack
from epdoctor.model import Finding, Status

LIBFABRIC_EFA = stack.floor("libfabric")
LIBFABRIC_GDA = Version(stack.transport("efa-gda").libfabric_min)


def ofi_plugins(node: NodeFacts) -> list[PluginLib]:
    """Plugin files that are aws-ofi-nccl NET plugins (they export ncclNetPlugin_v*)."""
    return [
        p
        for p in node.plugins
        if p.exports("ncclNetPlugin") or "ofi" in p.realpath.rsplit("/", 1)[-1]
    ]


@check("N101")
def plugin_present(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    plugs = ofi_plugins(node)
    if plugs:
        yield finding(
            "N101",
            Status.PASS,
            f"aws-ofi-nccl plugin: {plugs[0].realpath}",
            [p.realpath for p in plugs][:4],
        )
    else:
        yield finding(
            "N101",
            Status.FAIL,
            evidence=[
                "searched /opt/amazon/ofi-nccl/lib{,64,/x86_64-linux-gnu}, "
                "/opt/amazon/aws-ofi-nccl/lib and NCCL_NET_PLUGIN/NCCL_GIN_PLUGIN"
            ],
        )


@check("N102")
def plugin_gin_exports(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    transport = transport_for(ctx, node.env.values)
    for p in ofi_plugins(node):
        if not p.symbols.known:
            yield finding(
                "N102", Status.UNKNOWN, f"{p.realpath}: symbols unreadable ({p.symbols.reason})"
            )
            continue
        gin = p.exports("ncclGinPlugin")
        ev = [f"{p.realpath} exports: {', '.join(gin) or 'no ncclGinPlugin_*'}"]
        has13, has14 = "ncclGinPlugin_v13" in gin, "ncclGinPlugin_v14" in gin
        if transport == "efa-gda" and not has14:
            yield finding(
                "N102",
                Status.FAIL,
                "no ncclGinPlugin_v14: EFA-GDA (Libfabric_GDAKI) unavailable",
                ev,
            )
        elif transport == "gin-proxy" and not has13:
            yield finding(
                "N102", Status.FAIL, "no ncclGinPlugin_v13: the CPU-proxy GIN plugin is missing", ev
            )
        elif transport is None and not (has13 or has14):
            yield finding(
                "N102", Status.FAIL, "the plugin exports no GIN plugin (ncclGinPlugin_v13/_v14)", ev
            )
        elif transport is None and not has14:
            yield finding(
                "N102", Status.WARN, "ncclGinPlugin_v13 only: CPU proxy yes, EFA-GDA (v14) no", ev
            )
        else:
            yield finding("N102", Status.PASS, f"GIN exports: {', '.join(gin)}", ev)


@check("N103")
def plugin_gdrcopy(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    for p in ofi_plugins(node):
        f = p.gdrcopy_compiled_in
        if not f.known:
            yield finding("N103", Status.UNKNOWN, f"{p.realpath}: {f.reason}")
        elif f.value:
            yield finding(
                "N103", Status.PASS, "plugin built with GDRCopy", [f"{p.realpath}: {f.evidence[0]}"]
            )
        else:
            yield finding("N103", Status.FAIL, evidence=[f"{p.realpath}: {f.evidence[0]}"])


@check("N104")
def libfabric_floor(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    transport = transport_for(ctx, node.env.values)
    v = libfabric_version(node)
    if v is None:
        if node.efa_devices() or ofi_plugins(node):
            yield finding(
                "N104", Status.UNKNOWN, f"libfabric release unknown: {node.libfabric.reason}"
            )
        return
    ev = list(node.libfabric.evidence)
    if v < LIBFABRIC_EFA:
        yield finding(
            "N104",
            Status.FAIL,
            f"libfabric {v} < {LIBFABRIC_EFA}: aws-ofi-nccl's EFA provider path refuses it",
            ev,
        )
    elif v < LIBFABRIC_GDA and transport == "efa-gda":
        yield finding(
            "N104", Status.FAIL, f"libfabric {v} < {LIBFABRIC_GDA}: below the EFA-GDA floor", ev
        )
    elif v < LIBFABRIC_GDA and transport is None:
        yield finding(
            "N104",
            Status.WARN,
            f"libfabric {v}: fine for the CPU proxy, EFA-GDA needs >= {LIBFABRIC_GDA}",
            ev,
        )
    else:
        yield finding("N104", Status.PASS, f"libfabric {v}", ev)


@check("N105")
def plugin_env_paths(node: NodeFacts, ctx: Context) -> Iterable[Finding]:
    for var, req in sorted(node.plugin_requests.items()):
        if var == "NCCL_TUNER_PLUGIN":
            continue
        value, resolved = req.get("value"), req.get("resolved") or []
        if resolved:
            yield finding(
                "N105", Status.PASS, f"{var} resolves to {resolved[0]}", [f"{var}={value}"]
            )
        else:
            yield finding(
                "N105", Status.FAIL, f"{var}={value} resolves to no file", [f"{var}={value}"]
            )
