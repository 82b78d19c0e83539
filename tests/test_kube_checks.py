"""Pod/node checks (domain "kube") on API-shaped objects, each verdict they can give.

Objects follow the Kubernetes API's documented shapes (ContainerStatus,
Event, Node.status.allocatable); messages are the scheduler's and kubelet's
own wording (e.g. "0/4 nodes are available: 4 Insufficient vpc.amazonaws.com/efa.",
"Readiness probe failed: ..."). The end-to-end paths over HTTP are in
test_kube_targets.py; these pin every branch.
"""

from __future__ import annotations

import copy

import pytest

from epdoctor.checks import load_all
from epdoctor.checks.base import Context, run_checks
from epdoctor.model import Status


def facts(**over) -> dict:
    pod = {
        "kind": "Pod",
        "metadata": {"name": "p-0", "namespace": "ml"},
        "spec": {
            "nodeName": "n1",
            "containers": [
                {
                    "name": "c",
                    "image": "r/i:v1-20260818",
                    "securityContext": {"privileged": True},
                    "resources": {
                        "limits": {"cpu": "4", "memory": "8Gi"},
                        "requests": {"cpu": "4", "memory": "8Gi"},
                    },
                }
            ],
        },
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {"name": "c", "ready": True, "restartCount": 0, "state": {"running": {}}}
            ],
        },
    }
    node = {
        "metadata": {"name": "n1", "labels": {"node.kubernetes.io/instance-type": "p5en.48xlarge"}},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "16"}},
    }
    base = {
        "pod": pod,
        "container": "c",
        "events": [],
        "node": node,
        "services": [],
        "logs": {"current": ""},
        "unseen": {},
        "probe_ran": True,
    }
    base.update(over)
    return base


def run(f: dict, ctx: Context | None = None) -> dict[str, Status]:
    load_all()
    return {x.code: x.status for x in run_checks(f, ctx or Context(), domain="kube")}


def _cs(f: dict) -> dict:
    return f["pod"]["status"]["containerStatuses"][0]


def test_healthy_pod_has_only_passes():
    got = run(facts())
    assert got == {"K109": Status.PASS, "K110": Status.PASS}


def test_oomkilled():
    f = facts()
    _cs(f)["restartCount"] = 2
    _cs(f)["lastState"] = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    assert run(f)["K102"] is Status.FAIL


def test_other_error_exit_and_unrecorded_restart():
    f = facts()
    _cs(f)["restartCount"] = 1
    _cs(f)["lastState"] = {"terminated": {"exitCode": 1, "reason": "Error"}}
    assert run(f)["K103"] is Status.WARN
    _cs(f)["state"] = {"waiting": {"reason": "CrashLoopBackOff"}}
    assert run(f)["K103"] is Status.FAIL
    g = facts()
    _cs(g)["restartCount"] = 3
    assert run(g)["K103"] is Status.UNKNOWN


def test_clean_exit_zero_is_not_an_error():
    f = facts()
    _cs(f)["lastState"] = {"terminated": {"exitCode": 0, "reason": "Completed"}}
    assert "K103" not in run(f) and "K101" not in run(f)


