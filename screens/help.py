"""KeysScreen: every key of the screen beneath, the way k9s's `?` and posting's F1 show them.

Opened with `?` or F1 from any screen; Esc, `q`, `?` or F1 close it. The list is read from the
bindings active on the screen it was opened over (its focused widget's, the screen's, the
app's), so it never drifts from what the keys do.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

# Keys that work everywhere, said once under the screen's own (descriptions for the hidden ones)
GLOBAL = (
    ("? F1", "these keys"),
    ("q", "back from an explanation or dialog; quit from a screen (stops what it started)"),
    ("Ctrl-Q", "quit (stops everything started)"),
    ("F2 F3 F4 F5 F6", "Targets · Traps · Plan · Launch · Tour"),
    ("Ctrl-P", "command palette: every action, Explain CODE"),
    ("Tab Shift-Tab", "next / previous field or pane"),
)
_GLOBAL_ACTIONS = {
    "help",
    "quit_or_back",
    "quit",
    "app.quit",
    "command_palette",
    "app.command_palette",
    "app.focus_next",
    "app.focus_previous",
    "screen.copy_text",
}


def screen_keys(app: Any, screen: Screen[Any]) -> list[tuple[str, str]]:
    """(keys, what they do): the screen's own bindings, the shown ones of the focused widget
    and its parents, then the screen's HELP_EXTRA lines; app-wide keys are left out."""
    from textual.binding import BindingsMap

    chain: list[BindingsMap] = [screen._bindings]
    node = screen.focused
    while node is not None and node is not screen:
        chain.append(node._bindings)
        node = node.parent  # type: ignore[assignment]
    seen: dict[str, list[str]] = {}
    for n, bindings in enumerate(chain):
        for binding in (b for group in bindings.key_to_bindings.values() for b in group):
            if binding.action in _GLOBAL_ACTIONS or not binding.description:
                continue
            if n and not binding.show:  # a widget's own cursor keys: said by HELP_EXTRA
                continue
            key = app.get_key_display(binding)
            keys = seen.setdefault(binding.description, [])
            if key not in keys:
                keys.append(key)
    rows = [(" ".join(keys), what) for what, keys in seen.items()]
    return rows + list(getattr(screen, "HELP_EXTRA", ()))


class KeysScreen(ModalScreen[None]):
    """The keys of the screen it was opened over."""

    BINDINGS = [Binding("escape,q,question_mark,f1", "app.pop_screen", "Close", show=False)]

    def __init__(self, over: Screen[Any], title: str) -> None:
        super().__init__()
        self.rows = screen_keys(over.app, over)
        self.title_text = title

    def _table(self, rows: list[tuple[str, str]]) -> Any:
        from rich.table import Table

        t = Table.grid(padding=(0, 2))
        t.add_column(style="bold", no_wrap=True, min_width=8)
        t.add_column()  # wraps between words at 80 columns
        for keys, what in rows:
            t.add_row(Text(keys), Text(what))
        return t

    def compose(self) -> ComposeResult:
        with Vertical(id="keys"):
            yield Static(Text(f"keys · {self.title_text}", style="bold"), id="keys-title")
            with VerticalScroll(id="keys-body"):
                if self.rows:
                    yield Static(self._table(self.rows), id="keys-screen")
                yield Static(Text("everywhere", style="bold"), classes="keys-head")
                yield Static(self._table(list(GLOBAL)), id="keys-global")
            yield Static("Esc, q, ? or F1 closes", id="keys-foot")
