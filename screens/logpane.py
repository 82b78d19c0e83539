"""LogPane: one live log stream, with a capped window of lines, drawn lazily.

Lines arrive in batches (the launch screen flushes a shared buffer a few times
a second), so a flood of output costs one refresh per batch, not per line, and
a batch longer than the window is cut to the window before anything is done
with it. Only the visible rows are rendered (render_line), and the pane keeps
at most `max_lines`: memory stays bounded however long a run goes. A longer
window changes the pane's scroll limits only, never the screen's layout (the
pane's own size is fixed by CSS), and a row is drawn into one Strip. A line
is shown without its escape sequences and control codes (`clean`, which is
epdoctor.facts.logs.prefix.shown). Known
signatures get a style from the launch layer's highlighter; a search term is
marked and `next_match` jumps between hits. Keys scroll at once (no
smooth-scroll animation): reading a log that moves wants the line where the key
put it, on the next frame.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable

from rich.segment import Segment
from rich.style import Style
from textual.actions import SkipAction
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from epdoctor.facts.logs.prefix import shown as clean  # the panes' name for it

MAX_LINES = 2000
TITLE_EVERY_S = 1.0
MAX_MARKS = 32
MAX_WIDTH = 512  # wider lines scroll to 512 columns; the log file has the rest
_STYLES: dict[str, Style] = {}
_ROW_STYLES: dict[tuple[Style, str | None], Style] = {}
_MATCH = Style(reverse=True, bold=True)


def _style(name: str | None) -> Style:
    if not name:
        return Style.null()
    got = _STYLES.get(name)
    if got is None:
        got = _STYLES[name] = Style.parse(name)
    return got


def _row_style(widget: Style, name: str | None) -> Style:
    """The pane's own style with a line's signature style on top (a few pairs in a run)."""
    got = _ROW_STYLES.get((widget, name))
    if got is None:
        if len(_ROW_STYLES) > 256:  # a theme change makes new pairs: keep the cache small
            _ROW_STYLES.clear()
        got = _ROW_STYLES[(widget, name)] = widget + _style(name)
    return got


class LogPane(ScrollView, can_focus=True):
    """A capped, searchable, follow-the-tail view of one stream."""

    def __init__(
        self,
        name: str,
        styler: Callable[[str], str | None] | None = None,
        max_lines: int = MAX_LINES,
        title: str | None = None,
        **kw: object,
    ) -> None:
        super().__init__(**kw)  # type: ignore[arg-type]
        self.stream = name
        self.heading = title or name  # e.g. "rank3 · host-b" when the launch spans hosts
        self.styler = styler or (lambda line: None)
        self.lines: deque[tuple[str, str | None]] = deque(maxlen=max_lines)
        self.total = 0
        self.search = ""
        self.follow = True
        self._width = 0
        self._titled = 0.0
        self.marks: list[tuple[str, str]] = []  # (evidence text, style) from the log analyzer
        self._frame: tuple[Style, int] | None = None  # (own style, width) of this frame
        self.border_title = self.heading
        self.wrap = False  # `w` on the launch screen: long lines wrap instead of scrolling
        self._rows: list[tuple[int, int]] = []  # wrapped: (line index, first column) per row
        self._rows_for: tuple[int, int, int] = (-1, -1, -1)  # (lines, total, width) of _rows

    # --- wrapping (k9s's `w`) ----------------------------------------------
    def set_wrap(self, wrap: bool) -> None:
        """Wrap long lines at the pane's width (no sideways scrolling), or stop wrapping."""
        self.wrap = wrap
        self._rows_for = (-1, -1, -1)
        self._relayout()
        if self.follow:
            self.scroll_to(y=self.max_scroll_y, animate=False)
        self.refresh()

    def _wrapped_rows(self, width: int) -> list[tuple[int, int]]:
        key = (len(self.lines), self.total, width)
        if key != self._rows_for:
            rows: list[tuple[int, int]] = []
            for i, (text, _) in enumerate(self.lines):
                rows += [(i, start) for start in range(0, max(1, len(text)), width)]
            self._rows, self._rows_for = rows, key
        return self._rows

    def _relayout(self) -> None:
        width = self.scrollable_content_region.width
        if self.wrap and width > 0:
            size = Size(width, len(self._wrapped_rows(width)))
        else:
            size = Size(self._width, len(self.lines))
        if size != self.virtual_size:
            self._set_virtual_size(size)

    def add_lines(
        self, lines: Iterable[str | tuple[str, str | None]], arrived: int | None = None
    ) -> None:
        """Append a batch (called on the UI thread); one refresh for the whole batch.

        An item is a line, or (line, style) when the producer already cleaned it and looked
        up its style (the launch worker does, so that work stays off the UI thread).
        `arrived` also counts lines the producer dropped from the front of a batch longer
        than the window.
        """
        if not isinstance(lines, (list, tuple)):
            lines = list(lines)
        if not lines:
            return
        self.total += len(lines) if arrived is None else arrived
        cap = self.lines.maxlen
        if cap is not None and len(lines) > cap:
            lines = lines[-cap:]  # the rest would be dropped by the window anyway
        if not self.marks and all(type(item) is tuple for item in lines):
            self.lines.extend(lines)  # styled by the producer: nothing to do per line here
            widest = max(len(line) for line, _ in lines)
        else:
            kept = [self._item(item) for item in lines]
            self.lines.extend(kept)
            widest = max(len(line) for line, _ in kept)
        if widest > self._width:
            self._width = min(widest, MAX_WIDTH)
        at_end = self.follow
        self._relayout()  # a full window keeps its size (unless wrapped)
        now = time.monotonic()
        if now - self._titled >= TITLE_EVERY_S:  # the count in the title, once a second
            self._titled = now
            self.border_title = f"{self.heading} ({self.total} lines)"
        if at_end:
            self.scroll_to(y=self.max_scroll_y, animate=False)
        # The rows only: the border (with the title, costly to draw) keeps what it drew until
        # the title changes, which refreshes the whole pane.
        self.refresh(self.scrollable_content_region.reset_offset)

    def _item(self, item: str | tuple[str, str | None]) -> tuple[str, str | None]:
        if isinstance(item, tuple):
            line, style = item
            return line, (self._marked(line) or style) if self.marks else style
        line = clean(item)
        return line, self._style_of(line)

    def _set_virtual_size(self, size: Size) -> None:
        """New scroll limits and scrollbars for a longer window, without a screen layout.

        Assigning virtual_size reflows every widget on the screen, once per batch while the
        windows fill (16 panes: a layout 4 times a second). Only this pane's scroll state
        depends on it, so only that is updated; a scrollbar that appears asks for its own
        layout (show_vertical_scrollbar is a layout reactive).
        """
        update = getattr(self, "_scroll_update", None)  # Textual's own after a layout
        if update is None or not self.is_mounted:
            self.virtual_size = size
            return
        self.set_reactive(ScrollView.virtual_size, size)
        update(size)

    # --- keys: scroll at once ---------------------------------------------
    def _scroll_keys(self, dy: int | None = None, y: int | None = None) -> None:
        if not self.allow_vertical_scroll:
            raise SkipAction()
        target = y if y is not None else int(self.scroll_offset.y) + (dy or 0)
        self.scroll_to(y=max(0, min(target, self.max_scroll_y)), animate=False)

    def action_scroll_up(self) -> None:
        self._scroll_keys(dy=-1)

    def action_scroll_down(self) -> None:
        self._scroll_keys(dy=1)

    def action_page_up(self) -> None:
        self._scroll_keys(dy=-max(1, self.scrollable_content_region.height))

    def action_page_down(self) -> None:
        self._scroll_keys(dy=max(1, self.scrollable_content_region.height))

    def action_scroll_home(self) -> None:
        self._scroll_keys(y=0)

    def action_scroll_end(self) -> None:
        self._scroll_keys(y=self.max_scroll_y)  # back at the end: following again

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame = None  # found at the first row this frame draws (none when all cached)
        try:
            return super().render_lines(crop)
        finally:
            self._frame = None

    def render_line(self, y: int) -> Strip:
        if self._frame is None:  # once per frame, not per row: rich_style walks every ancestor
            self._frame = (self.rich_style, self.scrollable_content_region.width)
        widget, width = self._frame
        scroll_x, scroll_y = self.scroll_offset
        index = scroll_y + y
        if self.wrap:
            rows = self._wrapped_rows(width)
            if index >= len(rows):
                return Strip.blank(width, widget)
            index, scroll_x = rows[index]  # the row shows columns [start, start + width)
        if index >= len(self.lines):
            return Strip.blank(width, widget)
        text, style_name = self.lines[index]
        if text.isascii():  # clean() left printable characters only: one cell each
            row = self._row(text, scroll_x, width, _row_style(widget, style_name), widget)
            return Strip(row, width)
        base = _style(style_name)
        segments: list[Segment] = []
        if self.search and self.search in text:
            pos = 0
            while (hit := text.find(self.search, pos)) >= 0:
                segments.append(Segment(text[pos:hit], base))
                segments.append(Segment(self.search, base + _MATCH))
                pos = hit + len(self.search)
            segments.append(Segment(text[pos:], base))
        else:
            segments.append(Segment(text, base))
        strip = Strip(segments).crop(scroll_x, scroll_x + width)
        return strip.extend_cell_length(width).apply_style(widget)

    def _row(self, text: str, start: int, width: int, style: Style, pad: Style) -> list[Segment]:
        """Columns [start, start + width) of a one-cell-per-character line, padded to width,
        search hits marked: the segments of one Strip (each extra Strip per row per frame is
        more garbage for the collector: Textual's Strips cache what they derive)."""
        end = start + width
        out: list[Segment] = []
        pos = start
        term = self.search
        if term and term in text:
            hit = text.find(term)
            while 0 <= hit < end:
                a, b = max(hit, start), min(hit + len(term), end)
                if a < b:
                    if a > pos:
                        out.append(Segment(text[pos:a], style))
                    out.append(Segment(text[a:b], style + _MATCH))
                    pos = b
                hit = text.find(term, hit + len(term))
        if pos < min(end, len(text)):
            out.append(Segment(text[pos:end], style))
        used = max(0, min(len(text), end) - start)
        if used < width:
            out.append(Segment(" " * (width - used), pad))
        return out

    def on_resize(self) -> None:
        if self.wrap:
            self._relayout()
        if self.follow:  # the first layout after lines arrived (or a new size): the tail
            self.scroll_to(y=self.max_scroll_y, animate=False)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.follow = new >= self.max_scroll_y

    def mark(self, text: str, style: str) -> int:
        """Style every kept line containing `text` (a finding's evidence), and future ones."""
        if not text or any(t == text for t, _ in self.marks):
            return 0
        self.marks.append((text, style))
        del self.marks[:-MAX_MARKS]
        hits = 0
        for i, (line, _) in enumerate(self.lines):
            if text in line:
                self.lines[i] = (line, style)
                hits += 1
        if hits:
            self.refresh()
        return hits

    def _marked(self, line: str) -> str | None:
        for text, style in self.marks:
            if text in line:
                return style
        return None

    def _style_of(self, line: str) -> str | None:
        return self._marked(line) or self.styler(line)

    def set_search(self, term: str) -> int:
        """Mark `term`; returns how many kept lines contain it."""
        self.search = term
        self.refresh()
        return sum(1 for text, _ in self.lines if term and term in text)

    def next_match(self) -> bool:
        """Scroll to the next line (after the top one) containing the search term."""
        if not self.search:
            return False
        start = int(self.scroll_offset.y) + 1
        if self.wrap:
            rows = self._wrapped_rows(self.scrollable_content_region.width)
            start = rows[min(start, len(rows) - 1)][0] + 1 if rows else 0
        n = len(self.lines)
        for k in range(n):
            i = (start + k) % n
            if self.search in self.lines[i][0]:
                self.follow = False
                if self.wrap:  # the line's first row
                    rows = self._wrapped_rows(self.scrollable_content_region.width)
                    i = next(r for r, (line, _) in enumerate(rows) if line == i)
                self.scroll_to(y=i, animate=False)
                return True
        return False
