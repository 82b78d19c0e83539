"""The image gate's verdicts as Findings: probes/image_gate.py runs in the image (or a pod of
it) and prints one check per trap code; this turns its JSON into the one Finding type, with
the catalogue's fix. Nothing it cannot read becomes a pass: a missing or malformed check is
an unknown."""

from __future__ import annotations

from typing import Any

from epdoctor.checks.registry import detector
from epdoctor.model import Finding, Status

# Every code the gate can write (probes/image_gate.py) and what it checks.
GATE_CODES = ("L101", "L104", "L505", "N101", "N102", "N103", "D406", "E201", "B410", "E101",
              "E102", "L103", "B416", "B417")  # fmt: skip
STATUSES = {s.value for s in Status}


@detector(*GATE_CODES, domain="image")
def gate_findings(doc: Any) -> list[Finding]:
    """Findings from the gate's JSON document; one unknown when it is not a gate's output."""
    if not isinstance(doc, dict) or doc.get("gate") != "epdoctor-image-gate":
        return [Finding("B416", Status.UNKNOWN, "the image gate printed no verdict")]
    out = []
    for c in doc.get("checks") or []:
        code, status = c.get("code"), c.get("status")
        if code not in GATE_CODES or status not in STATUSES:
            out.append(Finding("B416", Status.UNKNOWN, f"unreadable image-gate check: {c!r:.200}"))
            continue
        evidence = tuple(str(e)[:500] for e in c.get("evidence") or ())
        out.append(Finding(code, Status(status), str(c.get("title", ""))[:300], evidence))
    if not out:
        out.append(Finding("B416", Status.UNKNOWN, "the image gate ran no check"))
    return out
