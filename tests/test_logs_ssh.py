"""`epdoctor logs --ssh host:/path` against a real OpenSSH server on loopback (tests/sshd_fixture.py):
real key auth and known_hosts, the log read by `cat` or followed by `tail -F` on the far side.

Stopping a follow (Ctrl-C, --timeout, the client killed outright) must leave no remote process:
checked with pgrep run over the same sshd, as the remote user sees it.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers import line_within, wait_until
from sshd_fixture import USER

from epdoctor.model import Finding, Status
from epdoctor.targets import ssh_cli

pytestmark = pytest.mark.sshd
LOGS = Path(__file__).parent / "fixtures" / "logs"
REPO = Path(__file__).resolve().parent.parent
ENV = {**os.environ, "NO_COLOR": "1", "PYTHONPATH": str(REPO)}
VERSION_LINE = b"ip-172-31-3-153:35113:35113 [0] NCCL INFO NCCL version 2.30.4+cuda13.0\n"
SOCKET_LINE = b"ip-172-31-3-153:35113:35146 [0] NCCL INFO Using network Socket\n"


@pytest.fixture(scope="module")
def host(ssh_lab):
    return ssh_lab.start_host("logs-a")


@pytest.fixture
def logdir(ssh_lab, tmp_path):
    """A folder the remote user can read, with a name the remote shell must not interpret."""
    d = ssh_lab.root / f"logs {tmp_path.name} $(touch pwned)"
    d.mkdir()
    d.chmod(0o755)
    return d


def _log(d: Path, name: str, data: bytes) -> Path:
    """Write a log the remote user can read; its name is unique, so pgrep can look for it."""
    p = d / name
    p.write_bytes(data)
    p.chmod(0o644)
    return p


def _args(ssh_lab, *rest: str) -> list[str]:
    base = [sys.executable, "-m", "epdoctor", "logs"]
    return [*base, "-i", str(ssh_lab.key), "--known-hosts", str(ssh_lab.known_hosts), *rest]


def remote_pgrep(ssh_lab, host, pattern: str) -> list[int]:
    """PIDs of the remote user's processes whose command line matches `pattern` (a regex), by
    pgrep over the same sshd (a separate connection from the one under test)."""
    cmd = f"exec pgrep -u {USER} -f -- {shlex.quote(pattern)}"
    r = subprocess.run(
        [sys.executable, "-c", _PGREP, host.spec, cmd, str(ssh_lab.key), str(ssh_lab.known_hosts)],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return [int(x) for x in r.stdout.split()]


# One exec through epdoctor's own SSH target (paramiko, the lab's key and known_hosts).
_PGREP = """
import sys
from epdoctor.targets import ssh
spec, cmd, key, known = sys.argv[1:]
settings = ssh.SshSettings(policy=ssh.KnownHostsPolicy(known), identity_files=(key,))
t = ssh.SshTarget(ssh.resolve_host(spec, settings), settings)
rc, out, err = t.exec(cmd)
t.close()
sys.stdout.write(out.decode())
sys.exit(0 if rc in (0, 1) else 2)
"""


def _gone(ssh_lab, host, pattern: str, timeout: float = 10.0) -> bool:
    return wait_until(lambda: not remote_pgrep(ssh_lab, host, pattern), timeout, poll_s=0.2)


def _started(ssh_lab, host, name: str, p: subprocess.Popen) -> bool:
    """The remote tail of `name` runs (False at once if epdoctor exited instead)."""
    wait_until(lambda: p.poll() is not None or remote_pgrep(ssh_lab, host, f"^tail .*{name}"), 30)
    return p.poll() is None and bool(remote_pgrep(ssh_lab, host, f"^tail .*{name}"))


def test_plain_log_over_ssh(ssh_lab, host, logdir):
    log = _log(logdir, "serve.log", (LOGS / "real-p4d-socket-fallback.log").read_bytes())
    spec = f"{host.spec}:{log}"
    r = subprocess.run(_args(ssh_lab, "--json", "--ssh", spec), capture_output=True, env=ENV)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [(x["rank_key"], x["network"], x["sources"]) for x in doc["ranks"]] == [
        ("ip-172-31-3-153:35113", "Socket", [spec])
    ]
    t701 = next(f for f in doc["findings"] if f["code"] == "T701")
    assert t701["severity"] == "fail" and t701["evidence"][0].startswith(f"{spec}:")
    assert not list(logdir.glob("pwned")) and not (Path.home() / "pwned").exists()
    # a file that is not there: an error (exit 2) that says so, not an empty log
    r = subprocess.run(
        _args(ssh_lab, "--ssh", f"{host.spec}:{logdir}/missing.log"), capture_output=True, env=ENV
    )
    assert r.returncode == 2 and b"No such file or directory" in r.stderr


def test_bad_specs_are_refused(ssh_lab, host):
    for spec, text in (
        (f"{host.spec}", "is not [user@]host:/path"),
        ("bad;host:/var/log/x.log", "refusing host name"),
        ("-oProxyCommand=x:/var/log/x.log", "refusing host name"),
    ):
        r = subprocess.run(
            _args(ssh_lab, f"--ssh={spec}"), capture_output=True, env=ENV, timeout=60
        )
        assert r.returncode == 2 and text in r.stderr.decode(), (spec, r.stderr)


def test_follow_prints_a_finding_when_its_line_arrives_and_ctrl_c_kills_the_tail(
    ssh_lab, host, logdir
):
    name = f"live-{uuid.uuid4().hex[:8]}.log"
    log = _log(logdir, name, VERSION_LINE)
    spec = f"{host.spec}:{log}"
    p = subprocess.Popen(
        _args(ssh_lab, "--follow", "--findings-only", "--ssh", spec),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    try:
        assert _started(ssh_lab, host, name, p)
        with log.open("ab") as f:
            f.write(SOCKET_LINE)
        line = line_within(p)
        assert line.startswith("FAIL T701") and line.rstrip().endswith(f"({spec})")
        assert line_within(p).strip() == f"{spec}:2: {SOCKET_LINE.decode().strip()}"
        assert p.poll() is None  # still following: the finding did not wait for the end
        # the log is rotated (moved away, a new file in its place): tail -F reads the new one
        log.rename(log.with_suffix(".1"))
        _log(logdir, name, b"Fatal Python error: Segmentation fault\n")
        line = line_within(p)
        assert line.startswith("FAIL E203") and line.rstrip().endswith(f"({spec})"), line
    finally:
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
    assert p.returncode == 130, err  # Ctrl-C
    assert b"Traceback" not in err
    assert _gone(ssh_lab, host, name), remote_pgrep(ssh_lab, host, name)


def test_follow_timeout_and_a_killed_client_leave_no_remote_process(ssh_lab, host, logdir):
    name = f"quiet-{uuid.uuid4().hex[:8]}.log"
    log = _log(logdir, name, VERSION_LINE)
    spec = f"{host.spec}:{log}"
    t0 = time.monotonic()
    r = subprocess.run(
        _args(ssh_lab, "--json", "--follow", "--timeout", "2", "--ssh", spec),
        capture_output=True,
        env=ENV,
        timeout=60,
    )
    assert r.returncode == 0 and time.monotonic() - t0 >= 2, r.stderr
    assert [f["code"] for f in json.loads(r.stdout)["findings"]] == ["T701"]
    assert _gone(ssh_lab, host, name, timeout=2.0)
    # SIGKILL: nothing of ours runs to stop the tail; sshd closing its stdin does
    p = subprocess.Popen(_args(ssh_lab, "--follow", "--ssh", spec), stdout=subprocess.PIPE, env=ENV)
    try:
        assert _started(ssh_lab, host, name, p)
    finally:
        p.kill()
        p.communicate()
    assert _gone(ssh_lab, host, name), remote_pgrep(ssh_lab, host, name)


def test_stopping_a_stream_from_another_thread(ssh_lab, host, logdir):
    """The LogStream API the follow uses: stop() returns once the far side is clean."""
    name = f"api-{uuid.uuid4().hex[:8]}.log"
    log = _log(logdir, name, VERSION_LINE)
    s = ssh_cli.remote_log_stream(
        f"{host.spec}:{log}",
        follow=True,
        identity=(str(ssh_lab.key),),
        known_hosts=str(ssh_lab.known_hosts),
    )
    got: list[bytes] = []

    def read() -> None:
        for chunk in s:
            got.append(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert wait_until(lambda: got, 30) and got == [VERSION_LINE]
    s.stop()
    reader.join(5)
    assert not reader.is_alive()
    assert not remote_pgrep(ssh_lab, host, name)  # at once: stop() waited for it
    s.stop()  # twice is fine


def test_follow_output_is_redacted(capsys):
    from epdoctor.commands.logs import _print_found

    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0k1L2"
    f = Finding(
        code="D101",
        status=Status.FAIL,
        title="Segmentation fault",
        evidence=(f"pod/ml/x:3: HF_TOKEN={token} python3 -m vllm serve ...",),
    )
    _print_found([f], "pod/ml/x")
    out = capsys.readouterr().out
    assert token not in out and "[REDACTED]" in out
