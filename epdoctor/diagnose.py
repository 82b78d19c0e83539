"""The diagnose pipeline: targets -> probe output -> facts -> checks -> findings.

``diagnose(request)`` is the one place a diagnosis is assembled, for the command line
and the terminal app alike: every target's result, the fleet findings (drift between
nodes) and, when logs are given, their analysis, as one ``Report``.
``diagnose_many`` fans out over targets with a bounded pool and a per-target
deadline, so one dead host never stalls the rest: its failure becomes that
target's error line.

It is also the redaction boundary for what a target says besides its probe
document (which ``load_probe_doc`` redacts): side facts (a pod's spec, events and
log tail) are redacted before checks read them, and each result's target details
and error message before anything renders them.
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from epdoctor.checks import load_all
from epdoctor.checks.base import run_checks
from epdoctor.facts.node import NodeFacts, build_node_facts
from epdoctor.facts.probe_doc import ProbeDocError, load_probe_doc
from epdoctor.model import Context, EpdoctorError, Finding, TargetInfo, TargetResult
from epdoctor.redact import redact_obj, redact_text
from epdoctor.requests import DiagnoseRequest
from epdoctor.targets.base import ProbeOptions, Target, TargetError

if TYPE_CHECKING:
    from epdoctor.logwatch import LogAnalysis

Progress = Callable[[Target, str], None]  # (target, state) with state in start/done/error


@dataclass
class Diagnosis:
    """One target's result plus what it was built from (for bundles and drift)."""

    result: TargetResult
    node: NodeFacts | None = None
    probe_doc: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Report:
    """One diagnosis: every target's result, what differs between them, and the logs read."""

    diagnoses: list[Diagnosis]
    fleet: list[Finding] = field(default_factory=list)  # drift between the targets
    logs: LogAnalysis | None = None  # the --log files, their findings on a target's result

    @property
    def results(self) -> list[TargetResult]:
        return [d.result for d in self.diagnoses]

    def gated(self) -> list[TargetResult]:
        """What an exit code is judged on: every target's result and the fleet's."""
        return self.results + ([fleet_result(self.fleet)] if self.fleet else [])


def diagnose(
    request: DiagnoseRequest,
    targets: Sequence[Target] | None = None,
    progress: Progress | None = None,
) -> Report:
    """Diagnose the targets (opened from ``request.targets`` unless given), compare them,
    and read the request's logs; a log that cannot be read is an EpdoctorError."""
    if targets is None:
        from epdoctor.targets.selection import open_targets

        try:
            targets = open_targets(request.targets)
        except TargetError as exc:
            raise EpdoctorError(str(exc)) from exc
    diagnoses = diagnose_many(
        targets, request.context, request.probe, parallel=request.parallel, progress=progress
    )
    report = Report(diagnoses, fleet_findings(diagnoses))
    if request.logs:
        ctx = request.context
        node = next((d.node for d in diagnoses if d.node is not None), None)
        if node is not None:
            # the node the logs came from: its facts keep only the causes it can have
            from epdoctor.checks.log_differential import node_predicates

            ctx = dataclasses.replace(ctx, options={**ctx.options, "node": node_predicates(node)})
        report.logs = _attach_logs(report.results, request.logs, ctx)
    return report


def fleet_findings(diagnoses: Sequence[Diagnosis]) -> list[Finding]:
    """What differs between the targets that should be alike (none for a single target)."""
    if len(diagnoses) < 2:
        return []
    from epdoctor.checks.drift import drift_findings

    return list(drift_findings(list(diagnoses)))


def fleet_result(fleet: list[Finding]) -> TargetResult:
    """The fleet findings as one more result, for reports and exit codes."""
    return TargetResult(TargetInfo("fleet", "fleet"), findings=fleet)


def _attach_logs(results: list[TargetResult], paths: Sequence[str], ctx: Context) -> LogAnalysis:
    """The logs' findings join the local target's result (else the first one), redacted."""
    import zlib

    from epdoctor.logwatch import analyze_paths

    try:
        logs = analyze_paths(paths, ctx)
    except (OSError, EOFError, zlib.error) as exc:  # EOFError, zlib.error: a cut .gz
        raise EpdoctorError(f"cannot read log: {exc} (truncated or corrupt?)") from exc
    if results:
        target = next((r for r in results if r.target.kind == "local"), results[0])
        target.findings.extend(logs.findings)
    for r in results:  # log lines are redacted as they enter the log facts; again here
        r.findings = [_redacted(f) for f in r.findings]
    return logs


def _redacted(f: Finding) -> Finding:
    from dataclasses import replace

    ev = tuple(redact_text(e) for e in f.evidence)
    return replace(f, title=redact_text(f.title), evidence=ev, fix=redact_text(f.fix))


