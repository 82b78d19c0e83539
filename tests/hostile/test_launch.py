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

import json
import os
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


# ---- `run down` against a hostile API ----------------------------------------------------------


def applied(cluster, tmp_path, ns: str) -> Path:
    """A plan whose objects epdoctor applied (--keep leaves them up)."""
    plan = plan_for(tmp_path, ns)
    r = kube(cluster, "run", "kernel-test", "--plan", str(plan), "--yes", "--no-preflight",
             "--keep", "--timeout", "60", timeout=90)  # fmt: skip
    assert r.rc in (0, 1), r.err[-400:]
    return plan


DOWN_CASES = [
    ("read-401", "GET /statefulsets/", "401", exitcodes.ERROR, r"API \(HTTP 401\).*nothing was deleted"),
    ("read-403", "GET /statefulsets/", "403", exitcodes.ERROR, r"API \(HTTP 403\).*nothing was deleted"),
    ("read-500", "GET /statefulsets/", "500", exitcodes.ERROR, r"API \(HTTP 500\).*nothing was deleted"),
    ("read-html", "GET /statefulsets/", "html", exitcodes.ERROR, r"HTML.*nothing was deleted"),
    ("read-truncated", "GET /statefulsets/", "truncated", exitcodes.ERROR, r"JSON.*nothing was deleted"),
    ("read-shape", "GET /statefulsets/", "shape", exitcodes.ERROR, r"nothing was deleted"),
    ("read-garbage", "GET /statefulsets/", "wrong-object", exitcodes.ERROR,
     r"not the StatefulSet asked for.*nothing was deleted"),
    ("read-stall", "GET /statefulsets/", "stall", exitcodes.ERROR, r"nothing was deleted"),
    ("delete-500", "DELETE /statefulsets/", "500", exitcodes.TAKEDOWN_INCOMPLETE,
     r"take-down incomplete: still there: statefulset/vllm-deepep"),
    ("delete-403", "DELETE /services/", "403", exitcodes.TAKEDOWN_INCOMPLETE,
     r"take-down incomplete: still there: service/"),
    ("delete-garbage", "GET /statefulsets/", "after:1:wrong-object", exitcodes.TAKEDOWN_INCOMPLETE,
     r"take-down incomplete: still there: statefulset/vllm-deepep"),
]  # fmt: skip


@pytest.mark.parametrize(("cid", "rule", "mode", "code", "says"), DOWN_CASES,
                         ids=[c[0] for c in DOWN_CASES])  # fmt: skip
def test_run_down_against_a_hostile_api(cluster, tmp_path, cid, rule, mode, code, says):
    ns = f"d-{cid}"
    plan = applied(cluster, tmp_path, ns)
    verb, path = rule.split(" ", 1)
    cluster.emulator.hostile[f"{verb} /namespaces/{ns}{path}"] = mode
    cluster.emulator.hostile_seen.clear()
    try:
        r = kube(cluster, "run", "down", "--plan", str(plan), "--yes", timeout=60)
    finally:
        cluster.emulator.hostile.clear()
    try:
        judge(f"down/{cid}", r, Expect(code=code, says=says, max_s=40))
        assert "left alone" not in r.out, r.out  # garbage is never "not epdoctor's"
    finally:
        cleanup(cluster, ns, plan)
    assert not wait_gone(cluster, ns)


def test_run_down_json_dry_run_prints_json(cluster, tmp_path):
    ns = "d-json"
    plan = applied(cluster, tmp_path, ns)
    try:
        r = kube(cluster, "run", "down", "--plan", str(plan), "--json", "--dry-run")
        judge("down/json-dry-run", r, Expect(code=0, one_line=False))
        doc = json.loads(r.out)
        assert doc["dry_run"] is True and doc["done"] == []
        assert "delete:    statefulset/vllm-deepep" in doc["plan"]
        assert left(cluster, ns)  # nothing deleted
    finally:
        cleanup(cluster, ns, plan)


def test_sighup_during_run_down_finishes_the_deletion(cluster, tmp_path):
    import signal
    import subprocess
    import sys

    ns = "d-sighup"
    plan = applied(cluster, tmp_path, ns)
    # the StatefulSet's delete stalls for --request-timeout: SIGHUP arrives in the middle
    cluster.emulator.hostile[f"DELETE /namespaces/{ns}/statefulsets/"] = "stall"
    try:
        p = subprocess.Popen(
            [sys.executable, "-m", "epdoctor", "run", "down", "--plan", str(plan), "--yes",
             "--kubeconfig", str(cluster.kubeconfig), "--request-timeout", "3"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)}, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while not any(s.startswith("DELETE") and ns in s for s in cluster.emulator.seen):
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.05)
        p.send_signal(signal.SIGHUP)
        out, err = p.communicate(timeout=40)
    finally:
        cluster.emulator.hostile.clear()
    try:
        both = out + err
        assert "Traceback" not in both, both[-1500:]
        assert "SIGHUP arrived during the take-down; it was finished first" in err, err
        # the stalled delete failed: the take-down is incomplete, said with its own code
        assert p.returncode == exitcodes.TAKEDOWN_INCOMPLETE, (p.returncode, err)
        assert "deleted service/vllm-deepep in namespace d-sighup" in out  # it went on
    finally:
        cleanup(cluster, ns, plan)
    assert not wait_gone(cluster, ns)
