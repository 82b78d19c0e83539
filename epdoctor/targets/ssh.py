"""SSH hosts as targets: paramiko with OpenSSH's conventions and strict host keys.

One host = one TCP connection and ONE exec: the node probe goes on stdin of
``python3 - ARGS`` (nothing is written on the node). The remote command is

    exec /bin/sh -c 'echo EPDOCTOR_PID=$$; exec timeout -s KILL LIM python3 - ARGS'

so the first stdout line names the process to stop, and the remote
``timeout`` bounds the probe's life even when this side vanishes (set past the
probe's own deadline, at which the probe ends every tool it started). Cancelling
(Ctrl-C, the per-host deadline) kills that process and every descendant over
a second channel on the same connection: the probe runs its tools in their own
sessions, so killing one process group would leave a wedged tool behind.

Host keys are checked against known_hosts: an unknown key is refused with a
message that says how to accept it; ``accept_new`` records new keys (like
StrictHostKeyChecking=accept-new) and a changed key is always refused.
Every value that reaches the remote shell is quoted with shlex.quote.

A log is read over its own channel (``RemoteLog``): ``cat``, or to follow it ``tail -F`` under
a shell that kills the tail when its stdin closes. Stopping closes that stdin (and kills the
tail by PID if the shell lingers); a lost connection closes it too, so no follow outlives us.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import re
import shlex
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import paramiko

from epdoctor.model import TargetInfo
from epdoctor.targets.base import ProbeOptions, ProbeOutput, Target, TargetError
from epdoctor.targets.logstream import POLL_S, LogStream
from epdoctor.targets.probe_script import node_probe_source

# paramiko logs a failed handshake (a host that sends no banner, or junk) with its traceback
# through logging's last-resort handler, i.e. onto stderr; the one-line reason is ours to give.
logging.getLogger("paramiko").addHandler(logging.NullHandler())

PID_MARK = b"EPDOCTOR_PID="
READ_CHUNK = 1 << 20
BACKSTOP_GRACE_S = 15.0  # remote `timeout` = max(host deadline, probe deadline + this)
DEFAULT_KEYS = ("id_ed25519", "id_ecdsa", "id_rsa")

# Host names and users never reach a remote shell, but a host name does reach a local one
# through a ProxyCommand's %h: allow only what DNS names, IPv4/IPv6 addresses and user names use.
_HOST_RE = re.compile(
    r"^(?:[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,252})|[0-9A-Fa-f:.]+(?:%[A-Za-z0-9]+)?)$"
)
_USER_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,63}\$?\Z")

# Kill a process and all its descendants (any session): stop them all first, so none can
# fork a replacement, then kill; rescan until nothing new appears. Python 2.7 and 3.x.
KILL_TREE = r"""
import os, signal, sys
root = int(sys.argv[1])
def tree():
    kids = {}
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                st = open('/proc/%s/stat' % d).read()
            except (IOError, OSError):
                continue
            kids.setdefault(int(st.rsplit(')', 1)[1].split()[1]), []).append(int(d))
    out, todo = [], [root]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(kids.get(p, []))
    return out
done = set()
for _ in range(5):
    new = [p for p in tree() if p not in done]
    if not new:
        break
    for p in new:
        try:
            os.kill(p, signal.SIGSTOP)
        except OSError:
            pass
    done.update(new)
for p in done:
    try:
        os.kill(p, signal.SIGKILL)
    except OSError:
        pass
