"""Node checks, end to end: a fake node tree -> the real probe -> facts -> checks.

Every check is exercised for each verdict it can give. The trees are composed from
shared/reference facts (see tests/nodefs.py for the sources of each value).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nodefs import GIN_V120, NO_GIN, FakeNode, have_gcc, nccl_lib, p5en_node

from epdoctor.checks import load_all
from epdoctor.checks.base import Context, run_checks
from epdoctor.facts.node import build_node_facts
from epdoctor.facts.probe_doc import load_probe_doc
from epdoctor.model import Status

pytestmark = pytest.mark.skipif(not have_gcc(), reason="gcc is needed to build test ELF libraries")


def diagnose(node: FakeNode, ctx: Context | None = None, *args: str, extra_env=None, use_root=True):
    load_all()
    facts = build_node_facts(
        load_probe_doc(node.probe(*args, extra_env=extra_env, use_root=use_root))
    )
    return facts, run_checks(facts, ctx or Context())


def verdicts(findings, code):
    return [f.status for f in findings if f.code == code]


def one(findings, code):
    got = [f for f in findings if f.code == code]
    assert len(got) == 1, f"{code}: {got}"
    return got[0]


@pytest.fixture
def p5en(tmp_path: Path) -> FakeNode:
    return p5en_node(tmp_path / "root")


def test_healthy_p5en_proxy_node_has_no_failure(p5en):
    _, findings = diagnose(p5en)
    fails = [f for f in findings if f.status is Status.FAIL]
    assert fails == []
    for code in (
        "H101",
        "H102",
        "H111",
        "H112",
        "H113",
        "H121",
        "H123",
        "H124",
        "H126",
        "L101",
        "L102",
        "L103",
        "N101",
        "N102",
        "N103",
        "N104",
        "N105",
        "C111",
        "D101",
        "T101",
    ):
        assert Status.PASS in verdicts(findings, code), code
    # EFA-GDA-only floors do not apply to NCCL_GIN_TYPE=2.
    assert one(findings, "H122").status is Status.SKIP
    assert one(findings, "H125").status is Status.SKIP


def test_gda_transport_on_healthy_node_needs_sym_kernels_off(p5en):
    _, findings = diagnose(p5en, Context(transport="efa-gda"))
    assert one(findings, "H122").status is Status.PASS
    assert one(findings, "H125").status is Status.PASS
    assert one(findings, "H103").status is Status.PASS
    assert one(findings, "T103").status is Status.FAIL  # NCCL_SYM_GIN_KERNELS_ENABLE not 0
    # NCCL 2.30.4 is below the EFA-GDA floor.
    assert Status.FAIL in verdicts(findings, "L101")


def test_ldconfig_alias_path_is_matched_to_its_file(tmp_path):
    """On merged-/usr systems ldconfig prints /lib/... for a file found under /usr/lib/..."""
    n = FakeNode(tmp_path / "root")
    n.gpus(n=1)
    n.nccl("/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3", "2.28.3", lsa=False)
    n.symlink("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "libnccl.so.2.28.3")
    n.symlink("/lib", "usr/lib")
    n.write("/etc/ld.so.conf", "/lib/x86_64-linux-gnu\n")
    subprocess.run(["ldconfig", "-r", str(n.root)], check=True, capture_output=True)
    facts, f = diagnose(n)
    assert facts.ldconfig.value["libnccl.so.2"] == ["/lib/x86_64-linux-gnu/libnccl.so.2"]
    l101 = one(f, "L101")
    assert l101.status is Status.FAIL and "ldconfig" in l101.title and "2.28.3" in l101.title


def test_h200_like_node(tmp_path):
    """The real H200 machine's shape: wheel NCCL 2.28.9 (no LSA) in the torch venv, system 2.28.3."""
    n = FakeNode(tmp_path / "root")
    n.gpus(n=1, driver="580.159.04")
    n.nccl("/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3", "2.28.3", lsa=False)
    n.symlink("/usr/lib/x86_64-linux-gnu/libnccl.so.2", "libnccl.so.2.28.3")
    n.python_env(
        "/opt/torch/.venv",
        {"torch": "2.11.0", "nvidia-nccl-cu13": "2.28.9", "nvidia-nvshmem-cu13": "3.4.5"},
        nccl=("2.28.9", False),
    )
    _, f = diagnose(n)
    l101 = [x for x in f if x.code == "L101"]
    assert l101 and all(x.status is Status.FAIL for x in l101)
    assert any("2.28.9" in x.title for x in l101)
    l102 = one(f, "L102")
    assert l102.status is Status.WARN and "2.28.3" in l102.title and "2.28.9" in l102.title
    assert one(f, "L103").status is Status.WARN
    assert one(f, "H121").status is Status.FAIL
    assert one(f, "H111").status is Status.FAIL
    assert one(f, "N101").status is Status.FAIL
    assert one(f, "H101").status is Status.PASS


