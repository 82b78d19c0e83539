"""One trap as an ordered list of sections: what every front end shows, in one order.

``epdoctor explain`` (rich, reports/explain.py), the trap pages of docs/traps/ and the TUI's
explain screen (both through the Markdown renderer in reports/explain.py) render these; a
section's ``key`` says how (prose, commands to confirm, changes to copy, detectors, links).
"""

from __future__ import annotations

from dataclasses import dataclass

from epdoctor.knowledge.catalogue import Trap


@dataclass(frozen=True)
class Section:
    key: str  # symptom why fix safe change detect detectors versions applies references
    title: str
    text: str = ""  # prose sections
    items: tuple[str, ...] = ()  # commands, changes, detectors (module:function) or URLs


def trap_sections(t: Trap, detectors: bool = True) -> list[Section]:
    """The trap's sections that have content, in the order every front end shows them."""
    out = [
        Section("symptom", "Symptom", t.symptom),
        Section("why", "Why", t.why),
        Section("fix", "Fix", t.fix),
        Section("safe", "Safe to run (read-only, confirms the diagnosis)", items=t.fix_safe),
        Section(
            "change",
            "Changes a node or an image (copy; epdoctor never runs these)",
            items=t.fix_change,
        ),
        Section("detect", "How epdoctor detects it", t.detect),
    ]
    if detectors:
        out.append(Section("detectors", "Where its detectors live", items=t.detectors))
    out += [
        Section("versions", "Versions", t.versions),
        Section("applies", "Applies to", ", ".join([*t.transports, *t.engines])),
        Section("references", "References", items=t.references),
    ]
    return [s for s in out if s.text or s.items]
