"""Findings from log facts (domain "logs").

``evaluate(facts, ctx, final)`` turns the per-rank facts and signature events of
``epdoctor.facts.logs`` into findings keyed by (code, subject); it is pure. With
``final`` False (lines still arriving) a verdict that needs the whole log waits.
A log that shows nothing conclusive is UNKNOWN, never PASS. The analyzer that feeds
bytes and re-evaluates as lines arrive is epdoctor.logwatch.LogAnalyzer.
"""

from __future__ import annotations

import dataclasses
import re
import signal
from collections.abc import Generator, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from epdoctor import knowledge
from epdoctor.checks import log_incidents as incidents
from epdoctor.checks.base import Context, check, finding
from epdoctor.checks.registry import detector, detectors
from epdoctor.facts.logs import signatures as sig
from epdoctor.facts.logs.model import Event, LogFacts, RankFacts
from epdoctor.facts.logs.scanner import feed_all
from epdoctor.knowledge import stack
from epdoctor.knowledge.catalogue import LogRule
from epdoctor.knowledge.stack import instance_spec
from epdoctor.model import Finding, Status

MAX_EVIDENCE = 8
Keyed = tuple[str, Finding]


def _event_table() -> dict[str, LogRule]:
    """The traps' [[log]] rules judged one finding per rule (knowledge/traps/*.toml), in order."""
    return {e.id: e for e in knowledge.log_events()}


# rule id -> the finding it raises: (code, status, title), one table
LOG_EVENTS = _event_table()
EVENT_TRAPS: dict[str, tuple[str, Status]] = {k: (e.code, e.status) for k, e in LOG_EVENTS.items()}


@dataclass
class Expect:
    """What the operator (or the log itself) says the run should have used."""

    efa: bool  # EFA is the intended network (the default; --no-expect-efa says otherwise)
    strong: bool  # said by the operator (transport/instance/NIC count), not inferred
    nics: int | None
    transport: str | None
    gin: bool  # GIN is expected (transport chosen, NCCL_GIN_TYPE set, DeepEP-V2 in play)
    hosts: int | None = None  # hosts the job spans as the log tells it (LogFacts.hosts)
    forced: bool = False  # --expect-efa: EFA on every rank, also on one host

    @property
    def one_host(self) -> bool:
        """The log shows one host and the operator did not ask for EFA all the same: traffic
        stays inside the node (P2P, shm, a loopback Socket), where EFA is not the path."""
        return self.hosts == 1 and not self.forced


def expectation(facts: LogFacts, ctx: Context) -> Expect:
    spec = instance_spec(ctx.instance)
    nics = ctx.options.get("expect_nics") or (spec.efa if spec else None)
    strong = bool(ctx.transport or spec or ctx.options.get("expect_nics"))
    ranks = facts.nccl_ranks()
    transport = ctx.transport
    if transport is None:
        types = {r.gin_type for r in ranks if r.gin_type is not None}
        transport = (
            {2: "gin-proxy", 5: "efa-gda"}.get(next(iter(types))) if len(types) == 1 else None
        )
    gin = bool(
        ctx.transport
        or any(r.gin_type not in (None, 0) for r in ranks)
        or facts.kind_count("deepep_v2_context")
        or _deepep_v2_manager(facts)
        or any(r.gin_plugin for r in ranks)
    )
    # EFA is the goal: off EFA is a failure unless the operator says the run never meant it
    efa = ctx.options.get("expect_efa") is not False
    forced = ctx.options.get("expect_efa") is True
    return Expect(efa, strong, nics, transport, gin, facts.hosts(), forced)


def _deepep_v2_manager(facts: LogFacts) -> bool:
    return any("DeepEPV2" in (e.group("mgr") or "") for e in facts.events_of("vllm_manager"))


def _ev(r: RankFacts, *names: str) -> list[str]:
    return [r.evidence[n] for n in names if n in r.evidence]


def _ranks_str(rs: list[RankFacts]) -> str:
    shown = ", ".join(r.name() for r in rs[:6])
    return shown + (f" and {len(rs) - 6} more" if len(rs) > 6 else "")


def _f(code: str, status: Status, title: str | None, evidence: Iterable[str]) -> Finding:
    return finding(code, status, title, list(evidence)[:MAX_EVIDENCE])


