"""Hostile input against the launch path: `run kernel-test|serve --plan` on a Kubernetes plan,
`run down`, plan.json, config.json and flag values, and the terminal (CLI and TUI).

Each case runs the real CLI in a subprocess with a deadline (tests/hostile/test_inputs.py's
``epd``) against the Kubernetes API emulator (tests/kube_emulator.py) made hostile per request
(an API Status of 401, 403 or 500, an HTML proxy page, half a JSON object, the wrong type, a
server that stalls), and checks: the documented exit code, one line naming the API status and
what is left applied, no traceback, no hang, nothing of epdoctor's left behind (a leak).
``EPD_HOSTILE_TALLY=FILE`` counts them as test_inputs.py does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from epdoctor import exitcodes
from tests.hostile.test_inputs import Expect, Run, epd, judge

pytest.importorskip("kmock")
from kube_emulator import Image
from launch_helpers import ROOT
from test_run_kube_rollout import IMAGE, left, node, pod_processes

ENGINE = str(ROOT / "tests" / "fake_engine.py")
NAME = "vllm-deepep"


@pytest.fixture(scope="module")
def cluster(kube_api) -> Iterator:
    kube_api.emulator.images[IMAGE] = Image(ROOT / "tests" / "kube_image", {"FAKE_ENGINE": ENGINE})
    kube_api.put(node("h1"), node("h2"))
    yield kube_api


def plan_for(tmp: Path, ns: str) -> Path:
    from epdoctor.plan import PlanInput, make_plan
    from epdoctor.plan.render import render

    p = make_plan(PlanInput(namespace=ns, num_experts=128, gpus_per_node=2, image=IMAGE))
    render(p, tmp / ns)
    return tmp / ns / "plan.json"


def kube(cluster, *argv: str, timeout: float = 60) -> Run:
    return epd(*argv, "--kubeconfig", str(cluster.kubeconfig), "--request-timeout", "2",
               timeout=timeout)  # fmt: skip


def wait_gone(cluster, ns: str, timeout: float = 20) -> str:
    deadline = time.monotonic() + timeout
    while (left(cluster, ns) or pod_processes(ns)) and time.monotonic() < deadline:
        time.sleep(0.3)
    what = left(cluster, ns)
    return f"leak: {what} {pod_processes(ns)}" if what or pod_processes(ns) else ""


def cleanup(cluster, ns: str, plan: Path) -> None:
    cluster.emulator.hostile.clear()
    kube(cluster, "run", "down", "--plan", str(plan), "--yes", timeout=60)


# ---- API failures during `run kernel-test --plan` ----------------------------------------------

# (case, rule, mode, the step it breaks, what the one line must say)
ROLLOUT_CASES = [
    ("read-401", r"GET /statefulsets/", "401", r"API .*401|Unauthorized"),
    ("read-403", r"GET /statefulsets/", "403", r"API .*403|Forbidden"),
    ("read-500", r"GET /statefulsets/", "500", r"API .*500"),
    ("read-html", r"GET /statefulsets/", "html", r"HTML"),
    ("read-truncated", r"GET /statefulsets/", "truncated", r"JSON|truncated"),
    ("read-shape", r"GET /statefulsets/", "shape", r"list|object"),
    ("read-stall", r"GET /statefulsets/", "stall", r"timed out|slowly|did not"),
    ("dry-run-403", r"PATCH /services/", "403", r"API .*403|Forbidden"),
    ("apply-sts-500", r"PATCH /statefulsets/", "500", r"API .*500"),
    ("list-pods-500", r"GET /pods$", "500", r"API .*500"),
    # after the apply: the watch of the pods, the exec of the kernel test
    ("watch-500", r"GET /pods$", "after:1:500", r"API .*500.*(applied is deleted)"),
    ("watch-401", r"GET /pods$", "after:2:401", r"API .*401.*(applied is deleted)"),
    ("watch-html", r"GET /pods$", "after:1:html", r"HTML.*applied is deleted"),
    ("watch-shape", r"GET /pods$", "after:1:shape", r"list|object"),
    ("watch-stall", r"GET /pods$", "after:2:stall", r"timed out|slowly|did not"),
    ("sts-read-garbage", r"GET /statefulsets/", "after:1:shape", r"list|object"),
    ("exec-403", r"GET /pods/[^/]+/exec$", "403", r"API .*403|Forbidden"),
    ("exec-drop", r"GET /pods/[^/]+/exec$", "exec-drop", r"exec|closed|status"),
]


@pytest.mark.parametrize(("cid", "rule", "mode", "says"), ROLLOUT_CASES,
                         ids=[c[0] for c in ROLLOUT_CASES])  # fmt: skip
def test_an_api_failure_during_a_rollout_is_an_error(cluster, tmp_path, cid, rule, mode, says):
    ns = f"h-{cid}"
    plan = plan_for(tmp_path, ns)
    verb, path = rule.split(" ", 1)
    cluster.emulator.hostile[f"{verb} /namespaces/{ns}{path}"] = mode
    try:
        r = kube(cluster, "run", "kernel-test", "--plan", str(plan), "--yes", "--no-preflight",
                 "--timeout", "60", timeout=90)  # fmt: skip
    finally:
        cluster.emulator.hostile.clear()
    try:
        judge(f"launch/{cid}", r, Expect(code=exitcodes.ERROR, says=says, one_line=False,
                                          check=lambda _r: wait_gone(cluster, ns)))  # fmt: skip
    finally:
        cleanup(cluster, ns, plan)


def test_a_take_down_that_fails_has_its_own_exit_code(cluster, tmp_path):
    ns = "h-del-500"
    plan = plan_for(tmp_path, ns)
    cluster.emulator.hostile[f"DELETE /namespaces/{ns}/statefulsets/"] = "500"
    try:
        r = kube(cluster, "run", "kernel-test", "--plan", str(plan), "--yes", "--no-preflight",
                 "--timeout", "60", timeout=90)  # fmt: skip
    finally:
        cluster.emulator.hostile.clear()
    try:
        judge("launch/delete-500", r, Expect(
            code=exitcodes.TAKEDOWN_INCOMPLETE, one_line=False,
            says=r"take-down incomplete: still there: statefulset/vllm-deepep .*run down"))  # fmt: skip
        assert exitcodes.TAKEDOWN_INCOMPLETE not in (exitcodes.FINDINGS, exitcodes.ERROR)
    finally:
        cleanup(cluster, ns, plan)
    assert not wait_gone(cluster, ns)