print(len(done))
"""


# --------------------------------------------------------------- host names --


def check_host(host: str) -> str:
    if not host or not _HOST_RE.match(host) or host.startswith("-"):
        raise TargetError(f"refusing host name {host!r}: not a DNS name or IP address")
    return host


def check_user(user: str) -> str:
    if not _USER_RE.match(user):
        raise TargetError(f"refusing user name {user!r}")
    return user


def parse_host_spec(spec: str) -> tuple[str | None, str, int | None]:
    """``[user@]host[:port]`` (``[v6addr]:port`` too) -> (user, host, port); validated."""
    text = spec.strip()
    user: str | None = None
    if "@" in text:
        user, _, text = text.rpartition("@")
        check_user(user)
    port: int | None = None
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        if not sep:
            raise TargetError(f"refusing host {spec!r}: unbalanced [")
        if rest:
            if not rest.startswith(":"):
                raise TargetError(f"refusing host {spec!r}")
            port = _port(rest[1:], spec)
    elif text.count(":") == 1:
        host, _, p = text.partition(":")
        port = _port(p, spec)
    else:
        host = text  # a bare IPv6 address has several colons and no port
    return user, check_host(host), port


def _port(text: str, spec: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise TargetError(f"refusing host {spec!r}: port {text!r} is not a number in 1..65535")
    return int(text)


def known_hosts_name(host: str, port: int) -> str:
    """How OpenSSH writes a host in known_hosts."""
    return host if port == 22 else f"[{host}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def key_type(key: paramiko.PKey) -> str:
    """The key type as OpenSSH names it in "ED25519 key fingerprint is SHA256:..."."""
    t = _scan_type(key)
    return {"ed25519": "ED25519", "rsa": "RSA", "ecdsa": "ECDSA", "dsa": "DSA"}.get(t, t.upper())


def _scan_type(key: paramiko.PKey) -> str:
    name = key.get_name()  # ssh-ed25519, ssh-rsa, ecdsa-sha2-nistp256
    if name.startswith("ecdsa-"):
        return "ecdsa"
    return name.removeprefix("ssh-").split("-")[0]


def keyscan_line(name: str, key: paramiko.PKey) -> str:
    """The command that prints the same fingerprint from another vantage point."""
    host, port = name, 22
    if name.startswith("[") and "]:" in name:
        host, _, p = name[1:].partition("]:")
        port = int(p) if p.isdigit() else 22
    port_flag = f"-p {port} " if port != 22 else ""
    return f"ssh-keyscan {port_flag}-t {_scan_type(key)} {shlex.quote(host)} | ssh-keygen -lf -"


# --------------------------------------------------------------- host keys --


class HostKeyError(TargetError):
    """The server's host key is unknown or changed: the connection was refused."""


class KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """known_hosts verification shared by every host of one run.

    Unknown keys are refused unless ``accept_new``; then they are appended to the user's
    known_hosts file. A host whose recorded keys differ from the offered one is refused in
    every mode (a different key type than the recorded one counts as a change too).
    """

    def __init__(
        self,
        user_file: str | os.PathLike[str],
        system_files: Sequence[str] = (),
        accept_new: bool = False,
    ) -> None:
        self.user_file = Path(os.path.expanduser(str(user_file)))
        self.accept_new = accept_new
        self._lock = threading.Lock()
        self.keys = paramiko.HostKeys()
        for path in [*system_files, str(self.user_file)]:
            if os.path.isfile(path):
                try:
                    self.keys.load(path)
                except (OSError, paramiko.SSHException) as exc:
                    raise TargetError(f"cannot read known_hosts {path}: {exc}") from exc
        self.recorded: list[str] = []

    def verify(self, name: str, key: paramiko.PKey) -> None:
        """Accept `key` for `name` (known_hosts form) or raise HostKeyError."""
        with self._lock:
            known = self.keys.lookup(name) or {}
            if known.get(key.get_name()) == key:
                return
            if known:
                recorded = ", ".join(f"{t} {fingerprint(k)}" for t, k in known.items())
                raise HostKeyError(
                    f"HOST KEY CHANGED for {name}: it offered {key.get_name()} {fingerprint(key)},"
                    f" known_hosts has {recorded}. Someone may be intercepting the connection, or"
                    " the host was reinstalled. Refused (also with --accept-new-host-keys); once"
                    f" the new key is verified: ssh-keygen -f {shlex.quote(str(self.user_file))}"
                    f" -R {shlex.quote(name)}"
                )
            if not self.accept_new:
                raise HostKeyError(
                    f"unknown host key for {name}: {key_type(key)} key fingerprint is"
                    f" {fingerprint(key)} (not in {self.user_file}). Compare it out of band:"
                    f" {keyscan_line(name, key)} (or ask the host's owner for: ssh-keygen -lf"
                    f" /etc/ssh/ssh_host_{_scan_type(key)}_key.pub), then re-run with"
                    " --accept-new-host-keys to record it"
                )
            self.keys.add(name, key.get_name(), key)
            self.user_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(self.user_file, "a", encoding="ascii") as f:
                f.write(f"{name} {key.get_name()} {key.get_base64()}\n")
            self.recorded.append(f"{name} {key.get_name()} {fingerprint(key)}")

    # paramiko.SSHClient compatibility, for code that uses a client with this policy.
    def missing_host_key(self, client: Any, hostname: str, key: paramiko.PKey) -> None:
        self.verify(hostname, key)