# --- network -------------------------------------------------------------------------------
# One verdict on which network a rank used, for `epdoctor logs`, diagnose --log, the launch
# gates (launch/gates.network_gate) and the panes' colours (reports/launch_panes.style_of).
def why_not_efa(r: RankFacts) -> str:
    """Why a rank is not on EFA (efa provider, efa-direct fabric, the OFI network), in words."""
    if r.provider:
        prov, fabric, n = r.provider
        if prov != "efa":
            return f"provider {r.provider_text}: not EFA"
        if fabric not in ("efa-direct", ""):
            return f"provider efa but fabric {fabric} (found {n} nics): not efa-direct"
    if r.network and r.network not in sig.NET_NAMES_OFI:
        return f"NCCL used network {r.network}" + (
            f" after: {r.net_failures[0]}" if r.net_failures else ""
        )
    if r.net_failures:
        return r.net_failures[0]
    return "no `Selected provider is efa, fabric is efa-direct` line"


def short_of_nics(ranks: Iterable[RankFacts], nics: int | None) -> list[RankFacts]:
    """Ranks on the efa provider that found fewer NICs than the instance has."""
    if not nics:
        return []
    return [r for r in ranks if r.provider and r.provider[0] == "efa" and 0 <= r.provider[2] < nics]


def line_network(text: str) -> Status | None:
    """The network verdict one NCCL line carries by itself: the provider banner or the network
    NCCL chose (PASS on EFA, FAIL off it), None for any other line."""
    if "rovider is " in text and (m := sig.OFI_PROVIDER.search(text)):
        efa = m["prov"].strip() == "efa" and (m["fab"] or "efa-direct") == "efa-direct"
        return Status.PASS if efa else Status.FAIL
    if "Using network " in text and (m := sig.USING_NETWORK.search(text)):
        return Status.PASS if m["net"] in sig.NET_NAMES_OFI else Status.FAIL
    return None


