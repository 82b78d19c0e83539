"""Kubernetes targets of a TargetSpec: pods by name or label, or nodes via a Job (the
kubectl-like flags that fill it are in epdoctor.options).

Light on purpose: the kubernetes client is imported only in from_spec, and
only when the spec names pods or nodes.
"""

from __future__ import annotations

from typing import Any

from epdoctor.requests import TargetSpec
from epdoctor.targets.base import Target, TargetError


def wanted(spec: TargetSpec) -> bool:
    return bool(spec.pod or spec.selector or spec.all_namespaces or spec.nodes)


def from_spec(spec: TargetSpec) -> list[Target] | None:
    if not wanted(spec):
        if spec.namespace or spec.context:
            raise TargetError("-n/--context need --pod NAME, -l SELECTOR or --all-namespaces")
        return None
    if spec.pod and spec.selector and not spec.nodes:
        raise TargetError("give either --pod NAME or -l SELECTOR, not both")
    from epdoctor.targets import kube

    if spec.namespace:
        kube.valid_namespace(spec.namespace)
    if spec.container:
        kube.valid_container_name(spec.container)
    session = kube.KubeSession.connect(spec.context, spec.kubeconfig, spec.request_timeout)
    if spec.nodes:
        from epdoctor.targets import kube_job

        return kube_job.node_targets(session, spec)
    pods = kube.select_pods(
        session,
        namespace=spec.namespace,
        pod=spec.pod,
        selector=spec.selector,
        all_namespaces=spec.all_namespaces,
    )
    return [kube.KubePodTarget(session, p, spec.container) for p in pods]


def describe(args: Any) -> str:
    """One line for progress output: what was selected."""
    if getattr(args, "pod", None):
        return f"pod {args.pod}"
    return f"pods matching {args.selector}" if getattr(args, "selector", None) else "pods"
