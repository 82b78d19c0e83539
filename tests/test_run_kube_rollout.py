"""`epdoctor run kernel-test|serve --plan` on a Kubernetes plan, driven as a user runs it
(`python -m epdoctor` in a subprocess) against the Kubernetes API emulator over HTTP.

The emulator (tests/kube_emulator.py + tests/kube_workloads.py) plays the API server, the
StatefulSet controller, the scheduler and a kubelet whose containers are local processes; the
engine images are stand-ins (tests/kube_image/: `vllm serve` runs tests/fake_engine.py, DeepEP's
kernel tests print NCCL's own lines). No real cluster can run here: what these tests cannot show
is said in docs/kubernetes.md ("How this is tested").
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from launch_helpers import ROOT, cli_env

from epdoctor.cli import main

pytest.importorskip("kmock")
from kube_emulator import Image
from kube_workloads import POD_MARK

IMAGE = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/engine:v1-20261204"
CRASHING = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/engine:v2-crashes"
NOT_EFA = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/engine:v3-tcp"
SLOW = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/engine:v4-slow"
MISSING = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/engine:v9-never-pushed"
DYNAMO = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/dynamo:v1-20261204"
STANDIN = ROOT / "tests" / "kube_image"
ENGINE = str(ROOT / "tests" / "fake_engine.py")
# A real failing engine log (tests/fixtures/logs/corpus): torchrun's child died of SIGSEGV.
SEGV_LOG = ROOT / "tests" / "fixtures" / "logs" / "corpus" / "dev" / "028-segfault-exitcode-11.log"
KINDS = ("pods", "services", "statefulsets", "jobs")


def node(name: str, instance: str = "p5en.48xlarge", efa: str = "16", gpus: str = "8",
         taints: tuple[dict[str, str], ...] = ()) -> dict:  # fmt: skip
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"node.kubernetes.io/instance-type": instance,
                                              "kubernetes.io/hostname": name}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"},
                            *taints]},
        "status": {"allocatable": {"cpu": "191", "memory": "2000Gi", "nvidia.com/gpu": gpus,
                                   "vpc.amazonaws.com/efa": efa, "pods": "110"}},
    }  # fmt: skip


@pytest.fixture(scope="module")
def cluster(kube_api):
    env = {"FAKE_ENGINE": ENGINE}
    kube_api.emulator.images.update(
        {
            IMAGE: Image(STANDIN, env),
            SLOW: Image(STANDIN, {**env, "FAKE_ENGINE_ARGS": "--start-delay 120"}),
            NOT_EFA: Image(STANDIN, {**env, "FAKE_KERNEL_FABRIC": "efa"}),
            CRASHING: Image(STANDIN, {**env, "FAKE_ENGINE_ARGS": f"--crash-log {SEGV_LOG} --crash-code 139"}),
            DYNAMO: Image(STANDIN, {**env, "FAKE_DYNAMO_REGISTER_S": "4"}),
        }
    )  # fmt: skip
    kube_api.put(
        node("p5en-a"), node("p5en-b"),
        # p5 pods ask for 32 EFA devices; these nodes advertise 16
        node("p5-a", "p5.48xlarge"), node("p5-b", "p5.48xlarge"),
        # one p6-b200 node is reserved by a taint, the other has one GPU free
        node("b200-a", "p6-b200.48xlarge", efa="8",
             taints=({"key": "dedicated", "value": "infra", "effect": "NoSchedule"},)),
        node("b200-b", "p6-b200.48xlarge", efa="8", gpus="1"),
    )  # fmt: skip
    return kube_api


def plan(tmp_path: Path, ns: str, *flags: str, image: str = IMAGE) -> str:
    out = tmp_path / f"plan-{ns}"
    argv = ["plan", "--no-input", "--num-experts", "128", "--gpus-per-node", "2", "-n", ns,
            "-o", str(out), *flags] + (["--image", image] if image else [])  # fmt: skip
    assert main(argv) == 0
    return str(out / "plan.json")


def epdoctor(cluster, *argv: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", *argv, "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True, text=True, env=cli_env(), timeout=timeout, cwd=ROOT,
    )  # fmt: skip


def run(cluster, what: str, plan_path: str, *flags: str, timeout: float = 240):
    return epdoctor(cluster, "run", what, "--plan", plan_path, "--no-preflight", *flags,
                    timeout=timeout)  # fmt: skip


def left(cluster, ns: str) -> dict[str, list[str]]:
    """Every namespaced kind the API serves, listed through the API: what is still there."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(cluster.kubeconfig))
    try:
        calls = {
            "pods": client.CoreV1Api(api).list_namespaced_pod,
            "services": client.CoreV1Api(api).list_namespaced_service,
            "statefulsets": client.AppsV1Api(api).list_namespaced_stateful_set,
            "jobs": client.BatchV1Api(api).list_namespaced_job,
        }
        out = {}
        for kind in KINDS:
            doc = json.loads(calls[kind](ns, _preload_content=False).data)
            out[kind] = [o["metadata"]["name"] for o in doc["items"]]
        return {k: v for k, v in out.items() if v}
    finally:
        api.close()


