"""SSH fleet diagnosis against real OpenSSH servers on loopback (tests/sshd_fixture.py).

Every host is a real sshd with real ed25519 host keys and key auth; the node probe runs for
real through `python3 -` on the far side. Per-host differences are real too: each sshd's
SetEnv gives its sessions a PATH / LD_LIBRARY_PATH with different tools and libraries (fake
nvidia-smi and libnccl.so.2 files built by tests/nodefs.py, whose version strings are the
real "NCCL version X+cudaY" form). No part of the transport is mocked.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nodefs import have_gcc, nccl_lib
from sshd_fixture import USER, SshLab, dead_port, sudo_rule, user_processes

from epdoctor.checks.base import Context
from epdoctor.cli import build_parser
from epdoctor.diagnose import diagnose_many
from epdoctor.options import to_target_spec
from epdoctor.targets import ssh_cli
from epdoctor.targets.base import ProbeOptions, TargetError
from epdoctor.targets.ssh import SshTarget, parse_host_spec, probe_command

REPO = Path(__file__).resolve().parent.parent
SMI_ROW = "{i}, NVIDIA H200, {driver}, 9.0, 00000000:{bus:02X}:00.0, 143771 MiB"

pytestmark = pytest.mark.sshd


def targets(lab: SshLab, *hosts: str, extra: tuple[str, ...] = ()) -> list[SshTarget]:
    args = build_parser().parse_args(["diagnose", *lab.cli_args(*hosts), *extra])
    return ssh_cli.from_spec(to_target_spec(args))  # type: ignore[return-value]


def run_cli(lab: SshLab, *hosts: str, extra: tuple[str, ...] = (), timeout: float = 120):
    cmd = [sys.executable, "-m", "epdoctor", "diagnose", "--json", *lab.cli_args(*hosts), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout)


def node_dir(lab: SshLab, name: str, nccl: str | None = None, driver: str | None = None, tool=None):
    """A per-host directory (PATH bin/ and lib/) the host's sshd hands its sessions."""
    d = lab.root / f"{name}-tree"
    (d / "bin").mkdir(parents=True, exist_ok=True)
    (d / "lib").mkdir(exist_ok=True)
    if nccl:
        shutil.copyfile(nccl_lib(nccl), d / "lib" / f"libnccl.so.{nccl}")
        (d / "lib" / "libnccl.so.2").symlink_to(f"libnccl.so.{nccl}")
    if driver:
        rows = "\n".join(SMI_ROW.format(i=i, driver=driver, bus=0x59 + i) for i in range(8))
        _script(d / "bin" / "nvidia-smi", f"cat <<'EOF'\n{rows}\nEOF\n")
    if tool:
        _script(d / "bin" / tool[0], tool[1])
    for p in [d, *d.rglob("*")]:
        if not p.is_symlink():
            p.chmod(0o755)
    return {"PATH": f"{d / 'bin'}:/usr/local/bin:/usr/bin:/bin", "LD_LIBRARY_PATH": str(d / "lib")}


def _script(path: Path, body: str) -> None:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


@pytest.fixture(scope="module")
def good(ssh_lab: SshLab):
    """Two matching hosts (NCCL 2.30.4, driver 580.95.05) and one odd host (NCCL 2.28.9)."""
    if not have_gcc():
        pytest.skip("gcc builds the fake libnccl")
    hosts = []
    for name, nccl in (("node-a", "2.30.4"), ("node-b", "2.30.4"), ("node-c", "2.28.9")):
        env = node_dir(ssh_lab, name, nccl=nccl, driver="580.95.05")
        hosts.append(ssh_lab.start_host(name, env=env))
    return hosts


# --------------------------------------------------------------- good hosts --


def test_one_exec_per_host_and_a_real_probe_document(ssh_lab, good):
    t = targets(ssh_lab, good[0].spec)[0]
    try:
        out = t.run_probe(ProbeOptions(timeout_s=30))
    finally:
        t.close()
    assert out.round_trips == 1 and t.execs == 1
    doc = json.loads(out.stdout)
    assert doc["probe"] == "epdoctor-node-probe"
    assert doc["sections"]["env"]["LD_LIBRARY_PATH"].endswith("node-a-tree/lib")
    assert t.info.kind == "ssh" and t.info.detail["user"] == USER