# --------------------------------------------------------------- settings --


@dataclass
class SshSettings:
    """Options shared by every host of one run (flags)."""

    policy: KnownHostsPolicy
    identity_files: tuple[str, ...] = ()  # -i KEY (tried first)
    user: str | None = None  # --user (beats ~/.ssh/config, loses to user@host)
    connect_timeout: float = 10.0  # TCP connect, banner, key exchange and auth, each
    host_timeout: float | None = None  # whole host; default: probe deadline + connect + 20 s
    sudo: bool = False
    python: str = "python3"
    allow_agent: bool = True
    config: paramiko.SSHConfig | None = None


@dataclass
class HostConfig:
    """One host after ~/.ssh/config: where to connect, as whom, with which keys, via whom."""

    alias: str
    hostname: str
    port: int = 22
    user: str = ""
    identity_files: tuple[str, ...] = ()
    jump: tuple[HostConfig, ...] = ()  # ProxyJump chain, outermost first
    proxy_command: str | None = None
    name: str = ""  # how reports call it: the alias, plus :port when given on the command line

    def label(self) -> str:
        return f"{self.user}@{known_hosts_name(self.hostname, self.port)}"


def load_ssh_config(path: str | None = None) -> paramiko.SSHConfig:
    p = os.path.expanduser(path or "~/.ssh/config")
    if not os.path.isfile(p):
        if path:
            raise TargetError(f"ssh config {path} not found")
        return paramiko.SSHConfig()
    try:
        return paramiko.SSHConfig.from_path(p)
    except (OSError, paramiko.SSHException, ValueError) as exc:
        raise TargetError(f"cannot read ssh config {p}: {exc}") from exc


def resolve_host(spec: str, settings: SshSettings, depth: int = 0) -> HostConfig:
    """``[user@]alias[:port]`` through ~/.ssh/config, as OpenSSH would (first value wins;
    user@/:port on the command line beat the file; --user beats the file's User)."""
    if depth > 8:
        raise TargetError(f"ProxyJump chain too deep at {spec!r}")
    user, alias, port = parse_host_spec(spec)
    explicit_port = port
    cfg: dict[str, Any] = dict((settings.config or paramiko.SSHConfig()).lookup(alias))
    hostname = check_host(str(cfg.get("hostname") or alias))
    if port is None:
        port = _port(str(cfg["port"]), spec) if cfg.get("port") else 22
    user = user or settings.user or cfg.get("user") or _local_user()
    check_user(user)
    ids = tuple(os.path.expanduser(p) for p in cfg.get("identityfile") or ())
    jump: tuple[HostConfig, ...] = ()
    pj = cfg.get("proxyjump")
    if pj and str(pj).lower() != "none":
        chain: list[HostConfig] = []
        for hop in str(pj).split(","):
            hop = hop.strip().removeprefix("ssh://")
            hop_cfg = resolve_host(hop, replace(settings, user=None), depth + 1)
            chain.extend([*hop_cfg.jump, replace(hop_cfg, jump=())])
        jump = tuple(chain)
    proxy_cmd = cfg.get("proxycommand")
    if proxy_cmd and str(proxy_cmd).lower() == "none":
        proxy_cmd = None
    return HostConfig(
        name=alias if explicit_port is None else f"{alias}:{explicit_port}",
        alias=alias,
        hostname=hostname,
        port=port,
        user=user,
        identity_files=ids,
        jump=jump,
        proxy_command=proxy_cmd,
    )


def _local_user() -> str:
    import getpass

    return getpass.getuser()


# --------------------------------------------------------------- connecting --


class _Expired(Exception):
    """The host's deadline passed (distinct from socket timeouts, which are retried)."""


class _Deadline:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    def left(self, cap: float | None = None) -> float:
        left = self.at - time.monotonic()
        if left <= 0:
            raise _Expired
        return min(left, cap) if cap is not None else left


def _load_key(path: str) -> paramiko.PKey | None:
    try:
        return paramiko.PKey.from_path(path)
    except FileNotFoundError:
        return None
    except paramiko.PasswordRequiredException:
        return None  # encrypted and no passphrase prompt here: the agent may hold it
    except (OSError, paramiko.SSHException, ValueError) as exc:
        raise TargetError(f"cannot load key {path}: {exc}") from exc


