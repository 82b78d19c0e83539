"""The one interface every target implements."""

from __future__ import annotations

import abc
from collections.abc import Iterator
from dataclasses import dataclass

from epdoctor.model import TargetInfo

# The probe's request is one of the core's typed requests; every target reads it from here.
from epdoctor.requests import ProbeOptions


@dataclass(frozen=True)
class ProbeOutput:
    """The probe's stdout (one JSON document) and how the run went."""

    stdout: str
    stderr: str = ""
    exit_code: int | None = 0
    elapsed_s: float = 0.0
    round_trips: int = 1


class TargetError(Exception):
    """This target could not be reached or the probe did not run; other targets go on."""


class Target(abc.ABC):
    info: TargetInfo

    @abc.abstractmethod
    def run_probe(self, options: ProbeOptions) -> ProbeOutput:
        """Run the node probe in ONE round trip. Raises TargetError."""

    def read_logs(self, **kwargs: object) -> Iterator[bytes]:
        """Stream log bytes from this target (chunks). Targets without logs raise."""
        raise TargetError(f"{self.info.kind} target {self.info.name} has no log source")

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections. Must be safe to call twice."""

    def __enter__(self) -> Target:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DryRun(Exception):
    """--dry-run: what would be created was printed and nothing was (exit 0)."""
