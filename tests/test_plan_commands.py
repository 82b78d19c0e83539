"""The plan's command strings, run for real under `bash -c` the way the launcher
runs them (NODE_RANK and LEADER_ADDR in the environment), with stand-in
executables on PATH / PYTHONPATH that record the argv they receive. The engines
are stand-ins (no GPU here); the shell quoting and expansion are real."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from epdoctor.launch import config as runcmd
from epdoctor.plan import PlanInput, make_plan

RECORD = """import json, os, sys
with open(os.environ["ARGV_LOG"], "a") as f:
    f.write(json.dumps({"prog": PROG, "argv": sys.argv[1:]}) + "\\n")
"""


@pytest.fixture
def stand_ins(tmp_path):
    bin_ = tmp_path / "bin"
    pkg = tmp_path / "py"
    bin_.mkdir()
    for name in ("vllm", "trtllm-serve"):
        exe = bin_ / name
        exe.write_text(f"#!{sys.executable}\nPROG = {name!r}\n" + RECORD)
        exe.chmod(0o755)
    for mod in ("dynamo/frontend.py", "dynamo/vllm.py", "sglang/launch_server.py"):
        path = pkg / mod
        path.parent.mkdir(parents=True, exist_ok=True)
        (path.parent / "__init__.py").touch()
        # a server stays up: the Dynamo leader checks its frontend is alive after 6 s
        stay = "import time; time.sleep(8)\n" if mod == "dynamo/frontend.py" else ""
        path.write_text(f"PROG = {mod!r}\n" + RECORD + stay)
    python3 = bin_ / "python3"
    python3.symlink_to(sys.executable)
    log = tmp_path / "argv.jsonl"

    def run(cmd: str, rank: int) -> list[dict]:
        log.unlink(missing_ok=True)
        env = {
            "PATH": f"{bin_}:{os.environ['PATH']}",
            "PYTHONPATH": str(pkg),
            "ARGV_LOG": str(log),
            "NODE_RANK": str(rank),
            "LEADER_ADDR": "10.1.2.3",
        }
        subprocess.run(["bash", "-c", cmd + "; wait"], env=env, check=True, timeout=60)
        return [json.loads(line) for line in log.read_text().splitlines()]

    return run


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_vllm_leader_and_worker_argv(stand_ins):
    p = make_plan(PlanInput(num_experts=128, nodes=3))
    (leader,) = stand_ins(p.commands.leader, 0)
    assert leader["argv"][:2] == ["serve", "Qwen/Qwen3-30B-A3B-FP8"]
    assert _flag(leader["argv"], "--data-parallel-address") == "10.1.2.3"
    assert _flag(leader["argv"], "--data-parallel-size") == "24"
    assert "--headless" not in leader["argv"] and "--enforce-eager" in leader["argv"]
    (worker,) = stand_ins(p.commands.worker, 2)
    assert "--headless" in worker["argv"]
    assert _flag(worker["argv"], "--data-parallel-start-rank") == "16"
    assert _flag(worker["argv"], "--data-parallel-size-local") == "8"


def test_dynamo_leader_starts_frontend_and_worker(stand_ins):
    p = make_plan(PlanInput(engine="dynamo", num_experts=128))
    got = {r["prog"]: r["argv"] for r in stand_ins(p.commands.leader, 0)}
    assert got["dynamo/frontend.py"] == [
        "--discovery-backend", "file", "--http-host", "0.0.0.0", "--http-port", "8000",
    ]  # fmt: skip
    engine = got["dynamo/vllm.py"]
    assert _flag(engine, "--model") == "Qwen/Qwen3-30B-A3B-FP8"
    assert _flag(engine, "--all2all-backend") == "deepep_v2"
    # the recipe's planes that need no NATS or etcd, one argument for the JSON
    assert _flag(engine, "--request-plane") == "tcp" and _flag(engine, "--event-plane") == "zmq"
    assert _flag(engine, "--kv-events-config") == '{"enable_kv_cache_events": false}'
    (worker,) = stand_ins(p.commands.worker, 1)
    assert worker["prog"] == "dynamo/vllm.py" and "--headless" in worker["argv"]
    assert _flag(worker["argv"], "--data-parallel-start-rank") == "8"


def test_trtllm_serves_per_node_with_attention_dp(stand_ins, tmp_path):
    p = make_plan(PlanInput(engine="tensorrt-llm", num_experts=128))
    (serve,) = stand_ins(p.commands.worker, 1)
    assert serve["prog"] == "trtllm-serve"
    assert _flag(serve["argv"], "--ep_size") == "8" and _flag(serve["argv"], "--tp_size") == "8"
    extra = Path(_flag(serve["argv"], "--extra_llm_api_options")).read_text()
    assert "enable_attention_dp: true" in extra


def test_sglang_node_rank_and_dist_init(stand_ins):
    p = make_plan(PlanInput(engine="sglang", transport="nvshmem", num_experts=128))
    (serve,) = stand_ins(p.commands.worker, 1)
    assert _flag(serve["argv"], "--node-rank") == "1"
    assert _flag(serve["argv"], "--dist-init-addr") == "10.1.2.3:5757"
    assert _flag(serve["argv"], "--moe-a2a-backend") == "deepep"


def test_model_path_with_spaces_is_one_argument(stand_ins, tmp_path):
    model = tmp_path / "my model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"num_experts": 128}))
    p = make_plan(PlanInput(model=str(model)))
    (leader,) = stand_ins(p.commands.leader, 0)
    assert leader["argv"][1] == str(model)
    body = shlex.split(p.commands.smoke.split("-d ", 1)[1].split(')" && ', 1)[0])[0]
    assert json.loads(body)["model"] == str(model)


def test_the_launcher_reads_what_the_plan_writes(tmp_path):
    """`epdoctor run --plan plan.json` takes env and commands from the file the plan wrote."""
    import argparse

    from epdoctor.launch.launcher import LocalNode

    p = make_plan(PlanInput(num_experts=128))
    p.render(str(tmp_path))
    doc = runcmd.load_plan(str(tmp_path / "plan.json"))
    assert runcmd.plan_env(doc) == p.env_dict()
    args = argparse.Namespace(
        cmd=None, worker_cmd=None, engine=None, url="http://127.0.0.1:8000",
        run_dir=str(tmp_path / "run"), startup_budget=10.0,
    )  # fmt: skip
    cfg = runcmd.serve_config(args, doc, [LocalNode("a"), LocalNode("b")])
    assert (cfg.leader_cmd, cfg.worker_cmd, cfg.engine) == (
        p.commands.leader,
        p.commands.worker,
        "vllm",
    )
    assert cfg.env == p.env_dict()
