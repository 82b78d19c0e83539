"""The app's Launch screen on the app's current target, driven with App.run_test() and Pilot.

Real parts: loopback OpenSSH servers (tests/sshd_fixture.py: real key auth, known_hosts, a
test user whose processes are started by ShellNode in their own sessions), pods behind the
Kubernetes API emulator (tests/kube_emulator.py: the real kubernetes client and exec
protocol), tests/fake_engine.py as the engine and, where a PyTorch is available, the built-in
kernel test on the gloo backend.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from epdoctor.screens.app import EpdoctorApp
from epdoctor.screens.explain import ConfirmScreen
from epdoctor.screens.launch import LaunchScreen
from launch_helpers import TORCH_PY, free_port, needs_torch, shared_dir
from sshd_fixture import ssh_lab, user_processes  # noqa: F401

HERE = Path(__file__).resolve().parent
ENGINE = str(HERE / "fake_engine.py")
BUNDLE = str(HERE / "fixtures" / "tui" / "three-nodes.tar.gz")
EFA_LINE = "NCCL INFO NET/OFI Selected provider is efa, fabric is efa-direct"


async def wait_for(pilot, pred, timeout: float = 30.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def serve_flags(rdir: str, port: int, worker_port: int) -> str:
    engine = f'python3 {ENGINE} --start-delay 600 --log-line "{EFA_LINE}"'
    return (
        f"--cmd '{engine} --port {port}' --worker-cmd '{engine} --port {worker_port}' "
        f"--run-dir {rdir} --no-preflight --url http://127.0.0.1:{port} --startup-budget 300"
    )


async def confirm(pilot, app, what: str, flags: str) -> ConfirmScreen:
    screen = app.screen
    assert isinstance(screen, LaunchScreen)
    screen.query_one("#launch-what").value = what
    screen.query_one("#launch-flags").value = flags
    await pilot.press("ctrl+l")
    said = lambda: [n.message for n in app._notifications]  # noqa: E731
    await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what=f"confirm {said()}")
    return app.screen


def shown(dialog: ConfirmScreen) -> tuple[str, list[str]]:
    title = str(dialog.query_one("#confirm-title").render())
    return title, [str(s.render()) for s in dialog.query(".command")]


# --------------------------------------------------------------------------- SSH
@pytest.fixture(scope="module")
def hosts(ssh_lab):  # noqa: F811
    return [ssh_lab.start_host("tui-a"), ssh_lab.start_host("tui-b")]


@pytest.mark.sshd
async def test_serve_on_the_diagnosed_ssh_hosts_then_stop_while_it_starts(ssh_lab, hosts):  # noqa: F811
    port, worker_port = free_port(), free_port()
    rdir = shared_dir()
    app = EpdoctorApp()
    async with app.run_test(size=(160, 48)) as pilot:
        # The Targets screen selects the two hosts and diagnoses them; the header says so.
        await pilot.press("slash")
        flags = app.screen.query_one("#target-flags")
        flags.value = " ".join(ssh_lab.cli_args(*(h.spec for h in hosts)))
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(app.shared.diagnoses) == 2, timeout=90, what="diag")
        assert "2 targets (2 ssh)" in app.sub_title
        names = [d.result.target.name for d in app.shared.diagnoses]

        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(app.screen, LaunchScreen), what="launch")
        screen = app.screen
        dialog = await confirm(pilot, app, "serve", serve_flags(rdir, port, worker_port))
        title, commands = shown(dialog)
        assert f"on 2 SSH hosts ({names[0]}, {names[1]})" in title
        assert commands[0].startswith(f"[ssh {names[0]}] ") and f"--port {port}" in commands[0]
        assert commands[1].startswith(f"[ssh {names[1]}] ") and "NODE_RANK=1" in commands[1]
        assert f"{rdir}/leader.log" in commands[0] and f"{rdir}/worker1.log" in commands[1]

        await pilot.press("n")  # no: nothing starts anywhere
        await pilot.pause(0.5)
        assert not user_processes(f"--port {port}") and not os.listdir(rdir)
        assert not app.shared.launches

        await confirm(pilot, app, "serve", serve_flags(rdir, port, worker_port))
        await pilot.press("y")
        await wait_for(
            pilot,
            lambda: user_processes(f"--port {port}") and user_processes(f"--port {worker_port}"),
            what="both engines running on their hosts",
        )
        # one live pane per node's process, titled with its host; the EFA banner highlighted
        await wait_for(
            pilot, lambda: {"leader", "worker1"} <= set(screen.panes), what="one pane per host"
        )
        assert screen.panes["leader"].heading == f"leader · {names[0]}"
        assert screen.panes["worker1"].heading == f"worker1 · {names[1]}"
        await wait_for(pilot, lambda: screen.panes["worker1"].total > 0, what="worker lines")
        efa = [s for t, s in screen.panes["leader"].lines if EFA_LINE in t]
        assert efa == ["bold green"]
        await wait_for(pilot, lambda: "ready" in screen.gates, what="the readiness gate")
        assert screen.gates["ready"][0] == "waiting"

        await pilot.press("s")  # stop while the engine is still starting
        await wait_for(pilot, lambda: not screen.running, what="stopped")
        assert screen.gates["serve verdict"][0] == "interrupted"
        said = [t for t, _ in screen.panes["epdoctor"].lines if t.startswith("stopped: ")]
        assert len(said) == 2, said  # each process's stop told once
        assert said[0].startswith(f"stopped: leader: {names[0]} process group ")
        assert said[1].startswith(f"stopped: worker1: {names[1]} process group ")
        assert all(ln.endswith("stopped (SIGTERM)") for ln in said)
        assert not user_processes(f"--port {port}")
        assert not user_processes(f"--port {worker_port}")
        assert not app.shared.launches


@pytest.mark.sshd
async def test_a_stop_right_after_yes_leaves_nothing_running_on_either_host(ssh_lab, hosts):  # noqa: F811
    port, worker_port = free_port(), free_port()
    app = EpdoctorApp(
        target_argv=ssh_lab.cli_args(*(h.spec for h in hosts)),
        start="launch",
        diagnose_on_start=False,
    )
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await confirm(pilot, app, "serve", serve_flags(shared_dir(), port, worker_port))
        await pilot.press("y")
        await pilot.press("s")  # while the commands are still being started over SSH
        await wait_for(pilot, lambda: not screen.running, what="stopped")
        assert screen.gates["serve verdict"][0] == "interrupted"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (
            user_processes(f"--port {port}") or user_processes(f"--port {worker_port}")
        ):
            await pilot.pause(0.1)
        assert not user_processes(f"--port {port}")
        assert not user_processes(f"--port {worker_port}")


async def test_a_bundle_target_cannot_launch_and_says_so():
    app = EpdoctorApp(target_argv=["--bundle", BUNDLE], start="launch", diagnose_on_start=False)
    async with app.run_test() as pilot:
        screen = app.screen
        screen.query_one("#launch-flags").value = "--gpus 1 --backend gloo"
        await pilot.press("ctrl+l")
        await pilot.pause(0.3)
        assert not isinstance(app.screen, ConfirmScreen) and not app.shared.launches
        said = [n.message for n in app._notifications]
        assert any("--bundle replays a saved diagnosis" in m and "F2" in m for m in said), said


# --------------------------------------------------------------------------- Kubernetes
NS = "ep"


def pod(name: str) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS, "labels": {"app": "engine"}},
        "spec": {"containers": [{"name": "vllm", "image": "x"}]},
        "status": {
            "phase": "Running",
            "podIP": "127.0.0.1",
            "containerStatuses": [
                {
                    "name": "vllm",
                    "ready": True,
                    "restartCount": 0,
                    "image": "x",
                    "imageID": "x",
                    "state": {"running": {"startedAt": "2026-12-03T10:00:00Z"}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    pytest.importorskip("kmock")
    from kube_emulator import running

    with running(tmp_path_factory.mktemp("kube")) as emu:
        emu.put(pod("engine-0"), pod("engine-1"))
        yield emu


@needs_torch
async def test_kernel_test_in_two_pods_one_pane_per_rank(cluster, tmp_path):
    app = EpdoctorApp(
        target_argv=["-n", NS, "-l", "app=engine", "--kubeconfig", str(cluster.kubeconfig)],
        start="launch",
        diagnose_on_start=False,
    )
    flags = (
        f"--backend gloo --gpus 1 --python {TORCH_PY} --tokens 16 --test-arg=--hidden=16 "
        f"--test-arg=--iters=1 --no-expect-efa --no-preflight --run-dir {tmp_path} --timeout 240 "
        f"--master-port {free_port()}"
    )
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.screen
        dialog = await confirm(pilot, app, "kernel-test", flags)
        title, commands = shown(dialog)
        assert f"on 2 pods ({NS}/engine-0, {NS}/engine-1)" in title
        starts = [c for c in commands if "torch.distributed.run" in c]
        assert [c.split("]")[0] for c in starts] == [f"[pod {NS}/engine-0", f"[pod {NS}/engine-1"]
        await pilot.press("y")
        await wait_for(
            pilot, lambda: "kernel-test verdict" in screen.gates, timeout=240, what="verdict"
        )
        assert screen.gates["kernel-test verdict"][0] == "pass", screen.gates
        assert screen.gates["exit codes"][0] == "pass"
        assert screen.gates["numerics"][0] == "pass"
        assert screen.panes["rank0"].heading == f"rank0 · {NS}/engine-0"
        assert screen.panes["rank1"].heading == f"rank1 · {NS}/engine-1"
        assert screen.panes["rank1"].total > 0