@detector("T701", "T702", "T206", "F201", "F202", domain="logs")
def network_findings(
    facts: LogFacts, exp: Expect, final: bool, tri: incidents.Triage | None = None
) -> Iterator[Keyed]:
    ranks = facts.nccl_ranks()
    groups: dict[tuple[str, str], list[RankFacts]] = {}
    for r in ranks:
        p = r.provider
        net = r.network
        if p is not None and p[0] != "efa":
            groups.setdefault(("provider", f"{p[0]} (fabric {p[1]})" if p[1] else p[0]), []).append(
                r
            )
        elif p is not None and p[1] not in ("efa-direct", ""):
            groups.setdefault(("fabric", p[1]), []).append(r)
        elif net is not None and net not in sig.NET_NAMES_OFI:
            groups.setdefault(("network", net), []).append(r)
    for (kind, what), rs in sorted(groups.items()):
        ev = [e for r in rs for e in _ev(r, "provider", "network", "ofi_init_failed", "comm")]
        n = f"{len(rs)} rank{'s' if len(rs) != 1 else ''}"
        cause = tri.net_cause([r.key for r in rs]) if tri is not None and kind != "fabric" else None
        if cause is not None and cause.code == "N101" and not exp.efa:
            cause = None  # no plugin was asked for (NCCL_NET_PLUGIN unset) and EFA is not the goal
        if kind == "provider":
            # a tcp / tcp;ofi_rxm provider is never EFA; only --no-expect-efa softens it
            status = Status.FAIL if exp.efa else Status.WARN
            title = f"aws-ofi-nccl selected provider {what}, not EFA, on {n}: {_ranks_str(rs)}"
        elif kind == "fabric":
            status = Status.FAIL if (exp.strong or exp.gin) else Status.WARN
            title = f"Provider efa but fabric {what}, not efa-direct, on {n}: {_ranks_str(rs)}"
        else:
            title = f"NCCL used the {what} network, not EFA, on {n}: {_ranks_str(rs)}"
            if exp.efa:
                status = Status.FAIL
            elif cause is None:  # the operator said EFA is not the goal, and nothing failed
                status = Status.PASS
                title = f"NCCL used the {what} network on {n}: {_ranks_str(rs)} (--no-expect-efa)"
            else:  # not the goal, but something meant to load did not
                status = Status.WARN
        if exp.one_host and status is Status.FAIL:
            # one host: no traffic leaves the node, so the NET transport carries none; a
            # non-EFA provider, or a plugin asked for and not loaded, still means the
            # multi-node run will not be on EFA
            asked = any(r.env.get("NCCL_NET_PLUGIN") or r.env.get("NCCL_NET") for r in rs)
            quiet = kind == "network" and cause is None and not asked
            status = Status.PASS if quiet else Status.WARN
            title += " (one host in this log: EFA carries only cross-node traffic; --expect-efa to require it)"
        if cause is not None:
            title += f"; it fell back after {cause.code}: {cause.cause.verdict.what or cause.code}"
            ev = [cause.cause.evidence(), *ev]
        elif kind == "network" and (why := _fallback_reason(rs)):
            title += f"; {why}"
        yield f"T701:{kind}:{what}", _f("T701", status, title, ev)
    # fewer NICs than the instance has
    if exp.nics:
        short = short_of_nics(ranks, exp.nics)
        if short:
            counts = sorted({r.provider[2] for r in short if r.provider})
            yield (
                "T702",
                _f(
                    "T702",
                    Status.WARN if exp.one_host else Status.FAIL,
                    f"NCCL found {'/'.join(map(str, counts))} EFA NICs, the instance has {exp.nics}, "
                    f"on {len(short)} ranks: {_ranks_str(short)}",
                    [e for r in short for e in _ev(r, "provider")],
                ),
            )
    # every rank of a job must see the same EFA rails: the plugin pairs rail i with rail i
    nics = [(r, r.provider[2]) for r in ranks if r.provider and r.provider[0] == "efa"]
    yield from _disagree(
        "T206", "Ranks disagree on the number of EFA NICs",
        [(r, n) for r, n in nics if n >= 0], "provider",
    )  # fmt: skip
    efa = [r for r in ranks if r.on_efa() is True]
    off = [r for r in ranks if r.on_efa() is False]
    if efa and off:
        yield (
            "F201",
            _f(
                "F201",
                Status.FAIL,
                f"Ranks disagree: {len(efa)} on EFA (efa-direct), {len(off)} not ({_ranks_str(off)})",
                [
                    *(_ev(efa[0], "provider")),
                    *(e for r in off[:4] for e in _ev(r, "provider", "network")),
                ],
            ),
        )
    yield from _disagree(
        "F202", "Ranks run different NCCL versions",
        [(r, r.nccl_version) for r in ranks if r.nccl_version], "nccl_version",
    )  # fmt: skip
    if not final:
        return
    unseen = [r for r in ranks if r.on_efa() is None]
    if not exp.efa and not groups and not efa and (done := _completed(facts, ranks)):
        # EFA is not the goal and the job says it completed: which network carried it is moot
        what, ev = done
        yield (
            "T701:completed",
            _f(
                "T701",
                Status.PASS,
                f"{what}; EFA not expected (--no-expect-efa): the network it used is not judged",
                ev,
            ),
        )
        return
    if not ranks or (unseen and not groups and not efa):
        what = (
            "no NCCL INFO line in the log"
            if not ranks
            else f"no `Using network` or provider line from {_ranks_str(unseen)}"
        )
        yield (
            "T701:unknown",
            _f(
                "T701",
                Status.UNKNOWN,
                f"Which network NCCL used cannot be seen: {what} (is NCCL_DEBUG=INFO set?)",
                [],
            ),
        )
    elif efa and not off:
        nics = sorted({r.provider[2] for r in efa if r.provider and r.provider[2] >= 0})
        fabrics = sorted({r.provider[1] or "efa" for r in efa if r.provider})
        note = "" if exp.nics else " (instance EFA count not given: NIC count not checked)"
        partial = f"; {len(unseen)} ranks logged no provider line" if unseen else ""
        status = Status.UNKNOWN if unseen else Status.PASS
        yield (
            "T701:pass",
            _f(
                "T701",
                status,
                f"{'/'.join(fabrics)} on {len(efa)} ranks, "
                f"{'/'.join(map(str, nics)) or 'unknown'} NICs{note}{partial}",
                [e for r in efa[:3] for e in _ev(r, "provider")],
            ),
        )


def _disagree(
    code: str, what: str, values: list[tuple[RankFacts, Any]], fact: str
) -> Iterator[Keyed]:
    """One failure when the ranks of a job hold different values of what must be one."""
    groups: dict[Any, list[RankFacts]] = {}
    for r, v in values:
        groups.setdefault(v, []).append(r)
    if len(groups) < 2:
        return
    title = f"{what}: " + "; ".join(f"{v} on {_ranks_str(rs)}" for v, rs in sorted(groups.items()))
    yield (
        code,
        _f(code, Status.FAIL, title, [e for rs in groups.values() for e in _ev(rs[0], fact)]),
    )


