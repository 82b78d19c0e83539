"""Env contract in env files, script exports and Dockerfile ENV (one implementation:
epdoctor.checks.env.env_findings), plus the kernel-test-vs-serve contract (C401)."""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.lint import lint_paths
from epdoctor.lint.envfile import parse_env_file
from epdoctor.lint.shell import script_findings

SERVE = """#!/bin/bash
# Composed from seed 001 serve.sh: the GIN CPU-proxy env contract.
export NCCL_GIN_TYPE=2
export NCCL_GIN_ENABLE=1
export FI_PROVIDER=efa
export NCCL_SOCKET_IFNAME=^docker,lo,veth
export EP_REUSE_NCCL_COMM=0
vllm serve Qwen/Qwen3-30B-A3B-FP8 --enable-expert-parallel --all2all-backend deepep_v2
"""


def lint(folder: Path, files: dict[str, str]) -> set[tuple[str, int, str]]:
    for rel, text in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if text.startswith("#!"):
            p.chmod(0o755)  # launchers are committed executable (S407)
    return {(f.path, f.line, f.code) for f in lint_paths([folder]).active}


def test_parse_env_file_quotes_exports_comments():
    env = parse_env_file("# c\nexport A=\"x y\"\nB='1'  # note\nC=plain\nnot a line\n")
    assert env == {"A": ("x y", 2), "B": ("1", 3), "C": ("plain", 4)}


def test_dead_knob_and_wrong_provider_in_env_file(tmp_path):
    got = lint(
        tmp_path,
        {
            "setup/transport.env": "NCCL_GIN_TYPE=2\nFI_PROVIDER=tcp\nOFI_NCCL_GIN_MAX_REQUESTS=512\n"
        },
    )
    assert ("setup/transport.env", 2, "T107") in got
    assert ("setup/transport.env", 3, "C102") in got


def test_nvshmem_provider_is_matched_case_sensitively(tmp_path):
    # NVSHMEM's libfabric transport strcmp()s NVSHMEM_LIBFABRIC_PROVIDER with verbs/cxi/efa:
    # "EFA" is an invalid persona, "verbs" is not EFA, "efa" is the one that works.
    from epdoctor.checks.env import env_findings
    from epdoctor.model import Status

    def n512(value: str):
        env = {"NVSHMEM_REMOTE_TRANSPORT": "libfabric", "NVSHMEM_LIBFABRIC_PROVIDER": value}
        return [(f.status, f.title) for f in env_findings(env) if f.code == "N512"]

    ((st, title),) = n512("efa")
    assert st is Status.PASS
    ((st, title),) = n512("EFA")
    assert st is Status.FAIL and "case-sensitively" in title
    ((st, title),) = n512("verbs")
    assert st is Status.FAIL and "will not use EFA" in title
    assert not [f for f in env_findings({"NCCL_GIN_TYPE": "2"}) if f.code == "N512"]
    got = lint(
        tmp_path,
        {"nvshmem.env": "NVSHMEM_REMOTE_TRANSPORT=libfabric\nNVSHMEM_LIBFABRIC_PROVIDER=EFA\n"},
    )
    assert ("nvshmem.env", 2, "N512") in got


def test_clean_contract_is_quiet(tmp_path):
    env = (
        "NCCL_GIN_TYPE=2\nNCCL_GIN_ENABLE=1\nFI_PROVIDER=efa\nNCCL_SOCKET_IFNAME=^docker,lo,veth\n"
    )
    assert lint(tmp_path, {"transport.env": env}) == set()


def test_missing_variables_only_for_a_contract(tmp_path):
    # A contract (two transport variables) without NCCL_SOCKET_IFNAME: C111 at line 1.
    got = lint(tmp_path / "a", {"transport.env": "NCCL_GIN_TYPE=2\nFI_PROVIDER=efa\n"})
    assert ("transport.env", 1, "C111") in got
    # A registry/region file is not a transport contract: nothing is missing from it.
    got = lint(tmp_path / "b", {"setup/env_vars": "export REGISTRY=x\nexport AWS_REGION=y\n"})
    assert got == set()


def test_reuse_comm_needs_vllm_in_the_folder(tmp_path):
    env = {"transport.env": "NCCL_GIN_TYPE=2\nFI_PROVIDER=efa\nNCCL_SOCKET_IFNAME=eth0\n"}
    assert ("transport.env", 1, "D101") not in lint(tmp_path / "a", env)
    serve = {"recipe/serve.sh": SERVE, **env}
    assert ("transport.env", 1, "D101") in lint(tmp_path / "b", serve)


def test_script_exports(tmp_path):
    got = lint(tmp_path / "a", {"recipe/serve.sh": SERVE})
    assert got == set()
    bad = SERVE.replace("export EP_REUSE_NCCL_COMM=0\n", "export OFI_NCCL_GIN_GDAKI=0\n")
    got = lint(tmp_path / "b", {"recipe/serve.sh": bad})
    assert ("recipe/serve.sh", 7, "C101") in got
    assert ("recipe/serve.sh", 1, "D101") in got  # a vLLM launcher must carry it


def test_dockerfile_env_presence_rules_only(tmp_path):
    df = "FROM ubuntu:22.04@sha256:" + "a" * 64 + "\nENV NCCL_GIN_TYPE=2 DEEP_EP_BACKEND=nccl\n"
    got = lint(tmp_path, {"Dockerfile": df})
    assert got == {("Dockerfile", 2, "C104")}