def test_fleet_reports_the_odd_nccl_node(ssh_lab, good):
    r = run_cli(ssh_lab, *(h.spec for h in good))
    assert r.returncode == 1, r.stderr  # a fail-level drift finding
    doc = json.loads(r.stdout)
    names = [t["target"]["name"] for t in doc["targets"]]
    assert names == [f"127.0.0.1:{h.port}" for h in good]
    assert all(t["error"] is None for t in doc["targets"])
    ncclv = [t["facts"]["nccl"][0]["version"] for t in doc["targets"]]
    assert ncclv == ["2.30.4", "2.30.4", "2.28.9"]
    fleet = {f["code"]: f for f in doc["fleet_findings"]}
    assert fleet["F601"]["severity"] == "fail"
    odd = f"127.0.0.1:{good[2].port}"
    assert f"on {odd} (2.28.9)" in fleet["F601"]["title"]
    assert fleet["F602"]["severity"] == "pass"  # same driver everywhere
    assert "580.95.05" in fleet["F602"]["title"]


# --------------------------------------------------------------- host keys --


def test_unknown_host_key_is_refused_with_the_accept_hint(ssh_lab):
    h = ssh_lab.start_host("stranger", known=False)
    before = ssh_lab.known_hosts.read_text()
    [t] = targets(ssh_lab, h.spec)
    with pytest.raises(TargetError) as e:
        t.run_probe(ProbeOptions(timeout_s=20))
    t.close()
    msg = str(e.value)
    assert f"unknown host key for [127.0.0.1]:{h.port}" in msg
    assert "--accept-new-host-keys" in msg and "SHA256:" in msg
    assert ssh_lab.known_hosts.read_text() == before, "nothing recorded silently"


def test_unknown_host_key_shows_the_fingerprint_as_openssh_does_once(ssh_lab):
    """The fingerprint is public: shown unredacted, once, with the line to compare it out of
    band; it is the one `ssh-keygen -lf` prints for the host's key file."""
    h = ssh_lab.start_host("stranger-text", known=False)
    good = ssh_lab.start_host("known-text")
    pub = str(h.host_key) + ".pub"
    lf = subprocess.run(["ssh-keygen", "-lf", pub], capture_output=True, text=True, check=True)
    fp = lf.stdout.split()[1]
    assert fp.startswith("SHA256:")
    cmd = [sys.executable, "-m", "epdoctor", "diagnose", *ssh_lab.cli_args(h.spec, good.spec)]
    r = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    out = r.stdout + r.stderr
    assert "[REDACTED]" not in out
    assert out.count(f"ED25519 key fingerprint is {fp}") == 1, out
    assert f"ssh-keyscan -p {h.port} -t ed25519 127.0.0.1 | ssh-keygen -lf -" in out


def test_accept_new_records_the_key_then_plain_runs_pass(ssh_lab):
    h = ssh_lab.start_host("newcomer", known=False)
    r = run_cli(ssh_lab, h.spec, extra=("--accept-new-host-keys",))
    assert r.returncode in (0, 1), r.stderr
    assert json.loads(r.stdout)["error"] is None
    assert h.known_hosts_line() in ssh_lab.known_hosts.read_text()
    r2 = run_cli(ssh_lab, h.spec)
    assert json.loads(r2.stdout)["error"] is None


def test_changed_host_key_is_refused_even_with_accept_new(ssh_lab, tmp_path):
    h = ssh_lab.start_host("reinstalled")
    # the host now presents another key than the one on record (a reinstall, or an attacker)
    from sshd_fixture import keygen

    h.stop()
    other = keygen(tmp_path / "other_host_key", "other")
    h2 = ssh_lab.start_host("reinstalled2", host_key=other, known=False)
    line = h.known_hosts_line().replace(f"[127.0.0.1]:{h.port}", f"[127.0.0.1]:{h2.port}")
    with open(ssh_lab.known_hosts, "a") as f:
        f.write(line)
    before = ssh_lab.known_hosts.read_text()
    r = run_cli(ssh_lab, h2.spec, extra=("--accept-new-host-keys",))
    doc = json.loads(r.stdout)
    assert "HOST KEY CHANGED" in doc["error"] and "ssh-keygen" in doc["error"]
    assert ssh_lab.known_hosts.read_text() == before


# --------------------------------------------------------------- failures --