def pod_processes(ns: str) -> list[int]:
    """Local processes that run in a pod of ``ns`` (containers and what exec started)."""
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        try:
            if any(
                v.startswith(f"{POD_MARK}={ns}/".encode())
                for v in environ.read_bytes().split(b"\0")
            ):
                found.append(int(environ.parent.name))
        except OSError:
            continue
    return found


def gone(cluster, ns: str, timeout: float = 15) -> None:
    """Nothing of ns is left: no object of any kind, no process of any of its pods."""
    deadline = time.monotonic() + timeout
    while (left(cluster, ns) or pod_processes(ns)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left(cluster, ns) == {}
    assert pod_processes(ns) == []


def gates(doc: dict) -> dict[str, str]:
    return {g["gate"]: g["status"] for g in doc["gates"]}


def test_serve_shows_what_it_applies_gates_it_and_run_down_takes_it_away(cluster, tmp_path):
    from test_kube_rbac import asked, grants

    ns = "rollout"
    p = plan(tmp_path, ns)
    requests: list[str] = []  # what epdoctor asked of the API server (not this test's listings)

    def recorded(call, *args, **kw):
        before = len(cluster.emulator.seen)
        r = call(*args, **kw)
        requests.extend(cluster.emulator.seen[before:])
        return r

    # the diff first: nothing exists, so everything is created; nothing is applied
    r = recorded(run, cluster, "serve", p, "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    for line in ("create     service/vllm-deepep-headless", "create     service/vllm-deepep",
                 "create     statefulset/vllm-deepep (2 pods)", "(dry run: nothing applied)"):  # fmt: skip
        assert line in r.stdout, r.stdout
    assert "kernel test in every pod at once: bash -c" in r.stdout
    assert "--num-processes 2 --num-experts 128" in r.stdout  # the plan's own kernel test
    assert left(cluster, ns) == {}

    r = recorded(run, cluster, "serve", p, "--yes", "--detach", "--json", "--bench", "1,2",
                 "--schedule-timeout", "60", "--startup-budget", "90")  # fmt: skip
    doc = json.loads(r.stdout)
    got = gates(doc)
    assert list(got) == ["apply", "pods", "exit codes", "network", "efa counters", "serve",
                         "pods serving", "ready", "smoke", "bench"], r.stderr  # fmt: skip
    assert {k: v for k, v in got.items() if v != "pass"} == {"efa counters": "unknown"}, doc
    net = next(g for g in doc["gates"] if g["gate"] == "network")
    assert net["summary"] == "efa-direct on all 4 ranks, 16 nics"
    counters = next(g for g in doc["gates"] if g["gate"] == "efa counters")
    assert counters["summary"].startswith("unverifiable") and counters["code"] == "T703"
    # the exit code is honest: a gate that could not be verified is not a pass
    assert r.returncode == 1
    assert any(s.startswith("left running (--detach)") for s in doc["stopped"]), doc["stopped"]
    assert "vllm-deepep-0: k8s: event Normal Scheduled" not in r.stderr  # panes are not logs
    live = {k: sorted(v) for k, v in left(cluster, ns).items()}
    assert live == {"pods": ["vllm-deepep-0", "vllm-deepep-1"],
                    "services": ["vllm-deepep", "vllm-deepep-headless"],
                    "statefulsets": ["vllm-deepep"]}  # fmt: skip
    sts = cluster.emulator.get("statefulsets", ns, "vllm-deepep", "apps")
    assert sts["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "epdoctor"
    assert [m["manager"] for m in sts["metadata"]["managedFields"]] == ["epdoctor"]
    assert {m["operation"] for m in sts["metadata"]["managedFields"]} == {"Apply"}

    # what running it again would change: the pods would go idle for the kernel test
    r = recorded(run, cluster, "serve", p, "--dry-run")
    assert "unchanged  service/vllm-deepep-headless" in r.stdout, r.stdout
    assert "change     statefulset/vllm-deepep" in r.stdout
    assert "spec.template.spec.containers[engine].env[RUN_SERVE].value: 1 -> 0" in r.stdout

    r = recorded(epdoctor, cluster, "run", "down", "--plan", p, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    for line in ("delete:    statefulset/vllm-deepep", "deleted statefulset/vllm-deepep in namespace rollout",
                 "deleted service/vllm-deepep in namespace rollout", "its pods are gone"):  # fmt: skip
        assert line in r.stdout, r.stdout
    gone(cluster, ns)

    # every request of the dry runs, the rollout and run down is one docs/rbac/rollout.yaml grants
    need = asked(requests)
    assert ("apps", "statefulsets", "patch") in need and ("", "pods/proxy", "get") in need
    assert ("", "services/proxy", "create") in need and ("", "pods/exec", "create") in need
    have = grants("rollout.yaml")
    assert need - have == set(), need - have
    writes = {(g, r) for g, r, v in have if v in ("create", "patch", "update", "delete")}
    # pods: deleted together, by UID, to restart at the serve spec (the StatefulSet is OnDelete)
    assert writes == {("", "services"), ("apps", "statefulsets"), ("", "pods"), ("", "pods/exec"),
                      ("", "pods/proxy"), ("", "services/proxy")}  # fmt: skip
    assert ("", "pods", "delete") in need


def test_a_plan_its_own_lint_flags_is_not_applied(cluster, tmp_path):
    p = plan(tmp_path, "lint-refused", image="")  # the plan's placeholder image (B415)
    r = run(cluster, "kernel-test", p, "--yes")
    assert r.returncode == 2
    assert (
        "does not lint clean" in r.stderr and "B415" in r.stderr and "nothing applied" in r.stderr
    )
    assert left(cluster, "lint-refused") == {}


def test_a_pending_pod_is_explained_by_its_events_and_everything_is_deleted(cluster, tmp_path):
    ns = "pending"
    p = plan(tmp_path, ns, "--instance", "p5.48xlarge")  # 32 EFA per pod; the nodes have 16
    r = run(cluster, "kernel-test", p, "--yes", "--json", "--schedule-timeout", "3")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    pods = next(g for g in doc["gates"] if g["gate"] == "pods")
    assert pods["status"] == "fail" and pods["code"] == "K105"
    assert "Insufficient vpc.amazonaws.com/efa" in pods["summary"]
    k105 = [f for f in doc["findings"] if f["code"] == "K105"]
    assert k105 and any("FailedScheduling" in e and "0/6 nodes are available" in e
                        for f in k105 for e in f["evidence"])  # fmt: skip
    pane = doc["panes"]["vllm-deepep-0"]  # the pod's pane said why, as it happened
    assert any(line.startswith("k8s: Pending: 0/6 nodes are available") for line in pane), pane
    assert any(s == "deleted statefulset/vllm-deepep in namespace pending" for s in doc["stopped"])
    gone(cluster, ns)


def test_untolerated_taints_and_missing_gpus_are_named(cluster, tmp_path):
    ns = "taints"
    p = plan(tmp_path, ns, "--instance", "p6-b200.48xlarge", "--nodes", "1")
    r = run(cluster, "kernel-test", p, "--yes", "--json", "--schedule-timeout", "3")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    k106 = [f for f in doc["findings"] if f["code"] == "K106"]
    assert k106, doc["findings"]
    title = k106[0]["title"]
    assert (
        "insufficient nvidia.com/gpu" in title and "untolerated taint {dedicated: infra}" in title
    )
    gone(cluster, ns)


def test_an_image_that_cannot_be_pulled_fails_the_pods_gate(cluster, tmp_path):
    ns = "no-image"
    p = plan(tmp_path, ns, image=MISSING)
    r = run(cluster, "kernel-test", p, "--yes", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    pods = next(g for g in doc["gates"] if g["gate"] == "pods")
    assert pods["status"] == "fail" and pods["code"] == "K107"
    assert "ImagePullBackOff" in pods["summary"]
    assert any(f["code"] == "K107" for f in doc["findings"])
    pane = doc["panes"]["vllm-deepep-0"]
    assert any(
        line.startswith("k8s: event Warning Failed") and "not found" in line for line in pane
    )
    gone(cluster, ns)


def test_a_crashing_engine_is_explained_by_its_real_log(cluster, tmp_path):
    ns = "crash"
    p = plan(tmp_path, ns, image=CRASHING)
    r = run(cluster, "serve", p, "--yes", "--schedule-timeout", "60", "--startup-budget", "60",
            "--no-live")  # fmt: skip
    assert r.returncode == 1, r.stdout[-3000:]
    out = r.stdout
    # the kernel test passed in the idle pods; the engine died once it started
    assert "kernel test: unknown" in out and "network pass" in out
    assert re.search(r"k8s: restarted \(\d\): last exit code 139 \(Error\)", out), out[-3000:]
    # the previous log, shown and analyzed: torchrun's failed child (the real log's own lines)
    assert "k8s: last log: torch.distributed.elastic.multiprocessing.errors.ChildFailedError" in out
    assert "FAIL K101 container died of a segfault (exit code 139)" in out
    assert "FAIL E203" in out
    assert "serve on Kubernetes: fail" in out
    assert "stopped: deleted statefulset/vllm-deepep in namespace crash" in out
    gone(cluster, ns)


def test_a_failed_kernel_gate_deletes_everything_unless_keep(cluster, tmp_path):
    ns = "not-efa"
    p = plan(tmp_path, ns, image=NOT_EFA)  # the ranks report fabric efa, not efa-direct
    r = run(cluster, "serve", p, "--yes", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert gates(doc)["network"] == "fail"
    assert "serve" not in gates(doc)  # nothing is served on a failed kernel test
    assert next(g for g in doc["gates"] if g["gate"] == "network")["code"] == "T701"
    gone(cluster, ns)

    r = run(cluster, "kernel-test", p, "--yes", "--json", "--keep")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert any(s.startswith("left running (--keep)") for s in doc["stopped"])
    assert left(cluster, ns)["statefulsets"] == ["vllm-deepep"]
    r = epdoctor(cluster, "run", "down", "--plan", p, "--yes")
    assert r.returncode == 0 and "deleted statefulset/vllm-deepep" in r.stdout
    gone(cluster, ns)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_delete_what_was_applied(cluster, tmp_path, sig):
    ns = f"stop-{sig.name.lower()}"
    # SIGINT while it follows a ready engine; SIGTERM while a slow engine is loading
    p = plan(tmp_path, ns, image=IMAGE if sig == signal.SIGINT else SLOW)
    wait_for = "following: running" if sig == signal.SIGINT else "ready: waiting"
    proc = subprocess.Popen(
        [sys.executable, "-m", "epdoctor", "run", "serve", "--plan", p, "--no-preflight",
         "--kubeconfig", str(cluster.kubeconfig), "--yes", "--no-live"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=cli_env(), cwd=ROOT,
    )  # fmt: skip
    lines = []
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            lines.append(line)
            if line.startswith(wait_for):
                break
            assert time.monotonic() < deadline, "".join(lines)
        assert left(cluster, ns).get("statefulsets") == ["vllm-deepep"]
        proc.send_signal(sig)
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    out = "".join(lines) + rest
    assert proc.returncode == (130 if sig == signal.SIGINT else 143), out[-3000:]
    name = "Ctrl-C" if sig == signal.SIGINT else "SIGTERM"
    assert f"interrupted ({name})" in out
    assert "stopped: deleted statefulset/vllm-deepep in namespace" in out
    assert "stopped: its pods are gone" in out
    gone(cluster, ns)


def test_objects_epdoctor_did_not_apply_are_never_changed_or_deleted(cluster, tmp_path):
    ns = "foreign"
    p = plan(tmp_path, ns)
    theirs = {"apiVersion": "v1", "kind": "Service",
              "metadata": {"name": "vllm-deepep-headless", "namespace": ns,
                           "managedFields": [{"manager": "kubectl-client-side-apply",
                                              "operation": "Update"}]},
              "spec": {"clusterIP": "None", "selector": {"app": "theirs"}}}  # fmt: skip
    cluster.put(theirs)
    r = run(cluster, "serve", p, "--yes")
    assert r.returncode == 2
    assert "epdoctor did not apply them: service/vllm-deepep-headless" in r.stderr
    assert "kubectl-client-side-apply" in r.stderr
    assert left(cluster, ns) == {"services": ["vllm-deepep-headless"]}

    r = epdoctor(cluster, "run", "down", "--plan", p, "--yes")
    assert r.returncode == 0
    assert "leave:     service/vllm-deepep-headless (epdoctor did not apply it" in r.stdout
    assert "left alone: service/vllm-deepep-headless" in r.stdout
    assert cluster.emulator.get("services", ns, "vllm-deepep-headless")["spec"]["selector"] == {
        "app": "theirs"
    }
    cluster.call(cluster.emulator._remove, "services", ns, "vllm-deepep-headless")


def test_the_sglang_plan_launches_the_same_way_in_another_namespace(cluster, tmp_path):
    ns = "sglang"
    p = plan(tmp_path, "planned-elsewhere", "--engine", "sglang")
    r = run(cluster, "serve", p, "-n", ns, "--yes", "--detach", "--json", "--startup-budget", "90")
    doc = json.loads(r.stdout)
    got = gates(doc)
    assert {k: v for k, v in got.items() if v != "pass"} == {"efa counters": "unknown"}, doc
    assert got["ready"] == "pass" and got["smoke"] == "pass"
    # made again for -n: the pods resolved their leader under this namespace's DNS name
    sts = cluster.emulator.get("statefulsets", ns, "sglang-deepep", "apps")
    script = sts["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert f"sglang-deepep-0.sglang-deepep-headless.{ns}.svc.cluster.local" in script
    env = {
        e["name"]: e.get("value") for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["NVSHMEM_LIBFABRIC_PROVIDER"] == "efa" and "NVSHMEM_DISABLE_CUDA_VMM" not in env
    r = epdoctor(cluster, "run", "down", "--plan", p, "-n", ns, "--yes")
    assert r.returncode == 0, r.stdout + r.stderr
    gone(cluster, ns)


def test_dynamo_is_ready_only_once_an_engine_registered(cluster, tmp_path):
    ns = "dynamo"
    p = plan(tmp_path, ns, "--engine", "dynamo", image=DYNAMO)
    r = run(cluster, "serve", p, "--yes", "--detach", "--json", "--no-kernel-test",
            "--startup-budget", "60")  # fmt: skip
    doc = json.loads(r.stdout)
    assert r.returncode == 0  # every gate passed (no kernel test, so no counters to verify)
    assert list(gates(doc)) == ["apply", "pods", "ready", "smoke"], doc["gates"]
    assert gates(doc)["ready"] == "pass" and gates(doc)["smoke"] == "pass"
    # /health said 200 with no endpoint first: Dynamo's readiness waited for one (E701)
    said = doc["panes"]["ready"]
    assert any("the endpoints array is empty" in line for line in said), said
    assert said[-1].endswith("serving fake/moe-test")
    r = epdoctor(cluster, "run", "down", "--plan", p, "--yes")
    assert r.returncode == 0
    gone(cluster, ns)


def test_the_preflight_diagnose_inside_the_pods_stops_a_failing_node(cluster, tmp_path):
    """Without --no-preflight the node probe runs in every pod first; here it sees this
    machine (no GPU, no EFA): failing findings stop the rollout before the kernel test, and
    --force goes on."""
    ns = "preflight"
    path = plan(tmp_path, ns)
    r = epdoctor(cluster, "run", "kernel-test", "--plan", path, "--yes", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 1, r.stderr
    assert list(gates(doc)) == ["apply", "pods", "preflight"] and gates(doc)["preflight"] == "fail"
    pre = next(g for g in doc["gates"] if g["gate"] == "preflight")
    assert "--force to launch anyway" in pre["summary"] and pre["code"]
    assert any(f["code"] == pre["code"] for f in doc["findings"])  # raised as findings too
    gone(cluster, ns)
    r = epdoctor(cluster, "run", "kernel-test", "--plan", path, "--yes", "--json", "--force")
    doc = json.loads(r.stdout)
    assert gates(doc)["preflight"] == "warn" and gates(doc)["network"] == "pass"
    gone(cluster, ns)
