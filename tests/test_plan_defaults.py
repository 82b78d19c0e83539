"""One default transport per engine (engines.toml's default_transport), the same through
every way of asking: `plan --no-input --engine X`, the questionary prompts' default answer
and the Textual wizard's default answer."""

from __future__ import annotations

import json
import time

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from epdoctor.cli import main
from epdoctor.commands.plan import TRANSPORT_DEFAULTS, ask
from epdoctor.knowledge import stack as knowledge

DOWN = "\x1b[B"
ENTER = "\r"
EXPECTED = {"vllm": "gin-proxy", "dynamo": "gin-proxy", "tensorrt-llm": "gin-proxy",
            "sglang": "nvshmem"}  # fmt: skip


def test_each_engine_has_one_default_it_runs_on():
    engines = knowledge.engines()
    assert {k: e.default_transport for k, e in engines.items()} == EXPECTED
    assert all(e.default_transport in e.transports for e in engines.values())
    # --help says the same thing as the data
    others = {t for k, t in EXPECTED.items() if k != "sglang"}
    assert f"nvshmem for sglang, {others.pop()} for the others" == TRANSPORT_DEFAULTS


@pytest.mark.parametrize("engine", sorted(EXPECTED))
def test_no_input_plans_the_engines_default_transport(engine, capsys):
    rc = main(["plan", "--no-input", "--engine", engine, "--num-experts", "128", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert data["input"]["transport"] == EXPECTED[engine]
    assert data["verdict"] != "not supported", data["reasons"]
    assert "E501" not in [r["code"] for r in data["reasons"]]
    assert rc == 0


def test_no_input_text_for_sglang_is_the_nvshmem_plan(capsys):
    rc = main(["plan", "--no-input", "--engine", "sglang", "--num-experts", "128"])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[0] == "Verdict: SUPPORTED WITH CAVEATS"
    assert "SGLang DeepEP over NVSHMEM" in out.splitlines()[1]


def test_an_asked_transport_still_wins(capsys):
    rc = main(["plan", "--no-input", "--engine", "sglang", "--transport", "gin-proxy",
               "--num-experts", "128", "--json"])  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert rc == 1 and data["verdict"] == "not supported"
    assert data["reasons"][0]["code"] == "E501"


def _engine_keys(engine: str) -> str:
    """Arrow presses that pick `engine` in the engine question, from its default (vllm)."""
    order = list(knowledge.engines())
    return DOWN * order.index(engine) + ENTER


@pytest.mark.parametrize("engine", sorted(EXPECTED))
def test_questionary_default_answer_is_the_engines_default(engine):
    # pick the engine, then take the transport question's default with Enter; the rest is
    # given so the prompt ends there
    rest = {"instance": "p5en.48xlarge", "nodes": 2, "gpus_per_node": 8, "num_experts": 128,
            "model": "Qwen/Qwen3-30B-A3B-FP8", "mode": "eager", "target": "kubernetes",
            "namespace": "default", "image": None}  # fmt: skip
    if not knowledge.engines()[engine].modes:
        rest.pop("mode")
    with create_pipe_input() as pipe:
        pipe.send_text(_engine_keys(engine) + ENTER)
        pipe.close()  # a question the keys do not answer ends the prompt (EOF), never hangs it
        got = ask(rest, input=pipe, output=DummyOutput())
    assert got is not None
    assert got["engine"] == engine and got["transport"] == EXPECTED[engine]


async def _wait(pilot, pred, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


async def test_wizard_default_answer_follows_the_engine():
    from epdoctor.screens.app import EpdoctorApp

    app = EpdoctorApp(start="wizard", diagnose_on_start=False)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        await _wait(pilot, lambda: app.shared.plan is not None, "first plan")
        assert app.shared.plan.input.transport == "gin-proxy"
        for engine in ["sglang", "tensorrt-llm", "sglang", "dynamo", "vllm"]:
            screen.query_one("#q-engine").value = engine
            await _wait(
                pilot,
                lambda e=engine: (
                    app.shared.plan.input.engine == e
                    and str(screen.query_one("#q-transport").value) == EXPECTED[e]
                ),
                f"{engine} plan",
            )
            plan = app.shared.plan
            assert plan.input.transport == EXPECTED[engine]
            assert plan.supported and "E501" not in plan.codes()


async def test_wizard_keeps_a_transport_the_operator_picked():
    from epdoctor.screens.app import EpdoctorApp

    app = EpdoctorApp(start="wizard", diagnose_on_start=False)
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        await _wait(pilot, lambda: app.shared.plan is not None, "first plan")
        screen.query_one("#q-transport").value = "efa-gda"
        await _wait(pilot, lambda: app.shared.plan.input.transport == "efa-gda", "efa-gda")
        # Dynamo runs on EFA-GDA too: the pick stays
        screen.query_one("#q-engine").value = "dynamo"
        await _wait(pilot, lambda: app.shared.plan.input.engine == "dynamo", "dynamo plan")
        assert app.shared.plan.input.transport == "efa-gda"
        # SGLang does not: its own default is planned, not a NOT SUPPORTED for a stale pick
        screen.query_one("#q-engine").value = "sglang"
        await _wait(pilot, lambda: app.shared.plan.input.engine == "sglang", "sglang plan")
        await _wait(pilot, lambda: app.shared.plan.input.transport == "nvshmem", "nvshmem")
        assert str(screen.query_one("#q-transport").value) == "nvshmem"
        # and the operator may still pick a transport the engine does not run on
        screen.query_one("#q-transport").value = "gin-proxy"
        await _wait(pilot, lambda: app.shared.plan.input.transport == "gin-proxy", "pick")
        assert not app.shared.plan.supported and app.shared.plan.codes()[0] == "E501"
