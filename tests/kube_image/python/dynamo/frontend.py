"""Stands in for `python3 -m dynamo.frontend` (see tests/kube_image/README.md): the fake engine
in Dynamo's shape on the pod's port 8000, whose /health is 200 at once and lists no endpoint
until the engine registers (FAKE_DYNAMO_REGISTER_S seconds later)."""

import os
import sys

args = sys.argv[1:]
port = os.environ.get("KUBE_EMULATOR_PORT_8000") or args[args.index("--http-port") + 1]
delay = os.environ.get("FAKE_DYNAMO_REGISTER_S", "0")
os.execv(
    sys.executable,
    [
        sys.executable,
        os.environ["FAKE_ENGINE"],
        "--port",
        port,
        "--shape",
        "dynamo",
        "--endpoints-delay",
        delay,
    ],
)
