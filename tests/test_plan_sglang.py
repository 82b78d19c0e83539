"""The SGLang plan is the merged SGLang DeepEP sample's path
(https://github.com/awslabs/awsome-distributed-ai/pull/1215): DeepEP V1 567632d with its EFA
patch on NVSHMEM v3.7.0's libfabric transport, the sample's env contract, pins, serve and kernel
test commands; it lints clean (tests/test_plan_render.py runs the whole matrix) and launches
like any Kubernetes plan (tests/test_run_kube_rollout.py)."""

from __future__ import annotations

from epdoctor.plan import PlanInput, make_plan
from epdoctor.plan.model import Level, Verdict


def _plan(**kw):
    kw.setdefault("num_experts", 256)
    return make_plan(PlanInput(engine="sglang", **kw))


def test_the_env_contract_is_the_samples():
    p = _plan()
    env = p.env_dict()
    assert env["NVSHMEM_REMOTE_TRANSPORT"] == "libfabric"
    # NVSHMEM compares the provider with strcmp: lowercase, or an invalid persona (N512)
    assert env["NVSHMEM_LIBFABRIC_PROVIDER"] == "efa"
    assert env["NVSHMEM_NETDEVS_POLICY"] == "EXTERNAL_SHARING_PCIE_SWITCH_NIC_EXCLUSIVE"
    assert env["NVSHMEM_BOOTSTRAP"] == "UID"
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert env["NCCL_NET_PLUGIN"] == "ofi"  # the short name, not a path (N105)
    assert env["LD_PRELOAD"] == "/opt/nvshmem/install/lib/libnvshmem_host.so.3.7.0"  # D803
    assert env["NVIDIA_GDRCOPY"] == "enabled"
    codes = {e.name: e.code for e in p.env}
    assert codes["NVSHMEM_LIBFABRIC_PROVIDER"] == "N512" and codes["LD_PRELOAD"] == "D803"
    # no GIN knob: NVSHMEM's transport reads none of them (E409)
    assert not {k for k in env if k.startswith(("NCCL_GIN", "EP_"))}
    forbidden = {f.name: f.code for f in p.forbidden}
    assert forbidden["NVSHMEM_DISABLE_CUDA_VMM"] == "D805"


def test_the_pins_are_the_samples():
    pins = {p.component: p.value for p in _plan().pins}
    assert pins["SGLang base image"] == "lmsysorg/sglang:v0.5.13.post1-cu130"
    assert pins["EFA installer"] == "1.49.0"
    assert pins["libfabric"].startswith("2.4.0amzn5.0")
    assert pins["NVSHMEM"].startswith("v3.7.0-0")
    assert pins["DeepEP (V1, NVSHMEM)"].startswith("deepseek-ai/DeepEP @ 567632d")
    assert pins["gdrcopy (image) / gdrdrv (host)"].startswith("userspace 2.5.2")
    codes = {p.component: p.code for p in _plan().pins}
    assert codes["DeepEP (V1, NVSHMEM)"] == "D804" and codes["NVSHMEM"] == "D803"


def test_serve_and_kernel_test_are_the_samples():
    p = _plan(nodes=2, gpus_per_node=8)
    c = p.commands
    assert "python3 -m sglang.launch_server" in c.leader
    assert "--tp-size 16 --ep-size 16 --moe-a2a-backend deepep --deepep-mode auto" in c.leader
    assert '--nnodes 2 --node-rank "$NODE_RANK"' in c.leader
    assert "--port 8000 --mem-fraction-static 0.85" in c.leader
    assert "--disable-radix-cache" not in c.leader  # the bench's prompts share no prefix (M403)
    assert "--enable-dp-attention" not in c.leader  # needs precompile + graph caps it does not set
    assert c.worker == c.leader  # every node runs the same launcher with its rank
    assert c.kernel_run.startswith('cd "${DEEPEP_SRC:-/opt/DeepEP}" && ')
    assert "WORLD_SIZE=2" in c.kernel_run and "NVSHMEM_DISABLE_CUDA_VMM=1" in c.kernel_run
    # internode (normal kernels, VMM off), then low_latency (the decode kernels, VMM on)
    internode, low_latency = c.kernel_run.split(" && ")[1:]
    assert internode.endswith("python3 tests/test_internode.py --num-processes 8")
    assert "NVSHMEM_DISABLE_CUDA_VMM=1" in internode
    assert low_latency.endswith("python3 tests/test_low_latency.py --num-processes 8")
    assert "NVSHMEM_DISABLE_CUDA_VMM" not in low_latency
    from epdoctor.plan.launch import BOUND  # the operator's script bounds it (600 s default)

    bounded = c.kernel_run.replace("python3 ", BOUND + "python3 ")  # each test is bounded
    assert c.kernel_test.startswith("{ " + bounded + "; } > /tmp/epdoctor-kernel-test.log 2>&1")


def test_verdict_and_reasons():
    p = _plan()
    assert p.verdict is Verdict.CAVEATS  # the sample ran docker run on hosts, not these pods
    by = {(r.code, r.level) for r in p.reasons}
    assert ("M508", Level.CAVEAT) in by
    assert {("D803", Level.INFO), ("D804", Level.INFO), ("D805", Level.INFO)} <= by
    m508 = next(r.message for r in p.reasons if r.code == "M508")
    assert "docker run" in m508 and "--device /dev/gdrdrv" in m508 and "privileged pod" in m508
    # the sample served on H100/H200 only: a Blackwell plan is planned from the mechanism
    b300 = _plan(instance="p6-b300.48xlarge")
    assert any(r.code == "M508" and "No reference recipe ran" in r.message for r in b300.reasons)
