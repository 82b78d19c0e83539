"""What a plan writes: manifests that parse with the kubernetes client's models,
lint clean, carry an env contract the shared env checks pass, and probes that
mean ready."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from epdoctor.checks.env import env_findings
from epdoctor.knowledge import stack as pk
from epdoctor.model import Status
from epdoctor.plan import PlanInput, make_plan
from epdoctor.plan.manifests import readiness_script
from epdoctor.plan.model import ENGINES, TARGETS, TRANSPORTS, Verdict
from epdoctor.plan.verify import env_check, env_problems

HF = str(Path(__file__).parent / "fixtures" / "plan" / "hf-cache")

SUPPORTED = [
    (e, t, i, target)
    for e, t, i, target in itertools.product(ENGINES, TRANSPORTS, pk.instances(), TARGETS)
    if make_plan(PlanInput(engine=e, transport=t, instance=i, target=target, hf_cache=HF)).supported
]


# A pushed image (the plan's default is a placeholder, B415): what an operator plans with.
IMAGE = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/engine:v1-20261204"


def _plan(engine, transport, instance, target, **kw):
    kw.setdefault("image", IMAGE)
    return make_plan(
        PlanInput(
            engine=engine, transport=transport, instance=instance, target=target, hf_cache=HF, **kw
        )
    )


def test_the_matrix_has_supported_plans_for_every_engine():
    assert {e for e, *_ in SUPPORTED} == set(ENGINES)


@pytest.mark.parametrize(("engine", "transport", "instance", "target"), SUPPORTED)
def test_supported_plan_env_contract_passes_the_shared_env_checks(
    engine, transport, instance, target
):
    p = _plan(engine, transport, instance, target)
    problems = env_problems(p)
    assert problems == [], [f.to_json() for f in problems]


@pytest.mark.parametrize(("engine", "transport", "instance", "target"), SUPPORTED)
def test_supported_plan_renders_files_that_lint_clean(
    tmp_path, engine, transport, instance, target
):
    from epdoctor.lint import lint_paths

    p = _plan(engine, transport, instance, target)
    written = p.render(str(tmp_path))
    assert "plan.json" in written and "plan.env" in written
    report = lint_paths([tmp_path])
    assert report.errors == []
    assert [f.to_json() for f in report.active] == []
    # the plan silences one info only, with its reason: the base is pinned by tag (B403)
    assert [(f.path, f.code) for f in report.suppressed] in ([], [("Dockerfile", "B403")])
    for rel in written:
        if rel.endswith(".sh"):
            subprocess.run(["bash", "-n", str(tmp_path / rel)], check=True)
            assert os.access(tmp_path / rel, os.X_OK)


@pytest.mark.parametrize(
    ("engine", "transport", "instance"),
    sorted({(e, t, i) for e, t, i, target in SUPPORTED if target == "kubernetes"}),
)
def test_manifests_parse_with_the_kubernetes_models(tmp_path, engine, transport, instance):
    from kubernetes.client import V1Service, V1StatefulSet

    p = _plan(engine, transport, instance, "kubernetes")
    p.render(str(tmp_path))
    docs = list(yaml.safe_load_all((tmp_path / "kubernetes" / f"{p.name}.yaml").read_text()))
    kinds = [d["kind"] for d in docs]
    assert kinds == ["Service", "Service", "StatefulSet"]
    headless, leader = (V1Service.from_dict(d) for d in docs[:2])
    sts = V1StatefulSet.from_dict(docs[2])
    assert headless.spec.cluster_ip == "None" and headless.spec.publish_not_ready_addresses
    assert leader.spec.selector["statefulset.kubernetes.io/pod-name"] == f"{p.name}-0"
    assert [pt.port for pt in leader.spec.ports] == [8000]
    assert sts.spec.service_name == headless.metadata.name
    assert sts.spec.replicas == p.input.nodes
    (c,) = sts.spec.template.spec.containers
    res = c.resources
    assert res.requests == res.limits  # Guaranteed QoS
    inst = pk.instances()[instance]
    assert res.limits["vpc.amazonaws.com/efa"] == str(inst.efa)
    assert res.limits["nvidia.com/gpu"] == str(inst.gpus)
    assert sts.spec.template.spec.node_selector == {"node.kubernetes.io/instance-type": instance}
    tag = c.image.rsplit(":", 1)[1]
    assert tag and tag != "latest"
    env = {e.name: e.value for e in c.env if e.value is not None}
    assert {k: env[k] for k in p.env_dict()} == p.env_dict()
    # The manifest's own env, through the same checks, has nothing to say.
    found = env_findings(env, engines=[engine], nccl_version=None)
    assert [f.code for f in found if f.status in (Status.FAIL, Status.WARN)] == []
    assert c.readiness_probe._exec.command[:2] == ["/bin/sh", "-c"]
    assert c.startup_probe.failure_threshold * c.startup_probe.period_seconds >= 3600


def test_plan_json_carries_the_env_check(tmp_path):
    p = _plan("vllm", "gin-proxy", "p5en.48xlarge", "kubernetes")
    p.render(str(tmp_path))
    data = json.loads((tmp_path / "plan.json").read_text())
    assert data["verdict"] == "supported"
    assert {f["severity"] for f in data["env_check"]} <= {"pass", "skip"}
    assert {f["code"] for f in data["env_check"]} >= {"C111", "D101", "T101"}


def test_env_check_is_live_not_decorative():
    p = _plan("vllm", "efa-gda", "p5en.48xlarge", "kubernetes")
    assert env_problems(p) == []
    tampered = {**p.env_dict(), "OFI_NCCL_GIN_GDAKI": "1"}
    del tampered["NCCL_SYM_GIN_KERNELS_ENABLE"]
    codes = {f.code: f.status for f in env_check(p, tampered)}
    assert codes["C101"] is Status.WARN and codes["T103"] is Status.FAIL


def test_unsupported_plan_writes_only_plan_json(tmp_path):
    p = _plan("sglang", "gin-proxy", "p5en.48xlarge", "kubernetes")
    assert p.verdict is Verdict.NOT_SUPPORTED
    assert p.render(str(tmp_path)) == ["plan.json"]
    assert sorted(os.listdir(tmp_path)) == ["plan.json"]


def test_bare_target_writes_role_scripts_with_the_hosts(tmp_path):
    p = make_plan(PlanInput(target="bare", hosts=("10.0.0.1", "10.0.0.2"), hf_cache=HF))
    written = p.render(str(tmp_path))
    assert set(written) == {
        "plan.json",
        "plan.env",
        "Dockerfile",
        ".dockerignore",
        "image/image_gate.py",
        "image/image-gate.json",
        "image/build_deepep.sh",
        "leader.sh",
        "worker.sh",
        "kernel-test.sh",
        "smoke.sh",
    }
    leader = (tmp_path / "leader.sh").read_text()
    assert 'LEADER_ADDR="${LEADER_ADDR:-10.0.0.1}"' in leader
    assert p.commands.leader in leader


def _run_probe(script: str, pod_index: str, hostname: str = "x") -> int:
    env = {"PATH": os.environ["PATH"], "POD_INDEX": pod_index, "RUN_SERVE": "1",
           "HOSTNAME": hostname}  # fmt: skip
    return subprocess.run(["/bin/sh", "-c", script], env=env, timeout=20).returncode


def test_without_the_pod_index_label_the_ordinal_comes_from_the_pod_name():
    """Before Kubernetes 1.28 the pod-index label is absent: the StatefulSet pod name's suffix
    is the ordinal, as the reference recipes derive it."""
    p = _plan("vllm", "gin-proxy", "p5en.48xlarge", "kubernetes")
    script = readiness_script(p)
    # a worker by its name (no engine running: not ready), the leader by its (no HTTP: not ready)
    assert _run_probe(script, "", hostname="vllm-deepep-1") == 1
    env = {"PATH": os.environ["PATH"], "HOSTNAME": "vllm-deepep-3"}
    out = subprocess.run(["bash", "-c", 'echo "${POD_INDEX:-${HOSTNAME##*-}}"'], env=env,
                         capture_output=True, text=True, timeout=10).stdout.strip()  # fmt: skip
    assert out == "3" and "${POD_INDEX:-${HOSTNAME##*-}}" in script


@pytest.mark.skipif(shutil.which("pgrep") is None, reason="pgrep (procps) not installed")
@pytest.mark.parametrize("engine", ["vllm", "dynamo", "sglang"])
def test_worker_probe_matches_the_engine_but_never_itself(engine):
    p = _plan(
        engine, "nvshmem" if engine == "sglang" else "gin-proxy", "p5en.48xlarge", "kubernetes"
    )
    script = readiness_script(p)
    # No engine process: the probe's own `sh -c '... [v]llm serve ...'` must not count.
    assert _run_probe(script, "1") == 1
    argv0 = {
        "vllm": "vllm serve",
        "dynamo": "python3 -m dynamo.vllm",
        "sglang": "python3 -m sglang.launch_server",
    }
    fake = subprocess.Popen(["bash", "-c", f'exec -a "{argv0[engine]} m" sleep 30'])
    try:
        time.sleep(0.3)
        assert _run_probe(script, "1") == 0
    finally:
        fake.kill()
        fake.wait()
    assert _run_probe(script, "1") == 1


def test_dynamo_leader_probe_needs_endpoints(tmp_path):
    """/health 200 with an empty endpoints array is not ready; a populated one is."""
    import http.server
    import threading

    body = {"v": b'{"status":"healthy","endpoints":[]}'}

    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.end_headers()
            self.wfile.write(body["v"])

        def log_message(self, *a):
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        p = _plan("dynamo", "gin-proxy", "p5en.48xlarge", "kubernetes")
        script = readiness_script(p).replace("127.0.0.1:8000", f"127.0.0.1:{srv.server_port}")
        assert _run_probe(script, "0") == 1
        body["v"] = b'{"status":"healthy","endpoints":["dyn://dynamo.backend.generate"]}'
        assert _run_probe(script, "0") == 0
    finally:
        srv.shutdown()


@pytest.mark.parametrize(("engine", "transport", "instance", "target"), SUPPORTED)
def test_epdoctor_lint_on_the_plan_output_exits_0(
    tmp_path, capsys, engine, transport, instance, target
):
    from epdoctor.cli import main

    _plan(engine, transport, instance, target).render(str(tmp_path))
    assert main(["lint", str(tmp_path)]) == 0, capsys.readouterr().out


def test_lint_sees_the_plan_env_file(tmp_path, capsys):
    """Guard against a vacuous pass: a dead knob added to plan.env is found."""
    from epdoctor.cli import main

    _plan("vllm", "gin-proxy", "p5en.48xlarge", "kubernetes").render(str(tmp_path))
    with (tmp_path / "plan.env").open("a") as fh:
        fh.write("OFI_NCCL_GIN_GDAKI=1\n")
    assert main(["lint", str(tmp_path)]) == 1
    assert "C101" in capsys.readouterr().out


def test_kubectl_wrappers_need_no_local_env_file(tmp_path):
    p = _plan("vllm", "gin-proxy", "p5en.48xlarge", "kubernetes")
    p.render(str(tmp_path))
    for name in ("kernel-test.sh", "smoke.sh"):
        text = (tmp_path / "kubernetes" / name).read_text()
        assert "plan.env" not in text
        assert f"kubectl -n default exec {p.name}-0" in text or "for pod in" in text


def test_real_kubectl_creates_the_manifest_and_the_client_reads_it_back(tmp_path):
    """kubectl (real binary) against the kmock-based API emulator (no real apiserver
    can run here): every object is accepted and reads back with its contract."""
    import sys as _sys

    kubectl = Path(_sys.executable).parent / "kubectl"
    if not kubectl.exists():
        kubectl = Path(shutil.which("kubectl") or "")
    if not kubectl.is_file():
        pytest.skip("kubectl not installed")
    _sys.path.insert(0, str(Path(__file__).parent))
    from kube_emulator import running
    from kubernetes import client, config

    p = _plan("dynamo", "gin-proxy", "p5en.48xlarge", "kubernetes")
    p.render(str(tmp_path / "out"))
    manifest = tmp_path / "out" / "kubernetes" / f"{p.name}.yaml"
    with running(tmp_path) as emu:
        proc = subprocess.run(
            [str(kubectl), "--kubeconfig", str(emu.kubeconfig), "create", "--validate=false",
             "-f", str(manifest)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.split() == [
            f"service/{p.name}-headless", "created", f"service/{p.name}", "created",
            f"statefulset.apps/{p.name}", "created",
        ]  # fmt: skip
        api = config.new_client_from_config(str(emu.kubeconfig))
        sts = client.AppsV1Api(api).read_namespaced_stateful_set(p.name, "default")
        svc = client.CoreV1Api(api).read_namespaced_service(f"{p.name}-headless", "default")
    (c,) = sts.spec.template.spec.containers
    assert {e.name: e.value for e in c.env if e.value is not None}.items() >= p.env_dict().items()
    assert c.resources.limits["vpc.amazonaws.com/efa"] == "16"
    assert "endpoints" in c.readiness_probe._exec.command[2]
    assert svc.spec.publish_not_ready_addresses is True


@pytest.mark.parametrize(
    ("engine", "transport", "instance"),
    sorted({(e, t, i) for e, t, i, target in SUPPORTED if target == "kubernetes"}),
)
def test_manifests_pass_the_shared_manifest_rules(engine, transport, instance):
    from epdoctor.plan.verify import manifest_problems

    p = _plan(engine, transport, instance, "kubernetes")
    assert [(f.code, f.title) for f in manifest_problems(p)] == []


def test_cache_on_a_host_directory(tmp_path):
    from kubernetes.client import V1StatefulSet

    from epdoctor.lint import lint_paths
    from epdoctor.plan import manifests
    from epdoctor.plan.verify import manifest_problems

    p = _plan(
        "vllm", "gin-proxy", "p5en.48xlarge", "kubernetes", cache_host_path="/mnt/k8s-disks/0/hf"
    )
    assert "K205" not in p.codes()
    sts = V1StatefulSet.from_dict(manifests.statefulset(p))
    (cache,) = [v for v in sts.spec.template.spec.volumes if v.name == "cache"]
    assert (cache.host_path.path, cache.host_path.type) == ("/mnt/k8s-disks/0/hf", "Directory")
    assert manifest_problems(p) == []
    p.render(str(tmp_path))
    assert lint_paths([tmp_path]).active == []
    # Without it, the emptyDir's precondition is a stated reason, not a silent one.
    assert "K205" in _plan("vllm", "gin-proxy", "p5en.48xlarge", "kubernetes").codes()


def test_the_emptydir_note_is_what_keeps_lint_quiet(tmp_path):
    """Guard: the K205 rule is live on this manifest; strip the note and it fires."""
    from epdoctor.lint import lint_paths

    p = _plan("vllm", "gin-proxy", "p5en.48xlarge", "kubernetes")
    p.render(str(tmp_path))
    f = tmp_path / "kubernetes" / f"{p.name}.yaml"
    f.write_text("\n".join(ln for ln in f.read_text().splitlines() if not ln.startswith("#")))
    assert [x.code for x in lint_paths([tmp_path]).active] == ["K205"]
