"""Dockerfile rules: each fires on the seed's first-submission shape and is quiet on its fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from epdoctor.lint import lint_paths
from epdoctor.lint.dockerfile import parse, stages

FIXTURES = Path(__file__).parent / "fixtures" / "lint"
HEAD = "FROM nvcr.io/nvidia/cuda:13.0.0-devel-ubuntu22.04@sha256:" + "a" * 64 + "\n"


def codes(folder: Path, files: dict[str, str]) -> list[tuple[str, int]]:
    for rel, text in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if text.startswith("#!"):
            p.chmod(0o755)  # launchers are committed executable (S407)
    return [(f.code, f.line) for f in lint_paths([folder]).active]


CASES = {
    # code: (fires, quiet)
    "B401": (
        HEAD + "ARG GDRCOPY_SHA=c91ad9f  # gdrcopy==2.5.2\n",
        HEAD + "# gdrcopy==2.5.2\nARG GDRCOPY_SHA=c91ad9f  # v2.5.2 tag object\n",
    ),
    "B402": ("FROM ubuntu:latest\n", "FROM ubuntu:22.04@sha256:" + "b" * 64 + "\n"),
    "B403": ("FROM nvcr.io/nvidia/cuda:13.0.0-devel-ubuntu22.04\n", HEAD),
    "B404": (
        HEAD + "RUN cd aws-efa-installer && ./efa_installer.sh -y --skip-kmod --no-verify\n",
        HEAD + "RUN cd aws-efa-installer && ./efa_installer.sh --disable-ngc -y --skip-kmod\n",
    ),
    "B405": (
        HEAD + "RUN pip install --no-deps nvidia-nccl-cu13==2.30.4\nRUN pip install ninja\n",
        HEAD + "RUN pip install ninja\nRUN pip install --no-deps nvidia-nccl-cu13==2.30.4\n",
    ),
    "B407": (
        HEAD + "RUN cd /opt/DeepEP && python3 setup.py build_ext --inplace 2>&1 | tail -30\n",
        HEAD
        + "RUN python3 setup.py build_ext > /tmp/b.log 2>&1 || { tail -200 /tmp/b.log; exit 1; }\n",
    ),
    "B408": (
        HEAD + "RUN pip3 install --break-system-packages torch==2.11.0\n",
        HEAD + "RUN pip3 install -U pip && pip3 install --break-system-packages torch==2.11.0\n",
    ),
    "B409": (
        HEAD + "RUN ldconfig -p | grep 'libnccl.so.2 => /usr/local/lib'\n",
        HEAD + "RUN ldconfig -p | grep -c 'libnccl.so.2 (libc6,x86-64) => /usr/local/lib'\n",
    ),
    "S401": (
        HEAD + 'HEALTHCHECK CMD pgrep -f "vllm serve" || exit 1\n',
        HEAD + 'HEALTHCHECK CMD pgrep -f "[v]llm serve" || exit 1\n',
    ),
    "S402": (
        HEAD + 'SHELL ["/bin/bash", "-o", "pipefail", "-c"]\nRUN nm -D /x.so | grep -q sym\n',
        HEAD + "RUN nm -D /x.so | grep -q sym\n",  # /bin/sh -c: no pipefail, no 141
    ),
}


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_fires_on_the_trap(tmp_path: Path, code: str):
    found = codes(tmp_path, {"Dockerfile": CASES[code][0]})
    assert code in [c for c, _ in found], found


@pytest.mark.parametrize("code", sorted(CASES))
def test_rule_is_quiet_on_the_fix(tmp_path: Path, code: str):
    found = codes(tmp_path, {"Dockerfile": CASES[code][1]})
    assert code not in [c for c, _ in found], found


def test_b401_points_at_the_arg_line(tmp_path):
    found = codes(tmp_path, {"Dockerfile": HEAD + "ARG A=1\nARG B=2 # pip==1\n"})
    assert ("B401", 3) in found


def test_b402_untagged_and_arg_resolved_bases(tmp_path):
    assert ("B402", 1) in codes(tmp_path / "a", {"Dockerfile": "FROM ubuntu\n"})
    df = "ARG BASE=nvcr.io/nvidia/cuda:latest\nFROM ${BASE}\n"
    assert ("B402", 2) in codes(tmp_path / "b", {"Dockerfile": df})
    # A stage built FROM an earlier stage is not a base image.
    df = HEAD.replace("\n", " AS build\n") + "FROM build\nRUN true\n"
    assert codes(tmp_path / "c", {"Dockerfile": df}) == []


def test_b404_only_on_nvcr_bases(tmp_path):
    df = "FROM ubuntu:22.04@sha256:" + "c" * 64 + "\nRUN ./efa_installer.sh -y\n"
    assert "B404" not in [c for c, _ in codes(tmp_path, {"Dockerfile": df})]


def test_b405_repin_in_a_later_unrelated_stage_is_not_overridden(tmp_path):
    df = (
        HEAD.replace("\n", " AS a\n")
        + "RUN pip install --no-deps nvidia-nccl-cu13==2.30.4\n"
        + "FROM ubuntu:22.04@sha256:"
        + "d" * 64
        + " AS b\nRUN pip install ninja\n"
    )
    assert "B405" not in [c for c, _ in codes(tmp_path, {"Dockerfile": df})]


def test_b406_env_file_in_context(tmp_path):
    found = codes(tmp_path / "a", {"Dockerfile": HEAD, "setup/env_vars": "HF_TOKEN=x\n"})
    assert ("B406", 1) in found
    ok = {"Dockerfile": HEAD, "setup/env_vars": "HF_TOKEN=x\n", ".dockerignore": "setup/env_vars\n"}
    assert "B406" not in [c for c, _ in codes(tmp_path / "b", ok)]
    # A .dockerignore that forgets the env file does not count.
    bad = {**ok, ".dockerignore": "benchmarks/raw/\n"}
    assert "B406" in [c for c, _ in codes(tmp_path / "c", bad)]
    # Only a template in git: its filled-in copy will sit beside it.
    tmpl = {"Dockerfile": HEAD, "setup/env_vars.example": "HF_TOKEN=\n"}
    assert "B406" in [c for c, _ in codes(tmp_path / "d", tmpl)]
    # No env file at all: nothing to leak.
    assert codes(tmp_path / "e", {"Dockerfile": HEAD, "README.md": "x\n"}) == []


def test_parser_continuations_comments_and_exec_form():
    ins = parse(
        "# c\nFROM a:1 AS x\nRUN echo a \\\n# dropped comment\n  && echo b\n"
        'CMD ["pgrep", "-f", "vllm"]\n'
    )
    assert [(i.line, i.keyword) for i in ins] == [(2, "FROM"), (3, "RUN"), (6, "CMD")]
    assert "dropped" not in ins[1].args and "echo b" in ins[1].args
    assert stages(ins)[0].name == "x"


def test_exec_form_cmd_runs_no_shell(tmp_path):
    df = HEAD + 'CMD ["pgrep", "-f", "vllm serve"]\n'
    assert codes(tmp_path, {"Dockerfile": df}) == []


def test_seed_shaped_recipe_folders():
    bad = lint_paths([FIXTURES / "recipe-bad"])
    assert sorted({f.code for f in bad.active if f.path == "Dockerfile"}) == [
        "B401",
        "B403",
        "B404",
        "B405",
        "B406",
        "B407",
        "B408",
        "B409",
    ]
    good = lint_paths([FIXTURES / "recipe-good"])
    assert good.active == []
    assert [(f.code, f.suppressed) for f in good.suppressed] == [
        ("B403", "the seed pins the NGC base by exact tag; every layer above is SHA-pinned")
    ]


def test_exec_form_naming_a_shell_is_linted(tmp_path):
    df = HEAD + 'HEALTHCHECK CMD ["bash", "-c", "pgrep -f \'vllm serve\'"]\n'
    assert ("S401", 2) in codes(tmp_path / "a", {"Dockerfile": df})
    df = HEAD + 'CMD ["bash", "-c", "pgrep -f \'[v]llm serve\'"]\n'
    assert codes(tmp_path / "b", {"Dockerfile": df}) == []


def test_b414_wheel_url_with_its_own_commit(tmp_path):
    sha_old = "e2f993dc4" + "0" * 31
    sha_new = "14617c2b6" + "1" * 31
    wheel = "vllm-0.22.1rc1.dev283%2Bge2f993dc4-cp38-abi3-manylinux_2_28_x86_64.whl"
    bumped = (
        HEAD + f"ARG VLLM_SHA={sha_new}\n"
        f"RUN pip install https://wheels.vllm.ai/{sha_old}/{wheel.replace('%2B', '+')}\n"
    )
    assert ("B414", 3) in codes(tmp_path / "a", {"Dockerfile": bumped})
    derived = (
        HEAD + f"ARG VLLM_SHA={sha_old}\n"
        "RUN pip install \"$(curl -fsSL https://wheels.vllm.ai/${VLLM_SHA}/vllm/ | grep -o 'x' | head -1)\"\n"
    )
    assert "B414" not in [c for c, _ in codes(tmp_path / "b", {"Dockerfile": derived})]
    consistent = (
        HEAD + f"ARG VLLM_SHA={sha_old}\nRUN pip install https://wheels.vllm.ai/{sha_old}/{wheel}\n"
    )
    assert "B414" not in [c for c, _ in codes(tmp_path / "c", {"Dockerfile": consistent})]
