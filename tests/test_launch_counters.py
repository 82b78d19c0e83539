"""EFA hw_counters snapshots and deltas.

The sysfs trees here are composed (no real `ls hw_counters` listing exists in
shared/reference): names and layout from the EFA driver's port hw_counters
(/sys/class/infiniband/<dev>/ports/1/hw_counters/, upstream-facts.md section 3)
and the p5en device names rdmap85s0... (efa-node-samples.md section 3).
"""

from __future__ import annotations

from pathlib import Path

from epdoctor.probes import hw_counters

from epdoctor.launch import counters as hwc
from epdoctor.launch.launcher import LocalNode
from epdoctor.model import Status

NAMES = (
    "tx_bytes",
    "tx_pkts",
    "rx_bytes",
    "rx_pkts",
    "rx_drops",
    "send_bytes",
    "send_wrs",
    "recv_bytes",
    "recv_wrs",
    "rdma_read_wrs",
    "rdma_read_bytes",
    "rdma_read_wr_err",
    "rdma_read_resp_bytes",
    "rdma_write_wrs",
    "rdma_write_bytes",
    "rdma_write_wr_err",
    "rdma_write_recv_bytes",
)


def make_tree(root: Path, devs=("rdmap85s0", "rdmap86s0"), counters=True, driver="efa") -> Path:
    drv = root / "bus" / "pci" / "drivers" / driver
    drv.mkdir(parents=True, exist_ok=True)
    ib = root / "class" / "infiniband"
    for d in devs:
        dev = ib / d
        (dev / "device").mkdir(parents=True)
        (dev / "device" / "driver").symlink_to(drv)
        port = dev / "ports" / "1"
        port.mkdir(parents=True)
        if counters:
            (port / "hw_counters").mkdir()
            for n in NAMES:
                (port / "hw_counters" / n).write_text("0\n")
    return ib


def bump(ib: Path, dev: str, name: str, value: int) -> None:
    (ib / dev / "ports" / "1" / "hw_counters" / name).write_text(f"{value}\n")


def test_bytes_per_node_and_per_nic(tmp_path):
    ib = make_tree(tmp_path)
    node = LocalNode("node0")
    before = hwc.take_snapshot(node, root=str(ib))
    bump(ib, "rdmap85s0", "rdma_write_bytes", 400_000_000)
    bump(ib, "rdmap86s0", "rdma_read_bytes", 1_000)
    bump(ib, "rdmap86s0", "tx_bytes", 5_000)
    d = hwc.delta("node0", before, hwc.take_snapshot(node, root=str(ib)))
    assert d.efa_devices == 2 and len(d.counted) == 2
    assert d.total["rdma_write_bytes"] == 400_000_000 and d.total["tx_bytes"] == 5_000
    nic = {n.device: n for n in d.nics}
    assert nic["rdmap85s0"].payload_bytes == 400_000_000
    g = hwc.counters_gate([d, d], multi_node=True)
    assert g.status is Status.PASS
    assert "rdma_write 400.0 MB" in g.evidence[0] and "rdmap85s0 400.0 MB" in g.evidence[0]


def test_absent_counters_are_unverifiable_with_the_banner(tmp_path):
    ib = make_tree(tmp_path, counters=False)
    snap = hw_counters.snapshot(str(ib))
    assert snap["devices"]["rdmap85s0"]["ports"]["1"]["hw_counters"] is None
    d = hwc.delta("node0", snap, snap)
    banner = (
        "x:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct "
        "(found 16 nics)",
    )
    g = hwc.counters_gate([d], multi_node=True, banner_evidence=banner)
    assert g.status is Status.UNKNOWN and g.code == "T703"
    assert "unverifiable" in g.summary and banner[0] in g.evidence


def test_counters_that_did_not_move_fail(tmp_path):
    ib = make_tree(tmp_path)
    s = hw_counters.snapshot(str(ib))
    g = hwc.counters_gate([hwc.delta("a", s, s)], multi_node=True)
    assert g.status is Status.FAIL and g.code == "T704"


def test_one_node_and_no_efa_are_skips(tmp_path):
    ib = make_tree(tmp_path)
    s = hw_counters.snapshot(str(ib))
    assert hwc.counters_gate([hwc.delta("a", s, s)], multi_node=False).status is Status.SKIP
    empty = hw_counters.snapshot(str(tmp_path / "nothing"))
    g = hwc.counters_gate([hwc.delta("a", empty, empty)], multi_node=True)
    assert g.status is Status.SKIP and "no EFA device" in g.summary


def test_non_efa_rdma_devices_are_not_counted(tmp_path):
    # p6-b200 also lists non-EFA ibp* devices (mlx5): their bytes are not EFA's
    ib = make_tree(tmp_path, devs=("ibp115s0f0",), driver="mlx5_core")
    s = hw_counters.snapshot(str(ib))
    assert hwc.delta("a", s, s).efa_devices == 0


def test_snapshot_error_is_not_a_pass():
    d = hwc.delta("a", {"error": "ssh: timeout"}, {})
    g = hwc.counters_gate([d], multi_node=True)
    assert g.status is Status.UNKNOWN and "ssh: timeout" in g.evidence[0]


def test_snapshot_script_runs_as_stdin_program(tmp_path):
    # the way remote nodes run it: `python3 - ROOT` with the script on stdin
    ib = make_tree(tmp_path)
    import json
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-", str(ib)], input=hwc.snapshot_script(), capture_output=True, check=True
    ).stdout
    assert set(json.loads(out)["devices"]) == {"rdmap85s0", "rdmap86s0"}


def test_gate_since_a_snapshot_of_every_node(tmp_path):
    # the smoke request and the kernel test: snapshot all nodes, act, gate what moved
    ib = make_tree(tmp_path)
    nodes = [LocalNode("a"), LocalNode("b")]
    before = hwc.snapshots(nodes, root=str(ib))
    assert sorted(before) == ["a", "b"]
    idle, deltas = hwc.gate_since(before, nodes, root=str(ib))
    assert idle.status is Status.FAIL and [d.node for d in deltas] == ["a", "b"]
    bump(ib, "rdmap85s0", "rdma_write_bytes", 4096)
    moved, _ = hwc.gate_since(before, nodes, root=str(ib))
    assert moved.status is Status.PASS
    # a node with no snapshot before has no baseline: not a pass
    lost, _ = hwc.gate_since({"a": before["a"]}, nodes, root=str(ib))
    assert lost.status is Status.UNKNOWN and lost.code == "T703"
    one, _ = hwc.gate_since(before, nodes[:1], root=str(ib))
    assert one.status is Status.SKIP
