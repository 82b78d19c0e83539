"""The node probe's package reading and its overlapping tool runs, on real probe runs."""

from __future__ import annotations

import json
import time

from nodefs import FakeNode

from epdoctor.facts.node import build_node_facts

# The shape dpkg writes: Package first, Status "want ok state", a Description that may hold
# anything (including lines that look like fields, indented as continuation lines).
STATUS = """\
Package: libfabric1-aws
Status: install ok installed
Priority: optional
Architecture: amd64
Version: 2.3.1amzn1.0
Description: libfabric for EFA
 Package: not-a-field

Package: efa-config
Status: deinstall ok config-files
Architecture: amd64
Version: 1.17
Description: removed, config kept

Package: libnccl2
Status: install ok installed
Architecture: amd64
Version: 2.30.4-1+cuda13.0

Package: libnccl-dev
Status: install ok half-configured
Architecture: amd64
Version: 2.30.4-1+cuda13.0

Package: openssh-server
Status: install ok installed
Architecture: amd64
Version: 1:9.2p1-2+deb12u3
"""


def _doc(n: FakeNode) -> dict:
    return json.loads(n.probe("--deadline", "30"))


def _packages(doc: dict) -> dict[str, str]:
    return build_node_facts(doc).distro_packages


def test_dpkg_status_read_without_dpkg_query(tmp_path):
    n = FakeNode(tmp_path / "node")
    n.write("/var/lib/dpkg/status", STATUS)
    doc = _doc(n)
    dpkg = doc["sections"]["efa"]["packages"]["dpkg"]
    assert dpkg["source"] == "/var/lib/dpkg/status" and dpkg["rc"] == 0
    # installed and half-configured packages that match, not the removed one nor ssh
    assert _packages(doc) == {
        "libfabric1-aws": "2.3.1amzn1.0",
        "libnccl2": "2.30.4-1+cuda13.0",
        "libnccl-dev": "2.30.4-1+cuda13.0",
    }


def test_dpkg_query_when_the_status_file_cannot_be_read(tmp_path):
    n = FakeNode(tmp_path / "node")
    n.tool("dpkg-query", "libfabric1-aws 2.3.1amzn1.0")
    doc = _doc(n)
    dpkg = doc["sections"]["efa"]["packages"]["dpkg"]
    assert dpkg["argv"][0] == "dpkg-query" and "--admindir=" in dpkg["argv"][1]
    assert _packages(doc) == {"libfabric1-aws": "2.3.1amzn1.0"}


def _slow_tool(n: FakeNode, name: str, stdout: str) -> None:
    """A stand-in that records when it ran (the real tools cannot run here)."""
    log = n.bin / f"{name}.ran"
    script = n.bin / name
    script.write_text(
        "#!/bin/sh\n"
        f"python3 -c 'import time; print(time.time())' > {log}\n"
        "sleep 0.4\n"
        f"python3 -c 'import time; print(time.time())' >> {log}\n"
        f"echo '{stdout}'\n"
    )
    script.chmod(0o755)


def _ran(n: FakeNode, name: str) -> tuple[float, float]:
    start, end = (n.bin / f"{name}.ran").read_text().split()
    return float(start), float(end)


def test_slow_tools_run_at_the_same_time_and_are_all_collected(tmp_path):
    n = FakeNode(tmp_path / "node")
    smi_row = "0, NVIDIA H200, 580.95.05, 9.0, 00000000:53:00.0, 143771 MiB"
    _slow_tool(n, "nvidia-smi", smi_row)
    _slow_tool(n, "rpm", "libfabric-aws 2.3.1amzn1.0-1.amzn2023")
    t0 = time.time()
    doc = _doc(n)
    smi, rpm = _ran(n, "nvidia-smi"), _ran(n, "rpm")
    # both started before either finished: their waits overlapped
    assert max(smi[0], rpm[0]) < min(smi[1], rpm[1])
    assert t0 < min(smi[0], rpm[0])
    assert smi_row in doc["sections"]["gpus"]["query"]["stdout"]
    assert doc["sections"]["efa"]["packages"]["rpm"]["rc"] == 0
    assert _packages(doc) == {"libfabric-aws": "2.3.1amzn1.0-1.amzn2023"}


def test_a_prestarted_tool_that_hangs_still_times_out(tmp_path):
    n = FakeNode(tmp_path / "node")
    script = n.bin / "rpm"
    script.write_text("#!/bin/sh\nsleep 30\n")
    script.chmod(0o755)
    doc = json.loads(n.probe("--deadline", "2"))
    rpm = doc["sections"]["efa"]["packages"]["rpm"]
    assert rpm["timeout"] is True and rpm["rc"] is None
