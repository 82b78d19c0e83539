"""Stands in for `python3 -m dynamo.vllm` (see tests/kube_image/README.md): the engine worker
beside the frontend, which only prints what it was asked to serve."""

import sys
import time

print(f"[dynamo.vllm] worker for {' '.join(sys.argv[1:])[:200]}", flush=True)
while True:
    time.sleep(3600)
