"""`epdoctor plan` on the flag path: --no-input, --json, -o DIR, exit codes,
and the import hygiene of the plan package."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from epdoctor.cli import main

HF = str(Path(__file__).parent / "fixtures" / "plan" / "hf-cache")
ROOT = Path(__file__).resolve().parent.parent


def test_main_case_text_starts_with_the_verdict(capsys):
    rc = main(["plan", "--no-input", "--hf-cache", HF])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0] == "Verdict: SUPPORTED"
    assert re.search(r"NCCL_GIN_TYPE += 2", out) and re.search(r"EP_REUSE_NCCL_COMM += 0", out)
    assert "Must NOT be set:" in out and "OFI_NCCL_GIN_GDAKI" in out
    assert '--data-parallel-start-rank "$((NODE_RANK * 8))" --headless' in out


def test_every_question_is_a_flag_and_json_is_data(capsys):
    rc = main(
        [
            "plan", "--no-input", "--json",
            "--engine", "dynamo", "--transport", "efa-gda", "--instance", "p6-b200.48xlarge",
            "--nodes", "4", "--gpus-per-node", "8", "--model", "Qwen/Qwen3-30B-A3B-FP8",
            "--mode", "eager", "--target", "kubernetes", "-n", "moe", "--num-experts", "128",
            "--nccl", "2.31.2", "--vllm-pin", "14617c2b", "--image", "reg/x:v1-20260901",
            "--name", "moe-a", "--hf-cache", HF,
        ]
    )  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert rc == 0
    assert data["input"]["engine"] == "dynamo" and data["input"]["namespace"] == "moe"
    assert (data["world"], data["serve_ep"], data["efa_per_node"], data["gin_type"]) == (
        32,
        32,
        8,
        5,
    )
    assert data["verdict"] == "supported with caveats"
    assert all({"code", "level", "message"} <= set(r) for r in data["reasons"])
    assert {e["name"] for e in data["env"]} >= {"NCCL_GIN_TYPE", "NCCL_SYM_GIN_KERNELS_ENABLE"}
    assert data["commands"]["worker"].startswith("python3 -m dynamo.vllm")


def test_output_dir(tmp_path, capsys):
    rc = main(["plan", "--no-input", "--hf-cache", HF, "-o", str(tmp_path)])
    assert rc == 0
    assert "Wrote 10 files" in capsys.readouterr().out
    assert (tmp_path / "Dockerfile").is_file() and (tmp_path / ".dockerignore").is_file()
    assert (tmp_path / "kubernetes" / "vllm-deepep.yaml").is_file()
    assert json.loads((tmp_path / "plan.json").read_text())["verdict"] == "supported"


def test_not_supported_exits_1(capsys):
    assert main(["plan", "--no-input", "--transport", "efa-gda", "--instance", "p5"]) == 1
    assert "H125" in capsys.readouterr().out


def test_bad_input_exits_2(capsys):
    assert main(["plan", "--no-input", "--instance", "p9.48xlarge"]) == 2
    err = capsys.readouterr().err
    assert "unknown instance type" in err and "p5en.48xlarge" in err
    # EP not dividing is bad input too: the plan is printed, the error explains, exit 2.
    assert main(["plan", "--no-input", "--nodes", "2", "--num-experts", "60"]) == 2
    io = capsys.readouterr()
    assert io.out.startswith("Verdict: NOT SUPPORTED")
    assert "epdoctor: error: 60 routed experts do not divide over EP16" in io.err
    assert main(["plan", "--no-input", "--model", "Qwen/Qwen3-8B", "--hf-cache", HF]) == 2
    assert "not a routed MoE" in capsys.readouterr().err


def test_no_prompt_without_a_terminal():
    """stdin is not a terminal: the flags are the whole input, nothing blocks."""
    proc = subprocess.run(
        [sys.executable, "-m", "epdoctor", "plan", "--json", "--num-experts", "128"],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["verdict"] == "supported"


def test_plan_package_is_headless():
    code = (
        "import sys, epdoctor.plan, epdoctor.plan.render, epdoctor.plan.verify;"
        "from epdoctor.plan import PlanInput, make_plan;"
        "make_plan(PlanInput(num_experts=128)).to_json();"
        "bad = [m for m in ('rich', 'textual', 'questionary', 'prompt_toolkit', 'kubernetes',"
        " 'paramiko') if m in sys.modules];"
        "print(bad); sys.exit(1 if bad else 0)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_help_does_not_import_questionary():
    code = (
        "import sys; from epdoctor.cli import build_parser; build_parser();"
        "sys.exit(1 if 'questionary' in sys.modules else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, timeout=60).returncode == 0
