"""Stands in for DeepEP's kernel tests in the emulator's test image (see tests/kube_image/README.md).

One process per node starts --num-processes ranks (8 when not given). Each rank writes the
NCCL INFO lines a real rank writes at init, in NCCL's and aws-ofi-nccl's own words, to
NCCL_DEBUG_FILE (%h and %p expanded as NCCL does) or to stdout, then the process exits 0.
It refuses to start without the rendezvous a real test needs (MASTER_ADDR, WORLD_SIZE, RANK)."""

import argparse
import os
import socket
import sys
import time

p = argparse.ArgumentParser()
p.add_argument("--num-processes", type=int, default=8)
p.add_argument("--num-experts", type=int, default=256)
a, _ = p.parse_known_args()
for var in ("MASTER_ADDR", "WORLD_SIZE", "RANK"):
    if not os.environ.get(var):
        sys.exit(f"{var} is not set: no rendezvous (did the leader's name resolve?)")
provider = os.environ.get("FAKE_KERNEL_PROVIDER", "efa")
fabric = os.environ.get("FAKE_KERNEL_FABRIC", "efa-direct")
nics = os.environ.get("FAKE_EFA_NICS", "16")
node = int(os.environ["RANK"])
host = socket.gethostname().split(".")[0]
print(
    f"test_ep: node {node} of {os.environ['WORLD_SIZE']}, {a.num_processes} processes, "
    f"{a.num_experts} experts, master {os.environ['MASTER_ADDR']}",
    flush=True,
)


def rank(local: int) -> None:
    pid = os.getpid()
    dev = local
    pre = f"{host}:{pid}:{pid} [{dev}] NCCL INFO "
    lines = [
        "NCCL version 2.30.4+cuda13.0",
        "NET/Plugin: Loaded net plugin Libfabric (v12)",
        "NET/OFI Initializing aws-ofi-nccl 1.21.1",
        "NET/OFI Using transport protocol RDMA (platform set)",
        f"NET/OFI Selected provider is {provider}, fabric is {fabric} (found {nics} nics)",
        "Initialized NET plugin Libfabric",
        "Assigned NET plugin Libfabric to comm",
        "Using network Libfabric",
    ]
    text = "".join(pre + line + "\n" for line in lines)
    path = os.environ.get("NCCL_DEBUG_FILE")
    if path:
        path = path.replace("%h", host).replace("%p", str(pid))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    os._exit(0)


children = []
for i in range(a.num_processes):
    child = os.fork()
    if child == 0:
        rank(i)
    children.append(child)
for child in children:
    os.waitpid(child, 0)
time.sleep(0.2)
for i in range(a.num_processes):
    print(f"[rank {node * a.num_processes + i}] dispatch/combine passed", flush=True)
sys.exit(int(os.environ.get("FAKE_KERNEL_EXIT", "0")))
