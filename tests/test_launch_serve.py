"""Readiness, smoke and bench against a real HTTP server process.

The server is tests/fake_engine.py: a small OpenAI-compatible server that stands
in for the engine (vLLM and Dynamo cannot run here). It answers in their response
shapes, including the broken ones: /health before endpoints, 200 without usage,
slow start, 500s, degenerate replies.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest
from launch_helpers import ENGINE, free_port

from epdoctor.cli import main
from epdoctor.launch import bench, readiness, smoke
from epdoctor.launch.http import request
from epdoctor.model import Status


class Engine:
    def __init__(self, *flags: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.cmd = [sys.executable, ENGINE, "--port", str(self.port), *flags]
        self.proc = subprocess.Popen(
            self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
        )

    def stats(self) -> dict:
        return request(self.url + "/stats").json

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
        self.proc.wait(10)


@pytest.fixture
def engine():
    started: list[Engine] = []

    def start(*flags: str, wait: bool = True) -> Engine:
        e = Engine(*flags)
        started.append(e)
        if wait:
            assert (
                readiness.wait_ready(
                    e.url, "vllm" if "dynamo" not in flags else "dynamo", 20, poll_s=0.1
                ).status
                is Status.PASS
            )
        return e

    yield start
    for e in started:
        e.stop()


def test_vllm_readiness_waits_through_a_slow_start(engine):
    e = engine("--start-delay", "1.0", wait=False)
    first = readiness.probe_once(e.url, "vllm")
    assert not first.ready and first.stage == "connect"
    g = readiness.wait_ready(e.url, "vllm", 15, poll_s=0.1)
    assert g.status is Status.PASS and "fake/moe-test" in g.summary


def test_dynamo_health_200_with_empty_endpoints_is_not_ready(engine):
    e = engine("--shape", "dynamo", "--endpoints-delay", "30", wait=False)
    deadline = time.monotonic() + 20
    while request(e.url + "/health").status is None and time.monotonic() < deadline:
        time.sleep(0.1)  # the server binds at once; the engine never registers
    assert request(e.url + "/health").status == 200  # the lie
    p = readiness.probe_once(e.url, "dynamo")
    assert not p.ready and p.stage == "endpoints"
    # vLLM-style readiness on the same server would be fooled by /health alone only if it
    # skipped /v1/models: ours asks for a listed model too
    assert not readiness.probe_once(e.url, "vllm").ready
    g = readiness.wait_ready(e.url, "dynamo", 1.0, poll_s=0.1)
    assert g.status is Status.FAIL and g.code == "E701"


@pytest.mark.parametrize("shape", ["sglang", "tensorrt-llm"])
def test_sglang_and_trtllm_are_ready_only_once_they_generate(engine, shape):
    # /health and /v1/models answer while the engine cannot generate yet (SGLang's /health is
    # also a stand-in on its non-leader nodes): /health_generate makes one token
    e = engine("--shape", shape, "--endpoints-delay", "1.5", wait=False)
    deadline = time.monotonic() + 20
    while request(e.url + "/health").status is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert request(e.url + "/health_generate").status == 503
    p = readiness.probe_once(e.url, shape)
    assert not p.ready and p.stage in ("models", "generate"), p
    g = readiness.wait_ready(e.url, shape, 15, poll_s=0.1)
    assert g.status is Status.PASS, g
    # vLLM has no /health_generate: its readiness never asks for it
    v = engine("--shape", "vllm")
    assert request(v.url + "/health_generate").status == 404
    assert readiness.probe_once(v.url, "vllm").ready


def test_dynamo_ready_once_endpoints_register(engine):
    e = engine("--shape", "dynamo", "--endpoints-delay", "1.0", wait=False)
    g = readiness.wait_ready(e.url, "dynamo", 15, poll_s=0.1)
    assert g.status is Status.PASS


def test_readiness_budget_expires_on_a_dead_port():
    g = readiness.wait_ready(f"http://127.0.0.1:{free_port()}", "vllm", 0.5, poll_s=0.1)
    assert g.status is Status.FAIL and g.code == "E702"


def test_smoke_passes_on_a_sane_reply(engine):
    e = engine()
    r = smoke.smoke(e.url, "fake/moe-test", max_tokens=16)
    assert r.gate.status is Status.PASS, r.gate
    assert r.usage["completion_tokens"] == 12 and r.finish_reason == "stop" and r.reply


@pytest.mark.parametrize(
    "flags,code,text",
    [
        (("--no-usage",), "E703", "without usage"),
        (("--degenerate",), "E704", "one token repeated"),
        (("--fail-every", "1"), "E704", "HTTP 500"),
    ],
)
def test_smoke_fails_on_broken_replies(engine, flags, code, text):
    e = engine(*flags)
    r = smoke.smoke(e.url, "fake/moe-test", max_tokens=16)
    assert r.gate.status is Status.FAIL and r.gate.code == code and text in r.gate.summary


def test_degenerate_detector():
    assert smoke.degenerate("") == "empty message"
    assert "repeated" in smoke.degenerate("a " * 20)
    assert smoke.degenerate("Expert parallelism places experts on different GPUs.") is None


def test_percentile_is_linear_interpolation():
    assert bench.percentile([], 50) is None
    assert bench.percentile([3.0], 99) == 3.0
    xs = [1.0, 2.0, 3.0, 4.0]
    assert bench.percentile(xs, 50) == 2.5
    assert bench.percentile(xs, 90) == pytest.approx(3.7)
    assert bench.percentile([10.0, 0.0], 100) == 10.0


def test_bench_method_on_a_healthy_engine(engine):
    e = engine()
    send = bench.http_sender(e.url, "fake/moe-test", 8, 30)
    res = bench.run_bench(send, [1, 3], 8, None, warmup=2, model="fake/moe-test")
    assert res.all_ok and res.gate().status is Status.PASS
    assert [lv.n for lv in res.levels] == [5, 15]  # 5 x level
    st = e.stats()
    # warm-up + 20 measured, every prompt distinct (one index across levels), all ignore_eos
    assert st["completions"] == 22 and st["distinct_prompts"] == 22
    assert all(st["ignore_eos"])
    row = res.to_json()["levels"][1]
    assert row["ok"] == 15 and row["p50_s"] is not None and row["tok_s"] > 0
    csv = bench.to_csv([res])
    assert csv.splitlines()[0].startswith("label,concurrency,n,ok")


def test_bench_counts_500s_and_200_without_usage_as_failures(engine):
    e = engine("--fail-every", "4")
    res = bench.run_bench(bench.http_sender(e.url, "fake/moe-test", 8, 30), [2], 8, 8, warmup=0)
    g = res.gate()
    assert not res.all_ok and g.status is Status.FAIL and g.code == "M701"
    assert res.levels[0].ok == 6 and "HTTP 500 x2" in g.evidence[0]
    # percentiles over the 6 successes only
    assert res.levels[0].stats()["ok"] == 6
    e2 = engine("--no-usage")
    res2 = bench.run_bench(bench.http_sender(e2.url, "fake/moe-test", 8, 30), [1], 8, 3, warmup=0)
    assert res2.levels[0].ok == 0
    assert res2.levels[0].stats()["failures"] == {"HTTP 200 without usage": 3}
    assert res2.levels[0].stats()["p50_s"] is None


def test_with_backend_replaces_or_adds():
    assert (
        bench.with_backend(
            "vllm serve m --all2all-backend deepep_v2 --x", "allgather_reducescatter"
        )
        == "vllm serve m --all2all-backend allgather_reducescatter --x"
    )
    assert bench.with_backend("vllm serve m", "naive") == "vllm serve m --all2all-backend naive"


# --- the command, end to end, against the stand-in engine ---------------------------------
def _cmd(port: int, *flags: str) -> str:
    return " ".join([sys.executable, ENGINE, "--port", str(port), *flags])


def test_run_serve_detach_then_smoke_and_bench(tmp_path, capsys):
    port = free_port()
    rc = main(
        [
            "run",
            "serve",
            "--cmd",
            _cmd(port),
            "--yes",
            "--no-preflight",
            "--detach",
            "--json",
            "--run-dir",
            str(tmp_path),
            "--url",
            f"http://127.0.0.1:{port}",
            "--startup-budget",
            "20",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    pid = doc["pids"]["leader"]
    try:
        assert rc == 0 and doc["gate"]["status"] == "pass"
        assert (tmp_path / "leader.log").read_text().count("listening on") == 1
        rc = main(["run", "smoke", "--url", f"http://127.0.0.1:{port}", "--yes", "--json"])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and out["status"] == "pass" and out["usage"]["completion_tokens"] > 0
        rc = main(
            [
                "run",
                "bench",
                "--url",
                f"http://127.0.0.1:{port}",
                "--yes",
                "--json",
                "--concurrency",
                "1,2",
                "--requests-per-level",
                "3",
                "--max-tokens",
                "4",
                "-o",
                str(tmp_path / "b"),
            ]
        )
        out = json.loads(capsys.readouterr().out)
        assert rc == 0 and out["results"][0]["all_ok"]
        assert (tmp_path / "b" / "bench.csv").read_text().count("\n") == 3
    finally:
        os.killpg(pid, signal.SIGTERM)


def test_run_serve_stops_when_the_engine_dies(tmp_path, capsys):
    port = free_port()
    rc = main(
        [
            "run",
            "serve",
            "--cmd",
            _cmd(port, "--start-delay", "30", "--crash-after", "0.5"),
            "--yes",
            "--no-preflight",
            "--json",
            "--run-dir",
            str(tmp_path),
            "--url",
            f"http://127.0.0.1:{port}",
            "--startup-budget",
            "20",
        ]
    )
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["gate"]["status"] == "fail"
    assert "exited before it was ready" in doc["gate"]["summary"]
    assert "crashed during init" in (tmp_path / "leader.log").read_text()


def test_run_bench_ab_serves_both_backends(tmp_path, capsys):
    port = free_port()
    rc = main(
        [
            "run",
            "bench",
            "--ab",
            "allgather_reducescatter",
            "--cmd",
            _cmd(port, "--all2all-backend", "deepep_v2"),
            "--url",
            f"http://127.0.0.1:{port}",
            "--yes",
            "--no-preflight",
            "--json",
            "--concurrency",
            "1",
            "--requests-per-level",
            "2",
            "--max-tokens",
            "4",
            "--run-dir",
            str(tmp_path),
            "--startup-budget",
            "20",
        ]
    )
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert rc == 0
    assert [r["label"] for r in doc["results"]] == ["current", "allgather_reducescatter"]
    assert "--all2all-backend allgather_reducescatter" in out.err
    # both arms were stopped: nothing listens any more
    assert request(f"http://127.0.0.1:{port}/health", timeout_s=1).status is None


def test_dry_run_prints_and_starts_nothing(tmp_path, capsys):
    port = free_port()
    rc = main(["run", "serve", "--cmd", _cmd(port), "--dry-run", "--run-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0 and "dry run: nothing started" in out and ENGINE in out
    assert not (tmp_path / "leader.log").exists()


def test_refuses_without_yes_when_stdin_is_not_a_terminal(tmp_path, capsys, monkeypatch):
    with open(os.devnull) as devnull:
        monkeypatch.setattr(sys, "stdin", devnull)
        rc = main(["run", "serve", "--cmd", "true", "--run-dir", str(tmp_path)])
    assert rc == 2 and "refusing to start without --yes" in capsys.readouterr().out


class FatalWatch:
    """Stand-in for the log analyzer in this test (the analyzer has its own tests): turns one
    exact upstream message into a FAIL finding, to check that serve stops on it."""

    def __init__(self) -> None:
        self.buf = b""

    def feed(self, data: bytes):
        from epdoctor.model import Finding

        self.buf += data
        if b"NCCL GIN is unavailable" in self.buf:
            self.buf = b""
            return [Finding("D201", Status.FAIL, "NCCL GIN is unavailable", ("log line",))]
        return []


def test_serve_stops_early_on_a_fatal_log_finding(tmp_path):
    from epdoctor.launch.launcher import LocalNode
    from epdoctor.launch.serve import ServeConfig, ServeRun

    port = free_port()
    msg = "RuntimeError: NCCL GIN is unavailable. This is usually due to a network configuration"
    cfg = ServeConfig(
        nodes=[LocalNode("a")],
        leader_cmd=_cmd(port, "--start-delay", "60", "--log-line", repr(msg)),
        url=f"http://127.0.0.1:{port}",
        run_dir=str(tmp_path),
        budget_s=30,
    )
    seen = []
    run = ServeRun(
        cfg,
        watch_factory=lambda source: FatalWatch(),
        on_finding=lambda source, f: seen.append((source, f.code)),
    )
    run.start()
    try:
        why = None
        deadline = time.monotonic() + 20
        while why is None and time.monotonic() < deadline:
            why = run.step()
            time.sleep(0.1)
        assert why == "fatal" and seen == [("leader", "D201")]
        g = run.gate(why)
        assert g.status is Status.FAIL and g.code == "D201"
    finally:
        stopped = run.stop()
    assert stopped and "leader" in stopped[0]


def test_serve_with_the_real_log_analyzer_stops_on_gin_unavailable(tmp_path, capsys):
    # the engine prints DeepEP's real runtime message (upstream-facts.md, DeepEP section)
    port = free_port()
    msg = (
        "RuntimeError: NCCL GIN is unavailable. This is usually due to a network "
        "configuration issue, such as allow_hybrid_mode=0"
    )
    cmd = _cmd(port, "--start-delay", "60", "--log-line", repr(msg))
    rc = main(
        [
            "run",
            "serve",
            "--cmd",
            cmd,
            "--yes",
            "--no-preflight",
            "--json",
            "--run-dir",
            str(tmp_path),
            "--url",
            f"http://127.0.0.1:{port}",
            "--startup-budget",
            "30",
        ]
    )
    out = capsys.readouterr()
    doc = json.loads(out.out)
    assert rc == 1 and doc["gate"]["code"] == "D201", doc
    assert any(f["code"] == "D201" for f in doc["findings"])
    assert "stopped: leader" in out.err


def test_a_log_analysis_error_does_not_stop_the_launch(capsys):
    from epdoctor.logwatch import _SourceWatch

    class Broken:
        def feed(self, data: bytes, source: str = "-"):
            raise KeyError("N999")

    w = _SourceWatch(Broken(), "rank0")
    assert w.feed(b"x\n") == [] and w.feed(b"y\n") == []
    assert "log analysis of rank0 stopped (KeyError" in capsys.readouterr().err
