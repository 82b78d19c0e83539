"""Snapshot of EFA hw_counters on this node (standard library only; fed as `python3 -`).

Prints one JSON document: {"devices": {dev: {"driver": ..., "ports": {port:
{"hw_counters": [names] | null, "counters": {name: int}}}}}}. A port whose
hw_counters directory is absent has "hw_counters": null (efa.ko without
them), so the reader can say "unverifiable" instead of "zero bytes".
"""

import json
import os
import sys
import time

COUNTERS = (
    "tx_bytes",
    "rx_bytes",
    "rdma_write_bytes",
    "rdma_read_bytes",
    "rdma_write_recv_bytes",
    "rdma_read_resp_bytes",
    "send_bytes",
    "recv_bytes",
)


def _read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _ls(path):
    try:
        return sorted(os.listdir(path))
    except OSError:
        return None


def snapshot(root="/sys/class/infiniband"):
    devices = {}
    for dev in _ls(root) or []:
        base = os.path.join(root, dev)
        try:
            driver = os.path.basename(os.path.realpath(os.path.join(base, "device", "driver")))
        except OSError:
            driver = None
        ports = {}
        for port in _ls(os.path.join(base, "ports")) or []:
            hc = os.path.join(base, "ports", port, "hw_counters")
            names = _ls(hc) if os.path.isdir(hc) else None
            values = {}
            for name in names or []:
                if name in COUNTERS:
                    raw = _read(os.path.join(hc, name))
                    if raw is not None and raw.isdigit():
                        values[name] = int(raw)
            ports[port] = {"hw_counters": names, "counters": values}
        devices[dev] = {"driver": driver, "ports": ports}
    return {
        "root": root,
        "time": time.time(),
        "devices": devices,
        "listable": _ls(root) is not None,
    }


if __name__ == "__main__":
    print(json.dumps(snapshot(sys.argv[1] if len(sys.argv) > 1 else "/sys/class/infiniband")))
