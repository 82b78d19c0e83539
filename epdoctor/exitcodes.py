"""Process exit codes: part of epdoctor's interface, documented in docs/json-schema.md."""

from __future__ import annotations

from epdoctor.model import Status, TargetResult

OK = 0  # no finding at or above the --fail-on level
FINDINGS = 1  # findings at or above the --fail-on level (default: fail)
ERROR = 2  # epdoctor could not run (bad arguments, unreachable target, no probe output)
TAKEDOWN_INCOMPLETE = 3  # `run --plan` / `run down`: something epdoctor applied is still there
INTERRUPTED = 130  # Ctrl-C


def for_results(results: list[TargetResult], fail_on: str = "fail") -> int:
    """An unreachable target is an epdoctor error unless another target found failures."""
    threshold = Status(fail_on).rank
    findings = any(f.status.rank >= threshold for r in results for f in r.findings)
    if findings:
        return FINDINGS
    if any(r.error for r in results):
        return ERROR
    return OK