class _Connection:
    """One authenticated transport (plus the jump transports it rides on)."""

    def __init__(self, transport: paramiko.Transport, hops: list[paramiko.Transport]) -> None:
        self.transport = transport
        self.hops = hops

    def close(self) -> None:
        for t in [self.transport, *reversed(self.hops)]:
            try:
                t.close()
            except Exception:
                pass


def _open_socket(
    host: HostConfig, via: paramiko.Transport | None, dl: _Deadline, ct: float, track: list[Any]
) -> Any:
    sock = _open_socket_untracked(host, via, dl, ct)
    track.append(sock)
    return sock


def _open_socket_untracked(
    host: HostConfig, via: paramiko.Transport | None, dl: _Deadline, ct: float
) -> Any:
    if via is not None:
        try:
            return via.open_channel(
                "direct-tcpip", (host.hostname, host.port), ("127.0.0.1", 0), timeout=dl.left(ct)
            )
        except paramiko.ChannelException as exc:
            raise TargetError(
                f"jump host could not open a connection to {known_hosts_name(host.hostname, host.port)}: {exc}"
            ) from exc
    if host.proxy_command:
        return paramiko.ProxyCommand(host.proxy_command)
    try:
        return socket.create_connection((host.hostname, host.port), timeout=dl.left(ct))
    except TimeoutError as exc:
        raise TargetError(
            f"TCP connect to {host.hostname}:{host.port} timed out after {ct:g}s"
        ) from exc
    except OSError as exc:
        raise TargetError(
            f"cannot connect to {host.hostname}:{host.port}: {exc.strerror or exc}"
        ) from exc


def _handshake(
    host: HostConfig, sock: Any, settings: SshSettings, dl: _Deadline, track: list[Any]
) -> paramiko.Transport:
    ct = settings.connect_timeout
    t = paramiko.Transport(sock)
    track.append(t)
    t.banner_timeout = dl.left(ct)
    t.handshake_timeout = dl.left(ct)
    t.auth_timeout = dl.left(ct)
    name = known_hosts_name(host.hostname, host.port)
    known = settings.policy.keys.lookup(name)
    if known:  # ask for the key type we have on record, as OpenSSH does
        opts = t.get_security_options()
        first = [k for k in opts.key_types if k in known]
        opts.key_types = first + [k for k in opts.key_types if k not in known]
    try:
        # start_client returns quietly when its own timeout passes first: check the outcome
        t.start_client(timeout=dl.left(ct) + 0.5)
        if t.host_key is None:
            raise t.get_exception() or paramiko.SSHException("handshake timed out")
    except (paramiko.SSHException, EOFError) as exc:
        t.close()
        if not t.remote_version:
            raise TargetError(
                f"{name} accepted TCP but sent no SSH banner within {ct:g}s (not an SSH server, or hung)"
            ) from exc
        if isinstance(exc, EOFError):
            raise TargetError(f"{name} closed the connection during the SSH handshake") from exc
        raise TargetError(f"SSH handshake with {name} failed: {exc}") from exc
    try:
        settings.policy.verify(name, t.get_remote_server_key())
        _authenticate(t, host, settings, dl)
    except BaseException:
        t.close()
        raise
    return t


def _authenticate(
    t: paramiko.Transport, host: HostConfig, settings: SshSettings, dl: _Deadline
) -> None:
    tried: list[str] = []
    paths = list(settings.identity_files) + list(host.identity_files)
    if not paths:
        paths = [os.path.expanduser(f"~/.ssh/{n}") for n in DEFAULT_KEYS]
    keys: list[tuple[str, paramiko.PKey]] = []
    for p in paths:
        k = _load_key(p)
        if k is not None:
            keys.append((p, k))
    if settings.allow_agent and os.environ.get("SSH_AUTH_SOCK"):
        try:
            keys += [("agent", k) for k in paramiko.Agent().get_keys()]
        except paramiko.SSHException:
            pass
    if not keys:
        raise TargetError(
            f"no SSH key to offer {host.label()}: none of {', '.join(paths)} loadable and no agent key"
        )
    for origin, key in keys:
        dl.left()
        try:
            t.auth_publickey(host.user, key)
        except paramiko.AuthenticationException:
            tried.append(f"{origin} ({key.get_name()} {fingerprint(key)})")
            continue
        except paramiko.SSHException as exc:
            raise TargetError(f"authentication with {host.label()} failed: {exc}") from exc
        if t.is_authenticated():
            return
    raise TargetError(f"authentication refused by {host.label()}; keys tried: {'; '.join(tried)}")


