"""One trap as an ordered list of sections: what every front end shows, in one order.

``epdoctor explain`` (rich, reports/explain.py), the trap pages of docs/traps/ and the TUI's
explain screen (both through the Markdown renderer in reports/explain.py) render these; a
section's ``key`` says how (prose, commands to confirm, changes to copy, detectors, links).
"""

from __future__ import annotations

from dataclasses import dataclass

from epdoctor.knowledge.catalogue import LogRule, Trap


@dataclass(frozen=True)
class Section:
    key: str  # symptom why fix safe change detect detectors logrules tell tellsays versions
    # applies references
    title: str
    text: str = ""  # prose sections
    items: tuple[str, ...] = ()  # commands, changes, detectors (module:function) or URLs


def _rule_item(r: LogRule) -> str:
    """One [[log]] rule as a line: id, role and subsystem, its patterns, where they come from."""
    text = f"{r.id} ({r.role}, {r.subsystem}, {r.per}): " + "  |  ".join(r.patterns)
    if r.candidates:
        text += f"  [may also be: {', '.join(r.candidates)}]"
    if r.sources:
        text += f"  [source: {'; '.join(r.sources)}]"
    return text


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
    if t.log_rules:
        out.append(
            Section(
                "logrules",
                f"Log rules (epdoctor/knowledge/traps/{t.code}.toml, [[log]])",
                items=tuple(_rule_item(r) for r in t.log_rules),
            )
        )
    if t.discriminator is not None:
        d = t.discriminator
        out.append(
            Section(
                "tell",
                "Tell it apart from the other causes of the same line (read-only)",
                items=(d.command,),
                text="",
            )
        )
        if d.says:
            out.append(Section("tellsays", "What that command tells", d.says))
    out += [
        Section("versions", "Versions", t.versions),
        Section("applies", "Applies to", ", ".join([*t.transports, *t.engines])),
        Section("references", "References", items=t.references),
    ]
    return [s for s in out if s.text or s.items]
