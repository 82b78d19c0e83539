"""The env contract: one implementation used by diagnose, lint, the plan and Kubernetes.

``env_findings(env, ctx, ...)`` takes a plain mapping of variable -> value (a
probe's workload env, an env file, a manifest's container env, a plan's
contract) and returns coded findings. Knobs that nothing reads only produce a
finding when set; the rest report their verdict.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from packaging.version import Version

from epdoctor.checks.base import Context, check, finding
from epdoctor.checks.transport_ctx import transport_for
from epdoctor.knowledge import stack
from epdoctor.model import Finding, Status

# variable -> trap code: set, but no component at these versions reads it.
DEAD_KNOBS: dict[str, str] = {
    "OFI_NCCL_GIN_GDAKI": "C101",
    "OFI_NCCL_GIN_MAX_REQUESTS": "C102",
    "OFI_NCCL_GDRCOPY_FORCED_PCIE_COPY": "C103",
    "DEEP_EP_BACKEND": "C104",
    "EP_EFA_MAX_QPS": "C105",
    "EP_EFA_RDMA_GBS": "C105",
    "TRTLLM_LOG_LEVEL": "C106",
    "OFI_NCCL_GIN_TYPE": "C107",
    "OFI_NCCL_GIN_STRONG_SIGNAL": "C107",
}

# ncclGinType_t values and the first NCCL that has each (NVIDIA/nccl nccl_device/core.h).
GIN_TYPE_SINCE = stack.gin_type_since()
OFI_NET_NAMES = {"libfabric", "aws libfabric", "ofi"}


def env_findings(
    env: Mapping[str, str],
    ctx: Context | None = None,
    nccl_version: Version | None = None,
    engines: Iterable[str] = (),
    where: str = "environment",
    deepep_flavour: str | None = None,
) -> list[Finding]:
    """Findings for one environment. `engines` names the engines present (vllm, dynamo, ...)."""
    ctx = ctx or Context()
    engines = set(engines) | ({ctx.engine} if ctx.engine else set())
    out: list[Finding] = []
    out += _dead_knobs(env, where, deepep_flavour)
    out += _gin(env, ctx, nccl_version, where)
    out += _socket_ifname(env, where)
    out += _reuse_comm(env, engines, where)
    out += _nvshmem_provider(env, where)
    return out


def _dead_knobs(env: Mapping[str, str], where: str, deepep_flavour: str | None) -> list[Finding]:
    out = []
    for var, code in DEAD_KNOBS.items():
        if var not in env:
            continue
        if code == "C105" and deepep_flavour == "deepseek-ai+PR612":
            continue  # a PR #612 build really reads these
        out.append(
            finding(
                code,
                Status.WARN,
                f"{var} is set but nothing reads it",
                [f"{where}: {var}={env[var]}"],
            )
        )
    return out


HW_COUNTER = "OFI_NCCL_GDAKI_EFA_HW_COUNTER"
HW_COUNTER_VALUES = ("auto", "on", "off")  # aws-ofi-nccl >= 1.21.0, default auto, strcasecmp


def _hw_counter(env: Mapping[str, str], transport: str | None, where: str) -> list[Finding]:
    """C108: the GDAKI hardware-counter tristate (aws-ofi-nccl v1.21.x
    include/nccl_ofi_param.h:397, src/platform-aws.cpp config_gdaki_domain)."""
    raw = env.get(HW_COUNTER)
    if raw is None:
        return []
    v = raw.strip().lower()
    ev = [f"{where}: {HW_COUNTER}={raw}"]
    if v not in HW_COUNTER_VALUES:
        return [finding("C108", Status.FAIL,
                        f"{HW_COUNTER}={raw} is not auto, on or off: the plugin's init fails "
                        "(`set to invalid value`)", ev)]  # fmt: skip
    if v == "off":
        if transport == "efa-gda":
            return [finding("C108", Status.FAIL,
                            f"{HW_COUNTER}=off: aws-ofi-nccl 1.21.x refuses GDAKI on every "
                            "domain (-FI_ENOSYS), so EFA-GDA cannot run", ev)]  # fmt: skip
        return [finding("C108", Status.INFO,
                        f"{HW_COUNTER}=off only refuses GDAKI; the CPU proxy does not read it",
                        ev)]  # fmt: skip
    if v == "on":
        return [finding("C108", Status.WARN,
                        f"{HW_COUNTER}=on is a bring-up override: where the EFA has no "
                        "completion counter (efa.ko < 3.3.0, not p5en/p6-b200/p6-b300) GDAKI "
                        "context creation fails instead of falling back", ev)]  # fmt: skip
    return [finding("C108", Status.PASS, f"{HW_COUNTER}=auto: the platform decides", ev)]


def _gin(env: Mapping[str, str], ctx: Context, nccl: Version | None, where: str) -> list[Finding]:
    out: list[Finding] = []
    transport = transport_for(ctx, env)
    gin = env.get("NCCL_GIN_TYPE")
    if gin is not None:
        g = gin.strip()
        ev = [f"{where}: NCCL_GIN_TYPE={gin}"]
        since = GIN_TYPE_SINCE.get(g)
        if since is None:
            out.append(finding("T101", Status.FAIL, f"NCCL_GIN_TYPE={gin} is not a GIN type", ev))
        elif nccl is None:
            out.append(
                finding(
                    "T101",
                    Status.UNKNOWN,
                    f"NCCL_GIN_TYPE={g}: the NCCL version it meets is unknown",
                    ev,
                )
            )
        elif nccl < Version(since):
            out.append(
                finding(
                    "T101",
                    Status.FAIL,
                    f"NCCL_GIN_TYPE={g} needs NCCL >= {since}, this is {nccl}",
                    [*ev, f"NCCL {nccl}"],
                )
            )
        else:
            out.append(
                finding(
                    "T101",
                    Status.PASS,
                    f"NCCL {nccl} supports NCCL_GIN_TYPE={g}",
                    [*ev, f"NCCL {nccl}"],
                )
            )
        if g in ("3", "4"):
            out.append(
                finding(
                    "T102",
                    Status.WARN,
                    f"NCCL_GIN_TYPE={g}: pre-release GDAKI numbering on EFA",
                    ev,
                )
            )
    out += _hw_counter(env, transport, where)
    # T103 is about the released EFA-GDA backend (type 5); types 3 and 4 are T102's.
    if transport == "efa-gda" and (gin or "").strip() not in ("3", "4"):
        sym = env.get("NCCL_SYM_GIN_KERNELS_ENABLE")
        ev = [f"{where}: NCCL_SYM_GIN_KERNELS_ENABLE={sym if sym is not None else '(unset)'}"]
        if (sym or "").strip() == "0":
            out.append(
                finding("T103", Status.PASS, "NCCL_SYM_GIN_KERNELS_ENABLE=0 for EFA-GDA", ev)
            )
        else:
            out.append(finding("T103", Status.FAIL, evidence=ev))
        dmabuf = (env.get("OFI_NCCL_DISABLE_DMABUF") or "").strip().lower()
        if dmabuf in ("1", "true", "yes", "on"):
            out.append(
                finding(
                    "T104",
                    Status.FAIL,
                    evidence=[f"{where}: OFI_NCCL_DISABLE_DMABUF={env['OFI_NCCL_DISABLE_DMABUF']}"],
                )
            )
    enable = env.get("NCCL_GIN_ENABLE")
    if enable is not None and enable.strip() == "0":
        out.append(finding("T105", Status.FAIL, evidence=[f"{where}: NCCL_GIN_ENABLE={enable}"]))
    net = env.get("NCCL_NET")
    if net is not None and net.strip().lower() not in OFI_NET_NAMES:
        out.append(
            finding(
                "T106",
                Status.FAIL,
                f"NCCL_NET={net} bypasses the OFI plugin",
                [f"{where}: NCCL_NET={net}"],
            )
        )
    prov = env.get("FI_PROVIDER")
    if (
        prov is not None
        and "efa" not in [p.strip().lower() for p in prov.replace(";", ",").split(",")][:1]
    ):
        out.append(
            finding(
                "T107",
                Status.FAIL,
                f"FI_PROVIDER={prov}: libfabric will not use EFA",
                [f"{where}: FI_PROVIDER={prov}"],
            )
        )
    return out


def _socket_ifname(env: Mapping[str, str], where: str) -> list[Finding]:
    val = env.get("NCCL_SOCKET_IFNAME")
    if val is None or not val.strip():
        return [finding("C111", Status.WARN, evidence=[f"{where}: NCCL_SOCKET_IFNAME unset"])]
    return [
        finding(
            "C111", Status.PASS, f"NCCL_SOCKET_IFNAME={val}", [f"{where}: NCCL_SOCKET_IFNAME={val}"]
        )
    ]


def _nvshmem_provider(env: Mapping[str, str], where: str) -> list[Finding]:
    # NVSHMEM's libfabric transport strcmp()s the value against "verbs", "cxi" and "efa":
    # anything else (also "EFA") is an invalid persona and the transport never starts.
    val = env.get("NVSHMEM_LIBFABRIC_PROVIDER")
    if val is None:
        return []
    ev = [f"{where}: NVSHMEM_LIBFABRIC_PROVIDER={val}"]
    if val == "efa":
        return [finding("N512", Status.PASS, "NVSHMEM_LIBFABRIC_PROVIDER=efa", ev)]
    title = (
        f"NVSHMEM_LIBFABRIC_PROVIDER={val}: NVSHMEM matches the provider case-sensitively, "
        "only 'efa' selects EFA"
        if val.strip().lower() == "efa"
        else f"NVSHMEM_LIBFABRIC_PROVIDER={val}: NVSHMEM's libfabric transport will not use EFA"
    )
    return [finding("N512", Status.FAIL, title, ev)]


def _reuse_comm(env: Mapping[str, str], engines: set[str], where: str) -> list[Finding]:
    if not engines & {"vllm", "dynamo"}:
        return []
    val = env.get("EP_REUSE_NCCL_COMM")
    ev = [f"{where}: EP_REUSE_NCCL_COMM={val if val is not None else '(unset: DeepEP default 1)'}"]
    if val is not None and val.strip() == "0":
        return [finding("D101", Status.PASS, "EP_REUSE_NCCL_COMM=0 for vLLM + DeepEP-V2", ev)]
    return [finding("D101", Status.FAIL, evidence=ev)]


@check(
    "C101",
    "C102",
    "C103",
    "C104",
    "C105",
    "C106",
    "C107",
    "C108",
    "C111",
    "D101",
    "N512",
    "T101",
    "T102",
    "T103",
    "T104",
    "T105",
    "T106",
    "T107",
)
def node_env(node, ctx: Context) -> Iterable[Finding]:
    """Apply the env contract to the workload env (or the probe's own), with node knowledge."""
    from epdoctor.checks.stack import consumer_nccl_version, deepep_flavour, engines_present

    for env in node.envs_to_check():
        engines = set(engines_present(node, env))
        # D101 matters only where DeepEP-V2 is in play: vLLM/Dynamo with DeepEP installed.
        if not _deepep_in_play(node, env):
            engines -= {"vllm", "dynamo"}
        yield from env_findings(
            env.values,
            ctx,
            nccl_version=consumer_nccl_version(node),
            engines=engines,
            where=env.origin if env.origin != "probe" else "environment",
            deepep_flavour=deepep_flavour(node),
        )


def _deepep_in_play(node, env) -> bool:
    from epdoctor.checks.stack import deepep_installed

    cmd = " ".join(p for proc in node.processes for p in proc.cmdline)
    return (
        deepep_installed(node)
        or "deepep_v2" in cmd
        or env.values.get("VLLM_ALL2ALL_BACKEND") == "deepep_v2"
    )
