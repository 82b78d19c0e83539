"""epdoctor plan: engine x transport x instance x model -> verdict, env contract,
commands and manifests. Headless: the prompts, the Textual wizard and the
launcher all call make_plan() and read the Plan it returns.
"""

from __future__ import annotations

from epdoctor.plan.make import make_plan, verdict_of
from epdoctor.plan.model import (
    Commands,
    EnvVar,
    Experts,
    Forbidden,
    Level,
    Pin,
    Plan,
    PlanInput,
    PlanInputError,
    Reason,
    Verdict,
)

__all__ = [
    "Commands",
    "EnvVar",
    "Experts",
    "Forbidden",
    "Level",
    "Pin",
    "Plan",
    "PlanInput",
    "PlanInputError",
    "Reason",
    "Verdict",
    "make_plan",
    "verdict_of",
]
