"""Log analysis on real and composed logs: per-rank facts, findings, verdicts.

Fixtures and their provenance: tests/fixtures/logs/README.md (real ones come from
shared/reference/efa-node-samples.md section 8 and tests/fixtures/h200-*).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.checks.base import Context
from epdoctor.checks.logs import evaluate
from epdoctor.facts.logs.model import LogFacts
from epdoctor.logwatch import analyze_paths
from epdoctor.model import Status

FIX = Path(__file__).parent / "fixtures"
LOGS = FIX / "logs"


def codes(a) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for f in a.findings:
        out.setdefault(f.code, set()).add(f.status.value)
    return out


def run(name: str, **ctx) -> object:
    return analyze_paths([str(LOGS / name)], Context(**ctx))


# --- real logs ---------------------------------------------------------------------------------
def test_real_p5en_gin_proxy_is_efa_direct_with_gin():
    a = run("real-p5en-gin-proxy.log")
    (r,) = a.ranks
    assert (r.key, r.nccl_version, r.cuda_version) == ("deepep-efa-bench-0:70124", "2.30.4", "13.2")
    assert r.provider == ("efa", "efa-direct", 16) and r.network == "Libfabric"
    assert r.ofi_nccl_version == "git-9c44d34" and r.libfabric_version == "2.4"
    assert r.gin_plugin == "Libfabric" and r.env["NCCL_NET_PLUGIN"].endswith("libnccl-net-ofi.so")
    assert codes(a) == {"T701": {"pass"}, "T201": {"pass"}}
    assert any(
        ".log:12: " in e and "Selected provider is efa" in e for f in a.findings for e in f.evidence
    )


def test_real_p5en_against_the_instance_nic_count():
    assert "T702" not in codes(run("real-p5en-gin-proxy.log", instance="p5en.48xlarge"))
    a = run("real-p5en-gin-proxy.log", instance="p5.48xlarge")  # p5 has 32 EFA NICs
    assert codes(a)["T702"] == {"fail"}
    a = run("real-p5en-gin-proxy.log", options={"expect_nics": 32})
    assert codes(a)["T702"] == {"fail"}


def test_real_torchrun_prefix_p6_b200():
    a = run("real-p6b200-torchrun.log")
    (r,) = a.ranks
    assert r.labels == ["default0"] and r.provider == ("efa", "efa-direct", 4)
    assert r.ofi_nccl_version == "1.16.2" and r.on_efa() is True
    assert codes(a) == {"T701": {"pass"}}


def test_real_p4d_fabric_efa_warns_and_fails_when_efa_direct_expected():
    a = run("real-p4d-healthy.log")
    assert codes(a) == {"T701": {"warn"}}
    assert codes(run("real-p4d-healthy.log", transport="gin-proxy"))["T701"] == {"fail"}


def test_real_socket_fallback_after_ofi_init_failure():
    a = run("real-p4d-socket-fallback.log")
    (r,) = a.ranks
    assert r.network == "Socket" and r.ofi_init_failed and r.on_efa() is False
    assert r.warn_count == 3 and r.env["NCCL_IB_DISABLE"] == "1"
    c = codes(a)
    assert c["T701"] == {"fail"} and c["N201"] == {"fail"}
    assert "N203" not in c  # the three WARN lines are the N201 evidence


def test_real_srun_prefix_groups_by_nccl_process():
    a = run("real-p5-srun.log")
    keys = [r.key for r in a.ranks]
    assert "p5-dy-gpu-3:47930" in keys and "p5-dy-gpu-4:930643" in keys
    r = next(r for r in a.ranks if r.key == "p5-dy-gpu-4:930643")
    assert r.labels == ["srun 2"] and r.ofi_nccl_version == "1.13.2-aws"
    assert codes(a) == {"T701": {"unknown"}}  # no provider line: never a pass


def test_real_h200_plugin_path_missing_and_gin_type():
    a = analyze_paths([str(FIX / "h200-run" / "nccl-no-plugin.log")])
    (r,) = a.ranks
    assert r.gin_type == 2 and r.net_plugin_not_found == [
        "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so"
    ]
    c = codes(a)
    # the plugin the run asked for is missing: a failure; the Socket network on this one host
    # (nNodes 1) carries no traffic off the node, so it is a warning unless EFA is required
    assert c["N105"] == {"fail"} and c["T701"] == {"warn"} and c["T201"] == {"unknown"}
    a = analyze_paths(
        [str(FIX / "h200-run" / "nccl-no-plugin.log")], Context(options={"expect_efa": True})
    )
    assert codes(a)["T701"] == {"fail"}


def test_real_h200_default_plugin_absent_is_a_failure_unless_efa_is_not_expected():
    # EFA is the goal: Socket after a missing plugin fails, and says why it fell back; the log
    # shows one host, so the network itself is a warning (no traffic left the node)
    a = analyze_paths([str(FIX / "h200-node" / "07_nccl_info_log.txt")])
    assert codes(a) == {"T701": {"warn"}, "N101": {"fail"}}
    (net,) = [f for f in a.findings if f.code == "T701"]
    assert "network plugin was not found" in net.title or "fell back after N101" in net.title
    a = analyze_paths(
        [str(FIX / "h200-node" / "07_nccl_info_log.txt")], Context(options={"expect_efa": False})
    )
    # --no-expect-efa: Socket is what the operator meant, and nobody asked for a plugin
    assert codes(a) == {"T701": {"pass"}, "N101": {"skip"}}
    assert a.worst() is Status.PASS
    a = analyze_paths(
        [str(FIX / "h200-node" / "07_nccl_info_log.txt")], Context(transport="efa-gda")
    )
    assert codes(a)["T701"] == {"warn"} and codes(a)["N101"] == {"fail"}
    a = analyze_paths(
        [str(FIX / "h200-node" / "07_nccl_info_log.txt")],
        Context(transport="efa-gda", options={"expect_efa": True}),
    )
    assert codes(a)["T701"] == {"fail"} and codes(a)["N101"] == {"fail"}


# --- composed logs -----------------------------------------------------------------------------
def test_tcp_provider_never_counts_as_efa():
    a = run("composed-tcp-provider.log")
    (r,) = a.ranks
    assert r.provider == ("tcp;ofi_rxm", "10.0.0.0/16", 1) and r.on_efa() is False
    assert codes(a) == {"T701": {"fail"}}


def test_old_provider_line_without_fabric_names_the_provider_alone(tmp_path):
    # NCCL 2.4.6 with an early aws-ofi-nccl on two V100 hosts (NVIDIA/nccl#229): no fabric is
    # printed, so none is shown and the finding names just the provider
    log = tmp_path / "nccl-229.log"
    log.write_text(
        "ip-192-168-16-255:25604:25604 [0] NCCL INFO NET/Socket : Using [0]eth0:192.168.16.255<0>\n"
        "ip-192-168-16-255:25604:25604 [0] NCCL INFO NET/OFI Selected Provider is tcp;ofi_rxm\n"
        "NCCL version 2.4.6+cuda10.0\n"
        "ip-192-168-29-243:24447:24447 [0] NCCL INFO NET/OFI Selected Provider is tcp;ofi_rxm\n"
    )
    a = analyze_paths([str(log)], Context())
    assert [r.provider_text for r in a.ranks] == ["tcp;ofi_rxm", "tcp;ofi_rxm"]
    (f,) = a.findings
    assert (f.code, f.status) == ("T701", Status.FAIL)
    assert "provider tcp;ofi_rxm, not EFA" in f.title and "fabric" not in f.title


def test_sixteen_ranks_two_on_socket():
    a = run("composed-16rank-mixed.log", instance="p5en.48xlarge")
    assert len(a.ranks) == 16
    off = sorted(r.key for r in a.ranks if r.on_efa() is False)
    assert off == ["p5en-a-1:70204", "p5en-a-1:70205"]
    c = codes(a)
    assert c["T701"] == {"fail"} and c["F201"] == {"fail"} and c["N105"] == {"fail"}
    assert "T702" not in c


def test_nccl_versions_disagree():
    f = LogFacts()
    f.add("a", 1, b"h1:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.0")
    f.add("a", 2, b"h2:2:2 [0] NCCL INFO NCCL version 2.31.2+cuda13.1")
    keyed = dict(evaluate(f, Context()))
    assert keyed["F202"].status is Status.FAIL
    assert "2.30.4" in keyed["F202"].title and "2.31.2" in keyed["F202"].title


def test_gin_and_gdaki_errors():
    c = codes(run("composed-gin-errors.log"))
    for code in ("H112", "T203", "T204", "D401", "T402"):
        assert c[code] == {"fail"}, code


def test_gin_type_against_transport():
    assert codes(run("composed-16rank-mixed.log", transport="efa-gda"))["T202"] == {"fail"}
    assert "T202" not in codes(run("composed-16rank-mixed.log", transport="gin-proxy"))


def test_deepep_init_failures():
    a = run("composed-deepep-init.log")
    c = codes(a)
    assert c["L104"] == {"fail"} and c["D201"] == {"fail"} and c["D504"] == {"fail"}
    assert c["E204"] == {"fail"} and "D202" not in c
    ranks = {r.key for r in a.ranks}
    assert {"rank0", "rank1", "rank2"} <= ranks


def test_vllm_graph_mode_crash_is_e503_and_banner_is_info():
    c = codes(run("composed-engine-crashes.log"))
    assert c["E503"] == {"fail"} and c["E407"] == {"pass"} and c["D401"] == {"pass"}
    assert "E202" not in c


def test_cuda_fault_without_deepep_v2_graphs_is_generic():
    f = LogFacts()
    f.add("x", 1, b"RuntimeError: CUDA error: an illegal memory access was encountered")
    assert dict(evaluate(f, Context()))["E202"].status is Status.FAIL


def test_segfault_with_deepep_v2_is_d101_and_without_is_e203():
    assert codes(run("composed-vllm-segfault.log"))["D101"] == {"fail"}
    f = LogFacts()
    f.add("x", 1, b"Segmentation fault (core dumped)")
    assert "E203" in dict(evaluate(f, Context()))


def test_vllm_manager_not_deepep_v2():
    f = LogFacts()
    f.add(
        "x",
        1,
        b"(Worker_DP0_EP0 pid=9) INFO 05-06 [cuda_communicator.py:175] Using AgRsAll2AllManager all2all manager.",
    )
    assert dict(evaluate(f, Context()))["E407:other"].status is Status.WARN


def test_trtllm_ncclep_hf429_kubectl_prefix_ansi_crlf():
    a = run("composed-trtllm-k8s.log")
    c = codes(a)
    assert c["E104"] == {"fail"} and c["E408"] == {"warn"}
    r = next(r for r in a.ranks if r.key == "trtllm-0:77")
    assert r.nccl_version == "2.28.9"  # ANSI colour and CR removed
    assert any(r.key == "pod/trtllm-0/serve" for r in a.ranks)


def test_ncclep_missing_on_a_new_nccl_is_e102():
    f = LogFacts()
    f.add("x", 1, b"h:1:1 [0] NCCL INFO NCCL version 2.30.4+cuda13.0")
    f.add("x", 2, b"RuntimeError: nccl-ep is not installed.")
    assert "E102" in dict(evaluate(f, Context()))


def test_nothing_conclusive_is_unknown_never_pass():
    a = run("composed-nothing.log")
    assert a.worst() is Status.UNKNOWN and codes(a) == {"T701": {"unknown"}}
    empty = analyze_paths([str(LOGS / "composed-nothing.log")], Context(transport="gin-proxy"))
    assert all(f.status is not Status.PASS for f in empty.findings)


def test_failed_any_net_plugin_and_warn_lines():
    f = LogFacts()
    f.add("x", 1, b"h:1:1 [0] init.cc:100 NCCL WARN Failed to initialize any NET plugin")
    f.add(
        "x",
        2,
        b"h:1:1 [0] transport.cc:9 NCCL WARN Connect to 10.0.0.1<1234> failed : Software caused connection abort",
    )
    keyed = evaluate(f, Context())
    d = dict(keyed)
    assert d["N202:net_any_failed"].status is Status.FAIL
    # the connect failure is the cause: its own finding, ranked before the symptom
    (cause,) = [f for k, f in keyed if f.code == "T803"]
    assert cause.status is Status.FAIL and "Software caused connection abort" in cause.title
    assert [f.code for _, f in keyed].index("T803") < [f.code for _, f in keyed].index("N202")


@pytest.mark.parametrize(
    "line,kind",
    [
        (b"h:1:1 [0] NCCL INFO GIN is disabled.", "T105"),
        (b"h:1:1 [0] NCCL INFO No GIN-capable devices found.", "T201"),
        (
            b"h:1:1 [0] x.cc:1 NCCL WARN NET/OFI gin: OFI NET plugin has not been initialized. GIN requires the OFI NET plugin to be active.",
            "T201",
        ),
        (b"h:1:1 [0] x.cc:1 NCCL WARN NET/OFI Failed to open gdr handle", "H201"),
        (
            b"h:1:1 [0] x.cc:1 NCCL WARN NET/OFI GDRCopy support not available at compile time",
            "N103",
        ),
        (
            b"h:1:1 [0] x.cc:1 NCCL WARN NET/OFI gdaki_mmio_region: host_register_iomem failed",
            "H103",
        ),
        (
            b"h:1:1 [0] x.cc:1 NCCL WARN NET/OFI gin GDAKI: not supported on this platform; cannot create a GDAKI context here",
            "H125",
        ),
        (
            b"RuntimeError: Prior to NCCL 2.31, NCCL compile-time and runtime versions must be the same. Please re-compile DeepEP.",
            "D402",
        ),
        (
            b"ImportError: DeepEP v2 (ElasticBuffer) not available. Requires DeepEP >= 2.0 and NCCL >= 2.30.4.",
            "E201",
        ),
        (b"ValueError: DeepEPv2 requires NCCL GIN (GPU-Initiated Networking).", "D201"),
        (b"RuntimeError: Failed: CUDA error CUDA_ERROR_NO_BINARY_FOR_GPU", "D504"),
        (b"ptxas error   : Feature 'st.bulk' requires .target sm_100 or higher", "D405"),
    ],
)
def test_single_signatures(line: bytes, kind: str):
    f = LogFacts()
    f.add("x", 7, line)
    got = {fd.code: fd for _, fd in evaluate(f, Context())}
    assert kind in got, got
    assert got[kind].status is Status.FAIL
    assert any(e.startswith("x:7: ") for e in got[kind].evidence)
