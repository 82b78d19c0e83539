"""The Kubernetes rollout as a state machine (epdoctor/launch/kube_rollout.py and its parts),
driven in-process: the objects a plan applies (kube_objects), what counts as epdoctor's, the
diff, stop() from another thread at any step, --keep, and the terminal app's Session handing a
Kubernetes plan to it. The API server is tests/kube_emulator.py over real HTTP."""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path

import pytest
from launch_helpers import ROOT

from epdoctor.launch import kube_objects as ko
from epdoctor.launch.kube_rollout import KubeRollout, NotEpdoctors, RolloutOptions, prepare
from epdoctor.plan import PlanInput, make_plan
from epdoctor.plan.render import render

pytest.importorskip("kmock")
from kube_emulator import Image
from test_run_kube_rollout import IMAGE, gone, left, node

ENGINE = str(ROOT / "tests" / "fake_engine.py")


@pytest.fixture(scope="module")
def cluster(kube_api):
    kube_api.emulator.images[IMAGE] = Image(ROOT / "tests" / "kube_image", {"FAKE_ENGINE": ENGINE})
    kube_api.put(node("n1"), node("n2"))
    return kube_api


def written(tmp_path: Path, ns: str, **kw) -> tuple[dict, str]:
    kw.setdefault("image", IMAGE)
    p = make_plan(PlanInput(namespace=ns, num_experts=128, gpus_per_node=2, **kw))
    render(p, tmp_path / ns)
    import json

    path = tmp_path / ns / "plan.json"
    return json.loads(path.read_text()), str(path)


def api_for(cluster):
    from epdoctor.targets.kube import KubeSession
    from epdoctor.targets.kube_apply import KubeApply

    return KubeApply(KubeSession.connect(None, str(cluster.kubeconfig)))


# -- the objects ---------------------------------------------------------------------------------


def test_phase_labels_everything_and_sets_run_serve(tmp_path):
    doc, path = written(tmp_path, "objs")
    objs = ko.load_objects(doc, path, "objs")
    assert objs.source == path.replace("plan.json", "kubernetes/vllm-deepep.yaml")
    assert [k for k, _ in objs.refs()] == ["services", "services", "statefulsets"]
    assert objs.leader_address == "vllm-deepep-0.vllm-deepep-headless.objs.svc.cluster.local"
    for run_serve, value in ((False, "0"), (True, "1")):
        out = ko.phase(objs, run_serve)
        assert all(o["metadata"]["labels"][ko.MANAGED_BY] == "epdoctor" for o in out)
        env = out[2]["spec"]["template"]["spec"]["containers"][0]["env"]
        assert [e["value"] for e in env if e["name"] == "RUN_SERVE"] == [value]
    # the plan's own objects are not touched
    assert ko.MANAGED_BY not in objs.objects[0]["metadata"]["labels"]