def _completed(facts: LogFacts, ranks: list[RankFacts]) -> tuple[str, list[str]] | None:
    """The log's own word that the job came up: nccl-tests' clean summary, or every rank of
    the communicator through NCCL's init (all of its nranks, each saying Init COMPLETE)."""
    if done := facts.events_of("nccl_tests_ok")[:1]:
        return "nccl-tests completed with 0 out-of-bounds values", [done[0].evidence()]
    size = max((r.comm_nranks or 0 for r in ranks), default=0)
    inited = [r for r in ranks if r.init_complete]
    if size and len(inited) >= size and len(inited) == len(ranks):
        return (
            f"NCCL initialised all {size} ranks of the communicator (Init COMPLETE)",
            [e for r in inited[:2] for e in _ev(r, "init_complete")],
        )
    return None


def _fallback_reason(rs: list[RankFacts]) -> str:
    """Why NCCL fell back, from the rank's own plugin facts, when no incident says it."""
    for r in rs:
        if r.net_plugin_not_found and not r.net_plugins_loaded:
            return f"the network plugin was not found ({r.net_plugin_not_found[-1]})"
        if r.ofi_init_failed or r.net_plugin_failed:
            return "the aws-ofi-nccl plugin failed to initialize"
    if all(not (r.net_plugins_loaded or r.providers or r.ofi_nccl_version) for r in rs):
        return "no network plugin was loaded (is NCCL_NET_PLUGIN set and the plugin on the path?)"
    return ""


# --- socket interfaces -----------------------------------------------------------------------
# interfaces a peer on another host can never reach: NCCL binds its bootstrap and NET/Socket
# listeners there and hands the address to the other ranks
_BRIDGES = ("docker", "veth", "cni", "flannel", "cali", "virbr", "br-", "podman", "lxc")


def _unreachable(name: str, addr: str) -> str | None:
    a = addr.lower().split("%", 1)[0]
    if name == "lo" or a.startswith("127.") or a == "::1":
        return "loopback"
    if a.startswith("169.254."):
        return "an IPv4 link-local address (169.254/16: not routed between hosts)"
    if a.startswith("fe80"):
        return "an IPv6 link-local address (fe80::/10: not routed between hosts)"
    if name.startswith(_BRIDGES):
        return "a container bridge or veth interface (private to this host)"
    return None


@detector("T802", domain="logs")
def socket_interface_findings(facts: LogFacts, exp: Expect) -> Iterator[Keyed]:
    """NCCL's socket interfaces (bootstrap, NET/Socket) that other hosts cannot reach (T802).

    On one host loopback works, so it is a warning there; across hosts the ranks cannot connect (or connect through the wrong interface).
    """
    ranks = facts.nccl_ranks()
    hosts = {r.host for r in ranks if r.host}
    bad: dict[tuple[str, str], list[RankFacts]] = {}
    for r in ranks:
        # the bootstrap listens on the first interface it lists ([0]); an old NCCL lists every
        # interface it found there (v2.6.4-1 src/bootstrap.cc:43, bootstrapNetListen(0, ...) at
        # :230). NET/Socket uses each one it lists.
        used = [m for ifs in r.bootstrap_ifs for m in list(sig.SOCKET_IF.finditer(ifs))[:1]]
        used += [m for ifs in r.socket_ifs for m in sig.SOCKET_IF.finditer(ifs)]
        for m in used:
            why = _unreachable(m["name"], m["addr"])
            if why and r not in bad.setdefault((m["name"], why), []):
                bad[(m["name"], why)].append(r)
    for (name, why), rs in sorted(bad.items()):
        # unreachable from other hosts, so harmful once the ranks span hosts; on one host it
        # works, even where EFA (a multi-node run) is the goal: a warning for the real run
        status = Status.FAIL if len(hosts) > 1 else Status.WARN
        title = (
            f"NCCL's sockets use {name}, {why}, on {len(rs)} rank{'s' if len(rs) != 1 else ''}: "
            f"{_ranks_str(rs)}; set NCCL_SOCKET_IFNAME to the host's routable interface"
        )
        if status is Status.WARN:
            title += " (one host in this log: works here, never across hosts)"
        ev = [e for r in rs[:4] for e in _ev(r, "bootstrap", "net_socket")]
        # a one-host warning is advice for the multi-node run: it ranks with the symptoms
        where = "if" if status is Status.FAIL else "if-onehost"
        yield f"T802:{where}:{name}", _f("T802", status, title, ev)


