"""Probe of TensorRT-LLM's NcclEP MoE communication through its real factory entry point.

Run one process per GPU with torchrun on every node:

    NCCL_DEBUG=INFO torchrun --nnodes 2 --nproc-per-node 8 ... trtllm_nccl_ep_probe.py

It does what a served MoE layer does, through the same code path:
  1. builds a Mapping that clears CommunicationFactory.create_strategy()'s
     gates (attention DP on, tp_size = world so dp_size > 1, moe_tp_size = 1,
     moe_ep_size = world) and a ModelConfig with the MoE sizes;
  2. asks the factory's own NcclEP availability check why it would refuse (when
     the build has it), then calls create_strategy() and records the class it
     selected; every rank must select NcclEP (one verdict, gathered);
  3. dispatches tagged tokens with seeded top-k routing, applies each rank's
     local experts to the received rows, combines, and checks both against the
     CPU oracle of ep_routing.py (dispatch exactly, per row identity; combine
     within bfloat16 rounding, since the combine reduction's order is the
     library's).

Each rank prints one line `EPDOCTOR_KERNEL_TEST {json}` (the same gate as the
built-in test) and exits non-zero on any failure. TLLM_LOG_LEVEL (not
TRTLLM_LOG_LEVEL) is what TensorRT-LLM's logger reads.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ep_routing as R

MARKER = "EPDOCTOR_KERNEL_TEST"
COMBINE_RTOL = 2.0**-7  # bfloat16: 8 significant bits; partial sums round once more
COMBINE_ATOL = 2.0**-6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--num-tokens", type=int, default=256, help="tokens per rank")
    p.add_argument("--hidden", type=int, default=4096)
    p.add_argument("--num-topk", type=int, default=8)
    p.add_argument("--num-experts", type=int, default=0, help="default: 16 per rank")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--iters", type=int, default=2, help="dispatch/combine rounds (each checked)")
    p.add_argument("--expect", default="NcclEP", help="class create_strategy must select")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------- oracle
def expected_rows(
    seed: int, rank: int, world: int, num_tokens: int, num_experts: int, topk: int
) -> dict[tuple[int, int], tuple[tuple[int, ...], tuple[float, ...]]]:
    """(source, token) -> (its experts, weights) for every token `rank` must receive."""
    out = {}
    for src in range(world):
        rt = R.make_routing(seed, src, num_tokens, num_experts, topk)
        for t in R.send_order(rt, num_experts, world)[rank]:
            out[(src, t)] = (rt.topk_idx[t], rt.weights[t])
    return out


def check_dispatch(
    recv_x,
    recv_slots,
    recv_scales,
    rank: int,
    world: int,
    num_tokens: int,
    num_experts: int,
    topk: int,
    seed: int,
    hidden: int,
) -> dict:
    """Layout-independent: every valid row is a token this rank must get, exactly, once.

    recv_x [N, hidden], recv_slots [N, k] (global expert ids, -1 = none),
    recv_scales [N, k]; all as nested Python lists (rows with no valid slot are padding).
    """
    want = expected_rows(seed, rank, world, num_tokens, num_experts, topk)
    seen: set[tuple[int, int]] = set()
    problems: list[str] = []
    valid = 0
    for i, (row, slots, scales) in enumerate(zip(recv_x, recv_slots, recv_scales, strict=True)):
        ids = [int(s) for s in slots]
        if all(s < 0 for s in ids):
            continue  # padding of the rank-major buffer
        valid += 1
        tag = R.decode_tag(row)
        if tag is None or tag not in want:
            problems.append(f"row {i}: not a token routed to rank {rank} (tag {tag})")
            continue
        if tag in seen:
            problems.append(f"row {i}: token {tag} received twice")
            continue
        seen.add(tag)
        src, t = tag
        bad_h = [h for h in range(hidden) if row[h] != R.tagged_value(src, t, h)]
        if bad_h:
            problems.append(
                f"row {i} (src {src} token {t}): {len(bad_h)} elements differ, first at {bad_h[0]}"
            )
        experts, weights = want[tag]
        got = {e: w for e, w in zip(ids, scales, strict=True) if e >= 0}
        local = {e for e in experts if R.owner(e, num_experts, world) == rank}
        if not local <= set(got) or not set(got) <= set(experts):
            problems.append(
                f"row {i} (src {src} token {t}): experts {sorted(got)}, routing {sorted(experts)}"
            )
        else:
            wmap = dict(zip(experts, weights, strict=True))
            if any(abs(got[e] - wmap[e]) > 1e-6 for e in got):
                problems.append(f"row {i} (src {src} token {t}): weights differ")
    missing = len(want) - len(seen)
    if missing > 0:
        problems.append(f"{missing} of {len(want)} tokens routed to rank {rank} never arrived")
    return {
        "ok": not problems,
        "mismatches": len(problems),
        "rows": valid,
        "expected_rows": len(want),
        "problems": problems[:8],
    }


def local_factor_rows(recv_slots, recv_scales, rank: int, world: int, num_experts: int) -> list:
    """Per received row: sum of weight * scale over the experts this rank owns."""
    out = []
    for slots, scales in zip(recv_slots, recv_scales, strict=True):
        out.append(
            sum(
                float(w) * R.expert_scale(int(e))
                for e, w in zip(slots, scales, strict=True)
                if int(e) >= 0 and R.owner(int(e), num_experts, world) == rank
            )
        )
    return out


def expected_combined_row(
    seed: int,
    src: int,
    t: int,
    hidden: int,
    num_tokens: int,
    num_experts: int,
    topk: int,
    routing=None,
) -> list[float]:
    rt = routing or R.make_routing(seed, src, num_tokens, num_experts, topk)
    f = sum(w * R.expert_scale(e) for e, w in zip(rt.topk_idx[t], rt.weights[t], strict=True))
    return [f * R.tagged_value(src, t, h) for h in range(hidden)]


def check_combine(
    combined, rank: int, seed: int, hidden: int, num_tokens: int, num_experts: int, topk: int
) -> dict:
    rt = R.make_routing(seed, rank, num_tokens, num_experts, topk)
    bad = 0
    first = None
    max_err = 0.0
    for t in range(num_tokens):
        want = expected_combined_row(seed, rank, t, hidden, num_tokens, num_experts, topk, rt)
        for h in range(hidden):
            got = float(combined[t][h])
            err = abs(got - want[h])
            max_err = max(max_err, err)
            if err > COMBINE_ATOL + COMBINE_RTOL * abs(want[h]):
                bad += 1
                if first is None:
                    first = {"index": [t, h], "got": got, "want": want[h]}
    out = {
        "ok": bad == 0,
        "mismatches": bad,
        "elements": num_tokens * hidden,
        "max_abs_err": max_err,
    }
    if first:
        out["first"] = first
    return out


# ------------------------------------------------------------------- MPI over torch.distributed
class TorchMpiComm:
    """The part of an mpi4py communicator TensorRT-LLM's NcclEP bootstrap calls, over
    torch.distributed (gloo, CPU objects).

    NcclEP builds its EP group with `mpi_comm().Split(pp_rank, moe_ep_rank)` and broadcasts the
    NCCL unique id with `.bcast(uid, root=0)` (tensorrt_llm/_torch/modules/fused_moe/
    communication/nccl_ep.py). Under torchrun there is no MPI world: `mpi_comm()` is each
    process's own one-rank COMM_WORLD, so every rank would build a one-rank EP group and the
    cross-node test would test nothing. The reference recipe's probe has such a shim too
    (awslabs/awsome-distributed-ai#1240, recipe/probe_nccl_ep.py, install_mpi_shim).
    """

    def __init__(self, dist, group, ranks: list[int]) -> None:
        self._dist, self._group, self._ranks = dist, group, ranks  # ranks: global, in order

    def Get_rank(self) -> int:  # mpi4py's method names
        return self._ranks.index(self._dist.get_rank())

    def Get_size(self) -> int:
        return len(self._ranks)

    def Split(self, color: int = 0, key: int = 0) -> TorchMpiComm:
        mine = (int(color), int(key), self._dist.get_rank())
        every = self.allgather(mine)
        out = None
        # new_group is collective over the whole world: every process makes every group, in
        # the same order, and keeps its own
        for c in sorted({e[0] for e in every}):
            ranks = [r for _, _, r in sorted(e for e in every if e[0] == c)]
            group = self._dist.new_group(ranks=ranks, backend="gloo")
            if c == mine[0]:
                out = TorchMpiComm(self._dist, group, ranks)
        assert out is not None
        return out

    # Objects travel as pickled bytes in uint8 tensors: torch's own *_object collectives need
    # numpy, which an image need not have.
    def bcast(self, obj: object = None, root: int = 0) -> object:
        import pickle

        import torch

        src = self._ranks[root]
        data = pickle.dumps(obj) if self._dist.get_rank() == src else b""
        size = torch.tensor([len(data)], dtype=torch.long)
        self._dist.broadcast(size, src=src, group=self._group)
        buf = _bytes_tensor(torch, data, int(size.item()))
        self._dist.broadcast(buf, src=src, group=self._group)
        return pickle.loads(bytes(buf.tolist()))

    def allgather(self, obj: object) -> list:
        import pickle

        import torch

        data = pickle.dumps(obj)
        n = len(self._ranks)
        sizes = [torch.zeros(1, dtype=torch.long) for _ in range(n)]
        self._dist.all_gather(sizes, torch.tensor([len(data)], dtype=torch.long), group=self._group)
        longest = max(int(t.item()) for t in sizes)
        bufs = [torch.zeros(longest, dtype=torch.uint8) for _ in range(n)]
        self._dist.all_gather(bufs, _bytes_tensor(torch, data, longest), group=self._group)
        got = [
            pickle.loads(bytes(b[: int(z.item())].tolist()))
            for b, z in zip(bufs, sizes, strict=True)
        ]
        # torch orders a group by global rank; MPI orders a communicator by its Split key
        by_global = dict(zip(sorted(self._ranks), got, strict=True))
        return [by_global[r] for r in self._ranks]

    def Barrier(self) -> None:
        self._dist.barrier(group=self._group)

    barrier = Barrier

    def Free(self) -> None:
        pass


def _bytes_tensor(torch, data: bytes, length: int):
    """`data` in a uint8 tensor of `length` (zero-padded)."""
    t = torch.zeros(length, dtype=torch.uint8)
    if data:
        t[: len(data)] = torch.tensor(list(data), dtype=torch.uint8)
    return t


def install_mpi_comm(dist) -> TorchMpiComm:
    """Make TensorRT-LLM's mpi_comm() return the torch world, also where a module imported the
    function by name before this ran."""
    world = TorchMpiComm(dist, dist.new_group(backend="gloo"), list(range(dist.get_world_size())))
    import tensorrt_llm._utils as tu

    original = tu.mpi_comm

    def mpi_comm() -> TorchMpiComm:
        return world

    for name, mod in list(sys.modules.items()):
        if (name == "tensorrt_llm" or name.startswith("tensorrt_llm.")) and getattr(
            mod, "mpi_comm", None
        ) is original:
            mod.mpi_comm = mpi_comm
    tu.mpi_comm = mpi_comm
    return world


# ----------------------------------------------------------------------------- TensorRT-LLM
def build_strategy(args, rank: int, world: int, local_world: int, num_experts: int):
    """The real entry point: Mapping + ModelConfig -> CommunicationFactory.create_strategy()."""
    import torch
    from tensorrt_llm._torch.model_config import ModelConfig
    from tensorrt_llm._torch.modules.fused_moe.communication.communication_factory import (
        CommunicationFactory,
    )
    from tensorrt_llm.mapping import Mapping
    from tensorrt_llm.models.modeling_utils import QuantConfig

    mapping = Mapping(
        world_size=world,
        rank=rank,
        gpus_per_node=local_world,
        tp_size=world,
        enable_attention_dp=True,
        moe_tp_size=1,
        moe_ep_size=world,
    )
    pretrained = types.SimpleNamespace(
        hidden_size=args.hidden, torch_dtype=torch.bfloat16, num_experts=num_experts
    )
    model_config = ModelConfig(
        pretrained_config=pretrained,
        mapping=mapping,
        quant_config=QuantConfig(),
        max_num_tokens=args.num_tokens,
        moe_max_num_tokens=args.num_tokens,
    )
    info: dict = {"dp_size": getattr(mapping, "dp_size", None)}
    why = getattr(CommunicationFactory, "_get_nccl_ep_unavailable_reason", None)
    if why is not None:
        info["nccl_ep_unavailable_reason"] = why(
            torch.bfloat16,
            model_config.quant_config,
            num_experts,
            args.hidden,
            args.num_tokens,
            args.num_tokens,
            args.num_topk,
        )
    strategy = CommunicationFactory.create_strategy(
        model_config, num_experts, num_experts, args.num_topk, num_experts // world
    )
    info["selected"] = type(strategy).__name__ if strategy is not None else None
    return strategy, info


def run_round(torch, strategy, args, rank, world, num_experts, dev) -> dict:
    rt = R.make_routing(args.seed, rank, args.num_tokens, num_experts, args.num_topk)
    x = torch.tensor(
        [[R.tagged_value(rank, t, h) for h in range(args.hidden)] for t in range(args.num_tokens)],
        dtype=torch.bfloat16,
        device=dev,
    )
    topk = torch.tensor(rt.topk_idx, dtype=torch.int32, device=dev)
    weights = torch.tensor(rt.weights, dtype=torch.float32, device=dev)
    recv_x, _sf, recv_slots, recv_scales = strategy.dispatch(
        x, None, topk, weights, [args.num_tokens] * world
    )
    rx = recv_x.float().cpu().tolist()
    rs = recv_slots.cpu().tolist()
    rw = recv_scales.float().cpu().tolist()
    disp = check_dispatch(
        rx, rs, rw, rank, world, args.num_tokens, num_experts, args.num_topk, args.seed, args.hidden
    )
    factor = torch.tensor(
        local_factor_rows(rs, rw, rank, world, num_experts), dtype=torch.float32, device=dev
    )
    partial = (recv_x.float() * factor[:, None]).to(torch.bfloat16)
    combined = strategy.combine(partial)
    comb = check_combine(
        combined.float().cpu().tolist(),
        rank,
        args.seed,
        args.hidden,
        args.num_tokens,
        num_experts,
        args.num_topk,
    )
    return {"num_tokens": args.num_tokens, "dispatch_check": disp, "combine_check": comb}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TLLM_DISABLE_MPI", "1")  # torchrun, not mpirun, starts the ranks
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(world)))
    num_experts = args.num_experts or 16 * world
    result: dict = {
        "rank": rank,
        "world_size": world,
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "kind": "trtllm",
        "hidden": args.hidden,
        "num_topk": args.num_topk,
        "num_experts": num_experts,
    }

    def done(code: int, **kw) -> int:
        result.update(kw)
        print(MARKER, json.dumps(result), flush=True)
        return code

    try:
        R.check_shape(world, num_experts, args.num_topk)
        R.check_tag_capacity(world, args.num_tokens)
        if args.hidden < R.TAG_WIDTH:
            raise ValueError(f"--hidden must be at least {R.TAG_WIDTH}")
        import torch
        import torch.distributed as dist
    except (ValueError, ImportError) as exc:
        return done(2, ok=False, error=f"{type(exc).__name__}: {exc}")
    torch.cuda.set_device(local_rank)
    dev = torch.device("cuda", local_rank)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    try:
        try:
            install_mpi_comm(dist)  # before the factory: NcclEP's group is the torch world's
            strategy, info = build_strategy(args, rank, world, local_world, num_experts)
        except Exception as exc:
            return done(
                1, ok=False, numerics="fail", error=f"create_strategy: {type(exc).__name__}: {exc}"
            )
        result.update(info)
        # one verdict for all ranks: a rank that selected another strategy would hang the others
        names: list = [None] * world
        dist.all_gather_object(names, info["selected"])
        result["selected_all"] = names
        if any(n != args.expect for n in names):
            return done(
                1,
                ok=False,
                numerics="fail",
                error=f"create_strategy selected {sorted(set(map(str, names)))}, "
                f"expected {args.expect} on every rank",
            )
        sizes = [
            run_round(torch, strategy, args, rank, world, num_experts, dev)
            for _ in range(max(1, args.iters))
        ]
        ok = all(s["dispatch_check"]["ok"] and s["combine_check"]["ok"] for s in sizes)
        code = done(0 if ok else 1, ok=ok, numerics="pass" if ok else "fail", sizes=sizes)
        dist.barrier()
        return code
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
