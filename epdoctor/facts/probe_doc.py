"""Validate the node probe's JSON document before anything reads it.

This is where every target's probe output (local, SSH, pod, job, bundle) enters
epdoctor, so it is also where it is redacted: the probe already masked secrets at
the source, and a document from an older probe or a hand-edited bundle is masked
here again (epdoctor.redact) before facts, checks, bundles or screens see it.
"""

from __future__ import annotations

import json
from typing import Any

from epdoctor.redact import redact_obj, redact_text

PROBE_NAME = "epdoctor-node-probe"
SUPPORTED = {1}


class ProbeDocError(Exception):
    pass


def load_probe_doc(stdout: str, stderr: str = "", exit_code: int | None = 0) -> dict[str, Any]:
    text = stdout.strip()
    if not text:
        hint = redact_text(stderr).strip().splitlines()[-1:] or [f"exit code {exit_code}"]
        if "python3" in stderr and ("not found" in stderr or "No such file" in stderr):
            raise ProbeDocError("python3 is not available on the target; the probe needs it")
        raise ProbeDocError(f"the probe printed nothing ({hint[0][:200]})")
    # Login banners or MOTD text may precede the document over SSH: take the last JSON line.
    line = text.splitlines()[-1]
    try:
        doc = json.loads(line)
    except ValueError as exc:
        raise ProbeDocError(f"probe output is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("probe") != PROBE_NAME:
        raise ProbeDocError("output is not an epdoctor probe document")
    if doc.get("probe_version") not in SUPPORTED:
        raise ProbeDocError(f"unsupported probe version {doc.get('probe_version')!r}")
    if not isinstance(doc.get("sections"), dict):
        raise ProbeDocError("probe document has no sections")
    return redact_obj(doc)
