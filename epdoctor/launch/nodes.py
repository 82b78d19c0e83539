"""Where a launch runs: the selected targets as launcher Nodes.

The local host is a LocalNode. An SSH host or a Kubernetes pod (any target with
an exec channel) is a ShellNode over that channel; its transport errors become
failed commands, so one lost node never crashes the launch of the others. A
bundle replays a saved diagnosis and the node-probe Jobs of ``--nodes`` only
read: neither can start anything, and saying so beats launching elsewhere.
`epdoctor run` and the terminal app both take their nodes from here.
"""

from __future__ import annotations

import os
import shlex
from collections import Counter
from typing import Any

from epdoctor.launch.launcher import LocalNode, Node
from epdoctor.launch.shell_node import ShellNode
from epdoctor.model import EpdoctorError
from epdoctor.requests import TargetSpec


def open_nodes(spec: TargetSpec) -> list[Node]:
    """The nodes a TargetSpec names (this host when it names none)."""
    from epdoctor.targets.base import TargetError
    from epdoctor.targets.selection import open_targets

    if spec.bundle:
        raise EpdoctorError("--bundle replays a saved diagnosis; it cannot run anything")
    if spec.nodes:
        raise EpdoctorError(
            "--nodes probes nodes through read-only Job pods; launch into the "
            "engine's pods with --pod or -l instead"
        )
    try:
        targets = open_targets(spec)
    except TargetError as exc:
        raise EpdoctorError(str(exc)) from exc
    return nodes_for(targets)


def launch_nodes(spec: TargetSpec, plan: dict[str, Any], plan_file: str | None) -> list[Node]:
    """Where the launch runs: the SSH hosts / pods the target flags name; else the plan's
    pods (a Kubernetes plan); else this host. A plan for several bare nodes names no
    address this host could stand in for: it is refused, naming what to pass."""
    targets = plan_targets(spec, plan, plan_file)
    return nodes_for(targets) if targets is not None else open_nodes(spec)


def plan_targets(spec: TargetSpec, plan: dict[str, Any], plan_file: str | None) -> list[Any] | None:
    """The targets a plan names when no target flag does: the StatefulSet pods of a
    Kubernetes plan (NAME-0 .. NAME-(N-1), leader first, in the plan's namespace or -n's).
    None: the target flags (or this host) decide."""
    inp = plan.get("input") if isinstance(plan.get("input"), dict) else {}
    target = inp.get("target")
    if not plan or spec.names_targets:  # given, the target flags win over a plan
        return None
    nodes = int(plan.get("nodes") or inp.get("nodes") or 1)
    if target == "bare":
        hosts = [str(h) for h in inp.get("hosts") or []]
        if nodes > 1 or hosts:
            where = ",".join(hosts) if hosts else ",".join(f"NODE{i}" for i in range(nodes))
            raise EpdoctorError(
                f"{plan_file} plans {nodes} bare node(s); name them: --ssh {where} "
                "(leader first; or --hosts FILE)"
            )
        return None
    if target != "kubernetes":
        return None
    name = str(plan.get("name") or inp.get("name") or "")
    namespace = spec.namespace or str(inp.get("namespace") or "default")
    if not name:
        raise EpdoctorError(f"{plan_file} names no StatefulSet: pass --pod NAME or -l SELECTOR")
    return plan_pods(spec, name, namespace, nodes, plan_file)


def plan_pods(
    spec: TargetSpec, name: str, namespace: str, count: int, plan_file: str | None
) -> list[Any]:
    """The pods NAME-0 .. NAME-(count-1) in `namespace`, each checked to exist, leader first."""
    from epdoctor.targets import kube
    from epdoctor.targets.base import TargetError

    pods = [f"{name}-{i}" for i in range(count)]
    shown = pods[0] if count == 1 else f"{pods[0]} .. {pods[-1]}"
    try:
        session = kube.KubeSession.connect(spec.context, spec.kubeconfig, spec.request_timeout)
        found = [kube.select_pods(session, namespace=namespace, pod=p)[0] for p in pods]
        return [kube.KubePodTarget(session, p, spec.container) for p in found]
    except TargetError as exc:
        hint = (
            "apply the plan first (without --attach, `epdoctor run` applies it), or name the "
            "pods with --pod / -l"
            if "not found" in str(exc)
            else "or name where to run with --pod, -l or --ssh"
        )
        raise EpdoctorError(
            f"{plan_file} runs in the pods {shown} (namespace {namespace}): {exc}; {hint}"
        ) from exc


