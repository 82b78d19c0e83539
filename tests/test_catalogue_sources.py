"""Every trap that states a version or a parameter name carries where it was read: a pull
request, issue or release, a commit, or a file at a tag or commit (not a moving master/main);
or its text says the claim is not verified."""

from __future__ import annotations

import re

from epdoctor import knowledge

PARAM = re.compile(r"\b(?:NCCL|OFI_NCCL|FI|EP|VLLM|TLLM|TRTLLM|NVSHMEM)_[A-Z0-9_]{3,}\b")
VERSION = re.compile(r"\b\d+\.\d+(?:\.\d+)?\b")
SOURCED = re.compile(
    r"/pull/\d+|/issues/\d+|/releases|/commit/|/blob/(?!master/|main/)[^/]+/|/tree/(?!master/|main/)v?\d"
)


def test_every_version_or_parameter_claim_has_a_source():
    missing = []
    for t in knowledge.all_traps():
        text = " ".join([t.why or "", t.versions or ""])
        if not (VERSION.search(text) or PARAM.search(text)):
            continue
        if any(SOURCED.search(r) for r in t.references) or "not verified" in text:
            continue
        missing.append(t.code)
    assert not missing, f"claims without a source: {missing}"


def test_the_canonical_benchmark_is_linked_where_it_lives():
    for t in knowledge.all_traps():
        for r in t.references:
            if "deepep-v2-benchmark" in r:
                assert "/micro-benchmarks/expert-parallelism/deepep-v2-benchmark" in r, (t.code, r)


def test_gin_type_4_dates_to_2_30_7():
    from epdoctor.knowledge import stack

    assert stack.gin_type_since()["4"] == "2.30.7"
    assert "v2.30.7-1" in knowledge.get("T101").why
