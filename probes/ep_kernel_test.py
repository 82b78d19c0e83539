"""epdoctor's built-in EP kernel test: MoE dispatch/combine all-to-all in torch.distributed.

Run one process per GPU with torchrun (or plain `python3 ep_kernel_test.py` for
one rank):

    NCCL_DEBUG=INFO torchrun --nproc-per-node=8 ep_kernel_test.py --num-tokens 4096

What one iteration does, per rank (the exchange DeepEP's dispatch/combine do):
  1. random top-k routing of T tokens over E experts (seeded: see ep_routing.py);
  2. exchange per-destination token counts (all_to_all_single of W integers);
  3. dispatch: each token once to every rank owning one of its experts, with its
     expert ids and weights (two all_to_all_single calls);
  4. experts: each rank scales the received tokens by its local experts' weights;
  5. combine: partial results back to the source (all_to_all_single), summed there.

The received tokens and the combined outputs are compared element-wise with a
CPU oracle (exact: see ep_routing.py). `--baseline` also times plain
all_to_all_single calls moving the same bytes with the same splits, so the
overhead ratio of the EP exchange over the bare collective is measured in the
same run. overhead_ratio times the exchange: dispatch (counts, tokens, their
expert ids and weights) and combine (partials back); the local work around it
(layout_us: routing mask and packing by destination; reduce_us: the sum of
partials) is timed apart and included only in step_ratio. Each rank prints one line, `EPDOCTOR_KERNEL_TEST {json}`, and the
process exits non-zero when any rank's numerics fail. NCCL's own INFO log is
what tells which network carried the bytes: with `--nccl-log-dir DIR` (or
EPDOCTOR_NCCL_LOG_DIR) each rank writes it to DIR/nccl-rank<R>.log.

`--backend gloo --device cpu` runs the same exchange on CPU (for CI and for a
host without GPUs). PyTorch is the only dependency.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ep_routing as R

MARKER = "EPDOCTOR_KERNEL_TEST"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument(
        "--num-tokens",
        default="4096",
        help="tokens per rank; a comma list sweeps several sizes (default 4096)",
    )
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--num-topk", type=int, default=8)
    p.add_argument(
        "--num-experts",
        type=int,
        default=0,
        help="experts in all (default: 32 per rank, at least --num-topk)",
    )
    p.add_argument("--dtype", choices=R.DTYPES, default="bfloat16")
    p.add_argument("--iters", type=int, default=20, help="timed iterations per size")
    p.add_argument("--warmup", type=int, default=3, help="untimed iterations per size")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--backend", choices=("nccl", "gloo"), default="nccl")
    p.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    p.add_argument(
        "--baseline",
        action="store_true",
        help="also time plain all_to_all_single of the same bytes (overhead ratio)",
    )
    p.add_argument("--skip-check", action="store_true", help="do not compare with the oracle")
    p.add_argument(
        "--nccl-log-dir",
        default=os.environ.get("EPDOCTOR_NCCL_LOG_DIR", ""),
        help="write each rank's NCCL log to DIR/nccl-rank<R>.log",
    )
    p.add_argument("--timeout-s", type=int, default=300, help="process-group timeout")
    # Self-test of the gate: corrupt one element on one rank and expect a failure.
    p.add_argument(
        "--fault", choices=("none", "dispatch", "combine"), default="none", help=argparse.SUPPRESS
    )
    p.add_argument("--fault-rank", type=int, default=0, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def token_counts(spec: str) -> list[int]:
    out = [int(x) for x in str(spec).split(",") if x.strip()]
    if not out or any(n < 1 for n in out):
        raise SystemExit(f"--num-tokens: positive integers expected, got {spec!r}")
    return out


def _standalone_env() -> None:
    # One rank without torchrun: give init_process_group what torchrun would.
    if "RANK" in os.environ:
        return
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", LOCAL_WORLD_SIZE="1")
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if "MASTER_PORT" not in os.environ:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            os.environ["MASTER_PORT"] = str(s.getsockname()[1])


class Exchange:
    """Tensors and collectives of one token count on one rank."""

    def __init__(self, torch, dist, args, rank, world, num_tokens, num_experts, dev, dtype):
        self.torch, self.dist = torch, dist
        self.rank, self.world, self.dev, self.dtype = rank, world, dev, dtype
        self.T, self.H, self.K, self.E = num_tokens, args.hidden, args.num_topk, num_experts
        self.seed = args.seed
        routing = R.make_routing(args.seed, rank, num_tokens, num_experts, args.num_topk)
        self.topk_idx = torch.tensor(routing.topk_idx, dtype=torch.int64, device=dev)
        self.weights = torch.tensor(routing.weights, dtype=torch.float32, device=dev)
        self.x = values(torch, rank, torch.arange(num_tokens, device=dev), self.H, dev).to(dtype)
        per_rank = num_experts // world
        self.owner = self.topk_idx // per_rank  # (T, K)
        self.scale = torch.tensor(
            [R.expert_scale(e) for e in range(num_experts)], dtype=torch.float32, device=dev
        )

    def layout(self):
        """Local preparation: who goes where, tokens packed by destination (no traffic).

        Each packed row carries the token and, in extra columns, its expert ids and
        weights (2K int32 viewed as the transfer dtype), so one collective moves both.
        """
        torch, W = self.torch, self.world
        mask = torch.zeros(self.T, W, dtype=torch.bool, device=self.dev)
        mask.scatter_(1, self.owner, True)  # token t goes to rank r once
        send_counts = mask.sum(0)
        pairs = mask.t().nonzero()  # (r, t) ordered by destination, then token
        tok = pairs[:, 1]
        meta = torch.cat([self.topk_idx.to(torch.int32), self.weights.view(torch.int32)], dim=1)
        rows = torch.cat([self.x, meta.view(self.dtype)], dim=1)
        send = rows.index_select(0, tok)
        return send_counts, tok, send, send_counts.tolist()

    def exchange(self, send_counts, send, in_splits):
        """The dispatch traffic: counts, then the rows (tokens with their ids and weights)."""
        torch, dist = self.torch, self.dist
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        out_splits = recv_counts.tolist()
        recv = torch.empty(sum(out_splits), send.shape[1], dtype=self.dtype, device=self.dev)
        dist.all_to_all_single(recv, send, out_splits, in_splits)
        recv_x = recv[:, : self.H]
        recv_meta = recv[:, self.H :].contiguous().view(torch.int32)
        return recv_x, recv_meta, out_splits

    def dispatch(self):
        send_counts, tok, send, in_splits = self.layout()
        recv_x, recv_meta, out_splits = self.exchange(send_counts, send, in_splits)
        return recv_x, recv_meta, tok, in_splits, out_splits

    def experts(self, recv_x, recv_meta):
        torch = self.torch
        idx = recv_meta[:, : self.K].to(torch.int64)
        w = recv_meta[:, self.K :].contiguous().view(torch.float32)
        local = (idx // (self.E // self.world)) == self.rank
        factor = (w * self.scale[idx] * local).sum(1)
        return (recv_x.float() * factor[:, None]).to(self.dtype)

    def combine(self, partial, tok, in_splits, out_splits):
        """Partials back to their source ranks (the exchange; reduce() sums them)."""
        back = self.torch.empty(len(tok), self.H, dtype=self.dtype, device=self.dev)
        self.dist.all_to_all_single(back, partial, in_splits, out_splits)
        return back

    def reduce(self, back, tok):
        out = self.torch.zeros(self.T, self.H, dtype=self.torch.float32, device=self.dev)
        out.index_add_(0, tok, back.float())
        return out


def values(torch, src, tokens, hidden, dev):
    """ep_routing.token_value for a block of tokens, vectorised (float32)."""
    h = torch.arange(hidden, device=dev, dtype=torch.int32)  # values stay far below 2**31
    v = (src * 37 + tokens.to(torch.int32)[:, None] * 11 + h[None, :] * 3) % R._VALUE_SPAN
    return (v - R._VALUE_OFFSET).to(torch.float32) / R._VALUE_SCALE


def oracle_recv(torch, args, rank, world, num_tokens, num_experts, dtype):
    """On the CPU, per source rank: the rows this rank must receive from it in dispatch."""
    cpu = torch.device("cpu")
    for src in range(world):
        routing = R.make_routing(args.seed, src, num_tokens, num_experts, args.num_topk)
        order = R.send_order(routing, num_experts, world)[rank]
        toks = torch.tensor(order, dtype=torch.int64)
        yield src, values(torch, src, toks, args.hidden, cpu).to(dtype).float()


def oracle_combined(torch, args, rank, world, num_tokens, num_experts, dtype):
    """On the CPU: this rank's tokens after combine, the sum of the rounded partials."""
    mine = R.make_routing(args.seed, rank, num_tokens, num_experts, args.num_topk)
    x = values(torch, rank, torch.arange(num_tokens), args.hidden, torch.device("cpu"))
    x = x.to(dtype).float()
    combined = torch.zeros(num_tokens, args.hidden, dtype=torch.float32)
    for r in range(world):
        f = torch.tensor(
            [
                R.local_factor(mine.topk_idx[t], mine.weights[t], r, num_experts, world)
                for t in range(num_tokens)
            ],
            dtype=torch.float32,
        )
        sent = torch.tensor([r in R.dest_ranks(row, num_experts, world) for row in mine.topk_idx])
        combined += (x * f[:, None]).to(dtype).float() * sent[:, None]
    return combined


