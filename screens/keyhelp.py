"""KeyHelp: Textual's Footer, recomposed only when the keys it shows change.

Footer rebuilds all its key widgets (and the screen's layout) on every focus
move, even between two widgets with the same keys, such as two log panes. On
the launch screen, with 16 panes streaming, that rebuild is most of what a Tab
costs; here it happens only when the shown keys or their state differ.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Footer

NARROW = 120  # below this many columns the footer keeps the screen's own keys
# app-wide keys the footer leaves to `?` when narrow: screen switches (F2-F6) and quit (^q)
HIDDEN_WHEN_NARROW = ("show(", "app.show(", "quit", "app.quit")


def shown_keys(screen: Screen[Any]) -> tuple[tuple[str, str, str, bool, str], ...]:
    """What the footer would draw for `screen`: key, action, description, enabled, tooltip."""
    return tuple(
        (b.key, b.action, b.description, enabled, tooltip or "")
        for _, b, enabled, tooltip in screen.active_bindings.values()
        if b.show
    )


class KeyHelp(Footer):
    """The key help at the bottom of every screen."""

    _shown: tuple[tuple[str, str, str, bool, str], ...] | None = None

    def bindings_changed(self, screen: Screen[Any]) -> None:
        keys = shown_keys(screen)
        if self._bindings_ready and keys == self._shown:
            return  # the same keys: nothing to redraw
        super().bindings_changed(screen)
        if self._bindings_ready and screen.app.app_focus and screen is self.screen:
            self._shown = keys  # a recompose was scheduled for exactly these keys

    def compose(self) -> ComposeResult:
        """Under NARROW columns: without the app-wide keys (F2-F6, ^q) and the palette (`?`
        lists them all), so the footer fits 80 columns whole."""
        narrow = self._narrow = self.app.size.width < NARROW
        self.show_command_palette = not narrow
        keys = [
            w
            for w in super().compose()
            if not (narrow and str(getattr(w, "action", "")).startswith(HIDDEN_WHEN_NARROW))
        ]
        if narrow:
            self.styles.grid_size_columns = max(1, len(keys))
        yield from keys

    _narrow: bool | None = None

    def on_resize(self) -> None:
        narrow = self.app.size.width < NARROW
        if self._narrow is not None and narrow != self._narrow:
            self._shown = None
            self.recompose()
