"""Real OpenSSH servers on loopback for the SSH tests and the fleet benchmark.

Each host is a real ``/usr/sbin/sshd -D -f <abs path>`` (Debian openssh-server) on 127.0.0.1
and a free high port, with its own ed25519 host key, real public-key auth for one test user
whose login shell is /bin/sh, and optional ``SetEnv`` lines: that is how a test gives one host a
different PATH / LD_LIBRARY_PATH (and so a different NCCL or driver) without touching the probe.
Pitfalls handled (see shared/reference/test-infra.md): /run/sshd must exist, StrictModes no for
keys under /tmp, absolute -f path, the user unlocked with ``usermod -p '*'`` since UsePAM is off,
and every file the user must read made world-readable.

Also here: a TCP listener that accepts and never speaks, and a port with nothing listening.
tests/conftest.py makes the ``ssh_lab`` fixture available to every test module.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
USER = "epdoctor-ssh"


def sshd_available() -> str | None:
    """Why real sshd tests cannot run here, or None when they can."""
    if not os.path.exists(SSHD):
        return "openssh-server is not installed (apt-get install openssh-server)"
    if os.geteuid() != 0:
        return "starting sshd for a test user needs root"
    if not shutil.which("ssh-keygen"):
        return "ssh-keygen missing"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_user(name: str = USER) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True)
        subprocess.run(["usermod", "-p", "*", name], check=True)  # unlocked, no password
        return pwd.getpwnam(name)


def keygen(path: Path, comment: str) -> Path:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
    )
    path.chmod(0o600)
    return path


@dataclass
class SshdHost:
    name: str
    port: int
    dir: Path
    host_key: Path
    proc: subprocess.Popen[bytes] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def spec(self) -> str:
        return f"{USER}@127.0.0.1:{self.port}"

    def known_hosts_line(self) -> str:
        typ, b64 = Path(str(self.host_key) + ".pub").read_text().split()[:2]
        return f"[127.0.0.1]:{self.port} {typ} {b64}\n"

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class SshLab:
    """A folder with the user's keys, known_hosts and ssh config, and the sshd hosts."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="epd-sshlab-"))
        self.root.chmod(0o755)
        self.user = ensure_user()
        self.key = keygen(self.root / "id_ed25519", "epdoctor-test")
        self.wrong_key = keygen(self.root / "wrong_ed25519", "epdoctor-wrong")
        self.authorized = self.root / "authorized_keys"
        self.authorized.write_text(Path(str(self.key) + ".pub").read_text())
        self.authorized.chmod(0o644)
        self.known_hosts = self.root / "known_hosts"
        self.known_hosts.touch()
        self.ssh_config = self.root / "ssh_config"
        self.ssh_config.write_text("")
        self.hosts: list[SshdHost] = []
        self._servers: list[socket.socket] = []
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)

    # -- hosts ----------------------------------------------------------------
    def start_host(
        self,
        name: str,
        env: dict[str, str] | None = None,
        host_key: Path | None = None,
        known: bool = True,
        extra_config: str = "",
    ) -> SshdHost:
        d = self.root / name
        d.mkdir(exist_ok=True)
        d.chmod(0o755)
        hk = host_key or keygen(d / "host_ed25519", name)
        port = free_port()
        host = SshdHost(name, port, d, hk, env=dict(env or {}))
        setenv = " ".join(f'"{k}={v}"' for k, v in sorted(host.env.items()))
        cfg = d / "sshd_config"
        cfg.write_text(
            "\n".join(
                [
                    extra_config,  # sshd takes the first value it reads: overrides go first
                    f"Port {port}",
                    "ListenAddress 127.0.0.1",
                    f"HostKey {hk}",
                    f"PidFile {d / 'sshd.pid'}",
                    f"AuthorizedKeysFile {self.authorized}",
                    f"AllowUsers {USER}",
                    "PubkeyAuthentication yes",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "PermitRootLogin no",
                    "AllowTcpForwarding yes",
                    "MaxStartups 500",
                    "MaxSessions 50",
                    "LogLevel ERROR",
                    *([f"SetEnv {setenv}"] if setenv else []),
                ]
            )
            + "\n"
        )
        with open(d / "sshd.log", "wb") as log:
            host.proc = subprocess.Popen(
                [SSHD, "-D", "-e", "-f", str(cfg.resolve())], stdout=log, stderr=log
            )
        _wait_listening(port, host.proc)
        self.hosts.append(host)
        if known:
            with open(self.known_hosts, "a") as f:
                f.write(host.known_hosts_line())
        return host

    def forget_known_hosts(self) -> None:
        self.known_hosts.write_text("")

    def silent_listener(self, release: threading.Event | None = None) -> int:
        """A port that accepts TCP connections and never sends a byte. With `release`, the
        connections (and the port) are closed when the test sets it: a client then fails at
        once, so a test decides when "still connecting" ends instead of racing a timeout."""
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(64)
        held: list[socket.socket] = []

        def serve() -> None:
            while True:
                try:
                    conn, _ = srv.accept()
                except OSError:
                    return
                held.append(conn)  # keep it open, say nothing
                if release is not None and release.is_set():
                    conn.close()

        def closer() -> None:
            assert release is not None
            release.wait()
            for c in list(held):
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                    c.close()
            with contextlib.suppress(OSError):
                srv.close()

        threading.Thread(target=serve, daemon=True).start()
        if release is not None:
            threading.Thread(target=closer, daemon=True).start()
        self._servers.append(srv)
        return srv.getsockname()[1]

    def stop(self) -> None:
        for h in self.hosts:
            h.stop()
        for s in self._servers:
            with contextlib.suppress(OSError):
                s.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- client side --------------------------------------------------------------
    def cli_args(self, *hosts: str) -> list[str]:
        """diagnose flags that point at this lab's key, known_hosts and ssh config."""
        args = ["-i", str(self.key), "--known-hosts", str(self.known_hosts)]
        args += ["--ssh-config", str(self.ssh_config)]
        return [*args, "--ssh", ",".join(hosts)] if hosts else args


def dead_port() -> int:
    """A loopback port with nothing listening (connection refused)."""
    return free_port()


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.02)
    raise RuntimeError(f"sshd on port {port} did not start listening")


def user_processes(marker: str, any_user: bool = False) -> list[int]:
    """PIDs of the test user's (or anyone's) processes whose command line contains `marker`."""
    uid = pwd.getpwnam(USER).pw_uid
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            if not any_user and os.stat(f"/proc/{d}").st_uid != uid:
                continue
            cmd = Path(f"/proc/{d}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if marker in cmd:
            out.append(int(d))
    return out


@contextlib.contextmanager
def sudo_rule(rule: str = f"{USER} ALL=(root) NOPASSWD: ALL") -> Iterator[None]:
    """A sudoers drop-in for the test user while the block runs (checked with visudo first)."""
    path = Path("/etc/sudoers.d/zz-epdoctor-ssh-test")
    tmp = path.with_suffix(".tmp")
    tmp.write_text(rule + "\n")
    tmp.chmod(0o440)
    subprocess.run(["visudo", "-cqf", str(tmp)], check=True)
    tmp.replace(path)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)


@pytest.fixture(scope="module")
def ssh_lab() -> Iterator[SshLab]:
    why = sshd_available()
    if why:
        pytest.skip(why)
    lab = SshLab()
    try:
        yield lab
    finally:
        lab.stop()
