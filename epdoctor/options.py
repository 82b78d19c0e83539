"""The flags, in one place: argparse fragments and what turns parsed flags into requests.

The command line (epdoctor.commands) and the terminal app (epdoctor.screens, whose target and
launch fields take the same flags) both read flags through here, so a flag means the same in
both and the core below sees only typed requests (epdoctor.requests), never a Namespace.
Light on purpose: `epdoctor --help` imports this, so no transport client, UI toolkit or YAML.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from typing import Any

from epdoctor.checks.base import TRANSPORTS
from epdoctor.model import Context
from epdoctor.requests import ProbeOptions, TargetSpec

ENGINES = ("vllm", "dynamo", "tensorrt-llm", "sglang")


# --------------------------------------------------------------------------- where to look
def add_target_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags that name targets: bundles, SSH hosts, Kubernetes pods or nodes."""
    parser.add_argument(
        "--bundle",
        metavar="FILE",
        action="append",
        default=[],
        help="replay a saved bundle (from `epdoctor collect`) or the node probe's JSON "
        "(python3 probes/node_probe.py > node.json) instead of probing live",
    )
    add_ssh_arguments(parser)
    add_kube_arguments(parser)


def add_ssh_arguments(parser: argparse.ArgumentParser) -> None:
    """ssh-like flags: hosts by name, from a file, or from ~/.ssh/config."""
    g = parser.add_argument_group("SSH hosts")
    g.add_argument(
        "--ssh",
        metavar="HOST[,HOST...]",
        action="append",
        default=[],
        help="diagnose these hosts over SSH ([user@]host[:port]; ~/.ssh/config aliases work)",
    )
    g.add_argument(
        "--hosts",
        metavar="FILE",
        action="append",
        default=[],
        help="hosts from FILE, one [user@]host[:port] a line; # starts a comment",
    )
    g.add_argument(
        "--ssh-config-hosts",
        metavar="PATTERN",
        action="append",
        default=[],
        help="every Host in ~/.ssh/config matching PATTERN (e.g. 'p5en-*')",
    )
    g.add_argument(
        "-i",
        "--identity",
        metavar="KEY",
        action="append",
        default=[],
        help="private key file to offer first (also IdentityFile, ssh-agent, ~/.ssh/id_*)",
    )
    g.add_argument(
        "--user", metavar="NAME", help="remote user (default: ~/.ssh/config, then yours)"
    )
    g.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="record host keys not yet in known_hosts (a changed key is still refused)",
    )
    g.add_argument(
        "--known-hosts",
        metavar="FILE",
        help="known_hosts file (default: UserKnownHostsFile, else ~/.ssh/known_hosts)",
    )
    g.add_argument("--ssh-config", metavar="FILE", help="ssh config (default: ~/.ssh/config)")
    g.add_argument(
        "--sudo",
        action="store_true",
        help="run the probe with `sudo -n` (non-interactive) for reads that need root",
    )
    g.add_argument(
        "--connect-timeout",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds for TCP connect, SSH banner, key exchange and auth, each (default 10)",
    )
    g.add_argument(
        "--host-timeout",
        type=float,
        metavar="S",
        help="overall seconds per host, connect to result (default: probe --timeout + 30)",
    )
    g.add_argument(
        "--remote-python",
        metavar="PATH",
        default="python3",
        help="python on the hosts that runs the probe (default python3)",
    )
    # --parallel N (hosts at once) belongs to the diagnose command: it bounds every target kind.


def add_kube_arguments(parser: argparse.ArgumentParser) -> None:
    """kubectl-like flags: pods by name or label, or nodes via a Job."""
    g = parser.add_argument_group("Kubernetes")
    g.add_argument("--pod", metavar="NAME", help="diagnose this pod (probe runs in its container)")
    g.add_argument(
        "-l", "--selector", metavar="SELECTOR", help="pods (or with --nodes, nodes) matching labels"
    )
    g.add_argument("-n", "--namespace", metavar="NS", help="namespace (default: the context's)")
    g.add_argument(
        "-A", "--all-namespaces", action="store_true", help="select pods in every namespace"
    )
    g.add_argument("--context", metavar="NAME", help="kubeconfig context (default: current)")
    g.add_argument("--kubeconfig", metavar="FILE", help="kubeconfig file (default: $KUBECONFIG)")
    g.add_argument(
        "--request-timeout",
        type=float,
        metavar="S",
        help="seconds to wait for each API call (default 20; the probe's exec waits for --timeout)",
    )
    g.add_argument("-c", "--container", metavar="NAME", help="container to probe (default: first)")
    g.add_argument(
        "--nodes",
        action="store_true",
        help="probe nodes, not pods: one read-only Job pod per node selected by -l",
    )
    g.add_argument(
        "--job-image",
        metavar="IMAGE",
        help="image for --nodes pods (needs python3; default: the probe image in docs/kubernetes.md)",
    )
    g.add_argument("--yes", "-y", action="store_true", help="create the --nodes Job without asking")


