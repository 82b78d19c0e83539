"""The guided tour's content: one source (tour.toml) for the app and docs/tour.md."""

from __future__ import annotations

from pathlib import Path

from epdoctor import knowledge
from epdoctor.knowledge import tour
from epdoctor.reports import docs, facts_table

DOC = Path(__file__).resolve().parent.parent / "docs" / "tour.md"
LAYERS_WANTED = [
    "gpu", "gdrcopy", "efa", "libfabric", "plugin", "nccl", "gin", "deepep", "engine", "kubernetes",
]  # fmt: skip


def test_docs_tour_is_generated_from_the_same_source():
    assert DOC.read_text(encoding="utf-8") == docs.render_tour(), (
        "docs/tour.md is stale: python -m epdoctor.reports.docs"
    )


def test_steps_cover_the_stack_in_order_and_name_real_traps():
    t = tour.load()
    assert [s.id for s in t.steps] == LAYERS_WANTED
    for s in t.steps:
        assert s.text and s.title
        for code in s.codes:
            assert knowledge.get(code).code == code  # KeyError when a code is not in the catalogue
        assert s.traps(), f"step {s.id} names no trap"


def test_live_facts_read_the_node_summary_and_env():
    step = tour.load().step("gin")
    rows = dict(step.live_facts({"env": {"NCCL_GIN_TYPE": "2"}}))
    assert rows["$NCCL_GIN_TYPE"] == "2"
    assert rows["$NCCL_GIN_ENABLE"] is None
    assert facts_table.fact_text(None) == "none"  # as the reports say it
    assert facts_table.fact_text(None, "gdrdrv") == "not loaded"
    assert facts_table.fact_text({"unknown": "no file"}) == "unknown (no file)"
    assert facts_table.fact_text(True) == "yes"


def test_layers_pull_every_trap_of_that_layer():
    k = tour.load().step("kubernetes")
    codes = {t.code for t in k.traps()}
    assert {t.code for t in knowledge.all_traps() if t.code.startswith("K")} <= codes