def diagnose_target(target: Target, ctx: Context, options: ProbeOptions) -> Diagnosis:
    load_all()
    t0 = time.monotonic()
    try:
        out = target.run_probe(options)
        doc = load_probe_doc(out.stdout, out.stderr, out.exit_code)
    except (TargetError, ProbeDocError) as exc:
        diag = Diagnosis(TargetResult(target.info, error=str(exc), elapsed_s=time.monotonic() - t0))
        return _with_side_facts(target, diag, ctx)
    node = build_node_facts(doc)
    findings = [_with_target(f, target.info.name) for f in run_checks(node, ctx, domain="node")]
    result = TargetResult(
        target=target.info,
        facts=node.summary(),
        findings=findings,
        elapsed_s=time.monotonic() - t0,
    )
    return _with_side_facts(target, Diagnosis(result, node=node, probe_doc=doc), ctx)


def _with_side_facts(target: Target, diag: Diagnosis, ctx: Context) -> Diagnosis:
    """Facts a target knows besides the probe (a pod's state, events, node), checked too.

    A target may define ``side_facts(diagnosis) -> {domain: facts}``; each domain's
    checks run on its facts and their findings join the result, also when the
    probe itself could not run (a Pending or crash-looping pod is the common case).
    A facts dict may carry ``summary`` (joins the result's facts) and
    ``probe_error_is_finding`` (a check reports the probe's error as a finding).
    """
    side = getattr(target, "side_facts", None)
    if side is None:
        return diag
    try:
        extra = redact_obj(side(diag))
    except TargetError as exc:
        diag.extra["side_facts_error"] = redact_text(str(exc))
        return diag
    for domain, facts in extra.items():
        diag.extra[domain] = facts
        if isinstance(facts, dict) and facts.get("summary"):
            diag.result.facts.setdefault(domain, facts["summary"])  # shown with the probe facts
        if isinstance(facts, dict) and facts.get("probe_error_is_finding"):
            # The target was diagnosed from what it knows; its checks say why the probe did not run.
            diag.result.error = None
        found = run_checks(facts, ctx, domain=domain)
        diag.result.findings.extend(_with_target(f, target.info.name) for f in found)
    return diag


def _with_target(f: Any, name: str) -> Any:
    from dataclasses import replace

    return replace(f, target=name)


def diagnose_many(
    targets: Sequence[Target],
    ctx: Context,
    options: ProbeOptions,
    parallel: int = 16,
    progress: Progress | None = None,
) -> list[Diagnosis]:
    """Diagnose every target concurrently; results keep the targets' order."""
    progress = _shown_progress(progress)
    if len(targets) == 1:
        return [_one(targets[0], ctx, options, progress)]
    results: dict[int, Diagnosis] = {}
    pool = cf.ThreadPoolExecutor(max_workers=max(1, min(parallel, len(targets))))
    try:
        futs = {pool.submit(_one, t, ctx, options, progress): i for i, t in enumerate(targets)}
        for fut in cf.as_completed(futs):
            results[futs[fut]] = fut.result()
    except KeyboardInterrupt:
        for t in targets:
            _close_quietly(t)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    return [results[i] for i in range(len(targets))]


class _Shown:
    """What a progress callback sees of a target: its info, the name redacted."""

    def __init__(self, target: Target) -> None:
        info = target.info
        self.info = TargetInfo(redact_text(info.name), info.kind, dict(info.detail))


def _shown_progress(progress: Progress | None) -> Progress | None:
    """Progress is drawn (a terminal's progress line, the TUI's rows) while a target is probed,
    before its result is redacted: the callback gets the target's name masked already."""
    if progress is None:
        return None
    inner = progress

    def cb(target: Target, state: str) -> None:
        inner(_Shown(target), state)  # type: ignore[arg-type]

    return cb


def _one(
    target: Target, ctx: Context, options: ProbeOptions, progress: Progress | None
) -> Diagnosis:
    if progress:
        progress(target, "start")
    try:
        diag = diagnose_target(target, ctx, options)
    except Exception as exc:  # a bug for one target must not lose the others
        diag = Diagnosis(TargetResult(target.info, error=f"{type(exc).__name__}: {exc}"))
    finally:
        _close_quietly(target)
    _redact_result(diag.result)
    if progress:
        progress(target, "error" if diag.result.error else "done")
    return diag


def _redact_result(result: TargetResult) -> None:
    """A target's own words (its name, details, error) are redacted like its probe output."""
    info = result.target
    name = redact_text(info.name)
    result.target = TargetInfo(name, info.kind, {k: redact_text(v) for k, v in info.detail.items()})
    if name != info.name:
        result.findings = [_with_target(f, name) for f in result.findings]
    if result.error:
        result.error = redact_text(result.error)


def _close_quietly(target: Target) -> None:
    try:
        target.close()
    except Exception:
        pass
