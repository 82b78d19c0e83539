"""Typed parsers on real outputs, and fuzzed: garbage gives unknown, never an exception."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.version import Version

from epdoctor.checks import load_all
from epdoctor.checks.base import Context, run_checks
from epdoctor.facts.efa import (
    parse_fi_info_providers,
    parse_fi_info_version,
    parse_installed_packages,
    parse_rdma_devices,
)
from epdoctor.facts.env import effective_env, parse_nccl_conf
from epdoctor.facts.gpu import (
    parse_nvidia_smi_csv,
    parse_peer_mapping_override,
    parse_proc_driver_version,
)
from epdoctor.facts.kernel import parse_modules
from epdoctor.facts.libs import nccl_version_from, parse_ldconfig, parse_nm_dynamic
from epdoctor.facts.node import build_node_facts
from epdoctor.facts.probe_doc import ProbeDocError, load_probe_doc
from epdoctor.facts.python_env import parse_pip_list_json
from epdoctor.facts.versions import parse_version

FIX = Path(__file__).parent / "fixtures"
H200 = FIX / "h200-node"
EFA = FIX / "efa-samples"


def capture(name: str) -> str:
    """A capture's output without its `$ command` first line and `[rc=N]` last line."""
    lines = (H200 / name).read_text().splitlines()
    return "\n".join(ln for ln in lines[1:] if not ln.startswith("[rc="))


def test_nvidia_smi_csv_real_h200():
    text = capture("01_nvidia_smi.txt")
    csv = "\n".join(ln for ln in text.splitlines() if ln.startswith(("name,", "NVIDIA H200,")))
    f = parse_nvidia_smi_csv(csv)
    assert f.known and len(f.value) == 1
    g = f.value[0]
    assert (g.name, g.driver, g.compute_cap, g.bus_id) == (
        "NVIDIA H200",
        "580.159.04",
        "9.0",
        "00000000:00:06.0",
    )


def test_nvidia_smi_garbage_and_error_text():
    assert not parse_nvidia_smi_csv(None).known
    assert not parse_nvidia_smi_csv("").known
    msg = "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    assert not parse_nvidia_smi_csv(msg).known


def test_proc_driver_version_real():
    text = capture("01_nvidia_smi.txt")
    f = parse_proc_driver_version(text[text.index("NVRM") :])
    assert f.value == "580.159.04"
    assert not parse_proc_driver_version(None).known
    assert not parse_proc_driver_version("nonsense").known


def test_peer_mapping_override_forms():
    on, _ = parse_peer_mapping_override('RegistryDwords: "PeerMappingOverride=1;"\n', {})
    assert on.value is True
    hexa, _ = parse_peer_mapping_override('RegistryDwords: "PeerMappingOverride=0x1"\n', {})
    assert hexa.value is True
    empty, conf = parse_peer_mapping_override(
        'RegistryDwords: ""\nRegistryDwordsPerDevice: ""\n',
        {"/etc/modprobe.d/x.conf": "# options nvidia NVreg_RegistryDwords=PeerMappingOverride=1\n"},
    )
    assert empty.value is False and conf.value is False  # a commented line does not count
    unk, _ = parse_peer_mapping_override(None, None)
    assert not unk.known


def test_installed_packages_real_rpm_and_deb():
    rpm = parse_installed_packages((EFA / "installed_packages_1.22.1_rpm.txt").read_text())
    assert rpm.value.version == "1.22.1"
    assert rpm.value.packages["libfabric-aws"] == "1.17.1"
    assert rpm.value.packages["efa"] == "2.1.1"
    deb = parse_installed_packages((EFA / "installed_packages_1.17.2_deb.txt").read_text())
    assert deb.value.version == "1.17.2"
    assert deb.value.packages["libfabric1-aws"] == "1.16.0~amzn3.0"
    assert not parse_installed_packages(None).known
    assert not parse_installed_packages("efa_3.3.0-1_amd64\n").known  # no header: not a manifest


def test_fi_info_real():
    v = parse_fi_info_version((EFA / "fi_info_version_1.19.txt").read_text())
    assert v.value == "1.19.0amzn3.0"
    provs = parse_fi_info_providers((EFA / "fi_info_p_efa.txt").read_text())
    assert [(p.fabric, p.domain) for p in provs.value] == [
        ("efa-direct", "rdmap47s0-rdm"),
        ("efa", "rdmap47s0-rdm"),
        ("efa", "rdmap47s0-dgrm"),
    ]
    assert not parse_fi_info_version("fi_info: command not found").known