# --- plugin ---------------------------------------------------------------------------------
_BUILTIN_NETS = frozenset({"IB", "Socket"})


@detector("N101", "N105", "N201", domain="logs")
def plugin_findings(facts: LogFacts, exp: Expect) -> Iterator[Keyed]:
    missing: dict[tuple[str, str], list[RankFacts]] = {}
    failed: list[RankFacts] = []
    for r in facts.nccl_ranks():
        loaded = bool(r.net_plugins_loaded or r.providers or r.ofi_nccl_version)
        if r.net_plugin_not_found and not loaded:
            path = r.net_plugin_not_found[-1]
            code = "N105" if r.env.get("NCCL_NET_PLUGIN") == path else "N101"
            missing.setdefault((code, path), []).append(r)
        # NCCL's own transports (IB, Socket) fail to start on every host without them; an
        # external plugin (aws-ofi-nccl under any name) that fails is the fallback's cause
        external = [n for n in r.net_plugin_failed if n not in _BUILTIN_NETS]
        if r.ofi_init_failed or external:
            failed.append(r)
    for (code, path), rs in sorted(missing.items()):
        status = Status.FAIL if (exp.efa or code == "N105") else Status.WARN
        if code == "N101" and not exp.efa:
            # nobody asked for a plugin (NCCL_NET_PLUGIN unset) and EFA is not the goal
            status = Status.SKIP
        yield (
            f"{code}:{path}",
            _f(
                code,
                status,
                f"NCCL could not find the network plugin {path} on {len(rs)} ranks: {_ranks_str(rs)}",
                [
                    e
                    for r in rs[:4]
                    for e in _ev(r, "env:NCCL_NET_PLUGIN", "net_not_found", "network")
                ],
            ),
        )
    if failed:
        names = ", ".join(
            sorted({n for r in failed for n in r.net_plugin_failed if n not in _BUILTIN_NETS})
            or ["aws-ofi-nccl"]
        )
        ev = [
            e
            for r in failed[:4]
            for e in _ev(
                r, "ofi_init_failed", *[k for k in r.evidence if k.startswith("net_failed:")]
            )
        ]
        yield (
            "N201",
            _f(
                "N201",
                # on a host without EFA (--no-expect-efa) the EFA-only plugin cannot start
                Status.FAIL if exp.efa else Status.WARN,
                f"The network plugin ({names}) loaded but failed to initialize on {len(failed)} ranks: "
                f"{_ranks_str(failed)}",
                ev,
            ),
        )