def _pending(message: str) -> dict:
    f = facts()
    f["pod"]["status"] = {"phase": "Pending"}
    f["pod"]["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] = "32"
    f["events"] = [{"reason": "FailedScheduling", "type": "Warning", "message": message}]
    return f


def test_pending_efa():
    got = run(_pending("0/4 nodes are available: 4 Insufficient vpc.amazonaws.com/efa."))
    assert got["K105"] is Status.FAIL and "K104" not in got and "K106" not in got


def test_pending_other_reason():
    got = run(
        _pending("0/4 nodes are available: 4 node(s) had untolerated taint {nvidia.com/gpu: true}.")
    )
    assert got["K106"] is Status.FAIL


def test_pending_without_events_access_is_unknown():
    f = _pending("x")
    f["events"] = None
    f["unseen"] = {"events": "events: forbidden by RBAC"}
    assert run(f)["K106"] is Status.UNKNOWN


def test_pending_while_not_yet_scheduled_says_nothing():
    f = _pending("x")
    f["events"] = []
    assert not {"K104", "K105", "K106"} & set(run(f))


def test_image_pull():
    f = facts()
    _cs(f)["state"] = {
        "waiting": {"reason": "ImagePullBackOff", "message": "Back-off pulling image"}
    }
    f["events"] = [
        {"reason": "Failed", "type": "Warning",
         "message": 'Failed to pull image "r/i:v9": not found'}
    ]  # fmt: skip
    assert run(f)["K107"] is Status.FAIL


def test_probe_failing_and_not_ready():
    f = facts()
    _cs(f)["ready"] = False
    assert run(f)["K113"] is Status.WARN
    f["events"] = [
        {"reason": "Unhealthy", "type": "Warning", "count": 30,
         "message": "Readiness probe failed: HTTP probe failed with statuscode: 503"}
    ]  # fmt: skip
    got = run(f)
    assert got["K108"] is Status.WARN and "K113" not in got


@pytest.mark.parametrize(
    ("itype", "efa", "gpu", "k109", "k110"),
    [
        ("p5en.48xlarge", "16", "8", Status.PASS, Status.PASS),
        ("p5.48xlarge", "16", "8", Status.WARN, Status.PASS),
        ("p6-b200.48xlarge", "8", "8", Status.PASS, Status.PASS),
        ("p6-b300.48xlarge", "16", "4", Status.PASS, Status.WARN),
        ("p5en.48xlarge", None, None, Status.FAIL, Status.FAIL),
        ("g6e.48xlarge", "1", "8", Status.UNKNOWN, None),
    ],
)
def test_node_allocatable_against_instance(itype, efa, gpu, k109, k110):
    f = facts()
    f["node"]["metadata"]["labels"]["node.kubernetes.io/instance-type"] = itype
    alloc = {}
    if efa:
        alloc["vpc.amazonaws.com/efa"] = efa
    if gpu:
        alloc["nvidia.com/gpu"] = gpu
    f["node"]["status"]["allocatable"] = alloc
    got = run(f)
    assert got["K109"] is k109
    assert got.get("K110") is k110


def test_node_forbidden_is_unknown_and_named():
    f = facts(node=None, unseen={"node": "node n1: forbidden by RBAC (...)"})
    got = run(f)
    assert got["K109"] is Status.UNKNOWN and got["K112"] is Status.UNKNOWN


def test_unprivileged_container_says_what_it_cannot_see():
    f = facts()
    f["pod"]["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": ["IPC_LOCK"]}}
    assert run(f)["K111"] is Status.UNKNOWN
    # if the probe did not run there is nothing partial to warn about
    assert "K111" not in run({**copy.deepcopy(f), "probe_ran": False})


def test_previous_log_unreadable():
    f = facts()
    _cs(f)["restartCount"] = 1
    _cs(f)["lastState"] = {"terminated": {"exitCode": 139}}
    f["unseen"] = {"logs.previous": "logs of ml/p-0: forbidden by RBAC"}
    got = run(f)
    assert got["K114"] is Status.UNKNOWN and got["K101"] is Status.FAIL


def test_job_node_without_result_is_unknown():
    load_all()
    bad = run_checks(
        {
            "node": "n1",
            "job": "j",
            "phase": "Pending",
            "probe_ran": False,
            "error": "still Pending",
        },
        Context(),
        domain="kube-job",
    )
    assert [(x.code, x.status) for x in bad] == [("K301", Status.UNKNOWN)]
    ok = run_checks({"node": "n1", "job": "j", "probe_ran": True}, Context(), domain="kube-job")
    assert ok == []


def _sts_and_services(leader_only: bool, publish: bool) -> dict:
    labels = {"app": "v"}
    sts = {
        "metadata": {"name": "v", "namespace": "ml"},
        "spec": {
            "serviceName": "v",
            "replicas": 2,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [{"name": "c", "readinessProbe": {"httpGet": {"port": 8000}}}]
                },
            },
        },
    }
    svcs = [
        {
            "metadata": {"name": "v", "namespace": "ml"},
            "spec": {
                "clusterIP": "None",
                "selector": labels,
                "publishNotReadyAddresses": publish,
                "ports": [{"name": "http", "port": 8000}, {"name": "rpc", "port": 13345}],
            },
        }
    ]
    if leader_only:
        svcs.append(
            {
                "metadata": {"name": "v-http", "namespace": "ml"},
                "spec": {
                    "clusterIP": "10.0.0.9",
                    "selector": {"statefulset.kubernetes.io/pod-name": "v-0"},
                    "ports": [{"name": "http", "port": 8000}],
                },
            }
        )
    return {"statefulset": sts, "services": svcs}


def test_live_statefulset_and_services():
    got = run(facts(**_sts_and_services(leader_only=False, publish=False)))
    assert got["K201"] is Status.WARN and got["K202"] is Status.FAIL
    ok = run(facts(**_sts_and_services(leader_only=True, publish=True)))
    assert "K201" not in ok and "K202" not in ok
