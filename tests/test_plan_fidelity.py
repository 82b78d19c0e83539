"""Recipe fidelity, not snapshots: each reference recipe's load-bearing mechanisms (public pull
requests of awslabs/awsome-distributed-ai: vLLM CPU proxy #1230, vLLM GPU-initiated #1231,
Dynamo #1256, TensorRT-LLM #1240, SGLang #1215) asserted in the files `epdoctor plan` writes."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from epdoctor.cli import main
from epdoctor.launch.bench import with_backend, with_transport
from epdoctor.launch.config import transport_flip
from epdoctor.model import EpdoctorError

BASE = ["plan", "--no-input", "--num-experts", "128"]
SYSTEMS = {
    "vllm-proxy": ("--engine", "vllm", "--transport", "gin-proxy"),
    "vllm-gda": ("--engine", "vllm", "--transport", "efa-gda"),
    "dynamo": ("--engine", "dynamo"),
    "trtllm": ("--engine", "tensorrt-llm"),
    "sglang": ("--engine", "sglang"),
}
FULL_SHA = re.compile(r"^ARG (VLLM_SHA|DEEPEP_COMMIT|GDRCOPY_COMMIT)=([0-9a-f]+)$", re.M)


def _plan(tmp_path, capsys, key):
    out = tmp_path / key
    assert main([*BASE, *SYSTEMS[key], "-o", str(out)]) == 0
    capsys.readouterr()
    files = {p.relative_to(out).as_posix(): p.read_text() for p in out.rglob("*") if p.is_file()}
    return json.loads(files["plan.json"]), files


def _container(files):
    manifest = next(
        v for k, v in files.items() if k.startswith("kubernetes/") and k.endswith(".yaml")
    )
    sts = next(d for d in yaml.safe_load_all(manifest) if d and d["kind"] == "StatefulSet")
    return sts["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize("key", ["vllm-proxy", "vllm-gda", "dynamo"])
def test_deepep_systems_build_deepep_in_the_pod_and_gate_the_image(tmp_path, capsys, key):
    plan, files = _plan(tmp_path, capsys, key)
    docker = files["Dockerfile"]
    # every commit pin is a full SHA (a short one is ambiguous, a tag moves)
    shas = dict(FULL_SHA.findall(docker))
    assert set(shas) == {"VLLM_SHA", "DEEPEP_COMMIT", "GDRCOPY_COMMIT"}
    assert all(len(v) == 40 for v in shas.values()), shas
    # the vLLM wheel from the per-commit index, served at <full sha>/<file> (no /vllm/ folder)
    assert "https://wheels.vllm.ai/${VLLM_SHA}/vllm/" in docker
    assert '"https://wheels.vllm.ai/${VLLM_SHA}/$(basename "$href")"' in docker
    # torch cu130 pinned and asserted after the last pip layer
    assert "ARG TORCH_SPEC=torch==2.11.0" in docker and "whl/cu130" in docker
    assert "torch.__version__ != '${TORCH_VERSION}'" in docker
    # plugin: the GIN table and GDRCopy compiled in, both fail the build
    symbol = "ncclGinPlugin_v14" if plan["gin_type"] == 5 else "ncclGinPlugin_v13"
    assert f"grep -c {symbol}" in docker
    assert "! grep -q -a 'GDRCopy support not available at compile time'" in docker
    # one NCCL wins: ldconfig, asserted by version string and GIN/LSA symbol
    assert "/etc/ld.so.conf.d/00-pip-nccl.conf" in docker
    assert 'grep -q -a "NCCL version ${NCCL_VERSION}"' in docker
    assert "grep -c ncclGetLsaDevicePointer" in docker
    # the nvshmem wheel's lib in the ldconfig cache (instead of a per-shell LD_LIBRARY_PATH)
    assert "01-pip-nvshmem.conf" in docker
    # the DeepEP build really runs: shipped in the image, run unconditionally at first boot
    assert (
        "image/build_deepep.sh" in files
        and "python3 setup.py build_ext --inplace" in files["image/build_deepep.sh"]
    )
    assert "COPY image/ /opt/recipe/" in docker
    script = _container(files)["command"][2]
    assert "\n/opt/recipe/build_deepep.sh\n" in script and "if [ -x" not in script
    assert script.index("build_deepep.sh") < script.index("RUN_SERVE")  # kernel test needs it
    assert "image_gate.py --expect /opt/recipe/image-gate.json --stage pod" in script
    # the image gate is the Dockerfile's last layer
    assert docker.rstrip().splitlines()[-1].endswith("--stage build")
    expect = json.loads(files["image/image-gate.json"])
    assert expect["deepep"]["commit"] == shas["DEEPEP_COMMIT"]
    # privileged: /dev/gdrdrv is EPERM in an unprivileged device cgroup (#1230)
    assert _container(files)["securityContext"] == {"privileged": True}
    env = {e["name"]: e.get("value") for e in _container(files)["env"]}
    assert env["EP_REUSE_NCCL_COMM"] == "0" and env["NCCL_GIN_TYPE"] == str(plan["gin_type"])
    # the engine's own timeout fires inside the pods' startup probe (its error names the cause)
    assert int(env["VLLM_ENGINE_READY_TIMEOUT_S"]) < 3600
    refused = {r["name"] for r in plan["env_refused"]}
    assert {"OFI_NCCL_GIN_MAX_REQUESTS", "OFI_NCCL_GIN_GDAKI"} <= refused


def test_dynamo_installs_ai_dynamo_without_its_dependencies(tmp_path, capsys):
    _, files = _plan(tmp_path, capsys, "dynamo")
    docker = files["Dockerfile"]
    assert (
        '--no-deps "ai-dynamo-runtime==${AI_DYNAMO_VERSION}" "ai-dynamo==${AI_DYNAMO_VERSION}"'
        in docker
    )
    assert "import dynamo.vllm.main, dynamo.frontend.main" in docker
    # the re-pin comes after the dynamo layer
    assert docker.index("ai-dynamo==") < docker.index("--force-reinstall")


def test_trtllm_selects_nccl_ep_ships_its_probe_and_wins_its_nccl(tmp_path, capsys):
    plan, files = _plan(tmp_path, capsys, "trtllm")
    env = {e["name"]: e["value"] for e in plan["env"]}
    assert env["TRTLLM_FORCE_COMM_METHOD"] == "NCCL_EP" and env["ENABLE_CONFIGURABLE_MOE"] == "1"
    assert env["TLLM_LOG_LEVEL"] == "INFO"
    # the probe the kernel test runs is in the image
    assert "/opt/recipe/probe_nccl_ep.py" in plan["commands"]["kernel_test"]
    assert "image/probe_nccl_ep.py" in files and "image/ep_routing.py" in files
    docker = files["Dockerfile"]
    assert "COPY image/ /opt/recipe/" in docker
    # the re-pinned NCCL wins over the NGC base's own: /usr/local/lib and ldconfig, by version
    assert 'ln -sf "$NCCL_ROOT/lib/libnccl.so.2" /usr/local/lib/libnccl.so.2' in docker
    assert 'grep -q -a "NCCL version ${NCCL_VERSION}"' in docker
    assert "nccl4py==${NCCL4PY_VERSION}" in docker and "ARG NCCL4PY_VERSION=0.3.1" in docker
    expect = json.loads(files["image/image-gate.json"])
    assert expect["nccl"] == "2.30.4" and expect["nccl_code"] == "L505"
    assert _container(files)["securityContext"] == {"privileged": True}


def test_trtllm_serves_the_recipes_bf16_model_and_refuses_a_quantized_one(tmp_path, capsys):
    """NcclEP v0.1 refuses quantized MoE communication (E411): the default is the recipe's
    BF16 checkpoint, and an FP8 one is a blocker, not a serve that fails at start."""
    plan, _ = _plan(tmp_path, capsys, "trtllm")
    assert plan["input"]["model"] == "Qwen/Qwen3-30B-A3B"
    assert "Qwen/Qwen3-30B-A3B " in plan["commands"]["leader"] + " "
    out = tmp_path / "fp8"
    rc = main([*BASE, *SYSTEMS["trtllm"], "--model", "Qwen/Qwen3-30B-A3B-FP8", "-o", str(out)])
    capsys.readouterr()
    assert rc == 1
    doc = json.loads((out / "plan.json").read_text())
    assert doc["verdict"] == "not supported"
    assert [r["level"] for r in doc["reasons"] if r["code"] == "E411"] == ["blocker"]
    # the other engines keep the FP8 default
    vllm, _ = _plan(tmp_path, capsys, "vllm-proxy")
    assert vllm["input"]["model"] == "Qwen/Qwen3-30B-A3B-FP8"


def test_sglang_writes_no_image_and_says_why(tmp_path, capsys):
    plan, files = _plan(tmp_path, capsys, "sglang")
    assert "Dockerfile" not in files
    assert any(r["code"] == "D804" and "pull/1215" in r["message"] for r in plan["reasons"])
    # the next step builds the sample's Dockerfile, not the plan directory (which has none)
    b415 = [r["message"] for r in plan["reasons"] if r["code"] == "B415"]
    assert b415 and "SAMPLE_DIR" in b415[0] and "the written Dockerfile" not in b415[0]


def test_gpu_initiated_plan_explains_the_recipes_type_3_and_the_hw_counter(tmp_path, capsys):
    plan, _ = _plan(tmp_path, capsys, "vllm-gda")
    msgs = {r["code"]: r["message"] for r in plan["reasons"]}
    assert "pull/1231" in msgs["M508"] and "NCCL_GIN_TYPE=3" in msgs["M508"]
    assert "off" in msgs["C108"] and "auto" in msgs["C108"]
    env = {e["name"]: e["value"] for e in plan["env"]}
    assert env["NCCL_GIN_TYPE"] == "5" and env["NCCL_SYM_GIN_KERNELS_ENABLE"] == "0"
    assert "OFI_NCCL_GDAKI_EFA_HW_COUNTER" not in env


@pytest.mark.parametrize(
    ("engine", "cmd", "want"),
    [
        (
            "vllm",
            "vllm serve m --all2all-backend deepep_v2",
            "vllm serve m --all2all-backend naive",
        ),
        (
            "dynamo",
            "python3 -m dynamo.vllm --model m",
            "python3 -m dynamo.vllm --model m --all2all-backend naive",
        ),
        (
            "sglang",
            "python3 -m sglang.launch_server --moe-a2a-backend deepep",
            "python3 -m sglang.launch_server --moe-a2a-backend naive",
        ),
        ("tensorrt-llm", "trtllm-serve m", "export TRTLLM_FORCE_COMM_METHOD=naive; trtllm-serve m"),
    ],
)
def test_ab_uses_each_engines_own_switch(engine, cmd, want):
    assert with_backend(cmd, "naive", engine) == want
    assert with_backend("", "naive", engine) == ""


def test_ab_switches_every_node_and_ab_transport_flips_env_only():
    from epdoctor.launch.config import bench_arms
    from epdoctor.requests import BenchOptions

    class N:
        def __init__(self, name):
            self.name, self.address = name, name

    plan = {"input": {"engine": "vllm", "transport": "gin-proxy"}, "nccl": "2.31.2",
            "commands": {"leader": "vllm serve m --all2all-backend deepep_v2",
                         "worker": "vllm serve m --all2all-backend deepep_v2 --headless"},
            "env": [{"name": "NCCL_GIN_TYPE", "value": "2"}]}  # fmt: skip
    nodes = [N("a"), N("b")]
    (_, base), (label, alt) = bench_arms(BenchOptions(ab="allgather_reducescatter"), plan, nodes)
    assert "deepep_v2" not in alt.leader_cmd + alt.worker_cmd
    assert alt.worker_cmd.endswith("--headless --all2all-backend allgather_reducescatter") or (
        "--all2all-backend allgather_reducescatter" in alt.worker_cmd
    )
    (_, base), (label, alt) = bench_arms(BenchOptions(ab_transport=True), plan, nodes)
    assert label == "efa-gda"
    assert (alt.leader_cmd, alt.worker_cmd) == (base.leader_cmd, base.worker_cmd)
    assert alt.env["NCCL_GIN_TYPE"] == "5" and alt.env["NCCL_SYM_GIN_KERNELS_ENABLE"] == "0"
    assert with_transport(alt.env, "gin-proxy")["NCCL_GIN_TYPE"] == "2"
    with pytest.raises(EpdoctorError, match="T101"):
        transport_flip({**plan, "nccl": "2.30.4"}, "vllm")
    with pytest.raises(EpdoctorError, match="E501"):
        transport_flip({**plan, "input": {"transport": "gin-proxy"}}, "tensorrt-llm")


def test_kernel_tests_are_bounded_and_gpu_initiated_proves_gdaki(tmp_path, capsys):
    """The proxy prints the efa-direct banner too: an EFA-GDA kernel test also needs the GDAKI
    context line (aws-ofi-nccl gin-getting-started); every script the plan writes is bounded."""
    gda, files = _plan(tmp_path, capsys, "vllm-gda")
    proxy, _ = _plan(tmp_path, capsys, "vllm-proxy")
    assert "gin GDAKI: createContext done" in gda["commands"]["kernel_test"]
    assert "gin GDAKI" not in proxy["commands"]["kernel_test"]
    # the recipes' provider check (run-kernel-test.sh, #1230 and #1240)
    assert "grep -q -iE 'efa-direct|Selected Provider is efa'" in proxy["commands"]["kernel_test"]
    # the written script waits for the pods to be idle (Ready under RUN_SERVE=0) first
    assert "kubectl -n default wait --for=condition=Ready pod" in files["kubernetes/kernel-test.sh"]
    assert 'timeout -k 30 "${KERNEL_TEST_TIMEOUT:-600}"' in files["kubernetes/kernel-test.sh"]
    env = {e["name"]: e["value"] for e in proxy["env"]}
    assert env["VLLM_DEEPEP_V2_ALLOW_HYBRID_MODE"] == "1"  # as both recipes serve (E410)


def test_dynamo_serves_as_its_recipe_does(tmp_path, capsys):
    """#1256's serve.sh and StatefulSet: dynamo.vllm on every node (--headless beyond the
    leader), the planes that need no NATS or etcd, a frontend checked alive, a leader liveness
    probe, and an update that restarts every pod together (the rendezvous is one-shot)."""
    plan, files = _plan(tmp_path, capsys, "dynamo")
    c = plan["commands"]
    assert c["worker"].startswith("python3 -m dynamo.vllm ") and "--headless" in c["worker"]
    for flag in ("--discovery-backend file", "--request-plane tcp", "--event-plane zmq",
                 """--kv-events-config '{"enable_kv_cache_events": false}'"""):  # fmt: skip
        assert flag in c["leader"], flag
    assert 'kill -0 "$FRONTEND_PID"' in c["leader"]
    container = _container(files)
    assert container["livenessProbe"]["exec"] == container["readinessProbe"]["exec"]
    manifest = next(v for k, v in files.items() if k.endswith(".yaml"))
    sts = next(d for d in yaml.safe_load_all(manifest) if d and d["kind"] == "StatefulSet")
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}


@pytest.mark.parametrize("key", ["vllm-proxy", "dynamo"])
def test_vllm_serves_with_the_recipes_sizing_env_and_model_revision(tmp_path, capsys, key):
    """The recipes' serve.sh COMMON and its V2-native env (#1230, #1256)."""
    plan, _ = _plan(tmp_path, capsys, key)
    for role in ("leader", "worker"):
        cmd = plan["commands"][role]
        for flag in ("--max-model-len 4096", "--max-num-seqs 16", "--max-num-batched-tokens 256",
                     "--gpu-memory-utilization 0.70", "--dtype bfloat16",
                     "--revision d206ba732169f29bb77fbf80fc2c4b81d4d30782"):  # fmt: skip
            assert flag in cmd, (role, flag)
        assert "--trust-remote-code" not in cmd  # a stated choice: the default model needs none
    env = {e["name"]: e["value"] for e in plan["env"]}
    for name in ("DEEP_EP_USE_V2_SHIM", "VLLM_USE_FLASHINFER_MOE_FP8",
                 "VLLM_DEEPEP_V2_PREFER_OVERLAP", "VLLM_DEEPEP_V2_ALLOW_MULTIPLE_REDUCTION"):  # fmt: skip
        assert env[name] == "0", name
    assert env["NCCL_DEBUG"] == "WARN"


