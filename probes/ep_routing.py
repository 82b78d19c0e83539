"""Routing and oracle of the built-in EP kernel test (standard library only).

The built-in kernel test (ep_kernel_test.py) moves tokens the way an
expert-parallel MoE layer does: every token picks top-k experts, is sent once
to each rank that owns one of them (dispatch), each rank applies its experts
and sends one partial result back per token (combine), and the source rank
sums the partials. This module is the specification of that exchange, written
without PyTorch so CI can check it anywhere and every rank can compute, on the
CPU, exactly what it must receive:

* the routing is a seeded function of (seed, source rank, token count), so any
  rank can regenerate any other rank's routing;
* token values, expert scales and routing weights are small dyadic numbers, so
  every product and sum the test performs is exact in float32 and the only
  rounding is the cast of a partial result to the transfer dtype, which
  ``round_to_dtype`` reproduces bit for bit (bfloat16 round-to-nearest-even).
  The check is therefore element-wise equality, not a tolerance.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Sequence
from dataclasses import dataclass

DTYPES = ("bfloat16", "float32")
# Value formula constants: token values are integers in [-127, 127] over 64,
# which bfloat16 (8 significant bits) holds exactly.
_VALUE_SPAN = 255
_VALUE_OFFSET = 127
_VALUE_SCALE = 64.0


@dataclass(frozen=True)
class Routing:
    """One source rank's top-k choice: expert ids and weights per token."""

    topk_idx: tuple[tuple[int, ...], ...]
    weights: tuple[tuple[float, ...], ...]


def check_shape(world: int, num_experts: int, topk: int) -> None:
    if world < 1:
        raise ValueError("world size must be at least 1")
    if num_experts % world:
        raise ValueError(f"--num-experts {num_experts} is not a multiple of the world size {world}")
    if not 1 <= topk <= num_experts:
        raise ValueError(f"--num-topk {topk} must be between 1 and --num-experts {num_experts}")


def owner(expert: int, num_experts: int, world: int) -> int:
    """Rank owning an expert: contiguous blocks of num_experts/world experts."""
    return expert // (num_experts // world)


def expert_scale(expert: int) -> float:
    """What expert e does to a token: multiply by 0.5, 1 or 2 (exact in any float)."""
    return (0.5, 1.0, 2.0)[expert % 3]


def token_value(src: int, token: int, h: int) -> float:
    """Element h of token `token` on source rank `src`."""
    return ((src * 37 + token * 11 + h * 3) % _VALUE_SPAN - _VALUE_OFFSET) / _VALUE_SCALE


def make_routing(seed: int, src: int, num_tokens: int, num_experts: int, topk: int) -> Routing:
    """Distinct experts per token, weights k/8 (k in 1..8): a seeded, rank-reproducible choice."""
    rng = random.Random(seed * 1_000_003 + src)
    idx: list[tuple[int, ...]] = []
    wts: list[tuple[float, ...]] = []
    for _ in range(num_tokens):
        idx.append(tuple(rng.sample(range(num_experts), topk)))
        wts.append(tuple(rng.randint(1, 8) / 8.0 for _ in range(topk)))
    return Routing(tuple(idx), tuple(wts))


def dest_ranks(row: Sequence[int], num_experts: int, world: int) -> list[int]:
    """Ranks a token is dispatched to: each owner of one of its experts, once, ascending."""
    return sorted({owner(e, num_experts, world) for e in row})


def send_order(routing: Routing, num_experts: int, world: int) -> list[list[int]]:
    """Per destination rank, the token indices sent to it, in token order."""
    out: list[list[int]] = [[] for _ in range(world)]
    for t, row in enumerate(routing.topk_idx):
        for r in dest_ranks(row, num_experts, world):
            out[r].append(t)
    return out


def local_factor(
    row: Sequence[int], weights: Sequence[float], rank: int, num_experts: int, world: int
) -> float:
    """Sum of w_k * scale(e_k) over the token's experts that `rank` owns (exact in float32)."""
    return sum(
        w * expert_scale(e)
        for e, w in zip(row, weights, strict=True)
        if owner(e, num_experts, world) == rank
    )


def round_to_dtype(x: float, dtype: str) -> float:
    """float32 -> dtype -> float32, as torch's .to(dtype) rounds (nearest, ties to even)."""
    bits = struct.unpack("<I", struct.pack("<f", x))[0]
    if dtype == "float32":
        return struct.unpack("<f", struct.pack("<I", bits))[0]
    if dtype != "bfloat16":
        raise ValueError(f"unsupported dtype {dtype}")
    if (bits & 0x7F800000) == 0x7F800000:  # inf/nan: not produced by the test
        return x
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return struct.unpack("<f", struct.pack("<I", rounded))[0]


