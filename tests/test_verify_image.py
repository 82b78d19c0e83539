"""`epdoctor verify-image`: the image gate's real outputs (tests/fixtures/verify_image, see its
README) parse into trap-coded findings that fail for the right reasons, and the command never
passes what it could not see."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from epdoctor.checks.image import GATE_CODES, gate_findings
from epdoctor.cli import main
from epdoctor.model import Status

FIX = Path(__file__).parent / "fixtures" / "verify_image"
REPO = Path(__file__).resolve().parent.parent


def _fixture(name: str) -> dict:
    return json.loads((FIX / name).read_text())


@pytest.mark.parametrize("engine", ["vllm-gin-proxy", "tensorrt-llm-gin-proxy"])
def test_the_cpu_machine_fails_for_the_right_reasons(engine):
    doc = _fixture(f"cpu-{engine}-pod.json")
    assert doc["exit"] == 1 and doc["stage"] == "pod"
    by = {(f["code"], f["severity"]) for f in doc["findings"]}
    nccl_code = "L505" if engine.startswith("tensorrt") else "L101"
    # torch does not import there: the loaded NCCL is unknown, never a pass
    assert (nccl_code, "unknown") in by
    assert ("N101", "fail") in by  # no installer-bundled GIN plugin
    assert ("B416", "fail") in by  # no engine at the pinned version
    assert not any(s == "pass" for _, s in by)
    if engine.startswith("vllm"):
        assert ("D406", "fail") in by and ("L103", "fail") in by
    else:
        assert ("E101", "fail") in by and ("E102", "fail") in by and ("B417", "fail") in by
    text = (FIX / f"cpu-{engine}-pod.txt").read_text()
    assert "Traceback" not in text and text.rstrip().endswith("at or above unknown")


def test_gate_output_becomes_findings_and_garbage_is_unknown():
    doc = {"gate": "epdoctor-image-gate", "checks": [
        {"code": "N103", "status": "fail", "title": "built without GDRCopy", "evidence": ["p"]},
        {"code": "Z999", "status": "pass", "title": "forged"},
    ]}  # fmt: skip
    got = gate_findings(doc)
    assert [(f.code, f.status) for f in got] == [("N103", Status.FAIL), ("B416", Status.UNKNOWN)]
    assert [f.status for f in gate_findings({"not": "a gate"})] == [Status.UNKNOWN]
    assert [f.status for f in gate_findings({"gate": "epdoctor-image-gate", "checks": []})] == [
        Status.UNKNOWN
    ]
    assert set(GATE_CODES) >= {"L101", "N102", "N103", "D406", "E201", "E101", "L103", "B416"}


def test_the_gate_reads_a_fake_image(tmp_path):
    """A plugin without the GIN table and built without GDRCopy, a DeepEP at another commit."""
    plugin = tmp_path / "libnccl-net-ofi.so"
    plugin.write_bytes(Path(sys.executable).resolve().read_bytes()[:4096] +
                       b"GDRCopy support not available at compile time")  # fmt: skip
    deepep = tmp_path / "DeepEP"
    (deepep / ".git").mkdir(parents=True)
    (deepep / ".git" / "HEAD").write_text("b306af06afd412c88e51e71802951606e40b7358\n")
    (deepep / "deep_ep" / "buffers").mkdir(parents=True)
    (deepep / "deep_ep" / "buffers" / "elastic.py").write_text("class ElasticBuffer:\n    pass\n")
    expect = tmp_path / "image-gate.json"
    expect.write_text(json.dumps({
        "gate": 1, "engine": "vllm", "transport": "gin-proxy", "nccl": "2.30.4",
        "plugin": str(plugin), "plugin_symbol": "ncclGinPlugin_v13",
        "deepep": {"root": str(deepep), "commit": "97d8f9bcc1be31e9036db2ab591ef9b9f4e38619"},
        "versions": [], "files": [],
    }))  # fmt: skip
    p = subprocess.run(
        [sys.executable, str(REPO / "probes" / "image_gate.py"), "--expect", str(expect),
         "--stage", "build", "--python", sys.executable, "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 1, p.stderr
    checks = {(c["code"], c["status"]) for c in json.loads(p.stdout)["checks"]}
    assert ("N103", "fail") in checks  # the GDRCopy-less build string is in the plugin
    assert ("D406", "fail") in checks  # upstream b306af06 is not the pinned fork commit
    assert ("E201", "pass") in checks  # the staged source has ElasticBuffer
    assert ("B410", "skip") in checks  # the import waits for the in-pod build (B410)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    assert main(["verify-image", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "image-gate.json" in err


@pytest.mark.parametrize(
    ("version_py", "status"),
    [
        ("__version__ = '2.11.0+cu130'\ncuda = '13.0'\n", "pass"),
        ("__version__ = '2.11.0+cu128'\ncuda = '12.8'\n", "fail"),
        (None, "unknown"),
    ],
    ids=["same-build", "other-build", "unreadable"],
)
def test_a_pin_with_a_local_label_is_read_from_the_package(tmp_path, version_py, status):
    """torch from PyPI says 2.11.0 in its metadata (PyPI refuses local labels) while its build is
    2.11.0+cu130: the gate reads torch/version.py, and what it cannot read is unknown. On the
    GPU machine the metadata-only comparison failed a torch that was the pinned build."""
    site = tmp_path / "site"
    info = site / "torch-2.11.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: torch\nVersion: 2.11.0\n")
    (site / "torch").mkdir()
    if version_py is not None:
        (site / "torch" / "version.py").write_text(version_py)
    expect = tmp_path / "image-gate.json"
    expect.write_text(json.dumps({
        "gate": 1, "engine": "vllm", "transport": "gin-proxy", "nccl": "2.30.4",
        "versions": [["torch", "2.11.0+cu130", "B416", "equals"]], "files": [],
    }))  # fmt: skip
    p = subprocess.run(
        [sys.executable, str(REPO / "probes" / "image_gate.py"), "--expect", str(expect),
         "--stage", "build", "--python", sys.executable, "--json"],
        capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert "Traceback" not in p.stderr, p.stderr
    torch = [c for c in json.loads(p.stdout)["checks"] if c["code"] == "B416"]
    assert [c["status"] for c in torch] == [status], torch


@pytest.mark.parametrize(
    "plan", ["vllm-gin-proxy", "dynamo-gin-proxy", "tensorrt-llm-gin-proxy", "vllm-efa-gda"]
)
def test_the_gpu_machine_fails_for_the_right_reasons(plan):
    """Real outputs from an H100 with torch 2.11.0+cu130 and its NCCL 2.28.9 wheel (README)."""
    doc = _fixture(f"gpu-{plan}-pod.json")
    assert doc["exit"] == 1 and doc["stage"] == "pod"
    by = {(f["code"], f["severity"]) for f in doc["findings"]}
    nccl = [f for f in doc["findings"] if f["code"] in ("L101", "L505")]
    # the NCCL torch really loads there is read (not unknown): 2.28.9, below the pin, no LSA
    assert nccl and all(f["severity"] == "fail" for f in nccl)
    assert any("2.28.9" in f["title"] for f in nccl)
    assert any("ncclGetLsaDevicePointer" in " ".join(f["evidence"]) for f in nccl)
    assert ("N101", "fail") in by and ("B417", "fail") in by
    torch = [f for f in doc["findings"] if f["code"] == "B416" and "torch" in f["title"]]
    if not plan.startswith("tensorrt"):  # the pinned torch build passes; the engine is absent
        assert [f["severity"] for f in torch] == ["pass"]
        assert ("D406", "fail") in by and ("L103", "fail") in by
    text = (FIX / f"gpu-{plan}-pod.txt").read_text()
    assert "Traceback" not in text