def test_failures_are_per_host_and_bounded(ssh_lab, good):
    silent = ssh_lab.silent_listener()
    refused = dead_port()
    specs = [good[0].spec, f"{USER}@127.0.0.1:{silent}", f"{USER}@127.0.0.1:{refused}"]
    ts = targets(ssh_lab, *specs, extra=("--connect-timeout", "1.5"))
    t0 = time.monotonic()
    diags = diagnose_many(ts, Context(), ProbeOptions(timeout_s=30), parallel=8)
    elapsed = time.monotonic() - t0
    ok, quiet, dead = (d.result for d in diags)
    assert ok.error is None and ok.facts["nccl"]
    assert "sent no SSH banner within 1.5s" in quiet.error
    assert "Connection refused" in dead.error
    assert elapsed < 10, elapsed


def test_wrong_key_is_refused_auth(ssh_lab, good):
    args = ["-i", str(ssh_lab.wrong_key), "--known-hosts", str(ssh_lab.known_hosts)]
    args += ["--ssh-config", str(ssh_lab.ssh_config), "--ssh", good[0].spec]
    [t] = ssh_cli.from_spec(to_target_spec(build_parser().parse_args(["diagnose", *args])))
    with pytest.raises(TargetError) as e:
        t.run_probe(ProbeOptions())
    t.close()
    assert f"authentication refused by {USER}@[127.0.0.1]:{good[0].port}" in str(e.value)
    assert str(ssh_lab.wrong_key) in str(e.value)


def test_garbage_probe_output_is_an_error_not_a_pass(ssh_lab):
    env = node_dir(ssh_lab, "garbage", tool=("python3", "cat >/dev/null; echo 'not json {'\n"))
    h = ssh_lab.start_host("garbage", env=env)
    r = run_cli(ssh_lab, h.spec)
    doc = json.loads(r.stdout)
    assert doc["verdict"] == "error" and "not JSON" in doc["error"]
    assert r.returncode == 1 or r.returncode == 2


