"""The built-in kernel test's routing and oracle (torch-free: runs in CI everywhere)."""

from __future__ import annotations

import pytest
from epdoctor.probes import ep_routing as R


def test_routing_is_seeded_distinct_and_rank_specific():
    a = R.make_routing(7, 0, 50, 32, 8)
    assert a == R.make_routing(7, 0, 50, 32, 8)
    assert a != R.make_routing(7, 1, 50, 32, 8)
    assert a != R.make_routing(8, 0, 50, 32, 8)
    for row, wts in zip(a.topk_idx, a.weights, strict=True):
        assert len(set(row)) == 8 and all(0 <= e < 32 for e in row)
        assert all(w * 8 == int(w * 8) and 0 < w <= 1 for w in wts)


def test_each_token_goes_once_to_every_owner_of_its_experts():
    world, experts = 4, 16
    routing = R.make_routing(0, 2, 40, experts, 3)
    order = R.send_order(routing, experts, world)
    for t, row in enumerate(routing.topk_idx):
        owners = {e // 4 for e in row}
        assert {r for r in range(world) if t in order[r]} == owners
    assert all(o == sorted(o) for o in order)
    # what rank r receives is the concatenation, by source, of what each sent it
    recv = R.recv_order(0, 1, world, 40, experts, 3)
    want = []
    for src in range(world):
        rt = R.make_routing(0, src, 40, experts, 3)
        want += [(src, t) for t in R.send_order(rt, experts, world)[1]]
    assert recv == want


@pytest.mark.parametrize("world,experts,topk", [(1, 8, 2), (2, 8, 3), (4, 16, 4), (3, 9, 9)])
def test_simulated_exchange_reproduces_the_moe_sum(world, experts, topk):
    # combined token = sum over its k experts of w_k * scale(e_k) * x: the layout
    # of the exchange (peer order, one copy per owner rank) must not change that.
    hidden, tokens = 5, 12
    got = R.simulate(3, world, tokens, hidden, experts, topk, "float32")
    for src in range(world):
        rt = R.make_routing(3, src, tokens, experts, topk)
        for t in range(tokens):
            want = [
                sum(
                    w * R.expert_scale(e)
                    for e, w in zip(rt.topk_idx[t], rt.weights[t], strict=True)
                )
                * R.token_value(src, t, h)
                for h in range(hidden)
            ]
            assert got[src][t] == want


def test_oracle_matches_simulation_with_bf16_rounding():
    world, experts, topk, hidden, tokens = 2, 8, 4, 6, 10
    sim = R.simulate(1, world, tokens, hidden, experts, topk, "bfloat16")
    for src in range(world):
        for t in range(tokens):
            assert (
                R.expected_combined(1, src, t, hidden, world, tokens, experts, topk, "bfloat16")
                == sim[src][t]
            )


def test_bf16_rounding_is_nearest_even():
    assert R.round_to_dtype(1.0, "bfloat16") == 1.0
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1.0)
    assert R.round_to_dtype(1.0 + 2**-8, "bfloat16") == 1.0
    assert R.round_to_dtype(1.0 + 3 * 2**-8, "bfloat16") == 1.0 + 2**-6
    assert R.round_to_dtype(1.0 + 2**-8 + 2**-12, "bfloat16") == 1.0 + 2**-7
    assert R.round_to_dtype(-3.3, "float32") == pytest.approx(-3.3)
    # token values are exact in bf16
    assert all(
        R.round_to_dtype(R.token_value(1, t, 3), "bfloat16") == R.token_value(1, t, 3)
        for t in range(300)
    )


def test_shape_errors_are_explained():
    with pytest.raises(ValueError, match="multiple of the world size"):
        R.check_shape(3, 8, 2)
    with pytest.raises(ValueError, match="--num-topk"):
        R.check_shape(2, 8, 9)


def test_tagged_rows_round_trip_and_are_exact_in_bf16():
    for src, t in [(0, 0), (7, 127), (15, 128), (63, 16383), (190, 5000)]:
        row = [R.tagged_value(src, t, h) for h in range(6)]
        assert all(R.round_to_dtype(v, "bfloat16") == v for v in row)
        assert R.decode_tag(row) == (src, t)
    assert R.decode_tag([0.013, 0.0, 0.0]) is None
    assert R.decode_tag([0.0, 0.0]) is None
    with pytest.raises(ValueError):
        R.check_tag_capacity(8, 20000)