def connect(
    host: HostConfig, settings: SshSettings, dl: _Deadline, track: list[Any] | None = None
) -> _Connection:
    """Connect (through the ProxyJump chain) and authenticate. Sockets and transports go
    into `track` as they are made, so another thread can abort a connect in progress."""
    track = [] if track is None else track
    hops: list[paramiko.Transport] = []
    via: paramiko.Transport | None = None
    ct = settings.connect_timeout
    try:
        for hop in host.jump:
            via = _handshake(hop, _open_socket(hop, via, dl, ct, track), settings, dl, track)
            hops.append(via)
        sock = _open_socket(host, via, dl, ct, track)
        return _Connection(_handshake(host, sock, settings, dl, track), hops)
    except BaseException:
        for t in reversed(hops):
            t.close()
        raise


# --------------------------------------------------------------- the target --


def probe_command(python: str, argv: Sequence[str], sudo: bool, limit_s: float) -> str:
    """The one remote command line: PID first, then the probe under a remote time limit."""
    py = shlex.join([python, "-", *argv])
    limit = str(int(limit_s) + 1)
    inner = (
        'echo "EPDOCTOR_PID=$$"; '
        "if command -v timeout >/dev/null 2>&1; then "
        f"exec timeout -s KILL {limit} {py}; fi; exec {py}"
    )
    cmd = shlex.join(["/bin/sh", "-c", inner])
    if sudo:
        cmd = "sudo -n " + cmd
    return "exec " + cmd


def kill_command(python: str, pid: int, sudo: bool) -> str:
    cmd = shlex.join([python, "-c", KILL_TREE, str(int(pid))])
    return ("exec sudo -n " if sudo else "exec ") + cmd


