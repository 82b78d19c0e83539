"""JSON report. Schema `epdoctor.report/1`, documented in docs/json-schema.md."""

from __future__ import annotations

import json
from typing import Any

from epdoctor import __version__
from epdoctor.model import Finding, TargetResult
from epdoctor.redact import redact_obj
from epdoctor.reports.common import counts, headline, sort_findings, verdict

SCHEMA = "epdoctor.report/1"


def target_doc(r: TargetResult) -> dict[str, Any]:
    return {
        "target": r.target.to_json(),
        "verdict": verdict(r),
        "summary": headline(r),
        "counts": counts(r.findings),
        "error": r.error,
        "facts": r.facts,
        "findings": [f.to_json() for f in sort_findings(r.findings)],
        "elapsed_s": round(r.elapsed_s, 3) if r.elapsed_s is not None else None,
    }


def report_doc(
    results: list[TargetResult], context: dict[str, Any], fleet: list[Finding] | None = None
) -> dict[str, Any]:
    """Single target: `target`, `facts`, `findings` at the top level. Several: `targets` too."""
    doc: dict[str, Any] = {"schema": SCHEMA, "epdoctor_version": __version__, "context": context}
    if len(results) == 1:
        doc.update(target_doc(results[0]))
    else:
        doc["targets"] = [target_doc(r) for r in results]
        doc["findings"] = [f.to_json() for r in results for f in sort_findings(r.findings)]
        doc["fleet_findings"] = [f.to_json() for f in (fleet or [])]
        from epdoctor.reports import fleet as fleet_report

        doc["fleet"] = fleet_report.render_json(results, fleet or [])
    return redact_obj(doc)


def render(
    results: list[TargetResult], context: dict[str, Any], fleet: list[Finding] | None = None
) -> str:
    return json.dumps(report_doc(results, context, fleet), indent=2, sort_keys=False, default=str)