def test_another_namespace_makes_the_manifest_again(tmp_path):
    doc, path = written(tmp_path, "home")
    objs = ko.load_objects(doc, path, "away")
    assert "made again" in objs.source
    assert {o["metadata"]["namespace"] for o in objs.objects} == {"away"}
    script = objs.statefulset["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert "vllm-deepep-0.vllm-deepep-headless.away.svc.cluster.local" in script
    assert ".home." not in script


def test_only_what_a_plan_writes_is_applied(tmp_path):
    doc, path = written(tmp_path, "kinds")
    manifest = Path(path).parent / "kubernetes" / "vllm-deepep.yaml"
    manifest.write_text(
        manifest.read_text()
        + "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: extra\n"
        "spec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n"
        "    spec:\n      containers: [{name: c, image: 'r/x:v1-20261204', resources: "
        "{requests: {cpu: 1, memory: 1Gi}, limits: {cpu: 1, memory: 1Gi}}}]\n"
    )
    with pytest.raises(ko.PlanObjectsError, match="holds a Deployment"):
        ko.load_objects(doc, path, "kinds")


def test_owned_needs_the_field_manager_and_the_label():
    obj = {"metadata": {"labels": {ko.MANAGED_BY: "epdoctor"},
                        "managedFields": [{"manager": "epdoctor", "operation": "Apply"}]}}  # fmt: skip
    assert ko.owned(obj)
    no_label = copy.deepcopy(obj)
    no_label["metadata"]["labels"] = {}
    assert not ko.owned(no_label)
    theirs = copy.deepcopy(obj)
    theirs["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    assert not ko.owned(theirs)
    assert ko.managers(theirs) == "kubectl"


def test_changes_name_fields_by_name_not_position():
    live = {"metadata": {"name": "s", "uid": "1", "resourceVersion": "7"}, "status": {"x": 1},
            "spec": {"containers": [{"name": "engine", "image": "r:a",
                                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}  # fmt: skip
    want = copy.deepcopy(live)
    want["metadata"]["resourceVersion"] = "8"  # the server's own fields never differ
    want["spec"]["containers"][0]["env"] = [
        {"name": "B", "value": "2"},
        {"name": "A", "value": "3"},
    ]
    assert ko.changes(live, want) == ["spec.containers[engine].env[A].value: 1 -> 3"]
    assert ko.changes(live, live) == []
    # a diff never shows a secret's value
    want["spec"]["containers"][0]["env"].append({"name": "MY_PASSWORD", "value": "hunter2hunter2"})
    assert "spec.containers[engine].env[MY_PASSWORD]: (value hidden)" in ko.changes(live, want)
    assert "hunter2" not in " ".join(ko.changes(live, want))


# -- preparing ------------------------------------------------------------------------------------


def test_prepare_refuses_what_epdoctor_did_not_apply(cluster, tmp_path):
    ns = "prep"
    doc, path = written(tmp_path, ns)
    objs = ko.load_objects(doc, path, ns)
    api = api_for(cluster)
    try:
        rp = prepare(api, objs, doc, RolloutOptions("serve"), "emulator", path)
        assert rp.diff[0].startswith("create     service/vllm-deepep-headless")
        assert any(line.startswith("2. read-only diagnose inside every pod") for line in rp.lines)
        assert any(line.startswith("3. kernel test in every pod at once") for line in rp.lines)
        cluster.put({"apiVersion": "apps/v1", "kind": "StatefulSet",
                     "metadata": {"name": "vllm-deepep", "namespace": ns},
                     "spec": {"replicas": 0, "selector": {"matchLabels": {"x": "y"}},
                              "template": {"metadata": {"labels": {"x": "y"}},
                                           "spec": {"containers": []}}}})  # fmt: skip
        with pytest.raises(NotEpdoctors) as err:
            prepare(api, objs, doc, RolloutOptions("serve"), "emulator", path)
        assert err.value.attachable  # a StatefulSet of someone else's: launch in its pods
        assert "statefulset/vllm-deepep" in str(err.value)
        assert left(cluster, ns) == {"statefulsets": ["vllm-deepep"]}  # the dry runs stored nothing
    finally:
        cluster.call(cluster.emulator._remove, "statefulsets", ns, "vllm-deepep")
        api.session.close()


# -- running and stopping -----------------------------------------------------------------------


def rollout_for(cluster, tmp_path, ns: str, **opts) -> tuple[KubeRollout, list]:
    doc, path = written(tmp_path, ns, **opts.pop("plan", {}))
    api = api_for(cluster)
    objs = ko.load_objects(doc, path, ns)
    opts.setdefault("preflight", False)  # the node probe sees this machine, not a GPU node
    options = RolloutOptions(opts.pop("what", "kernel-test"), poll_s=0.2, **opts)
    rp = prepare(api, objs, doc, options, "emulator", path)
    events: list = []
    r = KubeRollout(rp, api, on_gate=lambda g, s, t, c=None: events.append((g, s, t, c)))
    return r, events


def test_stop_from_another_thread_while_pods_are_pending_deletes_them(cluster, tmp_path):
    ns = "stop-pending"
    # p5 pods cannot schedule here: they wait until stopped
    r, events = rollout_for(cluster, tmp_path, ns, plan={"instance": "p5.48xlarge"},
                            schedule_timeout_s=600)  # fmt: skip
    result: list = []
    t = threading.Thread(target=lambda: result.append(r.run()))
    t.start()
    deadline = time.monotonic() + 30
    while not any(g == "pods" and s == "waiting" for g, s, *_ in events):
        assert time.monotonic() < deadline, events
        time.sleep(0.1)
    lines = r.stop()  # the terminal app's stop key, from the UI thread
    t.join(30)
    assert not t.is_alive()
    outcome = result[0]
    assert outcome.status == "interrupted"
    assert "deleted statefulset/vllm-deepep in namespace stop-pending" in lines
    assert outcome.stopped == lines  # stopped once, said once
    assert r.stop() == lines  # a second stop does nothing more
    gone(cluster, ns)


def test_stop_before_run_applies_nothing(cluster, tmp_path):
    r, _ = rollout_for(cluster, tmp_path, "stop-first")
    assert r.stop() == ["nothing was applied"]
    outcome = r.run()
    assert outcome.status == "interrupted" and outcome.stopped == ["nothing was applied"]
    assert left(cluster, "stop-first") == {}


def test_keep_leaves_a_failed_rollout_for_run_down(cluster, tmp_path):
    from epdoctor.launch.kube_rollout import take_down

    ns = "kept"
    r, _ = rollout_for(cluster, tmp_path, ns, plan={"instance": "p5.48xlarge"},
                       schedule_timeout_s=0.5, keep=True)  # fmt: skip
    outcome = r.run()
    assert outcome.status == "fail"
    assert [g.name for g in outcome.gates] == ["apply", "pods"]
    assert outcome.gates[1].code == "K105"
    assert outcome.stopped[0].startswith("left running (--keep)")
    assert left(cluster, ns)["statefulsets"] == ["vllm-deepep"]
    lines = take_down(r.api, r.plan.objects, 30)
    assert lines[-1] == "its pods are gone"
    gone(cluster, ns)


def test_the_terminal_apps_session_runs_a_kubernetes_plan(cluster, tmp_path):
    from epdoctor.launch.kube_launch import from_request, launch_of
    from epdoctor.launch.session import Session
    from epdoctor.requests import KernelTestOptions, LaunchRequest, RolloutFlags, TargetSpec

    ns = "tui"
    doc, path = written(tmp_path, ns)
    req = LaunchRequest(
        "kernel-test", KernelTestOptions(timeout=60.0), TargetSpec(kubeconfig=str(cluster.kubeconfig)),
        plan_file=path, preflight=False,
        rollout=RolloutFlags(schedule_timeout=30.0, start_timeout=60.0),
    )  # fmt: skip
    rp = from_request(req, doc)
    launch = launch_of(req, doc, rp)
    assert launch.where == "Kubernetes namespace tui" and launch.remote
    lines: list = []
    gates: list = []
    session = Session(launch, lambda pane, line: lines.append((pane, line)),
                      lambda g, s, t, c=None: gates.append((g, s)))  # fmt: skip
    outcome = session.run()
    assert outcome.status == "unknown", outcome  # EFA counters cannot be read here
    assert ("kernel test", "unknown") in gates and ("apply", "pass") in gates
    assert any(pane == "vllm-deepep-0" and line.startswith("k8s: event Normal Scheduled")
               for pane, line in lines)  # fmt: skip
    assert any(pane == "vllm-deepep-1 kernel test" for pane, _ in lines)
    assert "deleted statefulset/vllm-deepep in namespace tui" in outcome.stopped
    gone(cluster, ns)


def test_a_take_down_that_cannot_delete_says_so_and_how(cluster, tmp_path):
    from epdoctor.launch.kube_rollout import take_down

    ns = "cannot-delete"
    r, _ = rollout_for(cluster, tmp_path, ns)
    for obj in ko.phase(r.plan.objects, False):
        r.api.apply(obj)
    # a proxy in front of the API server answers the StatefulSet calls with an HTML page
    cluster.emulator.hostile[rf"/namespaces/{ns}/statefulsets/"] = "html"
    try:
        lines = take_down(r.api, r.plan.objects, 5)
    finally:
        cluster.emulator.hostile.clear()
    assert any(line.startswith("could not delete statefulset/vllm-deepep:") and "HTML" in line
               for line in lines), lines  # fmt: skip
    assert f"delete them yourself: kubectl -n {ns} delete statefulset/vllm-deepep" in lines
    assert "deleted service/vllm-deepep in namespace cannot-delete" in lines
    assert (
        take_down(r.api, r.plan.objects, 30)[0]
        == f"deleted statefulset/vllm-deepep in namespace {ns}"
    )
    gone(cluster, ns)