class SshTarget(Target):
    def __init__(self, host: HostConfig, settings: SshSettings) -> None:
        self.host = host
        self.settings = settings
        detail = {"host": host.hostname, "port": str(host.port), "user": host.user}
        if host.jump:
            detail["via"] = ",".join(h.label() for h in host.jump)
        self.info = TargetInfo(name=host.name or host.alias, kind="ssh", detail=detail)
        self.stage = "waiting"  # connecting, probing, done, error: for progress displays
        self.execs = 0  # channels opened: round trips, the benchmark's unit
        self._conn: _Connection | None = None
        self._lock = threading.Lock()
        self._running: tuple[paramiko.Channel, int | None] | None = None
        self._cancelled = False
        self._pending: list[Any] = []  # sockets/transports of a connect in progress

    # -- connection ----------------------------------------------------------
    def _connection(self, dl: _Deadline) -> _Connection:
        with self._lock:
            if self._cancelled:
                raise TargetError("cancelled")
            if self._conn is not None and self._conn.transport.is_active():
                return self._conn
        self.stage = "connecting"
        timed_out = threading.Event()

        def abort() -> None:
            timed_out.set()
            _close_all(self._pending)

        watchdog = threading.Timer(dl.left() + 0.5, abort)
        watchdog.daemon = True
        watchdog.start()
        try:
            conn = connect(self.host, self.settings, dl, self._pending)
        except _Expired as exc:
            raise TargetError(
                f"no SSH session with {self.host.label()} within {dl.seconds:g}s"
            ) from exc
        except (TargetError, paramiko.SSHException, EOFError, OSError) as exc:
            if self._cancelled:
                raise TargetError("cancelled") from exc
            if timed_out.is_set():
                raise TargetError(
                    f"no SSH session with {self.host.label()} within {dl.seconds:g}s"
                ) from exc
            if isinstance(exc, TargetError):
                raise
            raise TargetError(f"SSH to {self.host.label()} failed: {exc}") from exc
        finally:
            watchdog.cancel()
            self._pending.clear()
        with self._lock:
            if self._cancelled:
                conn.close()
                raise TargetError("cancelled")
            self._conn = conn
        return conn

    def _channel(self, conn: _Connection, dl: _Deadline) -> paramiko.Channel:
        try:
            ch = conn.transport.open_session(timeout=dl.left(self.settings.connect_timeout))
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise TargetError(f"{self.host.label()} refused a session channel: {exc}") from exc
        self.execs += 1
        return ch

    # -- the probe -------------------------------------------------------------
    def host_timeout(self, options: ProbeOptions) -> float:
        if self.settings.host_timeout is not None:
            return self.settings.host_timeout
        return options.timeout_s + self.settings.connect_timeout + 20.0

    def run_probe(self, options: ProbeOptions) -> ProbeOutput:
        limit = self.host_timeout(options)
        dl = _Deadline(limit)
        t0 = time.monotonic()
        try:
            conn = self._connection(dl)
            self.stage = "probing"
            # The remote backstop fires only after the probe's own deadline (which also ends
            # every tool it started): a KILL before that would orphan a wedged tool.
            backstop = max(limit, options.timeout_s + BACKSTOP_GRACE_S)
            cmd = probe_command(
                self.settings.python, options.probe_argv(), self.settings.sudo, backstop
            )
            rc, out, err = self._exec(conn, cmd, node_probe_source(), dl, track_pid=True)
        except TargetError:
            self.stage = "error"
            raise
        except _Expired as exc:
            self.stage = "error"
            raise TargetError(f"no answer from {self.host.label()} within {limit:g}s") from exc
        self.stage = "done"
        _, pid_line, doc = _split_pid(out)
        if pid_line is None:
            hint = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {rc}"]
            if self.settings.sudo and b"sudo" in err:
                raise TargetError(f"sudo -n refused on {self.host.label()}: {hint[0][:200]}")
            raise TargetError(f"the remote shell did not start the probe ({hint[0][:200]})")
        return ProbeOutput(
            stdout=doc.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            exit_code=rc,
            elapsed_s=time.monotonic() - t0,
            round_trips=self.execs,
        )

    def _exec(
        self,
        conn: _Connection,
        cmd: str,
        stdin: bytes,
        dl: _Deadline,
        track_pid: bool = False,
        limit_out: int = 256 << 20,
    ) -> tuple[int | None, bytes, bytes]:
        ch = self._channel(conn, dl)
        out = bytearray()
        err = bytearray()
        pid: int | None = None
        with self._lock:
            self._running = (ch, None) if track_pid else self._running
        try:
            ch.exec_command(cmd)
            if stdin:
                ch.sendall(stdin)
            ch.shutdown_write()
            while True:
                ch.settimeout(min(0.5, dl.left()))
                while ch.recv_stderr_ready():
                    err += ch.recv_stderr(65536)
                try:
                    data = ch.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    break
                out += data
                if track_pid and pid is None:
                    pid = _pid_of(out)
                    if pid is not None:
                        with self._lock:
                            self._running = (ch, pid)
                if len(out) > limit_out:
                    raise TargetError(f"{self.host.label()} sent more than {limit_out} bytes")
            while not ch.exit_status_ready():
                ch.status_event.wait(min(0.5, dl.left()))
            while ch.recv_stderr_ready():
                err += ch.recv_stderr(65536)
            return ch.recv_exit_status(), bytes(out), bytes(err)
        except _Expired:
            self._stop_remote()
            raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if self._cancelled:
                raise TargetError("cancelled") from exc
            raise TargetError(f"connection to {self.host.label()} lost: {exc}") from exc
        finally:
            with self._lock:
                if track_pid:
                    self._running = None
            ch.close()

    def _stop_remote(self) -> None:
        """Kill the running probe's process tree (best effort, bounded)."""
        with self._lock:
            running, conn = self._running, self._conn
        if not running or running[1] is None or conn is None or not conn.transport.is_active():
            return
        try:
            ch = conn.transport.open_session(timeout=5.0)
            self.execs += 1
            ch.settimeout(5.0)
            ch.exec_command(kill_command(self.settings.python, running[1], self.settings.sudo))
            ch.shutdown_write()
            ch.status_event.wait(5.0)
            ch.close()
        except Exception:
            pass  # the remote `timeout` still ends it

    # -- other operations ------------------------------------------------------
    def exec(
        self, cmd: str, stdin: bytes = b"", timeout_s: float = 30.0
    ) -> tuple[int | None, bytes, bytes]:
        """Run one shell command line (quote its parts!); the launch protocol's Exec shape."""
        dl = _Deadline(timeout_s)
        try:
            return self._exec(self._connection(dl), cmd, stdin, dl)
        except _Expired as exc:
            raise TargetError(
                f"{cmd[:60]!r} on {self.host.label()} timed out after {timeout_s:g}s"
            ) from exc

    def read_file(self, path: str, offset: int = 0, limit: int = READ_CHUNK) -> bytes:
        """Up to `limit` bytes of a remote file from `offset`."""
        cmd = f"tail -c +{int(offset) + 1} -- {shlex.quote(path)} | head -c {int(limit)}"
        rc, out, err = self.exec(cmd, b"", 30.0)
        if rc not in (0, None) and not out:
            raise TargetError(
                f"cannot read {path} on {self.host.label()}: {err.decode(errors='replace').strip()[:200]}"
            )
        return out

    def read_logs(  # type: ignore[override]
        self, path: str = "", follow: bool = False, timeout_s: float = 3600.0, **_: object
    ) -> Iterator[bytes]:
        """Stream a remote log in chunks as they arrive (``tail -F`` when follow); stopping
        the iteration early stops the remote reader too."""
        r = RemoteLog(self, path, follow, None if follow else timeout_s)
        try:
            yield from r.chunks()
        finally:
            r.stop()

    def log_stream(self, name: str, path: str, follow: bool = False) -> LogStream:
        """The remote log as a LogStream: stop() from any thread ends it on the far side."""
        r = RemoteLog(self, path, follow, None if follow else 3600.0)
        return LogStream(name, r.chunks, stop=r.stop)

    def close(self) -> None:
        """Stop a running probe on the far side, abort a connect in progress, drop the
        connection. Final: the target is not used after close. Safe to call twice."""
        with self._lock:
            self._cancelled = True
        self._stop_remote()
        _close_all(self._pending)
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