# --- GIN ------------------------------------------------------------------------------------
@detector("T102", "T202", "T201", domain="logs")
def gin_findings(facts: LogFacts, exp: Expect, final: bool) -> Iterator[Keyed]:
    ranks = facts.nccl_ranks()
    odd_type = [r for r in ranks if r.gin_type in (3, 4)]
    if odd_type and exp.efa:
        yield (
            "T102",
            _f(
                "T102",
                Status.WARN,  # the catalogue's severity: a known pre-release shape, not a fault
                f"NCCL_GIN_TYPE={odd_type[0].gin_type} on EFA (the pre-release GDAKI numbering; "
                f"released EFA-GDA is type 5) on {_ranks_str(odd_type)}",
                _ev(odd_type[0], "env:NCCL_GIN_TYPE"),
            ),
        )
    if exp.transport:
        want_type, want_plugin = (5, "Libfabric_GDAKI") if exp.transport == "efa-gda" else (2, None)
        wrong = []
        for r in ranks:
            bad_type = r.gin_type is not None and r.gin_type not in (want_type, -1)
            plugin = r.gin_plugin
            if plugin is not None:
                gdaki = plugin.endswith("GDAKI") or r.gin_plugin_type == 5
                bad_plugin = gdaki != (exp.transport == "efa-gda")
            else:
                bad_plugin = False
            if bad_type or bad_plugin:
                wrong.append(r)
        if wrong:
            r = wrong[0]
            got = f"NCCL_GIN_TYPE={r.gin_type}" if r.gin_type is not None else ""
            if r.gin_plugin:
                got += (", " if got else "") + f"GIN plugin {r.gin_plugin}"
            yield (
                "T202",
                _f(
                    "T202",
                    Status.FAIL,
                    f"The log shows {got} on {len(wrong)} ranks, but the transport is {exp.transport} "
                    f"(NCCL_GIN_TYPE={want_type}{', plugin ' + want_plugin if want_plugin else ''})",
                    [e for w in wrong[:4] for e in _ev(w, "env:NCCL_GIN_TYPE", "gin_plugin")],
                ),
            )
    if not final:
        return
    with_gin = [r for r in ranks if r.gin_plugin]
    if exp.gin and ranks:
        if with_gin and len(with_gin) == len(ranks):
            names = sorted({r.gin_plugin or "" for r in with_gin})
            gdaki = [r for r in with_gin if r.gdaki_context]
            extra = f"; GDAKI context created on {len(gdaki)}" if gdaki else ""
            yield (
                "T201:pass",
                _f(
                    "T201",
                    Status.PASS,
                    f"GIN plugin {', '.join(names)} assigned on all {len(ranks)} ranks{extra}",
                    [e for r in with_gin[:2] for e in _ev(r, "gin_plugin", "gdaki_context")],
                ),
            )
        elif not facts.events_of(*[k for k, e in LOG_EVENTS.items() if e.code in ("T201", "T105")]):
            missing = [r for r in ranks if not r.gin_plugin]
            yield (
                "T201:unknown",
                _f(
                    "T201",
                    Status.UNKNOWN,
                    f"No GIN plugin assignment logged by {_ranks_str(missing)}: whether GIN came up "
                    "cannot be seen (NCCL_DEBUG_SUBSYS must include INIT)",
                    [],
                ),
            )


# --- events ---------------------------------------------------------------------------------
def _event_group(events: list[Event], title: str, code: str, status: Status) -> Finding:
    ranks = sorted({e.rank_key for e in events})
    where = f" ({len(ranks)} ranks: {', '.join(ranks[:4])}{'...' if len(ranks) > 4 else ''})"
    return _f(
        code,
        status,
        title + (where if ranks and len(events) > 0 else ""),
        [e.evidence() for e in events],
    )


_EXITCODE = re.compile(r"exitcode\s*:?\s*-(\d+)\b")


@detector("E807", domain="logs")
def _signalled_children(evs: list[Event], timed_out: bool) -> Generator[Keyed, None, list[Event]]:
    """Children torchrun reports killed by a signal: the signal is the finding, not E204.

    torchrun prints a negative exitcode for a child ended by a signal (-9 SIGKILL: the OOM
    killer or a scheduler; -6 SIGABRT: an abort or a C++ exception). SIGSEGV (-11) is the
    segfault event's (E203); SIGTERM (-15) is a stop someone sent (torchrun itself, to the other
    workers once one failed). The rest stay "a failed child" (E204), a pure symptom; so does
    the watchdog's own abort after a collective timed out (``log_incidents.watchdog_abort``).
    """
    by_sig: dict[int, list[Event]] = {}
    rest: list[Event] = []
    for e in evs:
        m = _EXITCODE.search(e.text)
        if (
            m is None
            or int(m[1]) == signal.SIGTERM
            or (timed_out and incidents.watchdog_abort(e.text))
        ):
            rest.append(e)
        elif int(m[1]) != signal.SIGSEGV:
            by_sig.setdefault(int(m[1]), []).append(e)
    for num, group in sorted(by_sig.items()):
        try:
            name = signal.Signals(num).name
        except ValueError:
            name = f"signal {num}"
        title = f"A rank was killed by {name} (torchrun: exitcode -{num})"
        if num == signal.SIGKILL:
            title += ": the kernel's OOM killer, a scheduler or an operator"
        yield f"E807:signal:{num}", _event_group(group, title, "E807", Status.FAIL)
    return rest