def recv_order(
    seed: int, rank: int, world: int, num_tokens: int, num_experts: int, topk: int
) -> list[tuple[int, int]]:
    """What `rank` receives in dispatch, in order: (source rank, token index) pairs.

    all_to_all_single lays the receive buffer out by source rank, and each
    source sends its tokens for this rank in token order.
    """
    out: list[tuple[int, int]] = []
    for src in range(world):
        routing = make_routing(seed, src, num_tokens, num_experts, topk)
        out.extend((src, t) for t in send_order(routing, num_experts, world)[rank])
    return out


def expected_combined(
    seed: int,
    src: int,
    token: int,
    hidden: int,
    world: int,
    num_tokens: int,
    num_experts: int,
    topk: int,
    dtype: str,
    routing: Routing | None = None,
) -> list[float]:
    """The combined output of one token on its source rank: sum over destination ranks of the
    partial result rounded to the transfer dtype (the partials are summed in float32)."""
    routing = routing or make_routing(seed, src, num_tokens, num_experts, topk)
    row, wts = routing.topk_idx[token], routing.weights[token]
    out = [0.0] * hidden
    for r in dest_ranks(row, num_experts, world):
        f = local_factor(row, wts, r, num_experts, world)
        for h in range(hidden):
            out[h] += round_to_dtype(token_value(src, token, h) * f, dtype)
    return out


def simulate(
    seed: int,
    world: int,
    num_tokens: int,
    hidden: int,
    num_experts: int,
    topk: int,
    dtype: str = "float32",
) -> dict[int, list[list[float]]]:
    """A whole dispatch/combine exchange in plain Python: per source rank, the combined tokens.

    It moves data through explicit per-rank send and receive buffers the way
    the collective does (laid out by peer, counts exchanged first), so it is a
    check of the layout the kernel test relies on, independent of the oracle.
    """
    check_shape(world, num_experts, topk)
    routings = [make_routing(seed, s, num_tokens, num_experts, topk) for s in range(world)]
    orders = [send_order(routings[s], num_experts, world) for s in range(world)]
    # dispatch: rank r's receive buffer is the concatenation over sources of what they sent it
    recv: list[list[tuple[list[float], tuple[int, ...], tuple[float, ...]]]] = []
    for r in range(world):
        buf = []
        for s in range(world):
            for t in orders[s][r]:
                x = [round_to_dtype(token_value(s, t, h), dtype) for h in range(hidden)]
                buf.append((x, routings[s].topk_idx[t], routings[s].weights[t]))
        recv.append(buf)
    # experts + combine: partials go back in the order they came; sources sum them
    combined = {s: [[0.0] * hidden for _ in range(num_tokens)] for s in range(world)}
    for r in range(world):
        pos = 0
        for s in range(world):
            for t in orders[s][r]:
                x, row, wts = recv[r][pos]
                pos += 1
                f = sum(
                    w * expert_scale(e)
                    for e, w in zip(row, wts, strict=True)
                    if owner(e, num_experts, world) == r
                )
                for h in range(hidden):
                    combined[s][t][h] += round_to_dtype(x[h] * f, dtype)
    return combined


# Tagged rows: for layouts that do not keep token order (rank-major receive
# buffers with padding, as TensorRT-LLM's NcclEP returns), each row carries its
# own identity in its first three elements, all exact in bfloat16:
#   [0] source rank, [1] token // 128, [2] token % 128 (each minus 64, over 64).
TAG_WIDTH = 3


def tagged_value(src: int, token: int, h: int) -> float:
    if h == 0:
        return (src - 64) / 64.0
    if h == 1:
        return (token // 128 - 64) / 64.0
    if h == 2:
        return (token % 128 - 64) / 64.0
    return token_value(src, token, h)


def decode_tag(row: Sequence[float]) -> tuple[int, int] | None:
    """(source rank, token) of a tagged row, or None when the tag is not well formed."""
    if len(row) < TAG_WIDTH:
        return None
    vals = [row[i] * 64.0 + 64.0 for i in range(TAG_WIDTH)]
    if any(v != int(v) or not 0 <= v < 128 for v in vals[1:]) or vals[0] != int(vals[0]):
        return None
    src, hi, lo = (int(v) for v in vals)
    if src < 0:
        return None
    return src, hi * 128 + lo


def check_tag_capacity(world: int, num_tokens: int) -> None:
    if world > 191 or num_tokens > 128 * 128:
        raise ValueError("tagged rows hold at most 191 ranks and 16384 tokens per rank")
