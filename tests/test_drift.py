"""Fleet drift (F600-F610) on probe documents from the real node probe.

Each node is a fake node tree (tests/nodefs.py: real ELF libraries, the real /sys layout of
efa-node-samples.md) probed by the real probes/node_probe.py with --root; one node of the
fleet differs in exactly the fact under test, composed from the facts named in each case.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from nodefs import GIN_V120, have_gcc, p5en_node

from epdoctor.checks.drift import drift_findings
from epdoctor.diagnose import Diagnosis
from epdoctor.facts.node import build_node_facts
from epdoctor.model import Status, TargetInfo, TargetResult

pytestmark = pytest.mark.skipif(not have_gcc(), reason="gcc builds the fake shared libraries")

VARIANTS = {
    "healthy": lambda n: None,
    "nccl_2289": lambda n: n.nccl("/usr/lib/x86_64-linux-gnu/libnccl.so.2.30.4", "2.28.9"),
    "driver_570": lambda n: n.gpus(driver="570.86.15"),
    "efa_31": lambda n: n.module("efa", "3.1.0g"),
    "no_gdrdrv_dev": lambda n: (n.root / "dev/gdrdrv").unlink(),
    "installer_149": lambda n: n.installer(version="1.49.0"),
    "plugin_v120": lambda n: n.plugin(symbols=GIN_V120),
    "libfabric_25": lambda n: n.installer(libfabric="2.5.1amzn1.0"),
    "efa_15": lambda n: _drop_efa(n),
    "p5": lambda n: n.instance("p5.48xlarge"),
    "no_hw_counters": lambda n: _drop_counters(n),
}


def _drop_efa(n) -> None:
    import shutil

    shutil.rmtree(n.root / "sys/class/infiniband/rdmap100s0")


def _drop_counters(n) -> None:
    import shutil

    for d in (n.root / "sys/class/infiniband").glob("*/ports/1/hw_counters"):
        shutil.rmtree(d)


@pytest.fixture(scope="module")
def docs(tmp_path_factory) -> dict[str, dict]:
    out = {}
    for name, change in VARIANTS.items():
        root: Path = tmp_path_factory.mktemp(name) / "root"
        node = p5en_node(root)
        change(node)
        out[name] = json.loads(node.probe())
    return out


def diag(name: str, doc: dict | None, error: str | None = None) -> Diagnosis:
    info = TargetInfo(name, "ssh")
    if doc is None:
        return Diagnosis(TargetResult(info, error=error or "unreachable"))
    node = build_node_facts(doc)
    return Diagnosis(TargetResult(info, facts=node.summary()), node=node, probe_doc=doc)


def fleet(docs: dict, odd: str | None = None, size: int = 4) -> list[Diagnosis]:
    out = [diag(f"node-{i}", docs["healthy"]) for i in range(1, size + 1)]
    if odd:
        out[2] = diag("node-3", docs[odd])
    return out


def by_code(findings) -> dict:
    return {f.code: f for f in findings}


def test_identical_nodes_pass_every_aspect(docs):
    found = by_code(drift_findings(fleet(docs)))
    for code in [f"F6{i:02d}" for i in range(1, 11)]:
        assert found[code].status is Status.PASS, (code, found[code].title)
    assert "F600" not in found
    assert "all 4 nodes" in found["F601"].title and "2.30.4" in found["F601"].title
    assert found["F601"].target == "fleet"


@pytest.mark.parametrize(
    ("odd", "code", "status", "odd_value"),
    [
        ("nccl_2289", "F601", Status.FAIL, "2.28.9"),
        ("driver_570", "F602", Status.WARN, "570.86.15"),
        ("efa_31", "F603", Status.WARN, "3.1.0g"),
        ("no_gdrdrv_dev", "F604", Status.WARN, "/dev/gdrdrv absent"),
        ("installer_149", "F605", Status.WARN, "1.49.0"),
        ("plugin_v120", "F606", Status.FAIL, "GIN v11,v13, NET"),
        ("libfabric_25", "F607", Status.WARN, "2.5.1amzn1.0"),
        ("efa_15", "F608", Status.WARN, "15"),
        ("p5", "F609", Status.WARN, "p5.48xlarge"),
        ("no_hw_counters", "F610", Status.WARN, "no"),
    ],
)
def test_one_odd_node_is_named(docs, odd, code, status, odd_value):
    found = by_code(drift_findings(fleet(docs, odd)))
    f = found[code]
    assert f.status is status, f.title
    assert "on node-3" in f.title and "the other 3 node(s) have" in f.title
    odd_line = next(e for e in f.evidence if "node-3" in e)
    assert odd_value in odd_line
    assert "node-1" not in odd_line
    assert f.fix, "the catalogue's fix comes with it"


def test_only_the_differing_aspect_fires(docs):
    found = by_code(drift_findings(fleet(docs, "nccl_2289")))
    not_pass = {c for c, f in found.items() if f.status is not Status.PASS}
    assert not_pass == {"F601"}


def test_efa_count_is_compared_within_an_instance_type(docs):
    # a p5 (32 EFA on the real type, 16 in this tree) among p5en nodes: F609 names the type;
    # F608 compares p5en nodes among themselves and has nothing to compare for the lone p5
    nodes = fleet(docs, "p5")
    found = drift_findings(nodes)
    f608 = [f for f in found if f.code == "F608"]
    assert [f.status for f in f608] == [Status.PASS]
    assert "p5en.48xlarge" in f608[0].title
    assert by_code(found)["F609"].status is Status.WARN


def test_two_against_two_names_both_groups(docs):
    nodes = [
        diag("a", docs["healthy"]),
        diag("b", docs["healthy"]),
        diag("c", docs["nccl_2289"]),
        diag("d", docs["nccl_2289"]),
    ]
    f = by_code(drift_findings(nodes))["F601"]
    assert f.status is Status.FAIL
    assert "c, d 2.28.9" in f.title and "a, b 2.30.4" in f.title


def test_unreachable_node_is_unknown_not_pass(docs):
    nodes = [*fleet(docs, size=3), diag("node-9", None, "TCP connect to 10.0.0.9:22 timed out")]
    found = by_code(drift_findings(nodes))
    assert found["F600"].status is Status.UNKNOWN
    assert "node-9" in found["F600"].title
    assert any("timed out" in e for e in found["F600"].evidence)
    assert found["F601"].status is Status.PASS and "all 3 nodes" in found["F601"].title


def test_unreadable_fact_is_unknown_for_that_node(docs):
    broken = json.loads(json.dumps(docs["healthy"]))
    del broken["sections"]["rdma"]  # the probe could not list /sys/class/infiniband
    nodes = [*fleet(docs, size=2), diag("node-x", broken)]
    found = by_code(drift_findings(nodes))
    assert found["F608"].status is Status.UNKNOWN
    assert "node-x" in found["F608"].title and "the others agree on 16" in found["F608"].title
    assert found["F610"].status is Status.UNKNOWN


def test_a_single_diagnosed_node_gives_no_comparison(docs):
    found = drift_findings([diag("n1", docs["healthy"]), diag("n2", None, "refused")])
    assert [f.code for f in found] == ["F600"]