def compare_dispatch(torch, got, chunks) -> dict:
    """The received rows against the oracle one source rank at a time (bounded memory)."""
    total = {"ok": True, "mismatches": 0, "elements": 0}
    offset = 0
    for src, want in chunks:
        part = compare(torch, got[offset : offset + want.shape[0]], want)
        if part["mismatches"] < 0:
            return {"ok": False, "mismatches": -1, "detail": f"from rank {src}: {part['detail']}"}
        if not part["ok"] and total["ok"]:
            first = dict(part["first"])
            first["index"] = [first["index"][0] + offset, first["index"][1]]
            total["first"] = {**first, "source_rank": src}
        total["ok"] = total["ok"] and part["ok"]
        total["mismatches"] += part["mismatches"]
        total["elements"] += part["elements"]
        offset += want.shape[0]
    if offset != got.shape[0]:
        return {
            "ok": False,
            "mismatches": -1,
            "detail": f"received {got.shape[0]} rows, the routing sends {offset}",
        }
    return total


def compare(torch, got, want) -> dict:
    got = got.detach().float().cpu()
    if got.shape != want.shape:
        return {
            "ok": False,
            "mismatches": -1,
            "detail": f"shape {list(got.shape)} != {list(want.shape)}",
        }
    diff = got != want
    n = int(diff.sum())
    out = {"ok": n == 0, "mismatches": n, "elements": int(want.numel())}
    if n:
        first = diff.nonzero()[0].tolist()
        out["first"] = {
            "index": first,
            "got": float(got[tuple(first)]),
            "want": float(want[tuple(first)]),
        }
        out["max_abs_err"] = float((got - want).abs().max())
    return out


