"""EFA hw_counters before and after a run: bytes per node and per NIC, or "unverifiable".

The proof that EFA carried a kernel test or a smoke request is the counters
moving (rdma_write_bytes, rdma_read_bytes, tx/rx bytes on each EFA device).
Where the counters are absent (an efa.ko that does not expose them), the
verdict is UNKNOWN ("unverifiable") with the NCCL banner shown instead; a node
with no EFA device at all is SKIP for this gate. Never a pass by omission.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from epdoctor.checks.registry import detector
from epdoctor.launch.gates import Gate
from epdoctor.launch.launcher import LocalNode, Node
from epdoctor.model import Status

# The counters that carry payload bytes (others, like send_bytes, overlap them).
PAYLOAD = ("rdma_write_bytes", "rdma_read_bytes", "tx_bytes", "rx_bytes")


def snapshot_script() -> bytes:
    return resources.files("epdoctor.probes").joinpath("hw_counters.py").read_bytes()


def take_snapshot(node: Node, python: str = "python3", root: str | None = None) -> dict[str, Any]:
    """Run the snapshot script on the node (one round trip); {"error": ...} when it cannot."""
    if isinstance(node, LocalNode):
        # the same script, run in this process: probes/ is data the targets run, never an
        # import of the package (it must stay standalone, stdlib only)
        script: dict[str, Any] = {"__name__": "epdoctor_hw_counters"}
        exec(compile(snapshot_script(), "hw_counters.py", "exec"), script)
        return script["snapshot"](root or "/sys/class/infiniband")
    argv = [python, "-"] + ([root] if root else [])
    rc, out, err = node.run(argv, stdin=snapshot_script(), timeout_s=20)
    if rc != 0:
        return {
            "error": f"hw_counters snapshot failed on {node.name}: "
            f"{(err or b'').decode('utf-8', 'replace').strip()[:200]}"
        }
    try:
        return json.loads(out)
    except ValueError:
        return {"error": f"hw_counters snapshot on {node.name} printed no JSON"}


def snapshots(
    nodes: Sequence[Node], python: str = "python3", root: str | None = None
) -> dict[str, dict[str, Any]]:
    """One snapshot per node, by node name: the "before" of gate_since()."""
    return {n.name: take_snapshot(n, python, root) for n in nodes}


@dataclass
class NicDelta:
    device: str
    port: str
    deltas: dict[str, int] = field(default_factory=dict)
    has_counters: bool = True

    @property
    def payload_bytes(self) -> int:
        return sum(self.deltas.get(k, 0) for k in ("rdma_write_bytes", "rdma_read_bytes")) or max(
            self.deltas.get("tx_bytes", 0), self.deltas.get("rx_bytes", 0)
        )


@dataclass
class NodeDelta:
    node: str
    efa_devices: int
    nics: list[NicDelta]
    error: str | None = None

    @property
    def counted(self) -> list[NicDelta]:
        return [n for n in self.nics if n.has_counters]

    @property
    def total(self) -> dict[str, int]:
        out = {k: 0 for k in PAYLOAD}
        for n in self.counted:
            for k in PAYLOAD:
                out[k] += n.deltas.get(k, 0)
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "efa_devices": self.efa_devices,
            "error": self.error,
            "total": self.total if self.counted else None,
            "nics": [
                {"device": n.device, "port": n.port, "counters": n.has_counters, "deltas": n.deltas}
                for n in self.nics
            ],
        }


def _efa(devs: Mapping[str, Any]) -> dict[str, Any]:
    return {
        name: d
        for name, d in devs.items()
        if isinstance(d, dict)
        and (
            d.get("driver") == "efa" or (d.get("driver") in (None, "") and name.startswith("rdmap"))
        )
    }


def delta(node: str, before: Mapping[str, Any], after: Mapping[str, Any]) -> NodeDelta:
    if before.get("error") or after.get("error"):
        return NodeDelta(node, 0, [], error=str(before.get("error") or after.get("error")))
    b, a = _efa(before.get("devices") or {}), _efa(after.get("devices") or {})
    nics: list[NicDelta] = []
    for dev in sorted(set(a) & set(b)):
        for port, pa in sorted((a[dev].get("ports") or {}).items()):
            pb = (b[dev].get("ports") or {}).get(port) or {}
            if pa.get("hw_counters") is None or pb.get("hw_counters") is None:
                nics.append(NicDelta(dev, port, has_counters=False))
                continue
            ca, cb = pa.get("counters") or {}, pb.get("counters") or {}
            keys = [k for k in PAYLOAD if k in ca and k in cb]
            if not keys:
                nics.append(NicDelta(dev, port, has_counters=False))
                continue
            nics.append(NicDelta(dev, port, {k: max(0, int(ca[k]) - int(cb[k])) for k in keys}))
    return NodeDelta(node, len(a), nics)


@detector("T703", "T704", domain="launch")
def counters_gate(
    deltas: list[NodeDelta], multi_node: bool, banner_evidence: tuple[str, ...] = ()
) -> Gate:
    """PASS when EFA bytes moved on every node of a multi-node run; UNKNOWN when unreadable."""
    ev: list[str] = []
    for d in deltas:
        if d.error:
            ev.append(f"{d.node}: {d.error}")
            continue
        if not d.efa_devices:
            ev.append(f"{d.node}: no EFA device")
            continue
        if not d.counted:
            ev.append(f"{d.node}: {d.efa_devices} EFA devices, no hw_counters readable")
            continue
        t = d.total
        per_nic = ", ".join(f"{n.device} {_gb(n.payload_bytes)}" for n in d.counted[:16])
        ev.append(
            f"{d.node}: rdma_write {_gb(t['rdma_write_bytes'])}, rdma_read "
            f"{_gb(t['rdma_read_bytes'])}, tx {_gb(t['tx_bytes'])}, rx {_gb(t['rx_bytes'])}"
            f" [{per_nic}]"
        )
    if not deltas:
        return Gate("efa counters", Status.UNKNOWN, "no counter snapshot was taken", code="T703")
    if all(not d.error and not d.efa_devices for d in deltas):
        return Gate("efa counters", Status.SKIP, "no EFA device on any node", tuple(ev))
    unreadable = [d for d in deltas if d.error or (d.efa_devices and not d.counted)]
    if not multi_node:
        return Gate(
            "efa counters",
            Status.SKIP,
            "one node: ranks talk over NVLink/PCIe, EFA counters are not expected to move",
            tuple(ev),
        )
    if unreadable:
        return Gate(
            "efa counters",
            Status.UNKNOWN,
            f"unverifiable on {len(unreadable)} of {len(deltas)} nodes: hw_counters absent; "
            "the NCCL banner is the only evidence",
            tuple(ev) + tuple(banner_evidence[:4]),
            "T703",
        )
    idle = [d for d in deltas if d.efa_devices and not sum(n.payload_bytes for n in d.counted)]
    if idle:
        return Gate(
            "efa counters",
            Status.FAIL,
            f"EFA counters did not move on {', '.join(d.node for d in idle)}: the bytes "
            "went another way",
            tuple(ev),
            "T704",
        )
    return Gate("efa counters", Status.PASS, "EFA bytes moved on every node", tuple(ev))


def gate_since(
    before: Mapping[str, Mapping[str, Any]],
    nodes: Sequence[Node],
    python: str = "python3",
    banner_evidence: tuple[str, ...] = (),
    root: str | None = None,
) -> tuple[Gate, list[NodeDelta]]:
    """Snapshot every node again and gate what moved since ``before`` (from snapshots()).

    A node without a "before" has no baseline: its counters cannot be read as moved.
    """
    after = snapshots(nodes, python, root)
    deltas = [delta(name, before.get(name, {}), now) for name, now in after.items()]
    return counters_gate(deltas, len(nodes) > 1, banner_evidence), deltas


def _gb(n: int) -> str:
    if n >= 1e9:
        return f"{n / 1e9:.2f} GB"
    if n >= 1e6:
        return f"{n / 1e6:.1f} MB"
    return f"{n} B"
