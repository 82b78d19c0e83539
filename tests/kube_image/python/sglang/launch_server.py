"""Stands in for `python3 -m sglang.launch_server` in the emulator (see tests/kube_image/README.md).

Node rank 0 serves (tests/fake_engine.py in SGLang's shape); the other nodes idle, as SGLang's
non-leader nodes do behind their own stand-in /health."""

import os
import sys
import time

args = sys.argv[1:]


def flag(name: str, default: str = "") -> str:
    return (
        args[args.index(name) + 1] if name in args and args.index(name) + 1 < len(args) else default
    )


rank = flag("--node-rank", "0")
print(
    f"[sglang] launch_server node rank {rank} of {flag('--nnodes', '1')}, "
    f"moe-a2a-backend {flag('--moe-a2a-backend', 'none')}, dist-init-addr {flag('--dist-init-addr')}",
    flush=True,
)
if rank != "0":
    while True:
        time.sleep(3600)
port = os.environ.get("KUBE_EMULATOR_PORT_8000") or flag("--port", "8000")
extra = os.environ.get("FAKE_ENGINE_ARGS", "").split()
os.execv(
    sys.executable,
    [sys.executable, os.environ["FAKE_ENGINE"], "--port", port, "--shape", "sglang", *extra],
)
