"""The questionary flow driven for real: key presses through prompt_toolkit's
pipe input, and once in a real terminal under tmux."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from epdoctor.commands.plan import ask

DOWN = "\x1b[B"
ENTER = "\r"
ROOT = Path(__file__).resolve().parent.parent
HF = str(Path(__file__).parent / "fixtures" / "plan" / "hf-cache")


def drive(keys: str, answers: dict | None = None):
    with create_pipe_input() as pipe:
        pipe.send_text(keys)
        return ask(answers or {}, input=pipe, output=DummyOutput())


def test_defaults_all_the_way():
    got = drive(ENTER * 6 + "128" + ENTER + ENTER * 4)
    assert got == {
        "engine": "vllm",
        "transport": "gin-proxy",
        "instance": "p5en.48xlarge",
        "nodes": 2,
        "gpus_per_node": 8,
        "model": "Qwen/Qwen3-30B-A3B-FP8",
        "num_experts": 128,
        "mode": "eager",
        "target": "kubernetes",
        "namespace": "default",
    }


def test_arrow_keys_pick_and_engine_without_modes_skips_the_mode_question():
    # engine: down x2 = TensorRT-LLM; transport: first listed is its own (gin-proxy);
    # instance: the default is p5en, one down = p6-b200; nodes "4" (clear the default first); the rest default.
    keys = (
        DOWN * 2 + ENTER + ENTER + DOWN + ENTER
        + "\x7f4" + ENTER + ENTER + ENTER + ENTER  # nodes, gpus, model, experts (blank)
        + DOWN + ENTER  # target: bare
        + "10.0.0.1 10.0.0.2 10.0.0.3 10.0.0.4" + ENTER
        + "123456789012.dkr.ecr.us-east-1.amazonaws.com/trtllm:v1-20261205" + ENTER  # image
    )  # fmt: skip
    got = drive(keys)
    assert got["engine"] == "tensorrt-llm" and got["transport"] == "gin-proxy"
    assert got["instance"] == "p6-b200.48xlarge" and got["nodes"] == 4
    assert "mode" not in got and "num_experts" not in got
    assert got["target"] == "bare"
    assert got["hosts"] == ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4")
    assert got["image"] == "123456789012.dkr.ecr.us-east-1.amazonaws.com/trtllm:v1-20261205"


def test_image_question_refuses_a_moving_tag_and_blank_keeps_the_placeholder():
    from epdoctor.plan import questions as Q

    q = next(q for q in Q.all_questions({}) if q.key == "image")
    assert Q.parse(q, "") is None
    assert Q.check(q, "reg.example/x:latest") is not None  # a moving tag is refused
    assert Q.check(q, "reg.internal/x") is not None  # no tag at all
    assert Q.parse(q, "reg.internal/x:v1-20261205") == "reg.internal/x:v1-20261205"


def test_flags_answer_their_questions():
    # engine, transport, instance, nodes, gpus, model, experts given: first question is the mode.
    given = {
        "engine": "vllm", "transport": "efa-gda", "instance": "p5en.48xlarge", "nodes": 2,
        "gpus_per_node": 8, "model": "Qwen/Qwen3-30B-A3B-FP8", "num_experts": 128,
    }  # fmt: skip
    got = drive(DOWN + ENTER + ENTER + ENTER + ENTER, given)
    assert got == {**given, "mode": "graphs", "target": "kubernetes", "namespace": "default"}


def test_validation_refuses_bad_answers_and_keeps_asking():
    # nodes: "0" is refused (Enter does nothing), then backspace and "3".
    keys = ENTER * 3 + "\x7f0" + ENTER + "\x7f3" + ENTER + ENTER
    keys += "\x7f" * 40 + "not a model" + ENTER + "\x7f" * 11 + "Qwen/Qwen3-8B" + ENTER
    keys += ENTER * 5
    got = drive(keys)
    assert got["nodes"] == 3 and got["model"] == "Qwen/Qwen3-8B"


def test_questions_are_shared_data():
    """The sequence a front end walks: dependent questions follow earlier answers."""
    from epdoctor.plan import questions as Q

    a: dict = {}
    seen = []
    while (q := Q.next_question(a)) is not None:
        seen.append(q.key)
        a[q.key] = {"engine": "tensorrt-llm", "instance": "p6-b200.48xlarge", "target": "bare"}.get(
            q.key, Q.parse(q, q.default)
        )
    assert seen == [
        "engine", "transport", "instance", "nodes", "gpus_per_node", "model", "num_experts",
        "target", "hosts", "image",
    ]  # fmt: skip
    gpus = next(q for q in Q.all_questions({"instance": "p5en"}) if q.key == "gpus_per_node")
    assert (gpus.default, Q.check(gpus, "9")) == ("8", "a whole number from 1 to 8")
    transport = Q.all_questions({"engine": "sglang"})[1]
    assert transport.default == "nvshmem" and "not for this engine" in transport.choices[1][1]
    model = next(q for q in Q.all_questions({}) if q.key == "model")
    assert "neither a Hugging Face id" in Q.check(model, "not a model")
    assert Q.check(model, "Qwen/Qwen3-8B") is None


def test_ctrl_c_cancels():
    assert drive("\x03") is None


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux not installed")
def test_real_terminal_under_tmux(tmp_path):
    session = f"epdoctor-plan-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    env_prefix = f"cd {ROOT} && HF_HOME={tmp_path} NO_COLOR=1 "
    cmd = f"{env_prefix}{sys.executable} -m epdoctor plan --hf-cache {HF} -o {out}; sleep 30"
    subprocess.run(
        ["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50", cmd], check=True
    )

    def screen() -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-S", "-", "-t", session], capture_output=True, text=True
        ).stdout

    def wait_for(text: str, timeout: float = 20) -> str:
        end = time.time() + timeout
        while time.time() < end:
            s = screen()
            if text in s:
                return s
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n{screen()}")

    def keys(*k: str) -> None:
        subprocess.run(["tmux", "send-keys", "-t", session, *k], check=True)

    try:
        wait_for("Engine")
        keys("Down", "Enter")  # NVIDIA Dynamo + vLLM
        wait_for("Transport")
        keys("Enter")
        wait_for("Instance type")
        keys("Enter")
        wait_for("Nodes")
        keys("Enter")
        wait_for("GPUs per node")
        keys("Enter")
        wait_for("Model")
        keys("Enter")
        wait_for("Routed experts")
        keys("Enter")  # blank: read the cached config.json
        wait_for("Execution mode")
        keys("Enter")
        wait_for("Target")
        keys("Enter")
        wait_for("Namespace")
        keys("Enter")
        wait_for("Container image")
        keys("Enter")  # blank: the placeholder, and the plan says what to do about it
        s = wait_for("epdoctor lint", 30)
        assert "Verdict: SUPPORTED" in s and "B415" in s
        plan = json.loads((out / "plan.json").read_text())
        assert plan["input"]["engine"] == "dynamo" and plan["experts"]["count"] == 128
        assert (out / "kubernetes" / "dynamo-deepep.yaml").is_file()
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    assert not os.path.exists(f"/tmp/tmux-{os.getuid()}/{session}")
