"""`epdoctor diagnose --nodes -l SELECTOR`: the node probe as one Job per selected node.

For fleets, exec into workload pods does not scale and sees only what a pod
sees. This mode lists the nodes the selector names, shows the exact Job
objects it will create, asks (``--yes`` for scripts), then per node creates a
Job pinned to it (kubernetes.io/hostname), tolerating every taint (GPU nodes
are tainted), with the host's /sys, /proc, /usr, /opt and two /etc files
mounted read-only under /host and the probe reading them with ``--root /host``.
The probe source travels in the pod's command (``python3 -c``), so no
ConfigMap is needed. The probe's JSON is the pod's log. Every Job is deleted
(with its pod) when its node is done, and ``ttlSecondsAfterFinished`` removes
any that an interrupted run left behind.
"""

from __future__ import annotations

import json
import secrets
import sys
import time
from typing import Any

from epdoctor.model import TargetInfo
from epdoctor.requests import TargetSpec
from epdoctor.targets.base import DryRun, ProbeOptions, ProbeOutput, Target, TargetError
from epdoctor.targets.kube import (
    KubeApiError,
    KubeSession,
    valid_namespace,
    valid_selector,
)
from epdoctor.targets.probe_script import node_probe_source

DEFAULT_IMAGE = "public.ecr.aws/docker/library/python:3.12-slim"
APP_LABEL = "app.kubernetes.io/name"
APP = "epdoctor-node-probe"
RUN_LABEL = "epdoctor.dev/run"
HOST_ROOT = "/host"
# host path -> (volume name, hostPath type). Read-only; nothing else of the host is mounted.
HOST_MOUNTS = {
    "/sys": ("host-sys", "Directory"),
    "/proc": ("host-proc", "Directory"),
    "/usr": ("host-usr", "Directory"),
    "/opt": ("host-opt", "DirectoryOrCreate"),
    "/etc/ld.so.cache": ("host-ld-cache", "FileOrCreate"),
    "/etc/os-release": ("host-os-release", "FileOrCreate"),
}
POLL_S = 1.0


def job_object(
    node: str, run: str, index: int, namespace: str, image: str, options: ProbeOptions
) -> dict[str, Any]:
    """The Job for one node, exactly as it is sent to the API server."""
    argv = (
        [*options.probe_argv(), "--root", HOST_ROOT] if not options.root else options.probe_argv()
    )
    source = node_probe_source().decode("utf-8")
    labels = {APP_LABEL: APP, RUN_LABEL: run}
    volumes, mounts = [], []
    for path, (name, kind) in HOST_MOUNTS.items():
        volumes.append({"name": name, "hostPath": {"path": path, "type": kind}})
        mounts.append({"name": name, "mountPath": HOST_ROOT + path, "readOnly": True})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"epdoctor-probe-{run}-{index}",
            "namespace": namespace,
            "labels": labels,
            "annotations": {"epdoctor.dev/node": node},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(options.timeout_s) + 120,
            "ttlSecondsAfterFinished": 600,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "nodeSelector": {"kubernetes.io/hostname": node},
                    "tolerations": [{"operator": "Exists"}],
                    "containers": [
                        {
                            "name": "probe",
                            "image": image,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["python3", "-c", source, *argv],
                            "securityContext": {
                                "allowPrivilegeEscalation": False,
                                "readOnlyRootFilesystem": True,
                                "capabilities": {"drop": ["ALL"]},
                            },
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "256Mi"},
                                "limits": {"cpu": "1", "memory": "512Mi"},
                            },
                            "volumeMounts": mounts,
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }


def shown(job: dict[str, Any]) -> dict[str, Any]:
    """The Job as printed for confirmation: the probe source abbreviated, all else exact."""
    out = json.loads(json.dumps(job))
    cmd = out["spec"]["template"]["spec"]["containers"][0]["command"]
    cmd[2] = f"<epdoctor node probe, {len(cmd[2])} characters>"
    return out


def list_nodes(session: KubeSession, selector: str) -> list[str]:
    doc = session.call(
        f"nodes matching {selector!r}", session.core.list_node, label_selector=selector
    )
    names = sorted(n["metadata"]["name"] for n in doc.get("items") or [])
    if not names:
        raise TargetError(f"no nodes match {selector!r}")
    return names


