"""The machine epdoctor runs on: the embedded default target."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

from epdoctor.model import TargetInfo
from epdoctor.targets.base import ProbeOptions, ProbeOutput, Target, TargetError
from epdoctor.targets.probe_script import node_probe_source


class LocalTarget(Target):
    def __init__(self, python: str | None = None) -> None:
        self.python = python or sys.executable or "python3"
        self.info = TargetInfo(name=socket.gethostname(), kind="local")

    def run_probe(self, options: ProbeOptions) -> ProbeOutput:
        # Same path as every remote target: the script on stdin of `python3 -`,
        # in its own process group so a timeout kills whatever it started.
        argv = [self.python, "-", *options.probe_argv()]
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as exc:
            raise TargetError(f"cannot start {self.python}: {exc}") from exc
        try:
            out, err = proc.communicate(node_probe_source(), timeout=options.timeout_s + 10)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            raise TargetError(f"probe did not finish within {options.timeout_s + 10:.0f}s") from exc
        except BaseException:
            _kill_group(proc)
            raise
        return ProbeOutput(
            stdout=out.decode("utf-8", "replace"),
            stderr=err.decode("utf-8", "replace"),
            exit_code=proc.returncode,
            elapsed_s=time.monotonic() - t0,
        )

    def read_logs(self, path: str = "", **_: object):  # type: ignore[override]
        try:
            with open(path, "rb") as f:
                while chunk := f.read(1 << 20):
                    yield chunk
        except OSError as exc:
            raise TargetError(f"cannot read {path}: {exc}") from exc


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()
