"""A Node driven through a shell on the far side: SSH hosts and Kubernetes pods.

Everything is one short shell command per operation, run by an ``Exec``
callable the transport provides (an SSH channel, a pod exec) with its own
timeout, so the same start/follow/stop protocol serves every remote kind:

* start: ``setsid`` puts the command in its own session and process group,
  detached from the transport (it survives a dropped connection); its output
  is appended to the log file; its exit status is written to ``<log>.rc``
  when it ends; the group id is printed back.
* read_new: ``tail -c +N`` of the log from the last offset, bounded per call.
* poll: the ``.rc`` file, else whether the group is alive.
* stop: TERM to the whole group, a grace period, then KILL.

Every value that reaches the remote shell is quoted with shlex.quote.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from epdoctor.launch.launcher import READ_CHUNK, LaunchError, Node, Proc, ProcSpec

# (shell command line, stdin bytes, timeout seconds) -> (exit status or None, stdout, stderr)
Exec = Callable[[str, bytes, float], tuple[int | None, bytes, bytes]]


def start_script(spec: ProcSpec) -> str:
    log = shlex.quote(spec.log_path)
    rc = shlex.quote(spec.log_path + ".rc")
    env = " ".join(shlex.quote(f"{k}={v}") for k, v in sorted(spec.env.items()))
    cmd = "exec env " + (env + " " if env else "") + shlex.join(spec.argv)
    cd = f"cd {shlex.quote(spec.cwd)} && " if spec.cwd else ""
    inner = f"{cd}({cmd}) >> {log} 2>&1; echo $? > {rc}"
    return (
        f'mkdir -p "$(dirname {log})" && rm -f {rc} && '
        f"setsid sh -c {shlex.quote(inner)} < /dev/null > /dev/null 2>&1 & p=$!; "
        # answer once setsid() made the group, so stop() reaches all of it
        f"i=0; while [ $i -lt 50 ] && ! kill -s 0 -- -$p 2>/dev/null && kill -s 0 $p 2>/dev/null;"
        f" do sleep 0.02; i=$((i+1)); done; echo $p"
    )


def _alive_fns(pgid: int) -> str:
    """Shell functions: `galive` (a live, non-zombie member of the group), `palive` (the
    leader itself). Zombies count as gone: where nothing reaps them they would keep a group
    "alive" for kill -0 forever. Without /proc, kill -0 is what there is."""
    return (
        "galive() { if [ -r /proc/self/stat ]; then for f in /proc/[0-9]*/stat; do "
        'read -r l < "$f" 2>/dev/null || continue; set -- ${l##*") "}; '
        f'[ "$1" != Z ] && [ "$3" = {pgid} ] && return 0; done; return 1; '
        f"else kill -s 0 -- -{pgid} 2>/dev/null; fi; }}; "
        f"palive() {{ if [ -r /proc/{pgid}/stat ]; then read -r l < /proc/{pgid}/stat; "
        'set -- ${l##*") "}; [ "$1" != Z ]; '
        f"else kill -s 0 {pgid} 2>/dev/null; fi; }}; "
    )


class ShellProc(Proc):
    def __init__(self, node: ShellNode, spec: ProcSpec, pgid: int) -> None:
        self.node = node
        self.spec = spec
        self._pgid = pgid
        self._offset = 0
        self._rc: int | None = None
        self._stopped = ""

    @property
    def pid(self) -> int | None:
        return self._pgid

    def poll(self) -> int | None:
        if self._rc is not None:
            return self._rc
        rcfile = shlex.quote(self.spec.log_path + ".rc")
        rc, out, _ = self.node.exec(
            _alive_fns(self._pgid) + f"if [ -s {rcfile} ]; then cat {rcfile}; "
            # the group, or its leader before setsid() made the group
            "elif galive || palive; then echo running; "
            # it may have written its status between the two looks
            f"elif [ -s {rcfile} ]; then cat {rcfile}; else echo gone; fi",
            b"",
            15.0,
        )
        text = out.decode(errors="replace").strip()
        if rc != 0 or text == "running":
            return None  # an unreachable node is not an exit
        if text == "gone":
            self._rc = -1  # the group vanished without writing its status (killed)
        else:
            try:
                self._rc = int(text)
            except ValueError:
                return None
        return self._rc

    def read_new(self) -> bytes:
        data = self.node.read_file(self.spec.log_path, self._offset)
        self._offset += len(data)
        return data

    def stop_command(self) -> str:
        kill = f"kill -s TERM -- -{self._pgid}"
        if self.node.login:
            return f"{self.node.login} {shlex.quote(kill)}"
        return f"on {self.node.name}: {kill}"

    def stop(self, grace_s: float = 5.0) -> str:
        if self._stopped:
            return self._stopped
        ticks = max(1, int(grace_s * 5))
        g = self._pgid
        rcfile = shlex.quote(self.spec.log_path + ".rc")
        # the .rc file first: a finished group may linger as zombies where nothing reaps them
        rc, out, _ = self.node.exec(
            _alive_fns(g) + f"[ -s {rcfile} ] && {{ echo gone; exit 0; }}; "
            f"galive || {{ echo gone; exit 0; }}; kill -s TERM -- -{g}; "
            f"i=0; while [ $i -lt {ticks} ]; do galive || "
            f"{{ echo term; exit 0; }}; sleep 0.2; i=$((i+1)); done; "
            f"kill -s KILL -- -{g} 2>/dev/null; echo kill",
            b"",
            grace_s + 15.0,
        )
        how = {
            "gone": "had exited",
            "term": "stopped (SIGTERM)",
            "kill": f"killed (SIGKILL after {grace_s:.0f}s)",
        }.get(out.decode(errors="replace").strip(), f"stop unconfirmed (rc {rc})")
        self._stopped = f"{self.name}: {self.node.name} process group {g} {how}"
        return self._stopped


class ShellNode(Node):
    def __init__(self, name: str, kind: str, exec_fn: Exec, login: str = "") -> None:
        self.name = name
        self.kind = kind
        self.exec = exec_fn
        # the command line that runs a command there from this host (`ssh -p 2222 u@h`,
        # `kubectl exec -n ns pod -c c --`): how a detached launch is stopped later
        self.login = login

    def start(self, spec: ProcSpec) -> ShellProc:
        rc, out, err = self.exec(start_script(spec), b"", 30.0)
        text = out.decode(errors="replace").strip().splitlines()
        if rc != 0 or not text or not text[-1].isdigit():
            raise LaunchError(
                f"{self.name}: could not start {spec.name}: "
                f"{err.decode(errors='replace').strip()[:300] or text}"
            )
        return ShellProc(self, spec, int(text[-1]))

    def run(
        self, argv: Sequence[str], stdin: bytes = b"", timeout_s: float = 30.0
    ) -> tuple[int | None, bytes, bytes]:
        return self.exec(shlex.join(argv), stdin, timeout_s)

    def read_file(self, path: str, offset: int = 0) -> bytes:
        q = shlex.quote(path)
        rc, out, _ = self.exec(
            f"[ -f {q} ] && tail -c +{offset + 1} {q} | head -c {READ_CHUNK}", b"", 30.0
        )
        return out if rc == 0 else b""

    def list_dir(self, path: str) -> list[str]:
        rc, out, _ = self.exec(f"ls -1 {shlex.quote(path)} 2>/dev/null", b"", 15.0)
        return sorted(out.decode(errors="replace").split()) if rc == 0 else []

    def put_file(self, path: str, data: bytes) -> None:
        d = path.rsplit("/", 1)[0] or "/"
        rc, _, err = self.exec(
            f"mkdir -p {shlex.quote(d)} && cat > {shlex.quote(path)}", data, 30.0
        )
        if rc != 0:
            raise LaunchError(f"{self.name}: cannot write {path}: {err.decode(errors='replace')}")

    def describe(self, spec: ProcSpec) -> str:
        return f"[{self.kind} {self.name}] {spec.command_line()}"