def test_ldconfig_real_h200_resolves_system_nccl():
    cache = parse_ldconfig(capture("03_ldconfig.txt"))
    assert cache.value["libnccl.so.2"] == ["/lib/x86_64-linux-gnu/libnccl.so.2"]
    assert cache.value["libcuda.so.1"][0] == "/usr/local/nvidia/lib64/libcuda.so.1"
    # The seeds' broken assert expected `name => path`; that shape is not an ldconfig line.
    assert not parse_ldconfig("libnccl.so.2 => /usr/lib/libnccl.so.2").known


def test_nm_dynamic_real_h200_lines():
    text = capture("06_nccl_libs.txt")
    section = text.split(
        "== /opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
    )[1]
    syms = parse_nm_dynamic(section)
    assert "ncclDevCommCreate" in syms.value and "pncclGinBarrierCreateRequirement" in syms.value
    assert "ncclGetLsaDevicePointer" not in syms.value  # 2.28.9: below the GIN floor
    assert "__cxa_begin_catch" not in syms.value  # U = imported


def test_nccl_version_strings_real():
    assert nccl_version_from("NCCL version 2.28.9+cuda13.0").value == Version("2.28.9")
    assert nccl_version_from("NCCL version 2.28.3 compiled with CUDA 13.0").value == Version(
        "2.28.3"
    )
    assert nccl_version_from(None, "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3").value == Version(
        "2.28.3"
    )
    assert not nccl_version_from(None, "/usr/lib/libnccl.so.2").known


def test_pip_list_real_h200():
    pkgs = parse_pip_list_json(capture("04_pip.txt"))
    assert pkgs.value["nvidia-nccl-cu13"] == "2.28.9"
    assert pkgs.value["nvidia-nvshmem-cu13"] == "3.4.5"
    assert pkgs.value["torch"] == "2.11.0"
    assert not parse_pip_list_json("ERROR: unknown command").known


def test_versions_spellings():
    assert parse_version("3.3.0g") == Version("3.3.0")
    assert parse_version("2.6.0amzn1.0") == Version("2.6.0")
    assert parse_version("1.21.1-1") == Version("1.21.1")
    assert parse_version("2.5") == Version("2.5")
    assert parse_version("git-9c44d34") is None


def test_nccl_conf_and_precedence():
    conf = parse_nccl_conf("# comment\nNCCL_DEBUG=INFO\n  NCCL_SOCKET_IFNAME = eth0\nbroken line\n")
    assert conf == {"NCCL_DEBUG": "INFO", "NCCL_SOCKET_IFNAME": "eth0"}
    env = effective_env(
        {"NCCL_DEBUG": "WARN"}, {"/etc/nccl.conf": "NCCL_DEBUG=INFO\nNCCL_GIN_TYPE=2\n"}
    )
    assert env.get("NCCL_DEBUG") == "WARN" and env.get("NCCL_GIN_TYPE") == "2"
    assert env.where("NCCL_GIN_TYPE") == "/etc/nccl.conf"


def test_modules_section_states():
    mods = parse_modules(
        {
            "efa": {"present": True, "version": "3.1.0g"},
            "gdrdrv": {"present": False, "version": None},
            "proc_modules": "gdrdrv 24576 0 - Live 0x0\n",
        }
    )
    assert mods["efa"].value.version == "3.1.0g"
    assert (
        mods["gdrdrv"].value.loaded is True
    )  # /proc/modules lists it even if /sys/module missed it


def test_probe_doc_validation():
    for bad in (
        "",
        "not json",
        "[]",
        json.dumps({"probe": "other"}),
        json.dumps({"probe": "epdoctor-node-probe", "probe_version": 99, "sections": {}}),
    ):
        try:
            load_probe_doc(bad)
        except ProbeDocError:
            continue
        raise AssertionError(f"accepted {bad!r}")
    doc = load_probe_doc(
        "Welcome to Ubuntu\n"
        + json.dumps({"probe": "epdoctor-node-probe", "probe_version": 1, "sections": {}})
    )
    assert doc["sections"] == {}


