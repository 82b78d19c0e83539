"""The EP-divisibility preflight: the seeds' worked examples, every key
spelling, offline behaviour, and malformed config.json (fuzzed)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epdoctor.cli import main
from epdoctor.plan import Level, PlanInput, PlanInputError, Verdict, make_plan
from epdoctor.plan.experts import find_experts, routed_experts

FIX = Path(__file__).parent / "fixtures" / "plan"
HF = str(FIX / "hf-cache")


def ep_plan(model, nodes=2, **kw):
    return make_plan(PlanInput(model=model, nodes=nodes, hf_cache=HF, **kw))


def test_qwen3_30b_a3b_passes_at_ep16():
    p = ep_plan("Qwen/Qwen3-30B-A3B-FP8")
    assert p.serve_ep == 16 and p.experts.count == 128
    d506 = [r for r in p.reasons if r.code == "D506"]
    assert [r.level for r in d506] == [Level.INFO] and "8 per rank" in d506[0].message


def test_qwen15_moe_is_refused_at_ep16():
    p = ep_plan("Qwen/Qwen1.5-MoE-A2.7B")
    assert p.verdict is Verdict.NOT_SUPPORTED
    msg = next(r.message for r in p.reasons if r.code == "D506")
    assert "60 routed experts do not divide over EP16" in msg
    # ...and passes where EP divides 60 (one node of 4 GPUs: EP4).
    assert ep_plan("Qwen/Qwen1.5-MoE-A2.7B", nodes=1, gpus_per_node=4).experts.count == 60
    assert "D506" in [
        r.code for r in ep_plan("Qwen/Qwen1.5-MoE-A2.7B", nodes=1, gpus_per_node=4).reasons
    ]


def test_dense_qwen3_8b_is_refused_as_not_a_routed_moe():
    p = ep_plan("Qwen/Qwen3-8B")
    assert p.verdict is Verdict.NOT_SUPPORTED
    assert p.experts.dense
    assert "not a routed MoE" in next(r.message for r in p.reasons if r.code == "D506")


def test_other_key_spellings():
    assert ep_plan("deepseek-ai/DeepSeek-V2-Lite-Chat").experts.key == "n_routed_experts"
    mix = find_experts(str(FIX / "local-mixtral"), None)
    assert (mix.count, mix.key) == (8, "num_local_experts")
    mm = find_experts(str(FIX / "local-multimodal"), None)
    assert (mm.count, mm.key) == (16, "num_local_experts")


def test_offline_without_config_is_unknown_never_pass(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    p = make_plan(PlanInput(model="Qwen/Qwen3-30B-A3B-FP8"))
    assert p.verdict is Verdict.CAVEATS
    assert [r.level for r in p.reasons if r.code == "D507"] == [Level.UNKNOWN]
    assert "--num-experts" in p.experts.source
    # --num-experts answers it without a config.
    given_ = make_plan(PlanInput(model="Qwen/Qwen3-30B-A3B-FP8", num_experts=128))
    assert given_.verdict is Verdict.SUPPORTED


def test_hf_home_cache_is_found(tmp_path, monkeypatch):
    hub = tmp_path / "hub"
    shutil.copytree(FIX / "hf-cache", hub)
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    assert make_plan(PlanInput()).experts.count == 128


def test_model_path_without_config_json_exits_2(tmp_path, capsys):
    rc = main(["plan", "--no-input", "--model", str(tmp_path)])
    assert rc == 2
    assert "has no config.json" in capsys.readouterr().err


def test_malformed_config_json_exits_2(tmp_path, capsys):
    (tmp_path / "config.json").write_text('{"num_experts": 12', encoding="utf-8")
    assert main(["plan", "--no-input", "--model", str(tmp_path)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    (tmp_path / "config.json").write_text('{"num_experts": "many"}', encoding="utf-8")
    assert main(["plan", "--no-input", "--model", str(tmp_path)]) == 2
    assert "not an integer" in capsys.readouterr().err


def test_routed_experts_ignores_top_k():
    assert routed_experts({"num_experts_per_tok": 8}) == (None, "")
    assert routed_experts({"num_experts": 1}) == (None, "num_experts")


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["num_experts", "n_routed_experts", "num_local_experts", "text_config", "x"]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(doc=json_values)
def test_fuzzed_config_never_tracebacks(tmp_path_factory, doc):
    d = tmp_path_factory.mktemp("m")
    (d / "config.json").write_text(json.dumps(doc), encoding="utf-8")
    try:
        p = make_plan(PlanInput(model=str(d)))
    except PlanInputError as exc:
        assert str(exc)
    else:
        assert p.verdict in Verdict


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(raw=st.binary(max_size=64))
def test_fuzzed_bytes_exit_2_or_plan_without_traceback(tmp_path_factory, raw, capsys):
    d = tmp_path_factory.mktemp("b")
    (d / "config.json").write_bytes(raw)
    rc = main(["plan", "--no-input", "--model", str(d)])
    err = capsys.readouterr().err
    assert rc in (0, 1, 2)
    assert "Traceback" not in err
    if rc == 2:
        assert err.startswith("epdoctor: error:")


class _Hub:
    """A local HTTP server in the Hub's URL shape: /ORG/NAME/resolve/main/config.json."""

    def __init__(self, files: dict[str, bytes]):
        import http.server
        import threading

        seen: list[dict[str, str]] = []
        self.seen = seen

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                seen.append({"path": self.path, "auth": self.headers.get("Authorization", "")})
                body = files.get(self.path)
                self.send_response(200 if body is not None else 404)
                self.end_headers()
                self.wfile.write(body or b"")

            def log_message(self, *a):
                pass

        self.srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.srv.server_port}"

    def close(self):
        self.srv.shutdown()


