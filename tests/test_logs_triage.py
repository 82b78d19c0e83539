"""Open-world triage: every trouble line judged, root cause first, EFA as the goal.

The per-class tests on real wordings are in test_logs_corpus.py (the corpus of real excerpts);
this file tests the mechanics on the real fixtures of tests/fixtures/ and on upstream format
strings with their values filled in (each names the upstream source it prints from).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.checks.base import Context
from epdoctor.checks.logs import evaluate
from epdoctor.facts.logs import triage
from epdoctor.facts.logs.model import LogFacts
from epdoctor.facts.logs.prefix import parse_line
from epdoctor.logwatch import LogAnalyzer, analyze_paths, analyze_stream
from epdoctor.model import Status
from epdoctor.reports.logs_report import by_severity

FIX = Path(__file__).parent / "fixtures"
LOGS = FIX / "logs"


def _facts(*lines: str, source: str = "x") -> LogFacts:
    f = LogFacts()
    for n, line in enumerate(lines, 1):
        f.add(source, n, line.encode())
    return f


def _codes(findings) -> list[str]:
    return [f.code for f in findings]


@pytest.mark.parametrize(
    "name",
    ["real-p5en-gin-proxy.log", "real-p6b200-torchrun.log", "real-p5-srun.log"],
)
def test_healthy_real_logs_give_no_fail(name):
    a = analyze_paths([str(LOGS / name)])
    assert [f for f in a.findings if f.status is Status.FAIL] == []
    assert not any(f.status is Status.WARN for f in a.findings if f.code != "T701")


def test_benign_lines_are_counted_not_reported():
    # NCCL src/plugin/net.cc probes CollNet; rdma-core's mlx5 probe; torch's IPv6 localhost try
    f = _facts(
        "h:1:1 [0] NCCL INFO NET/Plugin: Failed to find ncclCollNetPlugin_v6 symbol.",
        "h:1:1 [0] misc/ibvwrap.cc:100 NCCL WARN dlvsym failed on mlx5dv_get_data_direct_sysfs_path",
        "[W socket.cpp:663] [c10d] The client socket has failed to connect to [localhost]:29500 "
        "(errno: 99 - Cannot assign requested address).",
    )
    assert f.benign_count == 3 and f.troubles == []


def test_unknown_warn_and_error_lines_still_become_findings():
    f = LogFacts()
    f.add("a", 1, b"h:1:1 [0] enqueue.cc:12 NCCL WARN Something NCCL has never said before")
    f.add("b", 1, b"libfabric:7:1700000000:efa:ep_ctrl:efa_rdm_ep_open():99<error> odd failure")
    f.add("c", 1, b"ZeroDivisionError: division by zero")
    got = {f.code: f for _, f in evaluate(f, Context())}
    assert got["N203"].status is Status.WARN
    assert got["N306"].status is Status.FAIL  # libfabric's <error> level
    assert got["E808"].status is Status.FAIL and "ZeroDivisionError" in got["E808"].title
    assert all(got[c].evidence for c in ("N203", "N306", "E808"))


def test_nccl_lines_without_the_prefix_still_count_as_nccl():
    # aws-ofi-nccl's banner as quoted in a review comment: "<pod> NCCL INFO ..." (no pid:tid)
    a = analyze_stream(
        [
            b"dynamo-deepep-v2-0 NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct "
            b"(found 16 nics)\n",
            b"NCCL INFO Using network Libfabric\n",
        ]
    )
    keys = {r.key for r in a.ranks}
    assert "dynamo-deepep-v2-0" in keys
    assert not any("no NCCL INFO line" in f.title for f in a.findings)


def test_old_provider_wording_without_fabric_is_efa():
    # aws-ofi-nccl 1.x: "Selected Provider is %s (found %d nics)"
    a = analyze_stream([b"h:1:1 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"])
    (r,) = a.ranks
    assert r.provider == ("efa", "", 4) and r.on_efa() is True
    a = analyze_stream([b"h:1:1 [0] NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics)\n"])
    assert [f.status for f in a.findings if f.code == "T701"] == [Status.FAIL]


def test_old_plugin_not_found_wordings():
    # NCCL 2.4-2.11 / 2.12-2.18 / 2.7-2.18 (src/net.cc, src/plugin/net.cc)
    for line in (
        "h:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal "
        "implementation",
        "h:1:1 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: "
        "No such file or directory No plugin found (libnccl-net.so), using internal implementation",
        "h:1:1 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: "
        "cannot open shared object file: No such file or directory",
    ):
        f = _facts(line, "h:1:1 [0] NCCL INFO Using network Socket")
        (r,) = f.nccl_ranks()
        assert r.net_plugin_not_found == ["libnccl-net.so"], line


def test_a_missing_dependency_is_not_a_missing_plugin():
    f = _facts(
        "h:1:1 [0] NCCL INFO NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libfabric.so.1: "
        "cannot open shared object file: No such file or directory",
        "h:1:1 [0] NCCL INFO Using network Socket",
    )
    (r,) = f.nccl_ranks()
    assert r.net_plugin_not_found == []
    keyed = evaluate(f, Context())
    first = keyed[0][1]
    assert first.code == "N302" and "libfabric.so.1" in first.title
    (net,) = [x for _, x in keyed if x.code == "T701"]
    assert net.status is Status.FAIL and "fell back after N302" in net.title


def test_root_cause_is_first_and_symptoms_are_its_evidence():
    # torch's ProcessGroupNCCL error block around NCCL's own WARN and return trail
    f = _facts(
        "h:9:9 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to 10.0.0.2<43215> "
        "failed : Software caused connection abort",
        "h:9:9 [0] NCCL INFO misc/socket.cc:565 -> 2",
        "h:9:9 [0] NCCL INFO bootstrap.cc:96 -> 2",
        "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
        "c10d/ProcessGroupNCCL.cpp:1970, unhandled system error (run with NCCL_DEBUG=INFO for "
        "details), NCCL version 2.19.3",
        "[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library call "
        "failed or device error.",
    )
    keyed = evaluate(f, Context())
    fails = [x for _, x in keyed if x.status is Status.FAIL]
    assert fails[0].code == "T803"
    assert "Software caused connection abort" in fails[0].title
    assert any("-> 2" in e for e in fails[0].evidence)


def test_same_cause_on_many_ranks_is_one_finding():
    lines = [
        f"node{i}:{100 + i}:{100 + i} [{i}] include/shm.h:28 NCCL WARN Error while creating shared "
        f"memory segment /dev/shm/nccl-AbC{i} (size 9637888)"
        for i in range(4)
    ]
    got = [x for _, x in evaluate(_facts(*lines), Context()) if x.code == "H803"]
    assert len(got) == 1 and "on 4 ranks" in got[0].title


def test_no_expect_efa_passes_socket_when_nothing_was_meant_to_load():
    lines = [
        "h:1:1 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so.",
        "h:1:1 [0] NCCL INFO Using network Socket",
    ]
    strict = {x.code: x.status for _, x in evaluate(_facts(*lines), Context())}
    relaxed = {
        x.code: x.status
        for _, x in evaluate(_facts(*lines), Context(options={"expect_efa": False}))
    }
    assert strict == {"T701": Status.FAIL, "N101": Status.FAIL}
    assert relaxed == {"T701": Status.PASS, "N101": Status.SKIP}
    # a plugin that was asked for and failed still warns: something meant to load did not
    asked = [
        "h:1:1 [0] NCCL INFO NET/Plugin: /opt/x/libnccl-net.so: /opt/x/libnccl-net.so: file too short",
        "h:1:1 [0] NCCL INFO Using network Socket",
    ]
    relaxed = {
        x.code: x.status
        for _, x in evaluate(_facts(*asked), Context(options={"expect_efa": False}))
    }
    assert relaxed["T701"] is Status.WARN and relaxed["N302"] is Status.FAIL


def test_nothing_in_the_log_stays_unknown():
    a = analyze_stream([b"INFO:     Started server process [1]\nINFO:     Application startup\n"])
    assert {f.status for f in a.findings} == {Status.UNKNOWN}


def test_secrets_never_reach_the_facts():
    token = "hf_" + "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3x"
    f = _facts(f"Traceback HF_TOKEN={token} failed", "h:1:1 [0] NCCL WARN token " + token)
    dump = repr(f.troubles) + repr([r.warns for r in f.nccl_ranks()])
    assert token not in dump


def test_trouble_lines_are_bounded_per_rank():
    f = LogFacts()
    for n in range(5000):
        f.add("x", n + 1, b"h:1:1 [0] NCCL WARN oddity number %d" % n)
    assert f.trouble_count == 5000 and len(f.troubles) <= 400


def test_incremental_analyzer_raises_the_cause_when_its_line_arrives():
    an = LogAnalyzer(source="live")
    assert an.feed(b"h:1:1 [0] NCCL INFO NCCL version 2.23.4+cuda12.6\n") == []
    new = an.feed(b"h:1:1 [0] proxy.cc:10 NCCL WARN Cuda failure 'out of memory'\n")
    assert [f.code for f in new] == ["E803"]


@pytest.mark.parametrize(
    "line, code",
    [
        # aws-ofi-nccl 1.x (src/nccl_ofi_net.c) and libfabric prov/efa
        ("h:1:1 [0] find_ofi_provider:543 NCCL WARN NET/OFI Couldn't find any optimal provider", "N301"),
        ("h:1:1 [0] NCCL WARN NET/OFI OFI fi_getinfo() call failed: No data available", "N301"),
        # NCCL init.cc
        ("h:1:1 [1] init.cc:871 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on "
         "CUDA device 1d000", "E801"),
        # torch c10d ProcessGroupNCCL.cpp
        ("[rank1]:[E ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation "
         "timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=20000) "
         "ran for 20076 milliseconds before timing out.", "E806"),
        # torch c10d TCPStore / rendezvous
        ("torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. "
         "1/2 clients joined.", "E805"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB.", "E803"),
        ("RuntimeError: CUDA error: device-side assert triggered", "E802"),
        ("Out of memory: Killed process 4321 (python3) total-vm:123456kB", "H805"),
        ("ImportError: libcudart.so.12: cannot open shared object file: No such file or directory",
         "L801"),
        ("ImportError: /opt/DeepEP/deep_ep_cpp.so: undefined symbol: ncclGetLsaDevicePointer", "L101"),
        # NCCL 2.28 plugin/net.cc, as printed on an H200 node (NCCL_NET_PLUGIN set to bad files)
        ("vm:2540:2540 [0] NCCL INFO External network plugin /opt/x/libnccl-net-nosym.so is "
         "unsupported", "N303"),
        ("vm:2255:2255 [0] NCCL INFO NET/Plugin: /opt/x/libnccl-net.so: /opt/x/libnccl-net.so: "
         "file too short", "N302"),
        ("vm:3918:3918 [0] NCCL INFO NET/Plugin: /opt/x/libnccl-net.so: libstubdep.so.1: cannot "
         "open shared object file: No such file or directory", "N302"),
        ("vm:3921:3921 [0] NCCL INFO NET/Plugin: /opt/x/libnccl-net.so: /lib/x86_64-linux-gnu/"
         "libfabric.so.1: version `FABRIC_1.7' not found (required by /opt/x/libnccl-net.so)", "N304"),
        # NCCL bootstrap.cc, graph/xml.cc, misc/socket.cc
        ("vm:2803:2803 [0] bootstrap.cc:114 NCCL WARN Bootstrap : no socket interface found",
         "T802"),
        ("vm:2789:2789 [0] graph/xml.cc:175 NCCL WARN XML Parse : expected >, got '", "C801"),
        ("vm:4168:4265 [0] misc/socket.cc:47 NCCL WARN socketProgressOpt: Call to send to "
         "10.1.2.3<49173> failed : Connection reset by peer", "T803"),
        # aws-ofi-nccl request completions and libfabric prov/efa completion status strings
        ("h:1:9 [3] nccl_net_ofi_rdma.c:1234 NCCL WARN NET/OFI Request 0x7f00 completed with "
         "error. RC: 5. Error: 110 (Unreachable remote). Completed length: 0", "T801"),
        # aws-ofi-nccl 1.x's own logger (its test binaries print without NCCL's prefix)
        ("WARN: Function: create_nccl_ofi_component Line: 459: NET/OFI Couldn't open AV. "
         "RC: -22, ERROR: Invalid argument", "T801"),
        # UCX (ucs/debug/log.c format): a refused peer is named as such, anything else is UCX's
        ("[1653901933.475958] [gpu02:5215 :0]            sock.c:325  UCX  ERROR   connect(fd=40, "
         "dest_addr=172.17.0.1:40703) failed: Connection refused", "T803"),
        ("[1629755187.401889] [thetagpu19:4178252:0]    ucp_context.c:1114 UCX  ERROR exceeded "
         "transports/devices limit (72 requested, up to 64 are supported)", "T809"),
        # DeepEP csrc/kernels/exception.cuh, raised to Python
        ("RuntimeError: Failed: Assertion error /workspace/DeepEP/csrc/deep_ep.cpp:105 "
         "'num_ranks > NUM_MAX_NVL_PEERS or low_latency_mode'", "D809"),
        # NVSHMEM host init
        ("/sgl-workspace/nvshmem/src/host/transport/transport.cpp:nvshmemi_transport_init:287: "
         "Unable to initialize any transports. returning error.", "D801"),
        # host limits and kernel
        ("h:1:1 [0] NCCL WARN Call to ibv_reg_mr failed: Cannot allocate memory (ulimit -l is "
         "64 KiB: raise the locked-memory limit)", "H801"),
        ("OSError: [Errno 24] Too many open files", "H802"),
    ],
)  # fmt: skip
def test_upstream_wordings_classify(line, code):
    v = triage.classify(parse_line(line))
    assert v is not None and v.code == code, (line, v)


# The new families, each line built from the upstream format string its rule cites (the rule's
# `sources` in knowledge/traps/CODE.toml), never from a fixture's wording.
@pytest.mark.parametrize(
    "line, code",
    [
        # gdrcopy src/gdrdrv/gdrdrv.c (v2.5.1), the kernel's module loader, libgdrapi, aws-ofi-nccl
        ("[  12.345678] gdrdrv:gdrdrv_init:can't get major 0", "H812"),
        ("[  12.3] gdrdrv: Unknown symbol nvidia_p2p_get_pages (err -22)", "H812"),
        ("insmod: ERROR: could not insert module /lib/modules/gdrdrv.ko: Unknown symbol in module", "H812"),
        ("[ 99.1] gdrdrv:__gdrdrv_pin_buffer:nvidia_p2p_get_pages(va=7f0000000000 len=65536 "
         "p2p_token=0 va_space=0 callback=ffffffffc0a1b2c3) failed [ret = -22]", "H813"),
        ("h:1:1 [0] NCCL WARN NET/OFI gdr_pin_buffer failed: 22", "H813"),
        ("ERR:  error opening driver (errno=2/No such file or directory)", "H201"),
        ("h:1:1 [0] NCCL WARN NET/OFI Failed to open gdr handle", "H201"),
        # NVSHMEM src/modules/transport/ibgda/ibgda.cpp, bootstrap_uid.cpp (v3.4.5)
        ("/nvshmem/src/modules/transport/ibgda/ibgda.cpp:3794: WARN: device rdmap16s27 is not "
         "supported (expected HCA interface: mlx5 or ibp). Skipping...", "D811"),
        ("/nvshmem/src/modules/transport/ibgda/ibgda.cpp:1889: NULL value cannot allocate "
         "mlx5dv_devx_uar", "D812"),
        ("/nvshmem/src/modules/bootstrap/uid/bootstrap_uid.cpp:bootstrap_net_init:160: No socket "
         "interface found", "D813"),
        ("/nvshmem/src/host/transport/transport.cpp:nvshmemi_transport_init:275: init failed for "
         "transport: IBGDA", "D801"),
        # NCCL src/gin/gin_host.cc, src/init.cc; aws-ofi-nccl src/nccl_ofi_rdma.cpp (v1.21.1)
        ("h:1:1 [0] gin/gin_host.cc:440 NCCL WARN GIN: DevComm setup failed on all available "
         "backends", "T205"),
        ("h:1:1 [0] gin/gin_host.cc:195 NCCL WARN GIN strong signals are required, but the GIN "
         "plugin does not support them.", "T205"),
        ("h:1:1 [0] NCCL WARN NET/OFI Unexpected number of remote rails for dev 0. Expected 4 "
         "but got 2", "T206"),
        ("h:1:1 [0] init.cc:1339 NCCL WARN Detected mixed local Net device counts across ranks "
         "(min 8, max 16). Set NCCL_IGNORE_NET_MISMATCH=1 to continue.", "T206"),
        ("h:1:1 [0] init.cc:974 NCCL WARN Mismatched NCCL version detected : rank 3 version "
         "23004 rank 0 version 22907", "L802"),
        ("ImportError: /opt/DeepEP/deep_ep_cpp.so: undefined symbol: ncclCommWindowRegister", "L802"),
        # NVSHMEM src/host/init/init.cu (v3.4.5): two hosts NVSHMEM takes for one
        ("/nvshmem/src/host/init/init.cu:387: NVSHMEM requires the same number of PEs on all "
         "nodes (16 PEs on ip-10-0-0-1)", "H814"),
        # NCCL src/misc/ibvwrap.cc, src/transport/net_ib.cc (v2.28.9-1): no uverbs device
        ("h:1:1 [0] misc/ibvwrap.cc:49 NCCL WARN Call to ibv_open_device failed", "N313"),
        ("h:1:1 [0] transport/net_ib.cc:715 NCCL WARN NET/IB : Unable to open device mlx5_0",
         "N313"),
        # UCX src/uct/ib/base/ib_iface.c (v1.11.0): a CQ's buffers are locked memory
        ("[1652739463.054681] [cn0022:4071024:0]        ib_iface.c:1035 UCX  ERROR "
         "ibv_create_cq(cqe=4096) failed: Cannot allocate memory", "H801"),
        # libfabric prov/efa/src/efa_hmem.c (v2.5.1): no GPUDirect RDMA for the EFA device
        ("libfabric:22:1725400706::efa:domain:efa_domain_hmem_info_init_cuda():169<warn> Failed "
         "to register CUDA buffer with the EFA device, FI_HMEM transfers that require peer to "
         "peer support will fail.", "N305"),
        # Slurm src/plugins/task/cgroup/task_cgroup_memory.c (24.11), src/srun/launch.c
        ("slurmstepd: error: Detected 1 oom_kill event in StepId=12.0. Some of the step tasks "
         "have been OOM Killed.", "H805"),
        ("srun: error: gpu20-15: task 0: Out Of Memory", "H805"),
        # CUDA runtime error 214 / 220; the driver's hardware Xids (NVIDIA Xid catalogue)
        ("RuntimeError: CUDA error: uncorrectable ECC error encountered", "H806"),
        ("RuntimeError: CUDA error: uncorrectable NVLink error detected during the execution",
         "H806"),
        ("kernel: NVRM: Xid (PCI:0000:91:00): 79, pid='<unknown>', name=<unknown>, GPU has "
         "fallen off the bus.", "H806"),
        ("kernel: NVRM: Xid (PCI:0000:10:1c): 95, pid=1896, name=python, Uncontained: FBHUB.",
         "H806"),
        # Ray's memory monitor (raylet node_manager.cc), kmod's modprobe, pyxis/enroot
        ("(raylet) node_manager.cc:3040: 1 Workers (tasks / actors) killed due to memory pressure "
         "(OOM), 0 Workers crashed due to other reasons at node (ID: 2c8, IP: 10.0.0.1)", "H805"),
        ("modprobe: FATAL: Module gdrdrv not found in directory /lib/modules/6.8.0-1015-aws",
         "H812"),
        ("slurmstepd: error: pyxis: failed to import docker image", "K107"),
        ("slurmstepd: error: pyxis:     [ERROR] URL https://nvcr.io/proxy_auth?scope=x returned "
         "error code: 401 Unauthorized", "K107"),
        # DeepSpeed's launcher pre-flight; Dynamo's etcd client; Open MPI's OFI MTL add_procs
        ("RuntimeError: Using hostfile at /job/hostfile but host=p5en-2 was not reachable via "
         "ssh. If you are running with a single node please remove /job/hostfile or setup "
         "passwordless ssh.", "T803"),
        ("Exception: Failed to connect to etcd server with config ClientOptions { etcd_url: "
         "[\"http://etcd:2379\"] }", "T803"),
        ("[p5en-1:08156] mtl_ofi_endpoint.h:48: *** The Open MPI OFI MTL is aborting the MPI job "
         "(via exit(3)).", "H121"),
        # CUDA error 800 on a fabric-handle allocation (no IMEX channel)
        ("CuError: (800, 'Call to cuMemCreate(&memHandle, nbytes, &prop, 0 ) failed. (Cu failure: "
         "operation not permitted)')", "H804"),
        # libfabric prov/efa (v2.5.1)
        ("A process has executed an operation involving a call", "N311"),
        ("FI_EFA_USE_DEVICE_RDMA=1 was set by user, but EFA device has no rdma-read capability.  "
         "Application will abort().", "N312"),
        # UCX src/ucp/core/ucp_context.c, NIXL (v1.4.0)
        ("[1.2] [h:1:0] ucp_context.c:1754 UCX  ERROR no usable transports/devices (asked "
         "rc,cuda_copy on mlx5_0:1)", "T810"),
        ("E0101 nixl_agent.cpp:12] createBackend: backend initialization error for 'UCX'", "T810"),
        # vLLM v1 engine (0.11.0, 0.34.0), shm_broadcast.py; gloo transport/tcp
        ("RuntimeError: Did not receive response from front-end process within 5 minutes", "E811"),
        ("TimeoutError: Timed out waiting for engines to sendinitial message on input socket.", "E811"),
        ("WARNING 01-02 10:00:00 [shm_broadcast.py:115] No available shared memory broadcast "
         "block found in 60 seconds. This typically happens when some processes are hanging.", "E812"),
        ("RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:79] "
         "Timed out waiting 1800000ms for recv operation to complete", "E813"),
        # kube-scheduler and kubelet wordings (kubectl describe / get events pasted into a log)
        ("  Warning  FailedScheduling  2m  default-scheduler  0/3 nodes are available: 3 "
         "Insufficient vpc.amazonaws.com/efa. preemption: 0/3 nodes are available", "K105"),
        ("0/2 nodes are available: 2 Insufficient hugepages-2Mi.", "K104"),
        ("0/4 nodes are available: 4 node(s) didn't match Pod's node affinity/selector.", "K106"),
        ("  Warning  BackOff  3m  kubelet  Back-off restarting failed container vllm in pod x", "K103"),
        ("      Reason:       OOMKilled", "K102"),
        ("  Warning  Failed  1m  kubelet  Failed to pull image \"x:1\": not found", "K107"),
        # gdrcopy's own tools (tests/common.hpp)
        ("gdr_open error: Is gdrdrv driver installed and loaded?", "H201"),
        ('Assertion "(gdr_pin_buffer(g, d_A, size, 0, 0, &mh)) == (0)" failed at copylat.cpp:171',
         "H813"),
        # gdrdrv's mmap path, DKMS, the EFA provider's own error codes, engines' KV-cache memory
        ("[  88.1] gdrdrv:gdrdrv_mmap:error -22 in gdrdrv_remap_gpu_mem", "H813"),
        ("Error! Bad return status for module build on kernel: 5.15.0-1 (aarch64)", "H812"),
        ("libfabric:1:1::efa:ep_ctrl:efa_rdm_ep_post_internal_rx_pkts():500<warn> Failure to post "
         "internal receive buffers", "H801"),
        ("ValueError: No available memory for the cache blocks. Try increasing "
         "`gpu_memory_utilization` when initializing the engine.", "E803"),
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "E803"),
        ("h:1:1 [0] ofi_init:1134 NCCL WARN NET/OFI Only EFA provider is supported", "N301"),
        ("h:1:1 [0] misc/shmutils.cc:80 NCCL WARN Error: failed to extend /dev/shm/nccl-ab12 to "
         "9637892 bytes, error: No space left on device (28)", "H803"),
        ("[1.2] [h:7:0] ib_mlx5_dv.c:90 UCX ERROR mlx5dv_devx_alloc_uar() failed: Operation not "
         "supported", "D812"),
        ("ValueError: Free memory on device cuda:0 (3.22/4.0 GiB) on startup is less than desired "
         "GPU memory utilization (0.9, 3.60 GiB).", "E803"),
        # NIXL's Python binding raising a backend status
        ("nixl._bindings.nixlBackendError: NIXL_ERR_BACKEND", "T810"),
    ],
)  # fmt: skip
def test_new_families_classify(line, code):
    v = triage.classify(parse_line(line))
    assert v is not None and v.code == code, (line, v)


@pytest.mark.parametrize(
    "line",
    [
        # application Xids follow a program fault; they are not the hardware's
        "kernel: NVRM: Xid (PCI:0000:cb:00): 13, pid=1234, name=python, Graphics SM Warp Exception",
        "kernel: NVRM: Xid (PCI:0000:cb:00): 31, pid=1234, name=python, Ch 00000008, intr 10000000",
        "kernel: NVRM: Xid (PCI:0000:cb:00): 43, pid=1234, name=python, Ch 00000008",
    ],
)
def test_application_xids_are_not_a_hardware_fault(line):
    v = triage.classify(parse_line(line))
    assert v is None or v.code != "H806", (line, v)


@pytest.mark.parametrize(
    "line, sub",
    [
        # shapes no rule knows: still failures, named by who wrote them
        ("Your job will now abort.", "the run"),
        ("srun: error: p5-st-1: task 3: Exited with exit code 1", "Slurm"),
        ("gdrcopy_copybw: gdr_map failed somewhere new", "gdrcopy"),
        ("/nvshmem/src/host/init/init.cu:1080: nvshmem initialization failed, exiting", "nvshmem"),
        ("h1: Test CUDA failure common.cu:891 'an unknown new cuda error'", "CUDA"),
        ("Failed, NCCL error alltoall.cu:102 'unknown result code'", "NCCL"),
    ],
)
def test_unrecognised_fatal_lines_are_trouble_whatever_their_shape(line, sub):
    v = triage.classify(parse_line(line))
    assert v is not None and v.is_trouble and v.level == triage.ERROR, (line, v)
    assert v.code in ("E810", "D809", "D801", "H813", "N204"), v
    if v.code in ("E810", "D809"):
        assert sub in v.what or v.subsystem == sub, v


def test_writer_level_keeps_a_warning_a_warning():
    v = triage.classify(parse_line("WARNING 01-02 10:00:00 [x.py:1] failed to import foo"))
    assert v is not None and v.level == triage.WARNING and v.code == "E809"
    v = triage.classify(parse_line("Could not find checkpoint, start training from scratch"))
    assert v is not None and v.level == triage.NOTE


def test_unprefixed_init_complete_lines_are_nccl_lines():
    data = b"".join(
        b"NCCL INFO comm 0x5555 rank %d nranks 12 cudaDev %d busId 1000 - Init COMPLETE\n" % (i, i)
        for i in range(12)
    )
    a = analyze_stream([data])
    (t701,) = [f for f in a.findings if f.code == "T701"]
    assert "no NCCL INFO line" not in t701.title and "no `Using network`" in t701.title


def _one_host(n_nodes: int, nranks: int, ranks: int) -> list[bytes]:
    out = []
    for r in range(ranks):
        out.append(b"h0:%d:%d [%d] NCCL INFO Using network Socket\n" % (r + 1, r + 1, r))
        if n_nodes:
            out.append(
                b"h0:%d:%d [%d] NCCL INFO comm 0x55 rank %d nRanks %d nNodes %d localRanks %d "
                b"localRank %d MNNVL 0\n" % (r + 1, r + 1, r, r, nranks, n_nodes, ranks, r)
            )
        else:
            out.append(
                b"h0:%d:%d [%d] NCCL INFO comm 0x55 rank %d nranks %d cudaDev %d busId 1 - "
                b"Init COMPLETE\n" % (r + 1, r + 1, r, r, nranks, r)
            )
    return out


def test_a_socket_fallback_after_an_rdma_device_failed_to_open_fails_whatever_was_expected(
    tmp_path,
):
    """An RDMA device NCCL could not open (a container without /dev/infiniband) is a failure
    even where EFA is not the goal, and a plugin it did not find (skip there) does not hide it."""
    log = tmp_path / "ib.log"
    log.write_text(
        "h:1:1 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 0.\n"
        "h:1:1 [0] misc/ibvwrap.cc:49 NCCL WARN Call to ibv_open_device failed\n"
        "h:1:1 [0] transport/net_ib.cc:715 NCCL WARN NET/IB : Unable to open device mlx5_0\n"
        "h:1:1 [0] NCCL INFO NET/IB : No device found.\n"
        "h:1:1 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\n"
        "h:1:1 [0] NCCL INFO Using network Socket\n"
        "h:1:1 [0] NCCL INFO NET/Plugin : No plugin found (libnccl-net.so), using internal "
        "implementation\n"
    )
    for expect_efa in (False, True):
        a = analyze_paths([str(log)], Context(options={"expect_efa": expect_efa}), parallel=False)
        assert a.worst() is Status.FAIL
        fails = [f.code for f in by_severity(a.findings) if f.status is Status.FAIL]
        assert fails[0] == "N313", fails


def test_a_net_channel_line_shows_a_rank_off_efa_but_never_on_it(tmp_path):
    """Without a `Using network` line, "[send] via NET/Socket/0" names the network (T701 fails);
    a channel over the OFI plugin proves nothing the provider line would, and makes no rank."""
    socket = tmp_path / "socket.log"
    socket.write_text(
        "h1:20:67 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/Socket/0\n"
        "h1:20:67 [0] NCCL INFO Channel 01/0 : 8[0] -> 0[0] [send] via NET/Socket/1\n"
    )
    a = analyze_paths([str(socket)], Context(), parallel=False)
    t701 = [f for f in a.findings if f.code == "T701"]
    assert t701 and t701[0].status is Status.FAIL and "Socket" in t701[0].title, a.findings
    ofi = tmp_path / "ofi.log"
    ofi.write_text(
        "h1:20:67 [0] NCCL INFO Channel 00/0 : 8[0] -> 0[0] [send] via NET/AWS Libfabric/0/GDRDMA\n"
    )
    a = analyze_paths([str(ofi)], Context(), parallel=False)
    assert not a.ranks and a.worst() is not Status.PASS


def test_the_printf_version_banner_belongs_to_the_process_around_it(tmp_path):
    """NCCL prints "NCCL version X" without its host:pid prefix: two hosts' banners in one
    log still say the ranks run different NCCL versions (F202)."""
    log = tmp_path / "two.log"
    log.write_text(
        "hostA:11:11 [0] NCCL INFO Bootstrap : Using ens7:10.0.0.1<0>\n"
        "NCCL version 2.14.3+cuda11.7\n"
        "hostA:11:12 [0] NCCL INFO Using network Socket\n"
        "hostB:22:22 [0] NCCL INFO Bootstrap : Using ens7:10.0.0.2<0>\n"
        "NCCL version 2.19.3+cuda12.3\n"
        "hostB:22:23 [0] NCCL INFO Using network Socket\n"
    )
    a = analyze_paths([str(log)], Context(options={"expect_efa": False}), parallel=False)
    versions = {r.key: r.nccl_version for r in a.facts.nccl_ranks()}
    assert versions == {"hostA:11": "2.14.3", "hostB:22": "2.19.3"}, versions
    assert "F202" in {f.code for f in a.findings if f.status is Status.FAIL}


def test_one_host_socket_is_not_a_failure_but_one_node_of_many_is():
    # NCCL's own nNodes 1: traffic stays in the node, Socket is what NCCL names and carries none
    a = analyze_stream(_one_host(1, 2, 2))
    assert {f.status for f in a.findings if f.code == "T701"} == {Status.PASS}
    # every rank of the communicator on one host (no nNodes in older NCCL): one host too
    a = analyze_stream(_one_host(0, 2, 2))
    assert {f.status for f in a.findings if f.code == "T701"} == {Status.PASS}
    # one host's ranks of a 16-rank job: a node of a multi-node run, off EFA is a failure
    a = analyze_stream(_one_host(0, 16, 2))
    assert {f.status for f in a.findings if f.code == "T701"} == {Status.FAIL}
    a = analyze_stream(_one_host(2, 16, 2))
    assert {f.status for f in a.findings if f.code == "T701"} == {Status.FAIL}
    # --expect-efa: EFA on every rank, one host or not
    a = analyze_stream(_one_host(1, 2, 2), Context(options={"expect_efa": True}))
    assert {f.status for f in a.findings if f.code == "T701"} == {Status.FAIL}


def test_ranks_that_disagree_on_efa_nics_fail():
    data = [
        b"a:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)\n",
        b"b:2:2 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 32 nics)\n",
    ]
    a = analyze_stream(data)
    (t206,) = [f for f in a.findings if f.code == "T206"]
    assert t206.status is Status.FAIL and "16 on" in t206.title and "32 on" in t206.title


def test_an_invalid_gin_type_is_the_nccl_version_not_the_plugin():
    data = [
        b"h:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.0\n",
        b"h:1:1 [0] NCCL INFO NCCL_GIN_TYPE set by environment to 5\n",
        b"h:1:1 [0] NCCL INFO GIN/Plugin: Loaded gin plugin Libfabric (v13)\n",
        b"h:1:1 [0] gin/gin_host.cc:247 NCCL WARN Cannot get backend version for invalid GIN type 5\n",
    ]
    a = analyze_stream(data)
    (t101,) = [f for f in a.findings if f.code == "T101"]
    assert t101.status is Status.FAIL
    assert "NCCL 2.30.4 is older than 2.31.2" in t101.title and "plugin itself loaded" in t101.title


def test_a_completed_nccl_tests_run_passes_where_efa_is_not_the_goal():
    data = [
        b"# Out of bounds values : 0 OK\n",
        b"# Avg bus bandwidth    : 95.3\n",
    ]
    a = analyze_stream(data, Context(options={"expect_efa": False}))
    assert a.worst() is Status.PASS
    # where EFA is the goal, a completed run proves nothing about the network: never a pass
    a = analyze_stream(data)
    assert a.worst() is Status.UNKNOWN


def test_a_test_summary_of_zero_failures_is_not_trouble():
    for line in ("Total: 28, Passed: 28, Failed: 0, Waived: 0", "errors: 0", "FAILED: 0"):
        v = triage.classify(parse_line(line))
        assert v is None or not v.is_trouble, (line, v)


def test_every_rank_through_init_passes_where_efa_is_not_the_goal():
    data = [
        b"h%d:%d:%d [0] NCCL INFO comm 0x55 rank %d nranks 2 cudaDev 0 busId 1 - Init COMPLETE\n"
        % (r, r + 1, r + 1, r)
        for r in range(2)
    ]
    a = analyze_stream(data, Context(options={"expect_efa": False}))
    assert a.worst() is Status.PASS
    assert analyze_stream(data).worst() is Status.UNKNOWN  # EFA the goal: nothing proves it


def test_rays_repeat_count_is_not_part_of_the_message():
    line = (
        "(RayTrainWorker pid=954, ip=10.0.0.2) w:954:3133 [6] NCCL INFO Using network Socket "
        "[repeated 15x across cluster]"
    )
    p = parse_line(line)
    assert p.nccl and p.msg == "Using network Socket"


def test_an_nccl_error_trail_alone_still_fails(tmp_path):
    """NCCL prints `file.cc:N -> rc` only for a real error return (checks.h): a log whose only
    trouble is that trail failed. Through bootstrap or socket code it is the bootstrap's sockets
    (T802, T803 the other candidate); 7 is ncclInProgress, not an error."""
    boot = _failing(
        tmp_path,
        "h1:2330:2658 [2] NCCL INFO Using network IBext\n"
        "h1:2330:2658 [2] NCCL INFO misc/socket.cc:567 -> 2\n"
        "h1:2330:2658 [2] NCCL INFO bootstrap.cc:270 -> 2\n",
    )
    assert boot[:2] == ["T802", "T803"], boot
    other = _failing(tmp_path, "h1:20:67 [0] NCCL INFO init.cc:1200 -> 3\n")
    assert other == ["N204"], other
    busy = _failing(tmp_path, "h1:20:67 [0] NCCL INFO init.cc:1200 -> 7\n")
    assert not busy, busy


def _failing(tmp_path, text: str) -> list[str]:
    """The codes of a log's fail findings, where EFA is not the goal."""
    log = tmp_path / "trail.log"
    log.write_text(text)
    a = analyze_paths([str(log)], Context(options={"expect_efa": False}), parallel=False)
    return [f.code for f in a.findings if f.status is Status.FAIL]