def test_the_gdaki_proof_line_is_logged_where_the_kernel_test_looks(tmp_path, capsys):
    """aws-ofi-nccl logs `gin GDAKI: createContext done` under NET, outside NCCL's default
    INIT|BOOTSTRAP|ENV mask: the kernel test must ask for NET or its grep never matches."""
    plan, _ = _plan(tmp_path, capsys, "vllm-gda")
    kt = plan["commands"]["kernel_test"]
    assert "NCCL_DEBUG_SUBSYS=INIT,BOOTSTRAP,ENV,NET" in kt and "createContext done" in kt


def test_trtllm_image_takes_the_recipes_system_layer(tmp_path, capsys):
    """#1240's Layer 1 on the Ubuntu 24.04 NGC base: the EFA installer's libevent deps, and no
    apt Python over the image's own (PEP 668)."""
    _, files = _plan(tmp_path, capsys, "trtllm")
    apt = next(line for line in files["Dockerfile"].splitlines() if "apt-get install" in line)
    assert "libevent-core-2.1-7t64" in apt and "libevent-pthreads-2.1-7t64" in apt
    assert "python3-pip" not in apt and " python3 " not in apt


@pytest.mark.parametrize("content, rc", [("391", 0), ("390", 1)])
def test_trtllm_smoke_asks_the_routing_question(tmp_path, capsys, content, rc):
    """#1240's smoke: "What is 17 multiplied by 23?", and 391 or it fails (routing, not fluency)."""
    import os
    import subprocess

    plan, _ = _plan(tmp_path, capsys, "trtllm")
    smoke = plan["commands"]["smoke"]
    assert "17 multiplied by 23" in smoke
    curl = tmp_path / "bin" / "curl"
    curl.parent.mkdir()
    reply = json.dumps({"choices": [{"message": {"content": content}}]})
    curl.write_text(f"#!/bin/sh\necho '{reply}'\n")
    curl.chmod(0o755)
    env = {**os.environ, "PATH": f"{curl.parent}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", smoke], env=env, capture_output=True,
                       text=True, timeout=30)  # fmt: skip
    assert r.returncode == rc, r.stderr