def _sync(torch, dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def run_size(torch, dist, args, rank, world, num_tokens, num_experts, dev, dtype) -> dict:
    ex = Exchange(torch, dist, args, rank, world, num_tokens, num_experts, dev, dtype)
    elem = torch.empty(0, dtype=dtype).element_size()
    res: dict = {"num_tokens": num_tokens}
    # correctness first, on the first exchange (a warm-up counts as well)
    recv_x, recv_meta, tok, ins, outs = ex.dispatch()
    if args.fault == "dispatch" and rank == args.fault_rank and recv_x.numel():
        recv_x[0, 0] += 1
    combined = ex.reduce(ex.combine(ex.experts(recv_x, recv_meta), tok, ins, outs), tok)
    if args.fault == "combine" and rank == args.fault_rank:
        combined[-1, -1] -= 1
    if not args.skip_check:
        chunks = oracle_recv(torch, args, rank, world, num_tokens, num_experts, dtype)
        res["dispatch_check"] = compare_dispatch(torch, recv_x, chunks)
        want = oracle_combined(torch, args, rank, world, num_tokens, num_experts, dtype)
        res["combine_check"] = compare(torch, combined, want)
    for _ in range(max(0, args.warmup - 1)):
        recv_x, recv_meta, tok, ins, outs = ex.dispatch()
        ex.reduce(ex.combine(ex.experts(recv_x, recv_meta), tok, ins, outs), tok)
    t_lay = t_disp = t_comb = t_red = 0.0
    for _ in range(args.iters):
        dist.barrier()
        _sync(torch, dev)
        t0 = time.perf_counter()
        send_counts, tok, send, ins = ex.layout()
        _sync(torch, dev)
        t1 = time.perf_counter()
        recv_x, recv_meta, outs = ex.exchange(send_counts, send, ins)
        _sync(torch, dev)
        t2 = time.perf_counter()
        partial = ex.experts(recv_x, recv_meta)
        _sync(torch, dev)
        t3 = time.perf_counter()
        back = ex.combine(partial, tok, ins, outs)
        _sync(torch, dev)
        t4 = time.perf_counter()
        ex.reduce(back, tok)
        _sync(torch, dev)
        t_red += time.perf_counter() - t4
        t_lay += t1 - t0
        t_disp += t2 - t1
        t_comb += t4 - t3
    iters = max(1, args.iters)
    sent_rows = sum(ins)
    remote_rows = sent_rows - ins[rank]
    disp_bytes = sent_rows * args.hidden * elem
    res.update(
        send_rows=sent_rows,
        remote_rows=remote_rows,
        recv_rows=sum(outs),
        dispatch_bytes=disp_bytes,
        layout_us=t_lay / iters * 1e6,  # routing mask, packing by destination: local work
        dispatch_us=t_disp / iters * 1e6,
        combine_us=t_comb / iters * 1e6,
        reduce_us=t_red / iters * 1e6,  # summing partials on the source: local work
        dispatch_gbps=disp_bytes / (t_disp / iters) / 1e9 if t_disp else None,
        combine_gbps=disp_bytes / (t_comb / iters) / 1e9 if t_comb else None,
    )
    if args.baseline:
        res.update(
            baseline(
                torch,
                dist,
                args,
                ex,
                ins,
                outs,
                dev,
                disp_bytes,
                t_disp + t_comb,
                t_lay + t_disp + t_comb + t_red,
            )
        )
    return res


def baseline(torch, dist, args, ex, ins, outs, dev, nbytes, ep_exchange_s, ep_step_s) -> dict:
    """Plain all_to_all_single moving the same rows both ways, nothing else."""
    send = torch.empty(sum(ins), args.hidden, dtype=ex.dtype, device=dev)
    recv = torch.empty(sum(outs), args.hidden, dtype=ex.dtype, device=dev)
    for _ in range(max(1, args.warmup)):
        dist.all_to_all_single(recv, send, outs, ins)
        dist.all_to_all_single(send, recv, ins, outs)
    total = 0.0
    for _ in range(args.iters):
        dist.barrier()
        _sync(torch, dev)
        t0 = time.perf_counter()
        dist.all_to_all_single(recv, send, outs, ins)
        dist.all_to_all_single(send, recv, ins, outs)
        _sync(torch, dev)
        total += time.perf_counter() - t0
    iters = max(1, args.iters)
    return {
        "baseline_us": total / iters * 1e6,
        "baseline_gbps": 2 * nbytes / (total / iters) / 1e9 if total else None,
        # the EP exchange (counts + tokens + ids/weights + partials back) over the bare collective
        "overhead_ratio": ep_exchange_s / total if total else None,
        # the whole step with local layout and reduction, for comparison
        "step_ratio": ep_step_s / total if total else None,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = token_counts(args.num_tokens)
    _standalone_env()
    rank = int(os.environ["RANK"])
    world = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if args.nccl_log_dir:
        # before the first NCCL call, which is when NCCL reads it
        os.makedirs(args.nccl_log_dir, exist_ok=True)
        os.environ["NCCL_DEBUG_FILE"] = os.path.join(args.nccl_log_dir, f"nccl-rank{rank}.log")
        os.environ.setdefault("NCCL_DEBUG", "INFO")
    num_experts = args.num_experts or max(32 * world, args.num_topk)
    result: dict = {
        "rank": rank,
        "world_size": world,
        "local_rank": local_rank,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "backend": args.backend,
        "device": args.device,
        "dtype": args.dtype,
        "hidden": args.hidden,
        "num_topk": args.num_topk,
        "num_experts": num_experts,
        "iters": args.iters,
        "nccl_log": os.environ.get("NCCL_DEBUG_FILE", ""),
    }
    try:
        R.check_shape(world, num_experts, args.num_topk)
        import torch
        import torch.distributed as dist
    except (ValueError, ImportError) as exc:
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        print(MARKER, json.dumps(result), flush=True)
        return 2
    result["torch"] = torch.__version__
    if args.device == "cuda":
        if not torch.cuda.is_available():
            result.update(ok=False, error="CUDA is not available to PyTorch on this node")
            print(MARKER, json.dumps(result), flush=True)
            return 2
        torch.cuda.set_device(local_rank)
        dev = torch.device("cuda", local_rank)
        result["gpu"] = torch.cuda.get_device_name(dev)
        try:
            result["nccl_version"] = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:
            pass
    else:
        dev = torch.device("cpu")
    dtype = getattr(torch, args.dtype)
    kwargs = {"timeout": datetime.timedelta(seconds=args.timeout_s)}
    if args.backend == "nccl" and dev.type == "cuda":
        kwargs["device_id"] = dev
    dist.init_process_group(args.backend, rank=rank, world_size=world, **kwargs)
    try:
        runs = [run_size(torch, dist, args, rank, world, n, num_experts, dev, dtype) for n in sizes]
    except Exception as exc:
        result.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        print(MARKER, json.dumps(result), flush=True)
        raise
    checked = [r for r in runs if "dispatch_check" in r]
    ok = all(r["dispatch_check"]["ok"] and r["combine_check"]["ok"] for r in checked)
    result.update(
        ok=ok,
        numerics="skipped" if not checked else ("pass" if ok else "fail"),
        sizes=runs,
    )
    print(MARKER, json.dumps(result), flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