def to_target_spec(args: argparse.Namespace) -> TargetSpec:
    """The targets the flags name; a flag this command does not have keeps its default."""
    a = vars(args)

    def seq(name: str) -> tuple[str, ...]:
        return tuple(a.get(name) or ())

    return TargetSpec(
        bundle=seq("bundle"),
        ssh=seq("ssh"),
        hosts=seq("hosts"),
        ssh_config_hosts=seq("ssh_config_hosts"),
        identity=seq("identity"),
        user=a.get("user"),
        accept_new_host_keys=bool(a.get("accept_new_host_keys")),
        known_hosts=a.get("known_hosts"),
        ssh_config=a.get("ssh_config"),
        sudo=bool(a.get("sudo")),
        connect_timeout=a.get("connect_timeout") or 10.0,
        host_timeout=a.get("host_timeout"),
        remote_python=a.get("remote_python") or "python3",
        pod=a.get("pod"),
        selector=a.get("selector"),
        namespace=a.get("namespace"),
        all_namespaces=bool(a.get("all_namespaces")),
        context=a.get("context"),
        kubeconfig=a.get("kubeconfig"),
        request_timeout=a.get("request_timeout"),
        container=a.get("container"),
        nodes=bool(a.get("nodes")),
        job_image=a.get("job_image"),
        yes=bool(a.get("yes")),
        probe_timeout=a.get("timeout"),
    )


def parse_target_flags(argv: list[str]) -> TargetSpec:
    """The same flags `epdoctor diagnose` takes, from a free-text field (the app's target)."""
    p = argparse.ArgumentParser(prog="targets", add_help=False, exit_on_error=False)
    add_target_arguments(p)
    try:
        ns, rest = p.parse_known_args(argv)
    except (argparse.ArgumentError, SystemExit) as exc:
        raise ValueError(f"bad target flags: {exc}") from exc
    if rest:
        raise ValueError(f"unknown target flags: {' '.join(rest)}")
    return to_target_spec(ns)


# --------------------------------------------------------------------------- the intended stack
def add_context_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("intended stack")
    g.add_argument(
        "--transport",
        choices=TRANSPORTS,
        help="judge floors for this transport (default: NCCL_GIN_TYPE of the workload, "
        "else report what each transport would need)",
    )
    g.add_argument(
        "--engine", choices=ENGINES, help="the serving engine, when not evident from the node"
    )
    g.add_argument(
        "--instance",
        metavar="TYPE",
        help="instance type when the node cannot tell (e.g. p5en.48xlarge)",
    )
    add_expect_efa_argument(g)


def add_expect_efa_argument(g: Any) -> None:
    """EFA is the goal: a rank off EFA fails unless the operator says the run never meant it."""
    g.add_argument(
        "--no-expect-efa",
        dest="expect_efa",
        action="store_false",
        default=True,
        help="the run was not meant to use EFA (one node, another fabric): a rank on Socket, "
        "IB or a non-EFA provider is then a warning, not a failure",
    )


def context_from(args: argparse.Namespace) -> Context:
    opts = {} if getattr(args, "expect_efa", True) else {"expect_efa": False}
    return Context(
        transport=args.transport, engine=args.engine, instance=args.instance, options=opts
    )


# --------------------------------------------------------------------------- the node probe
def add_probe_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("probe")
    g.add_argument(
        "--pid",
        type=int,
        action="append",
        default=[],
        metavar="N",
        help="also read what process N really loaded (/proc/N/maps) and its environment",
    )
    g.add_argument(
        "--all-pids", action="store_true", help="every process that has a libnccl mapped"
    )
    g.add_argument(
        "--timeout",
        type=float,
        default=60.0,
        metavar="S",
        help="probe deadline per target (default 60)",
    )
    g.add_argument(
        "--root",
        metavar="DIR",
        help="read the node's files under DIR (a mounted host root or an unpacked image)",
    )


def probe_options_from(args: argparse.Namespace, targets: Sequence[Any] = ()) -> ProbeOptions:
    """The probe's flags; a --root that this host is to read must be a folder here (for SSH
    hosts and pods it names a folder over there, which only the probe can judge)."""
    root = args.root
    if root and any(t.info.kind == "local" for t in targets) and not os.path.isdir(root):
        from epdoctor.model import EpdoctorError
        from epdoctor.safeio import plain

        why = "is not a folder" if os.path.exists(root) else "no such folder"
        raise EpdoctorError(f"--root {plain(root)}: {why} (a mounted host root or unpacked image)")
    return ProbeOptions(
        pids=tuple(args.pid), all_pids=args.all_pids, timeout_s=args.timeout, root=args.root
    )
