#!/usr/bin/env bash
# Capture real outputs on a GPU machine, from a source checkout (nothing installed: the node
# probe and the local diagnose path need only python3 with rich and packaging).
#   OUT=/some/dir bash benchmarks/h200_capture.sh
# Writes: diagnose.txt/.json (this host), diagnose-pid.json (a live NCCL process), probe-bench.txt,
# kernel.txt + nccl-rank0.log (built-in EP kernel test, NCCL INFO), nccl-no-plugin.log.
set -u
OUT=${OUT:-/tmp/epdoctor-capture}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 COLUMNS=110
py=python3
$py -m epdoctor diagnose > "$OUT/diagnose.txt" 2>&1; echo "[diagnose rc=$?]" >> "$OUT/diagnose.txt"
$py -m epdoctor diagnose --markdown >> "$OUT/diagnose.txt" 2>&1
$py -m epdoctor diagnose --json > "$OUT/diagnose.json" 2>/dev/null
$py benchmarks/probe_time.py --runs 7 > "$OUT/probe-bench.txt" 2>&1
# A live process with NCCL initialised: what it really mapped decides the NCCL trap.
$py - > "$OUT/pid.txt" 2>&1 <<'PY' &
import os, time, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29533")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
t = torch.ones(8, device="cuda"); dist.all_reduce(t); torch.cuda.synchronize()
print("ready", os.getpid(), flush=True); time.sleep(40)
PY
for _ in $(seq 60); do grep -q ready "$OUT/pid.txt" 2>/dev/null && break; sleep 1; done
pid=$(awk '/ready/{print $2}' "$OUT/pid.txt")
$py -m epdoctor diagnose --pid "${pid:-0}" --json > "$OUT/diagnose-pid.json" 2>&1
kill %1 2>/dev/null
# Built-in EP kernel test, one GPU, NCCL INFO logging to a file per rank.
mkdir -p /tmp/ncclk
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV,GRAPH torchrun --standalone --nproc-per-node=1 \
  probes/ep_kernel_test.py --num-tokens 512,2048,4096 --baseline --nccl-log-dir /tmp/ncclk \
  > "$OUT/kernel.txt" 2>&1; echo "[kernel rc=$?]" >> "$OUT/kernel.txt"
cp /tmp/ncclk/nccl-rank0.log "$OUT/nccl-rank0.log" 2>/dev/null
# The NCCL lines when NCCL_NET_PLUGIN names a file that does not exist.
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,ENV NCCL_NET_PLUGIN=/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so \
  NCCL_GIN_TYPE=2 $py - > "$OUT/nccl-no-plugin.log" 2>&1 <<'PY'
import os, torch, torch.distributed as dist
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT="29534")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
t = torch.ones(8, device="cuda"); dist.all_reduce(t); torch.cuda.synchronize(); dist.destroy_process_group()
PY
ls -la "$OUT"