# The follow command: the shell keeps its stdin (the channel) open and kills its tail when that
# closes, which is what our side does to stop, and what sshd does when the connection is lost;
# it also names the tail's PID on stderr so a shell that does not exit can be killed by PID.
# The path is "$1", never part of the script text.
# Both read only a regular file: a FIFO, a device (/dev/zero) or a folder would hang or never end.
_REGULAR = (
    '[ -e "$1" ] || { echo "$1: No such file or directory" >&2; exit 66; }; '
    '[ -d "$1" ] && { echo "$1: is a directory, not a regular file" >&2; exit 65; }; '
    '[ -f "$1" ] || { echo "$1: not a regular file (a FIFO, device or socket)" >&2; exit 65; }; '
    '[ -r "$1" ] || { echo "$1: Permission denied" >&2; exit 77; }; '
)
READ_SCRIPT = _REGULAR + 'exec cat -- "$1"'
FOLLOW_SCRIPT = (
    _REGULAR + 'tail -c +1 -F -- "$1" </dev/null & t=$!; '
    'echo "EPDOCTOR_PID=$t" >&2; '
    'read -r _; kill "$t" 2>/dev/null; wait "$t" 2>/dev/null; exit 0'
)
STOP_GRACE_S = 3.0  # how long the follow shell has to exit after its stdin closes


def log_command(path: str, follow: bool) -> str:
    """The remote command line that reads one log; the path is quoted, never interpreted."""
    if "\0" in path:
        raise TargetError(f"{path!r}: a path cannot hold a NUL byte")
    if follow:
        return "exec " + shlex.join(["/bin/sh", "-c", FOLLOW_SCRIPT, "sh", path])
    return "exec " + shlex.join(["/bin/sh", "-c", READ_SCRIPT, "sh", path])