def test_c401_kernel_test_vs_serve(tmp_path):
    kt = SERVE.replace("export NCCL_SOCKET_IFNAME=^docker,lo,veth\n", "").replace(
        "vllm serve", "python3 tests/elastic/test_ep.py #"
    )
    got = lint(tmp_path / "a", {"recipe/serve.sh": SERVE, "recipe/run-kernel-test.sh": kt})
    assert ("recipe/run-kernel-test.sh", 1, "C401") in got
    same = SERVE.replace("vllm serve", "python3 tests/elastic/test_ep.py #")
    got = lint(tmp_path / "b", {"recipe/serve.sh": SERVE, "recipe/run-kernel-test.sh": same})
    assert not {c for _, _, c in got} & {"C401", "D101"}
    differs = same.replace("NCCL_GIN_TYPE=2", "NCCL_GIN_TYPE=3")
    got = lint(tmp_path / "c", {"recipe/serve.sh": SERVE, "recipe/run-kernel-test.sh": differs})
    assert ("recipe/run-kernel-test.sh", 3, "C401") in got


def test_e407_all2all_backend():
    fires = "#!/bin/bash\nvllm serve M --data-parallel-size 16 --enable-expert-parallel\n"
    assert [h.code for h in script_findings(fires)] == []  # script-level rule, see below
    from epdoctor.lint.shell import _all2all_findings

    assert [h.code for h in _all2all_findings(fires)] == ["E407"]
    assert _all2all_findings(SERVE) == []
    arr = '#!/bin/bash\nARGS=(--all2all-backend deepep_v2)\nvllm serve M --enable-expert-parallel "${ARGS[@]}"\n'
    assert _all2all_findings(arr) == []


def test_b411_moving_pr_ref():
    fires = "#!/bin/bash\ngit fetch origin pull/1351/head && git cherry-pick FETCH_HEAD\n"
    assert [h.code for h in script_findings(fires)] == ["B411"]
    quiet = "#!/bin/bash\ngit fetch origin c2e773df0123456789abcdef0123456789abcdef && git cherry-pick FETCH_HEAD\n"
    assert script_findings(quiet) == []


def test_shell_defaults_resolve_and_runtime_values_are_not_judged(tmp_path):
    env = (
        "FI_PROVIDER=${FI_PROVIDER:-efa}\n"  # resolves to efa: no T107
        "NCCL_GIN_TYPE=$GIN_TYPE\n"  # known only at run time: no T101 verdict
        "OFI_NCCL_GIN_GDAKI=${X}\n"  # a dead knob is dead whatever its value
        "NCCL_SOCKET_IFNAME=^docker,lo,veth\n"
    )
    got = lint(tmp_path, {"transport.env": env})
    assert got == {("transport.env", 3, "C101")}


def test_a_generic_nccl_env_file_is_not_an_ep_contract(tmp_path):
    # NCCL debug knobs for a training job: no GIN/EP variable, so nothing is "missing".
    got = lint(
        tmp_path, {"env_vars.example": "export NCCL_DEBUG=INFO\nexport FI_EFA_USE_DEVICE_RDMA=1\n"}
    )
    assert got == set()


# Each knob as an env file sets it (composed from the seeds' review findings), and the code the
# shared env contract gives it: lint reports it on the line that sets it.
KNOB_CASES = [
    ("EP_EFA_MAX_QPS=2", "C105"),  # from DeepEP #612, not read by the amazon-contributing fork
    ("TRTLLM_LOG_LEVEL=INFO", "C106"),  # TensorRT-LLM reads TLLM_LOG_LEVEL
    ("OFI_NCCL_GIN_TYPE=2", "C107"),  # only in aws-ofi-nccl 1.20.0
    ("NCCL_GIN_ENABLE=0", "T105"),
    ("NCCL_NET=Socket", "T106"),
]


@pytest.mark.parametrize(("line", "code"), KNOB_CASES)
def test_env_contract_codes_in_an_env_file(tmp_path, line, code):
    env = f"NCCL_GIN_TYPE=2\nNCCL_SOCKET_IFNAME=^docker,lo,veth\nFI_PROVIDER=efa\n{line}\n"
    assert lint(tmp_path / "a", {"transport.env": env}) == {("transport.env", 4, code)}
    fixed = env.replace(line + "\n", "")
    assert lint(tmp_path / "b", {"transport.env": fixed}) == set()


def test_dmabuf_off_only_matters_for_efa_gda(tmp_path):
    gda = "NCCL_GIN_TYPE=5\nNCCL_SYM_GIN_KERNELS_ENABLE=0\nNCCL_SOCKET_IFNAME=eth0\n"
    got = lint(tmp_path / "a", {"transport.env": gda + "OFI_NCCL_DISABLE_DMABUF=1\n"})
    assert ("transport.env", 4, "T104") in got
    proxy = gda.replace("NCCL_GIN_TYPE=5", "NCCL_GIN_TYPE=2")
    got = lint(tmp_path / "b", {"transport.env": proxy + "OFI_NCCL_DISABLE_DMABUF=1\n"})
    assert "T104" not in {c for _, _, c in got}
