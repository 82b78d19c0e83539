"""One log line that fits several causes: the candidates, ranked by the log and the node.

Lines are upstream wordings (the rules' sources); the node is the real H200 bundle
(tests/fixtures/h200-run: no EFA, no mlx5, no gdrdrv) and a composed EFA node.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from epdoctor.checks import log_differential as diff
from epdoctor.checks.base import Context
from epdoctor.logwatch import analyze_stream

FIX = Path(__file__).parent / "fixtures"
IBGDA = (
    b"/nvshmem/src/host/transport/transport.cpp:nvshmemi_transport_init:275: init failed for "
    b"transport: IBGDA\n"
)
EFA_LINE = (
    b"h:1:1 [0] NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct (found 16 nics)\n"
)


def _fails(data: bytes, **opts) -> list:
    a = analyze_stream([data], Context(options=opts))
    return [f for f in a.findings if f.status.value == "fail"]


def test_a_line_of_several_causes_gives_each_with_the_command_that_tells_them_apart():
    got = _fails(IBGDA)
    assert [f.code for f in got] == ["D801", "D811", "D812"]
    for i, f in enumerate(got, 1):
        assert f"cause {i} of 3 this line fits" in f.title and "tell them apart: `" in f.title
        assert any("init failed for transport: IBGDA" in e for e in f.evidence)


def test_the_logs_own_lines_rank_the_candidates():
    # the same failure in a log that shows EFA devices: the NIC that is not mlx5 comes first
    got = _fails(EFA_LINE + IBGDA)
    assert [f.code for f in got][:3] == ["D811", "D801", "D812"]
    assert any("provider is efa" in e for e in got[0].evidence)


def test_node_facts_keep_only_the_causes_the_node_can_have():
    node = {"efa": True, "mlx5": False}
    got = _fails(IBGDA, node=node)
    codes = [f.code for f in got]
    assert codes[0] == "D811" and "D812" not in codes  # no mlx5 NIC: no DEVX UAR to run out of
    assert "the node's facts confirm it" in got[0].title
    assert "node fact: mlx5 is false" in got[0].evidence


def test_duplicate_gpu_is_pinning_or_two_hosts_of_one_name():
    line = (
        b"h:2:2 [1] init.cc:974 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on "
        b"CUDA device 1d000\n"
    )
    assert [f.code for f in _fails(line)][:2] == ["E801", "H814"]


def test_rank_never_drops_every_candidate():
    ranked = diff.rank("D812", ("D811",), {}, {"mlx5": False, "efa": False})
    assert [c for c, _, _ in ranked] == ["D811"]  # D812 ruled out, D811 kept
    ranked = diff.rank("E801", (), {}, {})
    assert [c for c, _, _ in ranked] == ["E801"]


def test_diagnose_log_on_a_bundle_uses_that_nodes_facts(tmp_path):
    log = tmp_path / "ibgda.log"
    log.write_bytes(IBGDA)
    out = subprocess.run(
        [sys.executable, "-m", "epdoctor", "diagnose", "--json",
         "--bundle", str(FIX / "h200-run" / "h200-bundle.tar.gz"), "--log", str(log)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    d = {f["code"]: f for f in doc["findings"] if f["code"].startswith("D8")}
    # the H200 has no mlx5 NIC (nor EFA): the DEVX UAR cause is dropped, the not-mlx5 one confirmed
    assert "D812" not in d and "the node's facts confirm it" in d["D811"]["title"]
    assert "D801" in d