def node_targets(session: KubeSession, spec: TargetSpec) -> list[Target]:
    if not spec.selector:
        raise TargetError(
            "--nodes needs -l SELECTOR (e.g. node.kubernetes.io/instance-type=p5en.48xlarge)"
        )
    selector = valid_selector(spec.selector)
    namespace = valid_namespace(spec.namespace or session.namespace)
    image = spec.job_image or DEFAULT_IMAGE
    nodes = list_nodes(session, selector)
    run = secrets.token_hex(3)
    # Only the deadline applies on a node's host view (no workload pids to follow).
    options = ProbeOptions(timeout_s=float(spec.probe_timeout or 60))
    jobs = [job_object(n, run, i, namespace, image, options) for i, n in enumerate(nodes)]
    if spec.dry_run:
        import yaml

        sys.stdout.write(yaml.safe_dump_all([shown(j) for j in jobs], sort_keys=False))
        raise DryRun(f"dry run: {len(jobs)} Job(s) printed, none created")
    confirm(jobs, namespace, yes=bool(spec.yes), manifests=spec.show_manifests)
    return [KubeNodeJobTarget(session, n, j) for n, j in zip(nodes, jobs, strict=True)]


def confirm(
    jobs: list[dict[str, Any]],
    namespace: str,
    yes: bool,
    stream: Any = None,
    manifests: bool = False,
) -> None:
    """Say what will be created (the exact objects with --show-manifests) and ask; refuse
    without a terminal unless --yes."""
    import yaml

    out = stream or sys.stderr
    nodes = [j["spec"]["template"]["spec"]["nodeSelector"]["kubernetes.io/hostname"] for j in jobs]
    image = jobs[0]["spec"]["template"]["spec"]["containers"][0]["image"] if jobs else "-"
    listed = ", ".join(nodes[:5]) + (f" (+{len(nodes) - 5} more)" if len(nodes) > 5 else "")
    out.write(
        f"epdoctor will create {len(jobs)} Job(s) in namespace {namespace}, one per node"
        f" ({listed}), image {image}, host paths mounted read-only.\n"
    )
    if manifests:
        out.write(yaml.safe_dump_all([shown(j) for j in jobs], sort_keys=False))
    else:
        out.write("--show-manifests prints each Job, --dry-run prints them and creates none.\n")
    out.write("Each is deleted with its pod when its node is done.\n")
    if yes:
        return
    if not sys.stdin.isatty():
        raise TargetError("refusing to create Jobs without confirmation: pass --yes")
    answer = input(f"Create {len(jobs)} Job(s)? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise TargetError("cancelled: no Job created")


class KubeNodeJobTarget(Target):
    def __init__(self, session: KubeSession, node: str, job: dict[str, Any]) -> None:
        self.session = session
        self.node = node
        self.job = job
        self.namespace = job["metadata"]["namespace"]
        self.job_name = job["metadata"]["name"]
        self._created = False
        self._state: dict[str, Any] = {"node": node, "job": self.job_name}
        detail = {"node": node, "job": self.job_name, "namespace": self.namespace}
        self.info = TargetInfo(name=node, kind="job", detail=detail)

    def run_probe(self, options: ProbeOptions) -> ProbeOutput:
        t0 = time.monotonic()
        core, batch = self.session.core, self.session.batch
        try:
            self.session.call(
                f"create job {self.job_name}", batch.create_namespaced_job, self.namespace, self.job
            )
        except KubeApiError as exc:
            raise TargetError(f"cannot create the probe Job on {self.node}: {exc}") from exc
        self._created = True
        deadline = t0 + options.timeout_s + 120
        sel = f"job-name={self.job_name}"
        try:
            while True:
                pods = (
                    self.session.call(
                        "probe pod", core.list_namespaced_pod, self.namespace, label_selector=sel
                    ).get("items")
                    or []
                )
                phase = ((pods[0].get("status") or {}).get("phase")) if pods else None
                self._state["phase"] = phase or "not created"
                if phase in ("Succeeded", "Failed"):
                    name = pods[0]["metadata"]["name"]
                    log = self.session.core.read_namespaced_pod_log(
                        name, self.namespace, _request_timeout=self.session.timeout
                    )
                    if phase == "Failed" and not str(log).lstrip().startswith("{"):
                        raise TargetError(f"probe pod on {self.node} failed: {str(log)[-500:]}")
                    return ProbeOutput(stdout=str(log), elapsed_s=time.monotonic() - t0)
                if time.monotonic() > deadline:
                    raise TargetError(
                        f"probe pod on {self.node} still {self._state['phase']} after "
                        f"{options.timeout_s + 120:.0f}s"
                    )
                time.sleep(POLL_S)
        finally:
            self.cleanup()

    def cleanup(self) -> None:
        if not self._created:
            return
        try:
            self.session.call(
                f"delete job {self.job_name}",
                self.session.batch.delete_namespaced_job,
                self.job_name,
                self.namespace,
                propagation_policy="Background",
            )
            self._created = False
        except KubeApiError as exc:
            self._state["cleanup_error"] = str(exc)

    def side_facts(self, diagnosis: Any = None) -> dict[str, Any]:
        ok = diagnosis is not None and getattr(diagnosis, "node", None) is not None
        return {"kube-job": {**self._state, "probe_ran": ok, "error": getattr(
            getattr(diagnosis, "result", None), "error", None)}}  # fmt: skip

    def close(self) -> None:
        self.cleanup()
