"""Start a command per node or rank, follow its output as bytes, stop it all.

A Node is a place processes run (this host; SSH and Kubernetes nodes plug in
with the same interface). ``Node.start(spec)`` starts one command in its own
process group with stdout and stderr appended to the spec's log file on that
node, so the log survives the terminal and epdoctor's own exit; ``Proc``
reads what the log gained since the last read (``read_new``), polls the exit
code and stops the group (TERM, then KILL after a grace period).
"""

from __future__ import annotations

import abc
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

READ_CHUNK = 1 << 20


@dataclass(frozen=True)
class ProcSpec:
    """One command to start: argv (never through a shell), its env additions and log file."""

    name: str  # "node0", "leader", "rank3": how panes and reports name it
    argv: tuple[str, ...]
    log_path: str
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None

    def command_line(self) -> str:
        """The exact command as an operator would type it (shown before anything starts)."""
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(self.env.items()))
        cmd = shlex.join(self.argv)
        cd = f"cd {shlex.quote(self.cwd)} && " if self.cwd else ""
        return f"{cd}{env + ' ' if env else ''}{cmd} >> {shlex.quote(self.log_path)} 2>&1"


class Proc(abc.ABC):
    """A started command. Every method is safe to call after the process ended."""

    spec: ProcSpec
    node: Node

    @property
    def name(self) -> str:
        return self.spec.name

    @abc.abstractmethod
    def poll(self) -> int | None:
        """Exit code, or None while it runs."""

    @abc.abstractmethod
    def read_new(self) -> bytes:
        """Bytes appended to the log since the previous call (b'' when none)."""

    @abc.abstractmethod
    def stop(self, grace_s: float = 5.0) -> str:
        """Stop the whole process group; returns what was done, for the operator."""

    @property
    @abc.abstractmethod
    def pid(self) -> int | None: ...

    def stop_command(self) -> str:
        """How an operator stops it later from this host (after --detach): its whole group."""
        return f"kill -s TERM -- -{self.pid}"


class Node(abc.ABC):
    """Where commands run."""

    name: str
    kind: str

    @abc.abstractmethod
    def start(self, spec: ProcSpec) -> Proc: ...

    @abc.abstractmethod
    def run(
        self, argv: Sequence[str], stdin: bytes = b"", timeout_s: float = 30.0
    ) -> tuple[int | None, bytes, bytes]:
        """Run a short command to completion (counter snapshots, file reads)."""

    @abc.abstractmethod
    def read_file(self, path: str, offset: int = 0) -> bytes:
        """Bytes of a file on the node from offset (b'' when absent)."""

    @abc.abstractmethod
    def list_dir(self, path: str) -> list[str]:
        """Names in a directory on the node ([] when absent)."""

    def describe(self, spec: ProcSpec) -> str:
        return f"[{self.name}] {spec.command_line()}"

    def put_file(self, path: str, data: bytes) -> None:
        """Write a file on the node (probe scripts staged into the run directory)."""
        d = path.rsplit("/", 1)[0]
        rc, _, err = self.run(
            ["sh", "-c", 'mkdir -p "$1" && cat > "$2"', "sh", d, path], stdin=data
        )
        if rc != 0:
            raise LaunchError(f"{self.name}: cannot write {path}: {err.decode(errors='replace')}")

    def close(self) -> None:  # noqa: B027 - optional hook
        pass


class LocalProc(Proc):
    def __init__(self, node: LocalNode, spec: ProcSpec, popen: subprocess.Popen[bytes]) -> None:
        self.node = node
        self.spec = spec
        self._popen = popen
        self._offset = 0
        self._stopped = ""

    @property
    def pid(self) -> int | None:
        return self._popen.pid

    def poll(self) -> int | None:
        return self._popen.poll()

    def read_new(self) -> bytes:
        data = self.node.read_file(self.spec.log_path, self._offset)
        self._offset += len(data)
        return data

    def stop(self, grace_s: float = 5.0) -> str:
        if self._stopped:
            return self._stopped
        if self._popen.poll() is not None:
            self._stopped = f"{self.name}: had exited ({self._popen.returncode})"
            _signal_group(self._popen.pid, signal.SIGKILL)  # stragglers of the group
            return self._stopped
        _signal_group(self._popen.pid, signal.SIGTERM)
        try:
            self._popen.wait(timeout=grace_s)
            how = "stopped (SIGTERM)"
        except subprocess.TimeoutExpired:
            _signal_group(self._popen.pid, signal.SIGKILL)
            self._popen.wait()
            how = f"killed (SIGKILL after {grace_s:.0f}s)"
        _signal_group(self._popen.pid, signal.SIGKILL)
        self._stopped = f"{self.name}: pid {self._popen.pid} process group {how}"
        return self._stopped


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class LocalNode(Node):
    """This host."""

    kind = "local"

    def __init__(self, name: str = "local") -> None:
        self.name = name

    def start(self, spec: ProcSpec) -> LocalProc:
        os.makedirs(os.path.dirname(os.path.abspath(spec.log_path)), exist_ok=True)
        env = {**os.environ, **spec.env}
        with open(spec.log_path, "ab") as log:
            try:
                popen = subprocess.Popen(
                    list(spec.argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    cwd=spec.cwd,
                    start_new_session=True,  # its own process group: stop() reaches children
                )
            except OSError as exc:
                raise LaunchError(f"{spec.name}: cannot start {spec.argv[0]}: {exc}") from exc
        return LocalProc(self, spec, popen)

    def run(
        self, argv: Sequence[str], stdin: bytes = b"", timeout_s: float = 30.0
    ) -> tuple[int | None, bytes, bytes]:
        try:
            p = subprocess.run(
                list(argv), input=stdin, capture_output=True, timeout=timeout_s, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, b"", str(exc).encode()
        return p.returncode, p.stdout, p.stderr

    def read_file(self, path: str, offset: int = 0) -> bytes:
        try:
            with open(path, "rb") as f:
                f.seek(offset)
                return f.read(READ_CHUNK)
        except OSError:
            return b""

    def list_dir(self, path: str) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def put_file(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)


class LaunchError(Exception):
    """A launch could not start or be followed (exit code 2)."""


@dataclass
class Group:
    """Everything one `epdoctor run` started: stop() reaches all of it, once."""

    procs: list[Proc] = field(default_factory=list)
    stopped: list[str] = field(default_factory=list)

    def add(self, proc: Proc) -> Proc:
        self.procs.append(proc)
        return proc

    def running(self) -> list[Proc]:
        return [p for p in self.procs if p.poll() is None]

    def stop(self, grace_s: float = 5.0) -> list[str]:
        for p in self.procs:
            line = p.stop(grace_s)
            if line not in self.stopped:
                self.stopped.append(line)
        return list(self.stopped)

    def wait(self, timeout_s: float, poll_s: float = 0.2) -> bool:
        """True when every process exited before the deadline."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                return True
            time.sleep(poll_s)
        return not self.running()