@pytest.mark.parametrize(
    "reply, rc",
    [('{"choices":[{"message":{"content":"EP"}}],"usage":{"completion_tokens":3}}', 0),
     ('{"choices":[{"message":{"content":"EP"}}]}', 1)],
)  # fmt: skip
def test_smoke_fails_a_reply_without_usage(tmp_path, capsys, reply, rc):
    """HTTP 200 without a usage object is a failure (E703), as the vLLM recipe's probe counts
    it: the written smoke checks more than curl's status."""
    import os
    import subprocess

    plan, _ = _plan(tmp_path, capsys, "vllm-proxy")
    curl = tmp_path / "bin" / "curl"
    curl.parent.mkdir()
    curl.write_text(f"#!/bin/sh\necho '{reply}'\n")
    curl.chmod(0o755)
    env = {**os.environ, "PATH": f"{curl.parent}:{os.environ['PATH']}"}
    r = subprocess.run(["bash", "-euo", "pipefail", "-c", plan["commands"]["smoke"]], env=env,
                       capture_output=True, text=True, timeout=30)  # fmt: skip
    assert r.returncode == rc, r.stderr


def test_idle_pods_are_ready_only_after_the_build_and_the_gate(tmp_path, capsys):
    """Under RUN_SERVE=0 the probe reads a file written just before the pod idles, not
    `pgrep sleep` (the leader lookup's retry sleep would match it)."""
    _, files = _plan(tmp_path, capsys, "vllm-proxy")
    container = _container(files)
    probe = container["readinessProbe"]["exec"]["command"][-1]
    script = container["command"][-1]
    assert "test -f /tmp/epdoctor-idle" in probe and "pgrep -x sleep" not in probe
    assert script.index("image_gate") < script.index("touch /tmp/epdoctor-idle")