# ----------------------------------------------------------------- fuzzing --

TEXT = st.text(max_size=400)
JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=30),
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=12), kids, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_fuzz_text_parsers(text):
    for parser in (
        parse_nvidia_smi_csv,
        parse_proc_driver_version,
        parse_installed_packages,
        parse_fi_info_version,
        parse_fi_info_providers,
        parse_ldconfig,
        parse_nm_dynamic,
        parse_pip_list_json,
    ):
        f = parser(text)
        assert f.known in (True, False)
    parse_peer_mapping_override(text, {"x": text})
    nccl_version_from(text, text)
    parse_nccl_conf(text)
    parse_version(text)


@settings(max_examples=150, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "system",
                "gpus",
                "modules",
                "rdma",
                "efa",
                "plugins",
                "libraries",
                "python",
                "deepep_src",
                "nccl_conf",
                "env",
                "processes",
                "mapped_libs",
            ]
        ),
        JSONISH,
        max_size=13,
    )
)
def test_fuzz_probe_document_never_crashes(sections):
    doc = {"probe": "epdoctor-node-probe", "probe_version": 1, "sections": sections}
    try:
        node = build_node_facts(doc)
    except (TypeError, AttributeError, ValueError) as exc:  # pragma: no cover - a failure is a bug
        raise AssertionError(f"facts crashed on {sections!r}: {exc}") from exc
    node.summary()
    load_all()
    for transport in (None, "efa-gda"):
        run_checks(node, Context(transport=transport))
    parse_rdma_devices(sections.get("rdma"))
    parse_modules(sections.get("modules"))


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_fuzz_probe_doc_bytes(data):
    try:
        load_probe_doc(data.decode("utf-8", "replace"))
    except ProbeDocError:
        pass


LIB_ENTRY = st.fixed_dictionaries(
    {
        "path": st.text(min_size=1, max_size=40),
        "kind": st.sampled_from(["nccl", "plugin", "gdrapi", "nvshmem"]),
    },
    optional={
        "version": JSONISH,
        "symbols": JSONISH,
        "gdrcopy_missing": JSONISH,
        "realpath": JSONISH,
        "alias_of": JSONISH,
    },
)
DEVICE = st.fixed_dictionaries(
    {},
    optional={
        "driver": JSONISH,
        "driver_version": JSONISH,
        "ports": st.dictionaries(
            st.text(max_size=3),
            st.fixed_dictionaries(
                {}, optional={"hw_counters": JSONISH, "counters": JSONISH, "state": JSONISH}
            ),
            max_size=2,
        ),
    },
)
MODULE = st.fixed_dictionaries({"present": JSONISH, "version": JSONISH})


@settings(max_examples=150, deadline=None)
@given(
    libs=st.lists(LIB_ENTRY, max_size=5),
    devices=st.dictionaries(st.text(min_size=1, max_size=10), DEVICE, max_size=3),
    modules=st.dictionaries(st.sampled_from(["efa", "gdrdrv", "nvidia"]), MODULE, max_size=3),
    env=st.dictionaries(
        st.sampled_from(
            [
                "NCCL_GIN_TYPE",
                "FI_PROVIDER",
                "NCCL_NET",
                "LD_PRELOAD",
                "EP_REUSE_NCCL_COMM",
                "NCCL_GIN_ENABLE",
            ]
        ),
        st.text(max_size=20),
    ),
    installer=TEXT,
)
def test_fuzz_structured_probe_document(libs, devices, modules, env, installer):
    doc = {
        "probe": "epdoctor-node-probe",
        "probe_version": 1,
        "sections": {
            "libraries": {"libs": libs, "ldconfig": {"rc": 0, "stdout": installer}},
            "plugins": {"libs": [dict(e, kind="plugin") for e in libs]},
            "rdma": {"devices": devices},
            "modules": modules,
            "env": env,
            "efa": {"installed_packages": "# EFA installer version: " + installer},
            "system": {"product_name": installer, "memlock": {"soft": 1, "unlimited": -1}},
        },
    }
    node = build_node_facts(doc)
    node.summary()
    load_all()
    for transport in (None, "gin-proxy", "efa-gda"):
        run_checks(node, Context(transport=transport))