@pytest.mark.parametrize(
    "bad", ["node;touch /tmp/epd-pwned", "$(touch /tmp/epd-pwned)", "-oProxyCommand=x", "a b"]
)
def test_host_names_with_shell_metacharacters_are_refused(ssh_lab, bad, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text(f"# fleet\n{bad}\n")
    for extra in ((f"--ssh={bad}",), ("--hosts", str(hosts))):
        r = subprocess.run(
            [sys.executable, "-m", "epdoctor", "diagnose", *extra],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=60,
        )
        assert r.returncode == 2, (bad, r.stdout, r.stderr)
        assert "refusing" in r.stderr
    assert not os.path.exists("/tmp/epd-pwned")


def test_remote_arguments_are_quoted():
    argv = ["--root", "/mnt/a b;$(reboot)", "--deadline", "5"]
    cmd = probe_command("python3", argv, sudo=False, limit_s=9)
    outer = __import__("shlex").split(cmd)
    assert outer[:3] == ["exec", "/bin/sh", "-c"]
    inner = __import__("shlex").split(outer[3].split("; exec ")[-1])
    assert inner == ["python3", "-", *argv]


# --------------------------------------------------------------- deadlines --


def test_a_hanging_probe_hits_the_host_deadline_and_leaves_nothing(ssh_lab):
    env = node_dir(ssh_lab, "hang", tool=("nvidia-smi", "exec sleep 3001\n"))
    h = ssh_lab.start_host("hang", env=env)
    [t] = targets(ssh_lab, h.spec, extra=("--host-timeout", "4"))
    t0 = time.monotonic()
    with pytest.raises(TargetError) as e:
        t.run_probe(ProbeOptions(timeout_s=60))
    t.close()
    assert "within 4s" in str(e.value)
    assert time.monotonic() - t0 < 12  # deadline 4 s + the bounded kill (5 s at most)
    # the remote `timeout` backstop is past the probe deadline (60 s), so only the kill did this
    # (a few seconds of slack: on a loaded machine the kill's python takes a while to start)
    assert _gone("sleep 3001", wait=5.0), user_processes("sleep 3001")
    assert t.execs == 2  # the probe, then the kill


def test_ctrl_c_cancels_and_no_remote_process_is_left(ssh_lab, good):
    env = node_dir(ssh_lab, "hang2", tool=("nvidia-smi", "exec sleep 3002\n"))
    h = ssh_lab.start_host("hang2", env=env)
    cmd = [sys.executable, "-m", "epdoctor", "diagnose", "--json"]
    cmd += ssh_lab.cli_args(h.spec, good[0].spec)
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        end = time.monotonic() + 30
        while not user_processes("sleep 3002") and time.monotonic() < end:
            time.sleep(0.1)
        assert user_processes("sleep 3002"), "the probe reached the hanging tool"
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(20)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, proc.stderr.read()
    assert _gone("sleep 3002"), user_processes("sleep 3002")
    assert _gone("python3 -"), user_processes("python3 -")


def test_epdoctor_killed_outright_still_leaves_nothing(ssh_lab):
    """No Ctrl-C, no cleanup: SIGKILL the client. The probe's own deadline (6 s here) ends the
    hanging tool; the remote `timeout` ends the probe if it wedged itself."""
    env = node_dir(ssh_lab, "hang3", tool=("nvidia-smi", "exec sleep 3004\n"))
    h = ssh_lab.start_host("hang3", env=env)
    cmd = [sys.executable, "-m", "epdoctor", "diagnose", "--json", "--timeout", "6"]
    proc = subprocess.Popen([*cmd, *ssh_lab.cli_args(h.spec)], cwd=REPO, stdout=subprocess.DEVNULL)
    end = time.monotonic() + 30
    while not user_processes("sleep 3004") and time.monotonic() < end:
        time.sleep(0.1)
    assert user_processes("sleep 3004")
    proc.kill()
    proc.wait()
    assert _gone("sleep 3004", wait=20), user_processes("sleep 3004")
    assert _gone("python3 -", wait=20), user_processes("python3 -")


def _gone(marker: str, wait: float = 5.0, any_user: bool = False) -> bool:
    end = time.monotonic() + wait
    while time.monotonic() < end:
        if not user_processes(marker, any_user):
            return True
        time.sleep(0.1)
    return False


# --------------------------------------------------------------- config --


def test_ssh_config_aliases_proxyjump_and_patterns(ssh_lab, good):
    bastion = ssh_lab.start_host("bastion")
    closed = ssh_lab.start_host("closed-bastion", extra_config="AllowTcpForwarding no")
    inner = good[1]
    ssh_lab.ssh_config.write_text(
        f"Host jump\n  HostName 127.0.0.1\n  Port {bastion.port}\n  User {USER}\n\n"
        f"Host p5en-1\n  HostName 127.0.0.1\n  Port {inner.port}\n  User {USER}\n"
        "  ProxyJump jump\n\n"
        f"Host p5en-2\n  HostName 127.0.0.1\n  Port {inner.port}\n  User {USER}\n"
        f"  ProxyJump {USER}@127.0.0.1:{closed.port}\n\n"
        "Host p5en-*\n  IdentityFile ~/.ssh/none_such\n\nHost other\n  HostName 10.0.0.1\n"
    )
    try:
        ts = targets(ssh_lab, extra=("--ssh-config-hosts", "p5en-*"))
        assert [t.info.name for t in ts] == ["p5en-1", "p5en-2"]
        assert ts[0].info.detail["via"] == f"{USER}@[127.0.0.1]:{bastion.port}"
        diags = diagnose_many(ts, Context(), ProbeOptions(timeout_s=30), parallel=2)
        assert diags[0].result.error is None, diags[0].result.error
        assert diags[0].result.facts["nccl"][0]["version"] == "2.30.4"
        assert "jump host could not open a connection" in diags[1].result.error
    finally:
        ssh_lab.ssh_config.write_text("")


def test_hosts_file_and_host_specs(tmp_path):
    f = tmp_path / "hosts"
    f.write_text("# p5en fleet\nnode-1\n  ubuntu@node-2:2222  # spare\n\n[fd00::5]:22\nnode-1\n")
    args = build_parser().parse_args(["diagnose", "--hosts", str(f), "--ssh", "node-3,node-1"])
    import paramiko

    specs = ssh_cli.host_specs(to_target_spec(args), paramiko.SSHConfig())
    assert specs == ["node-3", "node-1", "ubuntu@node-2:2222", "[fd00::5]:22"]
    assert parse_host_spec("ubuntu@node-2:2222") == ("ubuntu", "node-2", 2222)
    assert parse_host_spec("[fd00::5]:22") == (None, "fd00::5", 22)
    assert parse_host_spec("fd00::5") == (None, "fd00::5", None)
    with pytest.raises(TargetError):
        parse_host_spec("node:99999")
    assert ssh_cli.parse_remote_path("ubuntu@node-1:/var/log/x y.log") == (
        "ubuntu@node-1",
        "/var/log/x y.log",
    )


@pytest.mark.skipif(not shutil.which("sudo"), reason="sudo is not installed (.ci/run installs it)")
def test_sudo_is_non_interactive_runs_as_root_and_is_killed_as_root(ssh_lab, good):
    # no sudo rule yet: sudo -n must fail at once with sudo's reason, never prompt
    [t] = targets(ssh_lab, good[0].spec, extra=("--sudo",))
    with pytest.raises(TargetError) as e:
        t.run_probe(ProbeOptions(timeout_s=20))
    t.close()
    assert "sudo -n refused" in str(e.value) and "password is required" in str(e.value)
    env = node_dir(ssh_lab, "hang-root", tool=("nvidia-smi", "exec sleep 3003\n"))
    h = ssh_lab.start_host("hang-root", env=env)
    # sudo resets PATH to secure_path; this rule keeps the session's PATH so the hanging tool
    # of the second host is found (a site that wants the user's environment under sudo does this)
    keep = f'Defaults:{USER} !secure_path, env_keep += "PATH LD_LIBRARY_PATH"'
    with sudo_rule(f"{keep}\n{USER} ALL=(root) NOPASSWD: ALL"):
        [t] = targets(ssh_lab, good[0].spec, extra=("--sudo",))
        try:
            doc = json.loads(t.run_probe(ProbeOptions(timeout_s=30)).stdout)
        finally:
            t.close()
        assert doc["sections"]["system"]["euid"] == 0
        # a root probe that hangs: the kill goes through sudo too, nothing survives
        [t] = targets(ssh_lab, h.spec, extra=("--sudo", "--host-timeout", "5"))
        with pytest.raises(TargetError, match="within 5s"):
            t.run_probe(ProbeOptions(timeout_s=60))
        t.close()
        assert _gone("sleep 3003", 5.0, any_user=True), user_processes("sleep 3003", any_user=True)


# --------------------------------------------------------------- logs --


def test_read_logs_streams_a_remote_file_by_chunks(ssh_lab, good):
    d = ssh_lab.root / "logs dir"
    d.mkdir(exist_ok=True)
    d.chmod(0o755)
    log = d / "serve $(touch x).log"
    data = b"".join(b"line %07d NCCL INFO something\n" % i for i in range(120_000))
    log.write_bytes(data)
    log.chmod(0o644)
    [t] = targets(ssh_lab, good[0].spec)
    try:
        chunks = list(t.read_logs(path=str(log)))
        assert b"".join(chunks) == data
        assert len(chunks) > 1, "streamed, not one read"
        assert t.read_file(str(log), offset=13, limit=20) == data[13:33]
        with pytest.raises(TargetError):
            list(t.read_logs(path=str(d / "missing.log")))
    finally:
        t.close()
    assert not (Path.home() / "x").exists() and not Path("x").exists()
    spec = f"{good[0].spec}:{log}"
    got = ssh_cli.remote_log(
        spec, identity=(str(ssh_lab.key),), known_hosts=str(ssh_lab.known_hosts)
    )
    assert b"".join(got) == data


# --------------------------------------------------------------- agent --


@pytest.mark.skipif(not shutil.which("ssh-agent"), reason="ssh-agent not installed")
def test_agent_key_and_hashed_known_hosts(ssh_lab, good, tmp_path):
    """No -i: the key comes from a real ssh-agent; known_hosts is hashed (ssh-keygen -H)."""
    sock = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        end = time.monotonic() + 10
        while not sock.exists() and time.monotonic() < end:
            time.sleep(0.05)
        env = dict(os.environ, SSH_AUTH_SOCK=str(sock), HOME=str(tmp_path))
        subprocess.run(["ssh-add", "-q", str(ssh_lab.key)], env=env, check=True)
        hashed = tmp_path / "known_hosts"
        shutil.copyfile(ssh_lab.known_hosts, hashed)
        subprocess.run(["ssh-keygen", "-q", "-H", "-f", str(hashed)], check=True)
        assert "127.0.0.1" not in hashed.read_text()
        cmd = [sys.executable, "-m", "epdoctor", "diagnose", "--json"]
        cmd += ["--known-hosts", str(hashed), "--ssh", good[0].spec]
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
        assert json.loads(r.stdout)["error"] is None, r.stdout[-500:]
        # and without the agent there is nothing to offer: a clear error, not a hang
        env.pop("SSH_AUTH_SOCK")
        r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env=env, timeout=60)
        assert "no SSH key to offer" in json.loads(r.stdout)["error"]
    finally:
        agent.terminate()
        agent.wait(5)
