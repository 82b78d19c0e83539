"""docs/rbac/ grants exactly what diagnose asks of the API server, and nothing to write.
(docs/rbac/rollout.yaml, for `epdoctor run --plan` on a Kubernetes plan, is checked the same way
in tests/test_run_kube_rollout.py.)

The requests are the ones the real client sent to the emulator during real
diagnose runs (pods, a crash-looping pod, the node Job mode); each is mapped
to the RBAC (verb, resource) the API server would authorize it as.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml
from test_kube_job import SELECTOR, run_cli
from test_kube_job import cluster as job_cluster  # noqa: F401 - fixture
from test_kube_targets import NS, STS, epdoctor
from test_kube_targets import cluster as pod_cluster  # noqa: F401 - fixture

RBAC = Path(__file__).resolve().parent.parent / "docs" / "rbac"
WRITE = {"create", "update", "patch", "delete", "deletecollection", "*"}
_PATH = re.compile(
    r"^/(?:api/v1|apis/(?P<g>[a-z.]+)/v1)(?:/namespaces/[^/]+)?/(?P<res>[a-z]+)"
    r"(?:/(?P<name>[^/?]+))?(?:/(?P<sub>[a-z]+)(?P<proxied>/[^?]*)?)?(?:\?.*)?$"
)


def grants(*files: str) -> set[tuple[str, str, str]]:
    out = set()
    for f in files:
        for doc in yaml.safe_load_all((RBAC / f).read_text()):
            if doc["kind"] not in ("Role", "ClusterRole"):
                continue
            for rule in doc["rules"]:
                for g in rule["apiGroups"]:
                    for r in rule["resources"]:
                        for v in rule["verbs"]:
                            out.add((g, r, v))
    return out


def asked(seen: list[str]) -> set[tuple[str, str, str]]:
    out = set()
    for line in seen:
        method, path = line.split(" ", 1)
        m = _PATH.match(path)
        if not m:
            continue  # discovery (/api, /apis, /version): allowed to every user
        group = m.group("g") or ""
        res = m.group("res") + (f"/{m.group('sub')}" if m.group("sub") else "")
        if m.group("proxied") and m.group("sub") != "proxy":
            continue  # not an API path this mapping knows
        if m.group("sub") == "exec":
            verb = "create"
        elif method == "GET":
            verb = "get" if m.group("name") else "list"
        else:
            verb = {"POST": "create", "DELETE": "delete", "PATCH": "patch", "PUT": "update"}[method]
        out.add((group, res, verb))
    return out


def test_diagnose_roles_cover_every_request_and_write_nothing(pod_cluster):  # noqa: F811
    before = len(pod_cluster.emulator.seen)
    epdoctor(pod_cluster, "diagnose", "--pod", f"{STS}-0", "-n", NS, "--json")
    epdoctor(pod_cluster, "diagnose", "--pod", f"{STS}-1", "-n", NS, "--json")
    epdoctor(pod_cluster, "diagnose", "-l", f"app={STS}", "-n", NS, "--json")
    need = asked(pod_cluster.emulator.seen[before:])
    assert ("", "pods/exec", "create") in need and ("", "pods/log", "get") in need
    have = grants("diagnose-role.yaml", "diagnose-exec.yaml", "diagnose-clusterrole.yaml")
    assert need - have == set()
    read_only = grants("diagnose-role.yaml", "diagnose-clusterrole.yaml")
    assert not {v for _, _, v in read_only} & WRITE
    assert {(r, v) for _, r, v in grants("diagnose-exec.yaml")} <= {
        ("pods/exec", "create"),
        ("pods/exec", "get"),
    }


def test_node_job_role_covers_the_job_mode(job_cluster):  # noqa: F811
    run_cli(job_cluster, "--nodes", "-l", SELECTOR, "-n", "epdoctor", "--yes", "--json")
    need = asked(job_cluster.emulator.seen)
    assert ("batch", "jobs", "create") in need and ("batch", "jobs", "delete") in need
    have = grants("node-job.yaml")
    assert need - have == set()
    assert {(g, r) for g, r, v in have if v in WRITE} == {("batch", "jobs")}


def test_no_wildcards_and_no_secrets():
    for f in RBAC.glob("*.yaml"):
        text = f.read_text()
        assert '"*"' not in text and "secrets" not in text, f.name