@pytest.fixture
def empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_TOKEN", raising=False)


def test_hub_lookup_only_when_asked(empty_cache, monkeypatch):
    cfg = (FIX / "hf-cache/models--Qwen--Qwen1.5-MoE-A2.7B/snapshots").glob("*/config.json")
    hub = _Hub({"/Qwen/Qwen1.5-MoE-A2.7B/resolve/main/config.json": next(cfg).read_bytes()})
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_secret_for_test")
        quiet = make_plan(PlanInput(model="Qwen/Qwen1.5-MoE-A2.7B"))
        assert quiet.experts.count is None and hub.seen == []  # no --hub: no request
        asked = make_plan(PlanInput(model="Qwen/Qwen1.5-MoE-A2.7B", hub=True))
        assert asked.experts.count == 60 and asked.experts.source.startswith(hub.url)
        assert hub.seen[-1]["auth"] == "Bearer hf_secret_for_test"
        assert asked.verdict is Verdict.NOT_SUPPORTED  # 60 % 16
        missing = make_plan(PlanInput(model="Qwen/Nope", hub=True))
        assert missing.experts.count is None and "HTTP 404" in missing.experts.source
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
        n = len(hub.seen)
        offline = make_plan(PlanInput(model="Qwen/Qwen1.5-MoE-A2.7B", hub=True))
        assert "HF_HUB_OFFLINE" in offline.experts.source and len(hub.seen) == n
    finally:
        hub.close()


def test_hub_unreachable_is_unknown_not_an_error(empty_cache, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: refused
    p = make_plan(PlanInput(model="Qwen/Qwen3-30B-A3B-FP8", hub=True))
    assert [r.level for r in p.reasons if r.code == "D507"] == [Level.UNKNOWN]
    assert "unreachable" in p.experts.source


def test_hub_malformed_config_exits_2(empty_cache, monkeypatch, capsys):
    hub = _Hub({"/a/b/resolve/main/config.json": b"{not json"})
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        assert main(["plan", "--no-input", "--model", "a/b", "--hub"]) == 2
        assert "not valid JSON" in capsys.readouterr().err
    finally:
        hub.close()
