"""The terminal tables at 80 columns (an SSH session) and 120, as a user meets them.

Inputs are real: the fleet is test_drift.py's fake node trees probed by the real probe, named
like EC2 hosts; the H200 facts come from the bundle collected on a real H200 node
(tests/fixtures/h200-run); the logs are tests/fixtures/logs/composed-16rank-mixed.log with its
two hosts renamed to EC2 private DNS names. Each is drawn through the real CLI (COLUMNS=N)
where the CLI draws it, and checked for: no line wider than the terminal, headers that are
whole words, host names never cut across lines, wrapped lines that hang under their text.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from test_drift import diag, docs  # noqa: F401  (docs is the module fixture)

from epdoctor.checks.drift import drift_findings
from epdoctor.reports import fleet as fleet_report
from epdoctor.reports.layout import FitTable, KeyValues, mid, split_domain

HERE = Path(__file__).resolve().parent
H200 = HERE / "fixtures" / "h200-run" / "h200-bundle.tar.gz"
THREE = HERE / "fixtures" / "tui" / "three-nodes.tar.gz"
RANKS = HERE / "fixtures" / "logs" / "composed-16rank-mixed.log"
WIDTHS = [80, 120]
FLEET_HEADERS = ("node", "verdict", "type", "driver", "NCCL", "efa.ko", "EFA", "gdrdrv", "GIN")


def cli(*args: str, width: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, COLUMNS=str(width), LINES="50", NO_COLOR="1", TERM="xterm")
    return subprocess.run(
        [sys.executable, "-m", "epdoctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=HERE.parent,
    )


def assert_fits(out: str, width: int) -> list[str]:
    lines = out.splitlines()
    wide = [line for line in lines if len(line) > width]
    assert not wide, f"{len(wide)} line(s) wider than {width}: {wide[:3]}"
    return lines


def header_words(lines: list[str], first: str) -> list[str]:
    """The words of a table's header line (the line that starts with its first header)."""
    head = next(line for line in lines if line.strip().startswith(first + " "))
    return head.split()


def hanging(lines: list[str], marker: str) -> int:
    """Lines that continue a wrapped `marker` line start under its text; how many there were."""
    seen = 0
    for i, line in enumerate(lines[:-1]):
        if marker not in line:
            continue
        col = line.index(marker) + len(marker) + 1
        nxt = lines[i + 1].replace("│", " ").rstrip()
        text = nxt.lstrip()
        if not text or text[0] in "╰─" or re.match(r"(FAIL|WARN|UNKNOWN|PASS|same on) ", text):
            continue  # not wrapped: the next finding, the panel's foot or edge
        assert len(nxt) - len(text) >= col, (line, lines[i + 1])
        seen += 1
    return seen


# --------------------------------------------------------------- fleet --

NAMES = [f"p5en-48xl-use2-az1-node-{i:02d}.cluster.internal" for i in range(1, 8)]


@pytest.fixture
def fleet_run(docs):  # noqa: F811
    kinds = ["healthy", "healthy", "nccl_2289", "healthy", "driver_570", "healthy"]
    nodes = [diag(name, docs[kind]) for name, kind in zip(NAMES, kinds, strict=False)]
    nodes.append(diag(NAMES[6], None, "TCP connect to 10.1.123.47:22 timed out after 10 s"))
    return [d.result for d in nodes], drift_findings(nodes)


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_table_of_seven_long_names(fleet_run, width):
    results, found = fleet_run
    buf = io.StringIO()
    fleet_report.render_text(Console(file=buf, width=width, no_color=True), results, found)
    lines = assert_fits(buf.getvalue(), width)
    assert lines[0].startswith("fleet: 7 nodes (*.cluster.internal)")
    words = header_words(lines, "node")
    assert set(words) <= set(FLEET_HEADERS) | {"libfabric", "installer", "s"}
    assert {"node", "verdict", "NCCL", "driver"} <= set(words)  # the columns that differ
    table = "\n".join(lines[: lines.index(next(x for x in lines if x.startswith("every node")))])
    for name in NAMES:  # each node on one line, whole (its shared domain is in the title)
        assert re.search(rf"^{name.split('.')[0]}\s", table, re.M), name
    every = " ".join(line.strip() for line in lines if "every node" in line or "·" in line)
    assert "type p5en.48xlarge" in every and "GIN v11,v13,v14" in every
    assert "p5en-48xl-use2-az1-node-07: TCP connect to 10.1.123.47:22 timed out" in buf.getvalue()
    assert hanging(lines, "fix:") >= (1 if width == 80 else 0)


def test_fleet_table_that_fits_keeps_every_column(fleet_run):
    results, found = fleet_run
    buf = io.StringIO()
    fleet_report.render_text(Console(file=buf, width=200, no_color=True), results, found)
    lines = assert_fits(buf.getvalue(), 200)
    assert header_words(lines, "node")[:9] == list(FLEET_HEADERS)
    assert not any(line.startswith("every node") for line in lines)


@pytest.mark.parametrize("width", WIDTHS)
def test_fleet_through_the_cli(width):
    r = cli("diagnose", "--bundle", str(THREE), width=width)
    assert r.returncode == 1, r.stderr
    lines = assert_fits(r.stdout, width)
    assert header_words(lines, "node")[:2] == ["node", "verdict"]
    assert "gdrdrv" in header_words(lines, "node")  # p5en-b's gdrdrv 2.4 stays in the table
    hanging(lines, "fix:")


