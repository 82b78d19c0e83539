"""epdoctor.plan: verdicts, reasons and their trap codes, for the whole matrix
and for each rule the seeds establish."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from epdoctor import knowledge
from epdoctor.knowledge import stack as pk
from epdoctor.plan import Level, PlanInput, PlanInputError, Verdict, make_plan
from epdoctor.plan.model import ENGINES, TRANSPORTS

HF = str(Path(__file__).parent / "fixtures" / "plan" / "hf-cache")
INSTANCES = list(pk.instances())
MATRIX = list(itertools.product(ENGINES, TRANSPORTS, INSTANCES))


def plan(**kw):
    kw.setdefault("hf_cache", HF)
    return make_plan(PlanInput(**kw))


def levels(p, code):
    return [r.level for r in p.reasons if r.code == code]


@pytest.mark.parametrize(("engine", "transport", "instance"), MATRIX)
def test_every_combination_has_a_verdict_with_catalogued_codes(engine, transport, instance):
    p = plan(engine=engine, transport=transport, instance=instance)
    assert p.verdict in Verdict
    assert p.reasons, "a verdict always says why"
    for r in p.reasons:
        knowledge.get(r.code)  # every reason is a trap in the catalogue
        assert r.message
    blockers = [r for r in p.reasons if r.level is Level.BLOCKER]
    assert (p.verdict is Verdict.NOT_SUPPORTED) == bool(blockers)
    if p.verdict is Verdict.SUPPORTED:
        assert all(r.level is Level.INFO for r in p.reasons)
    json.loads(p.dumps())  # JSON-serialisable


def test_main_case_is_supported():
    p = plan()  # vLLM, gin-proxy, 2 x p5en.48xlarge, Qwen3-30B-A3B-FP8 (cached config)
    assert p.verdict is Verdict.SUPPORTED
    assert (p.world, p.serve_ep, p.mode, p.nccl, p.gin_type) == (16, 16, "eager", "2.30.4", 2)
    assert p.efa_per_node == 16 and p.gpus_per_node == 8
    assert p.experts.count == 128 and p.experts.key == "num_experts"
    assert "C510" in p.codes()  # the seed-vs-upstream NCCL floor is stated


@pytest.mark.parametrize("instance", ["p5.48xlarge", "p5e.48xlarge", "p5", "p5e"])
def test_efa_gda_refused_without_completion_counters(instance):
    p = plan(transport="efa-gda", instance=instance)
    assert p.verdict is Verdict.NOT_SUPPORTED
    assert levels(p, "H125") == [Level.BLOCKER]


@pytest.mark.parametrize("instance", ["p5en.48xlarge", "p6-b200.48xlarge", "p6-b300.48xlarge"])
def test_efa_gda_on_counter_instances_plans_type_5_with_floors(instance):
    p = plan(transport="efa-gda", instance=instance)
    assert p.verdict is not Verdict.NOT_SUPPORTED
    assert "H125" not in p.codes()
    assert p.nccl == "2.31.2" and p.gin_type == 5
    env = p.env_dict()
    assert env["NCCL_GIN_TYPE"] == "5" and env["NCCL_SYM_GIN_KERNELS_ENABLE"] == "0"
    for code in ("H124", "N104", "H122", "H103", "H111"):  # installer, libfabric, efa.ko, ...
        assert levels(p, code) == [Level.INFO], code


def test_efa_gda_on_seed_nccl_explains_the_type_3_vs_5_split():
    p = plan(transport="efa-gda", nccl="2.30.4")
    assert p.verdict is Verdict.NOT_SUPPORTED
    assert levels(p, "T101") == [Level.BLOCKER]
    t102 = [r for r in p.reasons if r.code == "T102"]
    assert t102 and "NCCL_GIN_TYPE=3" in t102[0].message


def test_trtllm_multi_node_serves_per_node_and_holds_nccl():
    p = plan(engine="tensorrt-llm", nodes=2)
    assert p.verdict is Verdict.CAVEATS
    assert levels(p, "E502") == [Level.CAVEAT]
    assert "VPC-CNI" in next(r.message for r in p.reasons if r.code == "E502")
    assert p.serve_ep == 8 and p.world == 16
    assert p.nccl == "2.30.4" and levels(p, "L505") == [Level.INFO]
    assert "--ep_size 8" in p.commands.leader
    assert "torchrun --nnodes 2 --nproc-per-node 8" in p.commands.kernel_test


def test_trtllm_refuses_an_nccl_bump_and_efa_gda():
    bumped = plan(engine="tensorrt-llm", nccl="2.31.2")
    assert levels(bumped, "L505") == [Level.BLOCKER]
    gda = plan(engine="tensorrt-llm", transport="efa-gda")
    assert gda.verdict is Verdict.NOT_SUPPORTED and levels(gda, "E501") == [Level.BLOCKER]


def test_vllm_graphs_need_52632():
    at = plan(mode="graphs")  # the vLLM engine's pin 14617c2b carries the fix
    assert levels(at, "E503") == [Level.CAVEAT] and at.verdict is Verdict.CAVEATS
    assert "--enforce-eager" not in at.commands.leader
    before = plan(mode="graphs", vllm_pin="e2f993dc4")
    assert levels(before, "E503") == [Level.BLOCKER]
    unknown = plan(mode="graphs", vllm_pin="0.99.0")
    assert levels(unknown, "E503") == [Level.UNKNOWN] and unknown.verdict is Verdict.CAVEATS
    by_wheel = plan(mode="graphs", vllm_pin="0.26.1rc1.dev1000+g14617c2b6")
    assert levels(by_wheel, "E503") == [Level.CAVEAT]
    assert "E503" not in plan(mode="eager").codes()


@pytest.mark.parametrize("engine", ["vllm", "dynamo"])
def test_vllm_pin_follows_the_mode_and_names_the_0_26_line(engine):
    eager = plan(engine=engine)
    assert eager.vllm_pin == "e2f993dc4"  # the pin both seeds served eager at
    assert levels(eager, "E401") == [Level.INFO] and eager.verdict is Verdict.SUPPORTED
    graphs = plan(engine=engine, mode="graphs")
    assert graphs.vllm_pin == "14617c2b"  # the #52632 merge
    assert levels(graphs, "E503") == [Level.CAVEAT] and levels(graphs, "E401") == [Level.CAVEAT]
    refused = plan(engine=engine, mode="graphs", vllm_pin="e2f993dc4")
    assert levels(refused, "E503") == [Level.BLOCKER]
    recipe = plan(engine=engine, vllm_pin="14617c2b")
    assert levels(recipe, "E401") == [Level.CAVEAT] and recipe.verdict is Verdict.CAVEATS
    stranger = plan(engine=engine, vllm_pin="deadbeef1")
    assert Level.CAVEAT in levels(stranger, "M508")


@pytest.mark.parametrize("engine", ["vllm", "dynamo"])
def test_deepep_on_sm103(engine):
    p = plan(engine=engine, instance="p6-b300")
    assert levels(p, "D504") == [Level.CAVEAT]
    assert "D504" not in plan(engine=engine, instance="p6-b200").codes()


def test_unmeasured_instance_and_single_node_are_caveats():
    p = plan(instance="p5.48xlarge")
    assert Level.CAVEAT in levels(p, "M508")
    one = plan(nodes=1)
    assert levels(one, "M509") == [Level.CAVEAT]
    assert one.commands.worker == "" and "--data-parallel-address" not in one.commands.leader


def test_engine_transport_mismatches():
    for engine, transport in [("sglang", "gin-proxy"), ("vllm", "nvshmem"), ("dynamo", "nvshmem")]:
        p = plan(engine=engine, transport=transport)
        assert levels(p, "E501") == [Level.BLOCKER], (engine, transport)
    sg = plan(engine="sglang", transport="nvshmem")
    assert sg.verdict is Verdict.CAVEATS
    assert sg.env_dict()["NVSHMEM_REMOTE_TRANSPORT"] == "libfabric"


def test_vllm_below_gin_floor():
    p = plan(nccl="2.28.9")  # the resolver-downgrade version
    assert levels(p, "L101") == [Level.BLOCKER]


@pytest.mark.parametrize(
    ("kw", "fragment"),
    [
        ({"instance": "p4d.24xlarge"}, "unknown instance type"),
        ({"engine": "llama.cpp"}, "unknown engine"),
        ({"transport": "tcp"}, "unknown transport"),
        ({"nodes": 0}, "--nodes"),
        ({"gpus_per_node": 9}, "--gpus-per-node"),
        ({"mode": "graphs", "engine": "tensorrt-llm"}, "no eager"),
        ({"model": "not a model"}, "neither a Hugging Face id"),
        ({"model": "/nonexistent/model"}, "not a directory"),
        ({"namespace": "Bad_NS"}, "DNS-1123"),
        ({"image": "repo/img:latest"}, "moves"),
        ({"image": "repo/img"}, "immutable tag"),
        ({"nccl": "banana"}, "NCCL version"),
        ({"cache_host_path": "relative/dir"}, "absolute path"),
        ({"num_experts": 0}, "positive"),
        ({"hosts": ("a", "b", "c"), "target": "bare"}, "3 hosts"),
        ({"hosts": ("a", "b")}, "--target bare"),
        ({"hosts": ("a;rm -rf /", "b"), "target": "bare"}, "not a hostname"),
        (
            {"vllm_pin": "14617c2b", "engine": "sglang", "transport": "nvshmem"},
            "does not run on vLLM",
        ),
    ],
)
def test_bad_input_is_a_clear_error(kw, fragment):
    with pytest.raises(PlanInputError, match=fragment):
        plan(**kw)


def test_aliases_normalise_to_canonical_names():
    p = plan(engine="trtllm", transport="proxy", instance="P5EN", target="k8s")
    assert (p.input.engine, p.input.transport, p.input.instance, p.input.target) == (
        "tensorrt-llm",
        "gin-proxy",
        "p5en.48xlarge",
        "kubernetes",
    )
    # A normalised input plans to the same result.
    assert make_plan(p.input).to_json() == p.to_json()


def test_instance_table():
    inst = pk.instances()
    assert {k: (v.efa, v.efa_comp_counters) for k, v in inst.items()} == {
        "p5.48xlarge": (32, False),
        "p5e.48xlarge": (32, False),
        "p5en.48xlarge": (16, True),
        "p6-b200.48xlarge": (8, True),
        "p6-b300.48xlarge": (16, True),
    }
    assert inst["p6-b300.48xlarge"].sm == "10.3"
    assert {v.gpu for v in inst.values()} == {"H100", "H200", "B200", "B300"}


def test_every_code_the_plan_uses_is_catalogued_and_every_plan_trap_is_used():
    import re

    root = Path(__file__).resolve().parent.parent / "epdoctor" / "plan"
    stack = root.parent / "knowledge" / "stack"
    text = "".join(p.read_text() for p in [*root.glob("*.py"), *stack.glob("*.toml")])
    # Codes are what a rule yields (_r("CODE", ...)) and what data cites (code = "CODE").
    used = set(re.findall(r'_r\(\s*"([A-Z][0-9]{3})"', text))
    used |= set(re.findall(r'code = "([A-Z][0-9]{3})"', text))
    live = {t.code for t in knowledge.all_traps()}
    assert used and not used - live, sorted(used - live)
    plan_traps = {t.code for t in knowledge.all_traps() if t.code[1] == "5"}
    assert plan_traps <= used, sorted(plan_traps - used)


def test_trtllm_below_its_nccl_floor():
    p = plan(engine="tensorrt-llm", nccl="2.29.7")
    assert levels(p, "E104") == [Level.BLOCKER]


def test_reasons_name_the_traps_the_output_avoids():
    vllm = plan()
    for code in ("D405", "E408", "M702", "K205"):
        assert levels(vllm, code) == [Level.INFO], code
    trt = plan(engine="tensorrt-llm")
    assert levels(trt, "E404") == [Level.INFO] and levels(trt, "E406") == [Level.INFO]
    assert "M702" not in trt.codes()
    dyn = plan(engine="dynamo")
    assert levels(dyn, "E701") == [Level.INFO]
    assert "E701" not in plan(engine="dynamo", target="bare").codes()
    assert "E408" not in plan(nodes=1).codes()
