"""KeyHelp: Textual's Footer, recomposed only when the keys it shows change.

Footer rebuilds all its key widgets (and the screen's layout) on every focus
move, even between two widgets with the same keys, such as two log panes. On
the launch screen, with 16 panes streaming, that rebuild is most of what a Tab
costs; here it happens only when the shown keys or their state differ.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


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