# --------------------------------------------------------------- H200 facts panel --


@pytest.mark.parametrize("width", WIDTHS)
def test_h200_facts_panel(width):
    r = cli("diagnose", "--bundle", str(H200), width=width)
    assert r.returncode == 1, r.stderr
    lines = assert_fits(r.stdout, width)
    inner = [line.strip("│").rstrip() for line in lines]
    # the key column is as wide as its short keys, not as the site-packages path
    nccl = next(line for line in inner if line.lstrip().startswith("NCCL "))
    assert nccl.index("2.28.3") - 1 <= 24
    # the long key is folded: alone on its line, the packages indented below it
    i = next(n for n, line in enumerate(inner) if "python /opt/torch/.venv" in line)
    assert "torch" not in inner[i].replace("/opt/torch", "") and inner[i + 1].startswith("   ")
    # a path longer than the value column loses its middle, never is cut into slices
    assert "libnccl.so.2" in r.stdout
    for line in inner:
        assert not re.search(r"^\s*(ccl\.so|gnu/|s/nvidia)", line), line
    assert hanging(lines, "fix:") >= (3 if width == 80 else 0)


def test_fix_lines_hang_under_their_text():
    r = cli("diagnose", "--bundle", str(H200), width=80)
    lines = r.stdout.splitlines()
    fix = next(n for n, line in enumerate(lines) if "fix: Use an EFA-enabled instance" in line)
    col = lines[fix].index("Use an EFA")
    assert lines[fix + 1].index("attached") == col  # the wrapped words start under "Use"


# --------------------------------------------------------------- per-rank logs --


@pytest.fixture
def ec2_log(tmp_path) -> Path:
    text = RANKS.read_text()
    hosts = sorted(set(re.findall(r"^([\w.-]+):\d+:\d+ \[", text, re.M)))
    assert len(hosts) == 2
    for n, host in enumerate(hosts):
        new = f"ip-10-1-123-{45 + n}.us-west-2.compute.internal"
        text = re.sub(rf"^{re.escape(host)}:", new + ":", text, flags=re.M)
    out = tmp_path / "ranks.log"
    out.write_text(text)
    return out


@pytest.mark.parametrize("width", WIDTHS)
def test_rank_table_with_ec2_host_names(ec2_log, width):
    r = cli("logs", str(ec2_log), width=width)
    assert r.returncode == 1, r.stderr
    lines = assert_fits(r.stdout, width)
    assert lines[0].startswith("ranks (hosts *.us-west-2.compute.internal)")
    words = header_words(lines, "rank")
    assert set(words) <= {"rank", "labels", "NCCL", "net", "provider", "NICs", "GIN", "EFA", "WARN"}
    assert {"net", "EFA"} <= set(words)  # two ranks use Socket: those columns differ
    for host, pids in (
        ("ip-10-1-123-45", range(70100, 70108)),
        ("ip-10-1-123-46", range(70200, 70208)),
    ):
        for pid in pids:  # every rank key whole, at the start of its row
            assert any(line.startswith(f"{host}:{pid} ") for line in lines), (host, pid)
    if width == 80:  # the NCCL column every rank agrees on is said once, under the table
        assert any(line.startswith("every rank: NCCL 2.30.4") for line in lines)
    else:
        assert "NCCL" in words


# --------------------------------------------------------------- the layout parts --


def test_mid_keeps_both_ends():
    path = "/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
    short = mid(path, 40)
    assert len(short) == 40 and short.startswith("/opt/") and short.endswith("libnccl.so.2")
    assert mid("short", 10) == "short"


def test_split_domain():
    names = [
        "ip-10-1-123-45.us-west-2.compute.internal:70100",
        "ip-10-1-9-9.us-west-2.compute.internal:1",
    ]
    assert split_domain(names) == (
        ["ip-10-1-123-45:70100", "ip-10-1-9-9:1"],
        "us-west-2.compute.internal",
    )
    assert split_domain(["10.0.0.9", "11.0.0.9"])[1] == ""  # addresses keep every part
    assert split_domain(["a.x.net", "b.y.net"])[1] == ""
    assert split_domain(["node-1", "node-2"])[1] == ""


def test_narrow_rows_fold_into_blocks():
    rows = [[f"node-{i}", "pass", f"v{i}" * 6, f"w{i}" * 6, f"x{i}" * 6] for i in range(3)]
    buf = io.StringIO()
    Console(file=buf, width=40, no_color=True).print(
        FitTable("t", ["node", "verdict", "alpha", "beta", "gamma"], rows, keep=(0, 1))
    )
    lines = assert_fits(buf.getvalue(), 40)
    assert "node-1  pass" in buf.getvalue()
    assert any(line.startswith("  alpha v1v1v1") for line in lines)


def test_key_values_fold_when_narrow():
    rows = [("host", "vm (Ubuntu 24.04.3 LTS)"), ("NVIDIA driver", "580.159.04")]
    buf = io.StringIO()
    Console(file=buf, width=36, no_color=True).print(KeyValues(rows))
    lines = assert_fits(buf.getvalue(), 36)
    assert [line.rstrip() for line in lines[:2]] == ["host", "  vm (Ubuntu 24.04.3 LTS)"]