def nodes_for(targets: list[Any]) -> list[Node]:
    nodes: list[Node] = []
    for t in targets:
        if t.info.kind == "local":
            nodes.append(LocalNode("local"))
        elif callable(getattr(t, "exec", None)):
            nodes.append(remote_node(t))
        else:
            close_nodes(nodes)
            raise EpdoctorError(f"{t.info.kind} target {t.info.name} cannot start processes")
    return nodes


def remote_node(target: Any) -> ShellNode:
    """A ShellNode over a target's exec (SSH channel or pod exec)."""
    from epdoctor.targets.base import TargetError

    def exec_fn(cmd: str, stdin: bytes, timeout: float) -> tuple[int | None, bytes, bytes]:
        try:
            return target.exec(cmd, stdin, timeout)
        except TargetError as exc:
            return None, b"", str(exc).encode()

    node = ShellNode(target.info.name, target.info.kind, exec_fn, login_of(target))
    node.address = address_of(target)  # type: ignore[attr-defined]
    node.close = target.close  # type: ignore[method-assign]
    return node


def login_of(target: Any) -> str:
    """The command that runs a command on the target from this host ("" when unknown)."""

    host = getattr(target, "host", None)
    hostname = getattr(host, "hostname", None)
    if target.info.kind == "ssh" and isinstance(hostname, str) and hostname:
        port = getattr(host, "port", 22)
        user = getattr(host, "user", "")
        jump = ",".join(h.label() for h in getattr(host, "jump", ()) or ())
        words = ["ssh"]
        settings = getattr(target, "settings", None)
        keys = getattr(settings, "identity_files", ()) or ()
        if keys:  # -i KEY as given to epdoctor
            words += ["-i", str(keys[0])]
        known = str(getattr(getattr(settings, "policy", None), "user_file", "") or "")
        if known and known != os.path.expanduser("~/.ssh/known_hosts"):
            words += ["-o", f"UserKnownHostsFile={known}"]
        if jump:
            words += ["-J", jump]
        if port and port != 22:
            words += ["-p", str(port)]
        words.append(f"{user}@{hostname}" if user else hostname)
        return shlex.join(words)
    if target.info.kind == "pod":
        ns, name = getattr(target, "namespace", None), getattr(target, "name", None)
        if ns and name:
            words = ["kubectl", "exec", "-n", ns, name]
            if getattr(target, "container", None):
                words += ["-c", target.container]
            return shlex.join([*words, "--"])
    return ""


def address_of(target: Any) -> str:
    """How the other nodes reach this one (the rendezvous and leader address)."""
    host = getattr(target, "host", None)
    for attr in ("hostname", "host", "address"):
        v = getattr(host, attr, None)
        if isinstance(v, str) and v:
            return v
    pod = getattr(target, "pod", None)
    if isinstance(pod, dict):
        ip = (pod.get("status") or {}).get("podIP")
        if ip:
            return str(ip)
    return str(target.info.name)


def close_nodes(nodes: list[Any]) -> None:
    """Close every node's connection; one that fails to close spares none of the others."""
    for n in nodes:
        try:
            n.close()
        except Exception:
            pass


_KIND = {"ssh": ("SSH host", "SSH hosts"), "pod": ("pod", "pods")}


def where(nodes: list[Node]) -> str:
    """The nodes in a few words, for a confirmation: 'this host', '2 SSH hosts (a, b)'."""
    if not nodes:
        return "no node"
    if all(isinstance(n, LocalNode) for n in nodes):
        return "this host" if len(nodes) == 1 else f"this host ({len(nodes)} nodes)"
    kinds = Counter(n.kind for n in nodes)
    one, many = (
        _KIND.get(next(iter(kinds)), ("node", "nodes")) if len(kinds) == 1 else ("node", "nodes")
    )
    if len(nodes) == 1:
        return f"{one} {nodes[0].name}"
    names = ", ".join(n.name for n in nodes[:4]) + (", …" if len(nodes) > 4 else "")
    return f"{len(nodes)} {many} ({names})"