def test_no_gpu_host_says_so(tmp_path):
    n = FakeNode(tmp_path / "root")
    _, f = diagnose(n)
    h101 = one(f, "H101")
    assert h101.status is Status.FAIL and "nvidia-smi not found" in h101.title
    assert "H102" not in {x.code for x in f}  # no driver to judge: no made-up verdict


def test_nvidia_smi_failure_is_not_a_gpu_list(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.tool(
        "nvidia-smi",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
        rc=9,
    )
    _, f = diagnose(n)
    assert "rc=9" in one(f, "H101").title


def test_old_driver(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.gpus(driver="535.183.01")
    _, f = diagnose(n)
    assert one(f, "H102").status is Status.FAIL


def test_peer_mapping_override_configured_but_not_loaded(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.registry_dwords("")
    n.modprobe("nvidia.conf", 'options nvidia NVreg_RegistryDwords="PeerMappingOverride=1;"\n')
    _, f = diagnose(n, Context(transport="efa-gda"))
    h = one(f, "H103")
    assert h.status is Status.FAIL and "reload" in h.title
    _, f = diagnose(n, Context(transport="gin-proxy"))
    assert one(f, "H103").status is Status.SKIP
    _, f = diagnose(n, Context())
    # NCCL_GIN_TYPE=2 in the workload env implies the proxy.
    assert one(f, "H103").status is Status.SKIP


def test_peer_mapping_unknown_without_params(tmp_path):
    n = p5en_node(tmp_path / "root")
    (n.root / "proc/driver/nvidia/params").unlink()
    _, f = diagnose(n, Context(transport="efa-gda"))
    assert one(f, "H103").status is Status.UNKNOWN


def test_gdrdrv_24_host(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.gdrdrv("2.4")
    _, f = diagnose(n)
    assert one(f, "H111").status is Status.FAIL
    h112 = one(f, "H112")  # image ships libgdrapi 2.5: min() is still 2.4
    assert h112.status is Status.FAIL and "2.4" in h112.title


def test_gdrdrv_without_version_is_unknown(tmp_path):
    n = p5en_node(tmp_path / "root")
    (n.root / "sys/module/gdrdrv/version").unlink()
    _, f = diagnose(n)
    assert one(f, "H111").status is Status.UNKNOWN
    assert one(f, "H112").status is Status.UNKNOWN


def test_dev_gdrdrv_missing_in_container(tmp_path):
    n = p5en_node(tmp_path / "root")
    (n.root / "dev/gdrdrv").unlink()
    _, f = diagnose(n)
    assert one(f, "H113").status is Status.FAIL


@pytest.mark.parametrize(
    ("transport", "expected"),
    [(None, Status.WARN), ("efa-gda", Status.FAIL), ("gin-proxy", Status.SKIP)],
)
def test_efa_driver_below_gda_floor(tmp_path, transport, expected):
    n = p5en_node(tmp_path / "root")
    n.efa(driver="3.1.0g")
    n.env.pop("NCCL_GIN_TYPE")
    _, f = diagnose(n, Context(transport=transport))
    assert one(f, "H122").status is expected


def test_hw_counters_absent_is_unverifiable_not_pass(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.instance("p5en.48xlarge").gpus().efa(count=16, hw_counters=False)
    _, f = diagnose(n)
    h = one(f, "H123")
    assert h.status is Status.UNKNOWN and "unverifiable" in h.title


def test_hw_counters_without_rdma_bytes(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.gpus().efa(count=2, rdma=False)
    _, f = diagnose(n)
    assert one(f, "H123").status is Status.UNKNOWN


def test_installer_old_and_absent(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.installer(version="1.48.0", libfabric="2.4.0amzn3.0", plugin="1.19.0-1")
    _, f = diagnose(n)
    assert one(f, "H124").status is Status.WARN
    _, f = diagnose(n, Context(transport="efa-gda"))
    assert one(f, "H124").status is Status.FAIL
    (n.root / "opt/amazon/efa_installed_packages").unlink()
    _, f = diagnose(n)
    assert one(f, "H124").status is Status.WARN  # absent: the installer did not run here
    n.write("/opt/amazon/efa_installed_packages", "garbage\n")
    _, f = diagnose(n)
    assert one(f, "H124").status is Status.UNKNOWN  # present but unreadable: cannot tell


def test_gda_on_p5_is_impossible(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.instance("p5.48xlarge")
    _, f = diagnose(n, Context(transport="efa-gda"))
    assert one(f, "H125").status is Status.FAIL
    n.env.pop("NCCL_GIN_TYPE")
    _, f = diagnose(n)
    assert one(f, "H125").status is Status.WARN
    # p5 has 32 EFA interfaces; 16 are visible.
    assert one(f, "H126").status is Status.WARN


def test_unknown_instance_type_with_gda_is_unknown(tmp_path):
    n = p5en_node(tmp_path / "root")
    (n.root / "sys/class/dmi/id/product_name").unlink()
    _, f = diagnose(n, Context(transport="efa-gda"))
    assert one(f, "H125").status is Status.UNKNOWN
    assert "H126" not in {x.code for x in f}


def test_plugin_exports(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.plugin(GIN_V120)
    n.env.pop("NCCL_GIN_TYPE")
    _, f = diagnose(n)
    assert one(f, "N102").status is Status.WARN
    _, f = diagnose(n, Context(transport="efa-gda"))
    assert one(f, "N102").status is Status.FAIL
    _, f = diagnose(n, Context(transport="gin-proxy"))
    assert one(f, "N102").status is Status.PASS
    n.plugin(NO_GIN)
    _, f = diagnose(n)
    assert one(f, "N102").status is Status.FAIL


def test_plugin_without_gdrcopy(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.plugin(gdrcopy=False)
    _, f = diagnose(n)
    assert one(f, "N103").status is Status.FAIL


def test_plugin_in_installer_container_layout(tmp_path):
    n = p5en_node(tmp_path / "root")
    import shutil

    shutil.rmtree(n.root / "opt/amazon/ofi-nccl/lib")
    n.plugin(dir="/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu")
    n.env.pop("NCCL_NET_PLUGIN")
    n.env.pop("NCCL_GIN_PLUGIN")
    _, f = diagnose(n)
    assert one(f, "N101").status is Status.PASS


@pytest.mark.parametrize(
    ("libfabric", "transport", "expected"),
    [
        ("1.20.0amzn1.0", None, Status.FAIL),
        ("2.4.0amzn3.0", None, Status.WARN),
        ("2.4.0amzn3.0", "efa-gda", Status.FAIL),
        ("2.6.0amzn1.0", "efa-gda", Status.PASS),
    ],
)
def test_libfabric_floors(tmp_path, libfabric, transport, expected):
    n = p5en_node(tmp_path / "root")
    n.installer(libfabric=libfabric)
    n.env.pop("NCCL_GIN_TYPE")
    _, f = diagnose(n, Context(transport=transport))
    assert one(f, "N104").status is expected


def test_libfabric_from_fi_info_wins(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.tool(
        "fi_info",
        "/opt/amazon/efa/bin/fi_info: 1.22.0amzn5.0\nlibfabric: 1.22.0amzn5.0\nlibfabric api: 1.22",
    )
    n.env.pop("NCCL_GIN_TYPE")  # no transport chosen: report what EFA-GDA would need
    facts, f = diagnose(n)
    assert facts.libfabric.value == "1.22.0amzn5.0"
    assert one(f, "N104").status is Status.WARN


def test_plugin_env_pointing_nowhere(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.env["NCCL_NET_PLUGIN"] = "/opt/aws-ofi-9c44/src/.libs/libnccl-net-ofi.so"
    _, f = diagnose(n)
    n105 = [x for x in f if x.code == "N105"]
    assert any(x.status is Status.FAIL and "NCCL_NET_PLUGIN" in x.title for x in n105)
    # A bare name is tried as libnccl-net-<name>.so in the plugin directories.
    n.env["NCCL_NET_PLUGIN"] = "ofi"
    _, f = diagnose(n)
    assert all(x.status is Status.PASS for x in f if x.code == "N105")


def test_knob_in_nccl_conf_counts_like_env(tmp_path):
    n = p5en_node(tmp_path / "root")
    n.nccl_conf("# site defaults\nOFI_NCCL_GIN_MAX_REQUESTS=1024\nNCCL_SOCKET_IFNAME=eth9\n")
    _, f = diagnose(n)
    c102 = one(f, "C102")
    assert c102.status is Status.WARN
    # The environment wins over nccl.conf for the same name.
    assert "^docker,lo,veth" in one(f, "C111").title


def test_workload_pid_env_and_two_ncclls_mapped(tmp_path):
    """A real process that dlopens two different libnccl.so.2: L104 fails and its env is judged."""
    a = tmp_path / "a" / "libnccl.so.2"
    b = tmp_path / "b" / "libnccl.so.2"
    for path, ver in ((a, "2.30.4"), (b, "2.28.9")):
        path.parent.mkdir(parents=True)
        path.write_bytes(nccl_lib(ver, lsa=ver != "2.28.9").read_bytes())
    code = f"import ctypes,time; ctypes.CDLL({str(a)!r}); ctypes.CDLL({str(b)!r}); print('up', flush=True); time.sleep(30)"
    env = dict(os.environ, OFI_NCCL_GDRCOPY_FORCED_PCIE_COPY="1", HF_TOKEN="hf_" + "x" * 30)
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, env=env, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "up"
        n = FakeNode(tmp_path / "root")
        # The process's maps show real paths, so probe this machine itself (no --root).
        facts, f = diagnose(n, Context(), "--pid", str(proc.pid), use_root=False)
        assert one(f, "L104").status is Status.FAIL
        l101 = [x for x in f if x.code == "L101"]
        assert {x.status for x in l101} == {
            Status.PASS,
            Status.FAIL,
        }  # one mapped lib has no LSA symbol
        assert one(f, "C103").status is Status.WARN  # the workload's env, not the probe's
        assert facts.processes[0].env.get("HF_TOKEN") == "[REDACTED]"
    finally:
        proc.kill()
        proc.wait()


def test_missing_pid_is_unknown(tmp_path):
    n = FakeNode(tmp_path / "root")
    _, f = diagnose(n, Context(), "--pid", "999999")
    assert one(f, "L104").status is Status.UNKNOWN


def test_probe_deadline_bounds_a_hung_tool(tmp_path):
    n = p5en_node(tmp_path / "root")
    script = n.bin / "nvidia-smi"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    t0 = time.monotonic()
    _, f = diagnose(n, Context(), "--deadline", "4")
    assert time.monotonic() - t0 < 15
    assert "timed out" in one(f, "H101").title


def test_trtllm_ga_without_nccl_ep_backend(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.gpus()
    n.trtllm("/opt/trt/venv", version="1.2.1", backend=False)
    _, f = diagnose(n)
    assert one(f, "E101").status is Status.FAIL
    assert "E102" not in {x.code for x in f}


def test_trtllm_rc24_with_nccl_ep_on_2304(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.gpus()
    n.trtllm("/opt/trt/venv")
    _, f = diagnose(n)
    assert one(f, "E101").status is Status.PASS
    assert one(f, "E102").status is Status.PASS and "0.1.0" in one(f, "E102").title
    assert one(f, "E104").status is Status.PASS
    assert "E103" not in {x.code for x in f}


def test_trtllm_nccl4py_without_libnccl_ep(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.gpus()
    n.trtllm("/opt/trt/venv", nccl_ep=None)
    _, f = diagnose(n)
    assert one(f, "E102").status is Status.FAIL


def test_trtllm_prebuilt_nccl_ep_on_nccl_231(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.gpus()
    n.trtllm("/opt/trt/venv", nccl="2.31.2")
    _, f = diagnose(n)
    assert one(f, "E103").status is Status.WARN


def test_trtllm_old_ngc_nccl(tmp_path):
    n = FakeNode(tmp_path / "root")
    n.gpus()
    n.trtllm("/opt/trt/venv", nccl="2.27.3")
    _, f = diagnose(n)
    assert one(f, "E104").status is Status.FAIL