class RemoteLog:
    """One remote log read over its own channel of the target's connection.

    ``chunks()`` runs in one thread (a reader); ``stop()`` may come from any other, and returns
    once nothing is left running on the far side: for a follow, the shell's stdin is closed
    (it kills its ``tail -F`` and exits), then the tail is killed by PID if the shell did not
    exit within STOP_GRACE_S; the channel is closed last.
    """

    def __init__(self, target: SshTarget, path: str, follow: bool, timeout_s: float | None) -> None:
        if not path:
            raise TargetError("read_logs over SSH needs a path (host:/path)")
        self.target = target
        self.path = path
        self.follow = follow
        self.cmd = log_command(path, follow)
        self.timeout_s = timeout_s  # None: until stopped
        self._lock = threading.Lock()  # held while starting or stopping: never both at once
        self._stopping = threading.Event()
        self._done = False
        self._ch: paramiko.Channel | None = None
        self._err = bytearray()
        self.pid: int | None = None

    def chunks(self) -> Iterator[bytes]:
        t = self.target
        dl = _Deadline(self.timeout_s if self.timeout_s is not None else float("inf"))
        # connecting is bounded even when the read is not (a Timer cannot wait forever)
        conn = t._connection(_Deadline(min(dl.seconds, t.settings.connect_timeout * 3 + 5)))
        with self._lock:
            if self._done:
                return
            ch = self._ch = t._channel(conn, _Deadline(t.settings.connect_timeout))
            try:
                ch.exec_command(self.cmd)
                if not self.follow:
                    ch.shutdown_write()
            except (paramiko.SSHException, EOFError, OSError) as exc:
                raise TargetError(f"{t.host.label()} refused the log command: {exc}") from exc
        got_any = False
        try:
            while not self._stopping.is_set():
                self._drain_stderr(ch)
                ch.settimeout(min(POLL_S, dl.left()))
                try:
                    data = ch.recv(READ_CHUNK)
                except TimeoutError:
                    continue
                if not data:
                    break
                got_any = True
                yield data
            if self._stopping.is_set():
                return
            ch.status_event.wait(5.0)
            self._drain_stderr(ch)
            rc = ch.recv_exit_status() if ch.exit_status_ready() else None
            if rc not in (0, None) and not got_any:
                err = self._err_text() or f"exit {rc}"
                raise TargetError(f"cannot read {self.path} on {t.host.label()}: {err[:200]}")
        except _Expired:
            return
        except (paramiko.SSHException, EOFError, OSError) as exc:
            if self._stopping.is_set():
                return
            raise TargetError(f"log stream from {t.host.label()} lost: {exc}") from exc
        finally:
            self.stop()

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            if self._done:
                return
            self._done = True
            ch = self._ch
            if ch is None:
                return
            try:
                if self.follow and not ch.closed:
                    self._end_follow(ch)
            finally:
                ch.close()

    def _end_follow(self, ch: paramiko.Channel) -> None:
        try:
            ch.shutdown_write()  # EOF on the shell's stdin: it kills its tail and exits
        except (paramiko.SSHException, EOFError, OSError):
            return  # the connection is gone: sshd closed that stdin itself
        if ch.status_event.wait(STOP_GRACE_S):
            return
        self._drain_stderr(ch)
        if self.pid is not None:
            self._kill(self.pid)

    def _kill(self, pid: int) -> None:
        """`kill PID` over a second channel (plain sh: the log host may have no python)."""
        conn = self.target._conn
        if conn is None or not conn.transport.is_active():
            return
        try:
            k = conn.transport.open_session(timeout=5.0)
            k.exec_command(f"exec kill -TERM {int(pid)}")
            k.shutdown_write()
            k.status_event.wait(5.0)
            k.close()
        except Exception:
            pass  # best effort: sshd ends the session's processes' stdin when we disconnect

    def _drain_stderr(self, ch: paramiko.Channel) -> None:
        while ch.recv_stderr_ready():
            self._err += ch.recv_stderr(65536)
        if self.pid is None and PID_MARK in self._err:
            self.pid = _pid_of(self._err)
        del self._err[:-8192]  # keep the tail: the reason a read failed is at the end

    def _err_text(self) -> str:
        _, mark, rest = bytes(self._err).partition(PID_MARK)
        text = rest.split(b"\n", 1)[1] if mark and b"\n" in rest else bytes(self._err)
        return text.decode("utf-8", "replace").strip()


def _close_all(things: list[Any]) -> None:
    for t in list(things):
        try:
            t.close()
        except Exception:
            pass


def _pid_of(out: bytearray) -> int | None:
    i = out.find(PID_MARK)
    if i < 0:
        return None
    j = out.find(b"\n", i)
    if j < 0:
        return None
    text = bytes(out[i + len(PID_MARK) : j]).strip()
    return int(text) if text.isdigit() else None


def _split_pid(out: bytes) -> tuple[bytes, bytes | None, bytes]:
    """(what a login script printed before, the PID line, the probe's output)."""
    i = out.find(PID_MARK)
    if i < 0:
        return out, None, b""
    j = out.find(b"\n", i)
    if j < 0:
        return out[:i], out[i:], b""
    return out[:i], out[i:j], out[j + 1 :]
