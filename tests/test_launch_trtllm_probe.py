"""The TensorRT-LLM NcclEP probe's oracle checks (torch-free).

TensorRT-LLM cannot run here, so the rank-major receive layout NcclEP returns
(per source rank a block of max_tokens_per_rank rows, padding rows with expert
id -1, row order inside a block not promised) is produced by a stand-in below,
written from the layout described in TensorRT-LLM's nccl_ep.py docstring. The
probe's own entry-point code runs only on a node with TensorRT-LLM.
"""

from __future__ import annotations

import random

import pytest
from epdoctor.probes import ep_routing as R
from epdoctor.probes import trtllm_nccl_ep_probe as P

W, T, H, E, K, SEED = 2, 20, 6, 8, 3, 5


def stand_in_dispatch(rank, only_local_ids=False, shuffle=True):
    """What NcclEP's LL rank-major dispatch hands rank `rank` (stand-in, see module doc)."""
    rows, slots, scales = [], [], []
    rng = random.Random(rank)
    for src in range(W):
        rt = R.make_routing(SEED, src, T, E, K)
        block = []
        for t in R.send_order(rt, E, W)[rank]:
            ids = [
                e if not only_local_ids or R.owner(e, E, W) == rank else -1 for e in rt.topk_idx[t]
            ]
            block.append(([R.tagged_value(src, t, h) for h in range(H)], ids, list(rt.weights[t])))
        if shuffle:
            rng.shuffle(block)
        block += [([0.0] * H, [-1] * K, [0.0] * K)] * (T - len(block))  # padding rows
        for r, s, w in block:
            rows.append(r)
            slots.append(s)
            scales.append(w)
    return rows, slots, scales


def stand_in_combine():
    """Per home rank, the bf16 sum of each rank's bf16 partials (what combine returns)."""
    out = {r: [[0.0] * H for _ in range(T)] for r in range(W)}
    for rank in range(W):
        rows, slots, scales = stand_in_dispatch(rank)
        f = P.local_factor_rows(slots, scales, rank, W, E)
        for row, fi, s in zip(rows, f, slots, strict=True):
            if all(x < 0 for x in s):
                continue
            src, t = R.decode_tag(row)
            for h in range(H):
                out[src][t][h] += R.round_to_dtype(row[h] * fi, "bfloat16")
    return {r: [[R.round_to_dtype(v, "bfloat16") for v in row] for row in out[r]] for r in out}


@pytest.mark.parametrize("only_local", [False, True])
def test_rank_major_dispatch_passes(only_local):
    for rank in range(W):
        got = P.check_dispatch(*stand_in_dispatch(rank, only_local), rank, W, T, E, K, SEED, H)
        assert got["ok"], got
        assert got["rows"] == got["expected_rows"] > 0


def test_combine_passes_within_bf16_rounding():
    comb = stand_in_combine()
    for rank in range(W):
        got = P.check_combine(comb[rank], rank, SEED, H, T, E, K)
        assert got["ok"], got


def test_a_missing_token_a_duplicate_and_a_wrong_element_fail():
    rows, slots, scales = stand_in_dispatch(0, shuffle=False)
    # drop the first real row (turn it into padding)
    slots = [list(s) for s in slots]
    slots[0] = [-1] * K
    got = P.check_dispatch(rows, slots, scales, 0, W, T, E, K, SEED, H)
    assert not got["ok"] and any("never arrived" in p for p in got["problems"])
    rows2, slots2, scales2 = stand_in_dispatch(0, shuffle=False)
    rows2[1], slots2[1], scales2[1] = rows2[0], slots2[0], scales2[0]
    assert any(
        "twice" in p
        for p in P.check_dispatch(rows2, slots2, scales2, 0, W, T, E, K, SEED, H)["problems"]
    )
    rows3, slots3, scales3 = stand_in_dispatch(1)
    rows3[0] = list(rows3[0])
    rows3[0][H - 1] += 0.5
    assert any(
        "elements differ" in p
        for p in P.check_dispatch(rows3, slots3, scales3, 1, W, T, E, K, SEED, H)["problems"]
    )


def test_wrong_experts_or_weights_fail():
    rows, slots, scales = stand_in_dispatch(1, shuffle=False)
    scales = [list(s) for s in scales]
    scales[0][0] += 0.125
    assert (
        "weights differ"
        in P.check_dispatch(rows, slots, scales, 1, W, T, E, K, SEED, H)["problems"][0]
    )
    rows, slots, scales = stand_in_dispatch(1, shuffle=False)
    slots = [list(s) for s in slots]
    slots[0] = [(e + 1) % E for e in slots[0]]
    assert not P.check_dispatch(rows, slots, scales, 1, W, T, E, K, SEED, H)["ok"]


def test_a_combine_off_by_more_than_rounding_fails():
    comb = stand_in_combine()
    comb[0][3] = list(comb[0][3])
    comb[0][3][4] *= 1.1
    got = P.check_combine(comb[0], 0, SEED, H, T, E, K)
    assert not got["ok"] and got["first"]["index"] == [3, 4]


def test_probe_reports_a_missing_tensorrt_llm_as_an_error_line(capsys, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "1")
    monkeypatch.setenv("RANK", "0")
    rc = P.main(["--num-tokens", "4", "--hidden", "2"])  # refused before any import
    out = capsys.readouterr().out
    assert rc == 2 and out.startswith("EPDOCTOR_KERNEL_TEST ") and "--hidden" in out
