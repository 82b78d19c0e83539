"""The targets screen on pods, through the real client and the Kubernetes API emulator, driven
by Textual's pilot: kubectl's columns, pods counted as pods, a trap's targets under it, and
Enter on a target opening its detail (k9s)."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("textual")
pytest.importorskip("kmock")

from epdoctor.screens.app import EpdoctorApp
from kube_emulator import running, running_pod

NS = "ml"
NODE = "ip-10-0-1-10.ec2.internal"


def _on_node(pod: dict) -> dict:
    pod["spec"]["nodeName"] = NODE
    pod["metadata"]["creationTimestamp"] = "2026-12-01T00:00:00Z"
    return pod


def _node() -> dict:
    labels = {
        "node.kubernetes.io/instance-type": "p5en.48xlarge",
        "topology.kubernetes.io/zone": "us-east-2b",
    }
    res = {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "16"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": NODE, "labels": labels},
        "status": {"capacity": res, "allocatable": res},
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running(tmp_path_factory.mktemp("kube")) as emu:
        emu.put(_node())
        emu.put(
            _on_node(running_pod("engine-0", NS)), _on_node(running_pod("engine-1", NS, restarts=3))
        )
        yield emu


async def _until(pilot, ok, what: str, seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while not ok():
        assert time.monotonic() < deadline, what
        await pilot.pause(0.2)


async def test_pods_get_kubectl_columns_grouped_traps_and_a_detail_on_enter(cluster):
    from epdoctor.screens.target_detail import TargetDetailScreen
    from textual.widgets import DataTable, Static, Tree

    app = EpdoctorApp(
        target_argv=["-n", NS, "-l", "app=engine", "--kubeconfig", str(cluster.kubeconfig)]
    )
    async with app.run_test(size=(200, 50)) as pilot:
        screen = app.screen
        summary = screen.query_one("#target-summary", Static)
        await _until(pilot, lambda: "failing" in str(summary.render()), "never diagnosed")
        assert "2 pods on 1 node" in str(summary.render())
        table = screen.query_one("#target-table", DataTable)
        labels = [str(c.label) for c in table.ordered_columns]
        assert labels[:6] == ["target", "state", "STATUS", "RESTARTS", "NODE", "AGE"], labels
        row1 = [str(c) for c in table.get_row_at(1)]
        assert row1[2] == "Running" and row1[3] == "3" and row1[4] == NODE and row1[5].endswith("d")
        # a trap both pods hit is one entry with the two pods under it
        tree = screen.query_one("#findings", Tree)
        fails = next(n for n in tree.root.children if str(n.label).startswith("FAIL"))
        grouped = [n for n in fails.children if "2 targets" in str(n.label)]
        assert grouped, [str(n.label) for n in fails.children]
        assert sorted(str(c.label) for c in grouped[0].children) == [
            f"{NS}/engine-0",
            f"{NS}/engine-1",
        ]
        # Enter on a target: its detail, as k9s describes a resource; Escape comes back
        table.focus()
        table.move_cursor(row=1)
        await pilot.press("enter")
        await _until(pilot, lambda: isinstance(app.screen, TargetDetailScreen), "no detail")
        text = str(app.screen.query_one("#target-detail Static", Static).render())
        assert f"{NS}/engine-1 (pod)" in text and "restarts" in text and "Findings" in text
        assert "us-east-2b" in text and "vpc.amazonaws.com/efa 16" in text  # the node's labels
        await pilot.press("escape")
        await _until(pilot, lambda: app.screen is screen, "escape did not come back")
