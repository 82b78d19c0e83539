"""`epdoctor plan -o DIR` writes the Dockerfile its pins imply, and `epdoctor lint DIR` on what
plan wrote finds exactly one thing: the placeholder image (B415), until the image is named."""

from __future__ import annotations

import json

import pytest

from epdoctor.cli import main

BASE = ["plan", "--no-input", "--num-experts", "128"]
IMAGE = "111122223333.dkr.ecr.us-west-2.amazonaws.com/ep/vllm-deepep:v1-20261204"


def _lint(capsys, path) -> tuple[int, dict]:
    """lint --json; "findings" keeps the active ones, "suppressed" the silenced ones."""
    rc = main(["lint", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    found = doc["findings"]
    doc["findings"] = [f for f in found if "suppressed" not in f]
    doc["suppressed"] = [f for f in found if "suppressed" in f]
    return rc, doc


def test_plan_output_lints_to_exactly_the_placeholder_then_passes(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*BASE, "-o", str(out)]) == 0
    written = capsys.readouterr().out
    assert "Dockerfile" in written and ".dockerignore" in written
    rc, doc = _lint(capsys, out)
    assert rc == 1
    assert [(f["path"], f["code"]) for f in doc["findings"]] == [
        ("kubernetes/vllm-deepep.yaml", "B415")
    ]
    finding = doc["findings"][0]
    manifest = (out / "kubernetes" / "vllm-deepep.yaml").read_text().splitlines()
    assert "image: REPLACE_WITH_YOUR_REGISTRY/" in manifest[finding["line"] - 1]
    assert "REPLACE_WITH_YOUR_REGISTRY" in finding["message"]

    # name the image: the same plan lints clean
    assert main([*BASE, "--image", IMAGE, "-o", str(out), "--force"]) == 0
    capsys.readouterr()
    rc, doc = _lint(capsys, out)
    assert rc == 0 and doc["findings"] == [], doc["findings"]
    assert f"docker build -t {IMAGE} ." in (out / "Dockerfile").read_text()


@pytest.mark.parametrize(
    "flags",
    [
        ("--engine", "vllm"),
        ("--engine", "vllm", "--transport", "efa-gda", "--mode", "graphs"),
        ("--engine", "dynamo"),
        ("--engine", "tensorrt-llm"),
        ("--engine", "vllm", "--target", "bare", "--host", "10.0.0.1", "--host", "10.0.0.2"),
    ],
)
def test_the_dockerfile_carries_the_plans_pins_and_lints_clean(tmp_path, capsys, flags):
    out = tmp_path / "out"
    assert main([*BASE, *flags, "--image", IMAGE, "-o", str(out)]) == 0
    capsys.readouterr()
    plan = json.loads((out / "plan.json").read_text())
    text = (out / "Dockerfile").read_text()
    pins = {p["component"]: p["value"] for p in plan["pins"]}
    base = pins.get("CUDA base image") or pins["TensorRT-LLM base image"]
    assert f"\nFROM {base}\n" in text
    assert f"ARG EFA_INSTALLER_VERSION={pins['EFA installer']}\n" in text
    assert "ARG GDRCOPY_COMMIT=c91ad9f178e5fb729fc5b6dc62a77c3bb364d6c9\n" in text
    assert "c91ad9f" in pins["gdrcopy / gdrdrv (host)"]
    assert f"ARG NCCL_VERSION={plan['nccl']}\n" in text
    gin_symbol = "ncclGinPlugin_v14" if plan["gin_type"] == 5 else "ncclGinPlugin_v13"
    assert f"grep -c {gin_symbol}" in text
    if plan["vllm_pin"]:
        assert f"ARG VLLM_SHA={plan['vllm_pin']}" in text  # the full SHA it abbreviates
        repo, _, commit = pins["DeepEP"].partition(" @ ")
        assert f"ARG DEEPEP_COMMIT={commit}" in text and repo in text  # the full commit
    else:
        assert "ARG NCCL4PY_VERSION=0.3.1" in text and "DeepEP" not in text
    # the NCCL re-pin is the last pip layer (B405 would say otherwise) and lint is quiet
    runs = [ln for ln in text.splitlines() if ln.startswith("RUN ")]
    pips = [i for i, ln in enumerate(runs) if "pip install" in ln]
    assert "nvidia-nccl-cu13==${NCCL_VERSION}" in runs[pips[-1]]
    assert runs[-1].startswith("RUN python3 /opt/recipe/image_gate.py")  # the image gate, last
    rc, doc = _lint(capsys, out)
    assert rc == 0 and doc["findings"] == [], doc["findings"]
    # the one silenced rule carries its reason in the file: the base is pinned by tag
    assert [f["code"] for f in doc["suppressed"]] == ["B403"]


def test_no_dockerfile_where_the_plan_pins_no_base(tmp_path, capsys):
    out = tmp_path / "out"
    assert main([*BASE, "--engine", "sglang", "-o", str(out)]) == 0
    capsys.readouterr()
    assert not (out / "Dockerfile").exists()
    rc, doc = _lint(capsys, out)
    assert rc == 1 and [f["code"] for f in doc["findings"]] == ["B415"]
