"""kubectl-like flags for `epdoctor diagnose`: pods by name or label, or nodes via a Job.

Light on purpose: the kubernetes client is imported only in from_args, and
only when one of these flags was given.
"""

from __future__ import annotations

import argparse
from typing import Any

from epdoctor.targets.base import Target, TargetError


def add_arguments(parser: argparse.ArgumentParser) -> None:
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


def wanted(args: argparse.Namespace) -> bool:
    return bool(
        getattr(args, "pod", None)
        or getattr(args, "selector", None)
        or getattr(args, "all_namespaces", False)
        or getattr(args, "nodes", False)
    )


def from_args(args: argparse.Namespace) -> list[Target] | None:
    if not wanted(args):
        if getattr(args, "namespace", None) or getattr(args, "context", None):
            raise TargetError("-n/--context need --pod NAME, -l SELECTOR or --all-namespaces")
        return None
    if args.pod and args.selector and not args.nodes:
        raise TargetError("give either --pod NAME or -l SELECTOR, not both")
    from epdoctor.targets import kube

    if args.namespace:
        kube.valid_namespace(args.namespace)
    if args.container:
        kube.valid_container_name(args.container)
    session = kube.KubeSession.connect(
        args.context, args.kubeconfig, getattr(args, "request_timeout", None)
    )
    if args.nodes:
        from epdoctor.targets import kube_job

        return kube_job.node_targets(session, args)
    pods = kube.select_pods(
        session,
        namespace=args.namespace,
        pod=args.pod,
        selector=args.selector,
        all_namespaces=args.all_namespaces,
    )
    return [kube.KubePodTarget(session, p, args.container) for p in pods]


def describe(args: Any) -> str:
    """One line for progress output: what was selected."""
    if getattr(args, "pod", None):
        return f"pod {args.pod}"
    return f"pods matching {args.selector}" if getattr(args, "selector", None) else "pods"