# the event table's codes, and the judgments of events below
@detector(
    *dict.fromkeys(e.code for e in LOG_EVENTS.values()),
    *("D401", "E407", "E102", "E104", "E503", "E202", "D101", "E203", "T101"),
    domain="logs",
)
def event_findings(facts: LogFacts, exp: Expect) -> Iterator[Keyed]:
    by_kind: dict[str, list[Event]] = {}
    for e in facts.events:
        by_kind.setdefault(e.kind, []).append(e)
    for kind, e in LOG_EVENTS.items():
        code, status = e.code, e.status
        evs = by_kind.get(kind)
        if kind == "jit_ptxas" and (
            by_kind.get("jit_ptxas_mov") or by_kind.get("jit_ptxas_stbulk")
        ):
            continue  # the same ptxas run, already explained by D504 / D405
        if kind == "torchrun_child" and evs:
            evs = yield from _signalled_children(evs, incidents.timed_out(facts))
        if evs:
            yield f"{code}:{kind}", _event_group(evs, e.title, code, status)
    if bad := by_kind.get("gin_bad_type"):
        yield "T101:log", _gin_type_finding(facts, bad)
    if qp := by_kind.get("deepep_qp_cap"):
        yield (
            "D401:cap",
            _event_group(
                qp,
                "DeepEP capped its QPs for EFA: the 128-slot GIN ring overflow is avoided",
                "D401",
                Status.PASS,
            ),
        )
    if mgr := by_kind.get("vllm_manager"):
        names = sorted({e.group("mgr") or "?" for e in mgr})
        v2 = [n for n in names if "DeepEPV2" in n]
        if v2 and len(names) == 1:
            yield (
                "E407:v2",
                _event_group(
                    mgr,
                    "vLLM uses DeepEP-V2 for the MoE all-to-all (DeepEPV2All2AllManager)",
                    "E407",
                    Status.PASS,
                ),
            )
        else:
            yield (
                "E407:other",
                _event_group(
                    mgr,
                    f"vLLM's all2all manager is {', '.join(names)}, not DeepEP-V2",
                    "E407",
                    Status.WARN if not v2 else Status.FAIL,
                ),
            )
    if ep := by_kind.get("trtllm_ncclep_missing"):
        floor = stack.engine("tensorrt-llm").nccl_floor
        ranks = facts.nccl_ranks()
        old = [r for r in ranks if r.nccl_version and _vt(r.nccl_version) < _vt(floor)]
        code = "E104" if old else "E102"
        title = "TensorRT-LLM: `nccl-ep is not installed.`" + (
            f" (NCCL {old[0].nccl_version} is below NcclEP's {floor} floor)"
            if old
            else f" (libnccl_ep missing, or the loaded NCCL is below {floor}: see E104)"
        )
        yield code, _event_group(ep, title, code, Status.FAIL)
    deepep_v2 = bool(facts.kind_count("deepep_v2_context") or _deepep_v2_manager(facts))
    crash = by_kind.get("cuda_illegal", []) + by_kind.get("cuda_launch", [])
    if crash:
        eager = [e.group("eager") for e in by_kind.get("vllm_engine_config", [])]
        graphs = "False" in eager
        if deepep_v2 and graphs:
            yield (
                "E503",
                _event_group(
                    crash,
                    "CUDA fault at startup with DeepEP-V2 in CUDA-graph mode: the #52632 "
                    "expert_tokens_meta crash",
                    "E503",
                    Status.FAIL,
                ),
            )
        else:
            kinds = sorted({e.kind for e in crash})
            what = " / ".join(
                {"cuda_illegal": "illegal memory access", "cuda_launch": "launch failure"}[k]
                for k in kinds
            )
            yield "E202", _event_group(crash, f"CUDA {what} in a rank", "E202", Status.FAIL)
    seg = by_kind.get("segfault")
    if seg:
        if deepep_v2:
            yield (
                "D101",
                _event_group(
                    seg,
                    "Segmentation fault with DeepEP-V2 in the process: the ElasticBuffer-init "
                    "segfault of EP_REUSE_NCCL_COMM=1 under vLLM",
                    "D101",
                    Status.FAIL,
                ),
            )
        else:
            yield (
                "E203",
                _event_group(seg, "A process died of a segmentation fault", "E203", Status.FAIL),
            )