def test_only_the_first_bootstrap_interface_is_the_one_nccl_listens_on(tmp_path):
    """An old NCCL lists every interface on its Bootstrap line but listens on [0]: a link-local
    address further down the list reaches no peer and harms nothing."""
    log = tmp_path / "boot.log"
    log.write_text(
        "a:14:14 [0] NCCL INFO Bootstrap : Using [0]eth0:192.168.2.54<0> "
        "[1]eni0f58:fe80::9473:48ff:fe6b:8179%eni0f58<0>\n"
        "b:14:14 [0] NCCL INFO Bootstrap : Using [0]eni5f53:fe80::8414:79ff:fe3e:236b%eni5f53<0>\n"
    )
    a = analyze_paths([str(log)], Context(options={"expect_efa": False}), parallel=False)
    t802 = [f for f in a.findings if f.code == "T802"]
    assert len(t802) == 1 and "eni5f53" in t802[0].title, t802


def test_gloo_without_an_address_to_bind_is_the_interface(tmp_path):
    """gloo's tcp device (device.cc): an interface without an address, or a host name that
    resolves to none of this host's addresses."""
    for line in (
        "RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:127] "
        "rp != nullptr. Unable to find address for: dgx-1.ai",
        "RuntimeError: [enforce fail at gloo/transport/tcp/device.cc:83] ifa != nullptr. Unable "
        "to find address for: ens35f0np0",
    ):
        v = triage.classify(parse_line(line))
        assert v is not None and v.code == "T802", (line, v)


def test_a_missing_devcomm_symbol_is_the_gin_floor_or_an_older_nccl_than_torch_was_built_for(
    tmp_path,
):
    """The import error's library decides (often on the line before): DeepEP's below the GIN
    floor (L101) or libtorch_cuda.so built against a newer NCCL than the one loaded (L802)."""
    codes = _failing(
        tmp_path,
        "ImportError: /usr/local/lib/python3.12/dist-packages/torch/lib/libtorch_cuda.so:\n"
        "  undefined symbol: ncclDevCommDestroy\n",
    )
    assert set(codes[:2]) == {"L101", "L802"}, codes