def _gin_type_finding(facts: LogFacts, bad: list[Event]) -> Finding:
    """NCCL refused NCCL_GIN_TYPE: a type this NCCL does not have (T101), told by the version.

    The line says the type is invalid for this NCCL, whether or not a GIN plugin loaded: the
    fix is the type or the NCCL, never the plugin path.
    """
    ranks = {r.key: r for r in facts.nccl_ranks()}
    since = stack.gin_type_since()
    r = next((ranks[e.rank_key] for e in bad if e.rank_key in ranks), None)
    gin_type = r.gin_type if r is not None else None
    if gin_type is None:
        m = re.search(r"invalid GIN type (\d+)", bad[0].text)
        gin_type = int(m[1]) if m else None
    version = r.nccl_version if r is not None else None
    title = "NCCL does not know the GIN type it was given"
    if gin_type is not None:
        title = f"NCCL_GIN_TYPE={gin_type} is a GIN type this NCCL does not have"
        first = since.get(str(gin_type))
        if version and first and _vt(version) < _vt(first):
            title += (
                f": NCCL {version} is older than {first}, the first release with type {gin_type}"
            )
        elif version and first is None:
            title += f": NCCL {version} knows no type {gin_type}"
        elif version:
            title += f" (NCCL {version})"
    loaded = r is not None and bool(r.gin_loaded or r.gin_plugin)
    if loaded:
        title += "; the GIN plugin itself loaded"
    ev = [e.evidence() for e in bad]
    if r is not None:
        ev = _ev(r, "env:NCCL_GIN_TYPE", "nccl_version") + ev
    where = sorted({e.rank_key for e in bad})
    if len(where) > 1:
        title += f" ({len(where)} ranks)"
    return _f("T101", Status.FAIL, title, ev)


def _with_evidence(f: Finding, extra: list[str]) -> Finding:
    if not extra or f.status in (Status.PASS, Status.UNKNOWN):
        return f
    ev = list(f.evidence)
    for e in extra:
        if len(ev) >= MAX_EVIDENCE:
            break
        if e not in ev:
            ev.append(e)
    return dataclasses.replace(f, evidence=tuple(ev))


def _order(kf: Keyed) -> tuple[int, int, int]:
    key, f = kf
    lines = [n for n in (_line_of(e) for e in f.evidence) if n is not None]
    return (-f.status.rank, incidents.tier(f.code, key), min(lines, default=1 << 40))


def _line_of(ev: str) -> int | None:
    try:
        return int(ev.split(": ", 1)[0].rsplit(":", 1)[-1].replace("line ", ""))
    except ValueError:
        return None


def _vt(v: str) -> tuple[int, ...]:
    out = []
    for p in v.split(".")[:3]:
        out.append(int(p) if p.isdigit() else 0)
    return tuple(out)


def evaluate(facts: LogFacts, ctx: Context, final: bool = True) -> list[Keyed]:
    """Every finding of the log, the one to fix first at the top (``log_incidents.tier``)."""
    exp = expectation(facts, ctx)
    tri = incidents.build(facts, EVENT_TRAPS)
    out: list[Keyed] = []
    out.extend(network_findings(facts, exp, final, tri))
    out.extend(socket_interface_findings(facts, exp))
    out.extend(plugin_findings(facts, exp))
    out.extend(gin_findings(facts, exp, final))
    out.extend(event_findings(facts, exp))
    owned = {f.code for _, f in out} | incidents.FACT_CODES
    out = [(k, _with_evidence(f, tri.extra_evidence(f.code))) for k, f in out]
    names = {r.key: r.name() for r in facts.all_ranks()}
    node = ctx.options.get("node") or {}
    out.extend(incidents.findings(tri, names, owned, facts.hints, node))
    out = [(k, dataclasses.replace(f, subject=k)) for k, f in out]
    out.sort(key=_order)
    if final and not out:
        out.append(
            (
                "T701:nothing",
                dataclasses.replace(
                    _f(
                        "T701",
                        Status.UNKNOWN,
                        "Nothing conclusive in the log: no NCCL or engine signature",
                        [],
                    ),
                    subject="T701:nothing",
                ),
            )
        )
    return out


def findings_in(chunks: Iterable[bytes], ctx: Context, source: str = "") -> list[Finding]:
    """The findings of a whole log already in memory (a pod's log tail): no I/O."""
    facts = LogFacts()
    feed_all(facts, source, chunks)
    return [f for _, f in evaluate(facts, ctx, final=True)]


@check(domain="logs")  # runs the detectors above, which register their own codes
def log_check(facts: Any, ctx: Context) -> Iterable[Finding]:
    if not isinstance(facts, LogFacts):
        return []
    return [f for _, f in evaluate(facts, ctx, final=True)]


# every code the log analyzer can raise
CODES = sorted({c for d in detectors("logs") for c in d.codes})
