"""Terminal layout shared by the rich reports, designed for 80 columns first.

* ``mid(s, width)``: an ellipsis in the middle, so a path keeps its file name and a host name
  the index at its end;
* ``split_domain(names)``: host names without the DNS domain they all share (said once, in a
  title, instead of on every row);
* ``Words(text)``: a value wrapped between words only; a word longer than the line (a path, a
  host name) is shortened in the middle instead of being cut into slices;
* ``hang(prefix, text)``: ``prefix`` then ``text``, wrapped lines start under the text
  (a hanging indent for evidence and ``fix:`` lines);
* ``KeyValues(rows)``: two columns, key and value; a key too long for its column, or every
  row when the line is narrow, is folded (key on one line, value indented below);
* ``FitTable(...)``: a table that fits the line: it drops empty columns, then moves the columns
  every row agrees on into one line under it, then shortens host names in the middle, and
  folds each row into a block when even that does not fit.

Every renderable measures the width it is given (``options.max_width``), so it fits inside a
panel as well as at the top level. rich is imported inside the methods: the JSON and Markdown
paths that import the reports need no terminal library.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

ELLIPSIS = "…"
_IP = re.compile(r"^\d+(\.\d+){3}$")


def mid(s: str, width: int) -> str:
    """`s` shortened to `width` characters with an ellipsis in the middle (tail kept longer)."""
    if width <= 0:
        return ""
    if len(s) <= width:
        return s
    if width == 1:
        return ELLIPSIS
    head = (width - 1) * 2 // 5
    tail = width - 1 - head
    return s[:head] + ELLIPSIS + s[len(s) - tail :]


def _host_part(name: str) -> str:
    return name.split(":", 1)[0] if ":" in name else name


def split_domain(names: Sequence[str]) -> tuple[list[str], str]:
    """(names without their shared DNS domain, that domain); ('', names) if they share none.

    Works on host names and on rank keys of the form ``host:pid``; IP addresses are kept.
    """
    hosts = [_host_part(n) for n in names]
    if len(set(hosts)) < 2 or any("." not in h or _IP.match(h) for h in hosts):
        return list(names), ""
    domains = {h.split(".", 1)[1] for h in hosts}
    if len(domains) != 1:
        return list(names), ""
    domain = domains.pop()
    return [n.replace("." + domain, "", 1) for n in names], domain


def _text(value: Any, style: str = "") -> Any:
    from rich.text import Text

    return value.copy() if isinstance(value, Text) else Text(str(value), style=style)


def _words(text: Any) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"\S+", text.plain)]


def shorten_words(text: Any, width: int) -> Any:
    """A copy of the rich Text where every word longer than `width` is shortened in the middle."""
    from rich.text import Text

    out = Text(style=text.style, end=text.end)
    pos = 0
    for start, end in _words(text):
        out.append_text(text[pos:start])
        if end - start > width:
            head = (width - 1) * 2 // 5
            tail = width - 1 - head
            out.append_text(text[start : start + head])
            out.append(ELLIPSIS, style="dim")
            out.append_text(text[end - tail : end])
        else:
            out.append_text(text[start:end])
        pos = end
    out.append_text(text[pos:])
    return out


class Words:
    """A value that wraps between words only; over-long words get a middle ellipsis.

    ``min_width`` is how narrow a table may make it (a long path then loses its middle).
    """

    def __init__(self, text: Any, style: str = "", min_width: int = 16) -> None:
        self.text = _text(text, style)
        self.min_width = min_width

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        lines = self.text.plain.split("\n") or [""]
        longest_word = max((len(w) for w in self.text.plain.split()), default=0)
        widest = max(len(line) for line in lines)
        low = min(longest_word, self.min_width, options.max_width)
        return Measurement(low, max(low, min(widest, options.max_width)))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        width = max(1, options.max_width)
        text = shorten_words(self.text, width)
        text.overflow = "fold"  # no word is longer than the line any more: never used
        text.no_wrap = False
        yield text


class Units:
    """Items (e.g. ``header value`` pairs) joined by `sep`, wrapped only between items."""

    def __init__(self, items: Sequence[Any], sep: str = " · ") -> None:
        self.items = [_text(i) for i in items]
        self.sep = sep

    def __rich_measure__(self, console: Any, options: Any) -> Any:
        from rich.measure import Measurement

        widest = max((len(i.plain) for i in self.items), default=0)
        total = sum(len(i.plain) for i in self.items) + len(self.sep) * max(0, len(self.items) - 1)
        low = min(widest, 16, options.max_width)
        return Measurement(low, max(low, min(total, options.max_width)))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.text import Text

        width = max(1, options.max_width)
        line = Text()
        for item in self.items:
            item = shorten_words(item, width)
            if line.plain and len(line.plain) + len(self.sep) + len(item.plain) > width:
                yield line
                line = Text()
            if line.plain:
                line.append(self.sep, style="dim")
            line.append_text(item)
        if line.plain:
            yield line


def hang(prefix: Any, text: Any, style: str = "") -> Any:
    """`prefix` then `text`; wrapped lines start under the text, not at column 1.

    `text` is a str, a rich Text (wrapped between words) or any renderable (e.g. Units).
    """
    from rich.table import Table
    from rich.text import Text

    head = _text(prefix, style)
    body = Words(text, style, min_width=8) if isinstance(text, (str, Text)) else text
    grid = Table.grid(padding=0)
    grid.add_column(width=len(head.plain), no_wrap=True)
    grid.add_column()
    grid.add_row(head, body)
    return grid


class KeyValues:
    """(key, value) rows: a key column of at most `key_max`, values wrapped between words.

    A key longer than `key_max`, or every key when the line leaves a value less than
    `value_min` columns, is folded: the key on its own line, the value indented below.
    """

    def __init__(
        self,
        rows: Iterable[tuple[Any, Any]],
        key_style: str = "bold",
        key_max: int = 22,
        value_min: int = 30,
        line_breaks: str | None = "; ",
    ) -> None:
        self.rows = [(_text(k, key_style), _text(v)) for k, v in rows]
        self.key_max, self.value_min, self.line_breaks = key_max, value_min, line_breaks

    def _value(self, v: Any) -> Any:
        if self.line_breaks and self.line_breaks in v.plain:  # one entry a line
            return _replace_breaks(v, self.line_breaks)
        return v

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from rich.padding import Padding
        from rich.table import Table

        width = options.max_width
        keys = [k for k, _ in self.rows if len(k.plain) <= self.key_max]
        key_w = max((len(k.plain) for k in keys), default=0)
        fold_all = width - key_w - 2 < self.value_min
        table = None
        for k, v in self.rows:
            value = Words(self._value(v), min_width=8)
            if fold_all or len(k.plain) > self.key_max:
                if table is not None:
                    yield table
                    table = None
                yield shorten_words(k, max(1, width))
                yield Padding(value, (0, 0, 0, 2))
                continue
            if table is None:
                table = Table.grid(padding=(0, 2, 0, 0))
                table.add_column(width=key_w, no_wrap=True)
                table.add_column()
            table.add_row(k, value)
        if table is not None:
            yield table


def _replace_breaks(v: Any, sep: str) -> Any:
    from rich.text import Text

    out = Text(style=v.style)
    pos = 0
    plain = v.plain
    while True:
        i = plain.find(sep, pos)
        if i < 0:
            out.append_text(v[pos:])
            return out
        out.append_text(v[pos:i])
        out.append(";\n")
        pos = i + len(sep)


class FitTable:
    """A table of rows that fits the line it is drawn on.

    `headers` are short words (they never wrap). A cell is a str or rich Text; None means "does
    not apply to this row" (e.g. a node that could not be reached) and is drawn as "-". Columns
    in `keep` stay in the table. Column `shrink` (the row's name) may lose its middle.
    When the table is too wide, the columns every row agrees on move to one line under it
    ("every <noun>: header value · ..."); when it still is, each row becomes a block.
    """

    def __init__(
        self,
        title: str,
        headers: Sequence[str],
        rows: Sequence[Sequence[Any]],
        noun: str = "row",
        keep: Sequence[int] = (0,),
        shrink: int = 0,
        row_styles: Sequence[str | None] | None = None,
        justify: dict[int, str] | None = None,
    ) -> None:
        self.title, self.headers, self.noun = title, list(headers), noun
        self.rows = [[None if c is None else _text(c) for c in r] for r in rows]
        self.keep, self.shrink = set(keep), shrink
        self.row_styles = list(row_styles or [None] * len(self.rows))
        self.justify = justify or {}

    # --- which columns -------------------------------------------------------
    def _nonempty(self) -> list[int]:
        return [
            i
            for i in range(len(self.headers))
            if i in self.keep or any(r[i] is not None and r[i].plain for r in self.rows)
        ]

    def _constant(self, cols: list[int]) -> list[int]:
        out = []
        for i in cols:
            vals = {r[i].plain for r in self.rows if r[i] is not None}
            if i not in self.keep and len(vals) == 1 and len(self.rows) > 1:
                out.append(i)
        return out

    def _table(self, cols: list[int], shrink_to: int | None) -> Any:
        from rich import box
        from rich.table import Table

        t = Table(
            title=self.title,
            title_justify="left",
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            padding=(0, 1),
        )
        for i in cols:
            t.add_column(self.headers[i], no_wrap=True, justify=self.justify.get(i, "left"))
        for r, style in zip(self.rows, self.row_styles, strict=False):
            cells = []
            for i in cols:
                c = r[i] if r[i] is not None else _text("-", "dim")
                if i == self.shrink and shrink_to is not None:
                    c = shorten_words(c, shrink_to)
                cells.append(c)
            t.add_row(*cells, style=style)
        return t

    def _width(self, console: Any, table: Any) -> int:
        from rich.measure import Measurement

        return Measurement.get(console, console.options.update_width(10_000), table).maximum

    def _constant_line(self, cols: list[int]) -> Any:
        from rich.text import Text

        items = []
        for i in cols:
            item = Text(f"{self.headers[i]} ", style="dim")
            item.append_text(next(r[i] for r in self.rows if r[i] is not None))
            items.append(item)
        return hang(Text(f"every {self.noun}: ", style="dim"), Units(items))

    def __rich_console__(self, console: Any, options: Any) -> Any:
        width = options.max_width
        cols = self._nonempty()
        table = self._table(cols, None)
        if self._width(console, table) <= width:
            yield table
            return
        moved = self._constant(cols)
        cols = [i for i in cols if i not in moved]
        table = self._table(cols, None)
        need = self._width(console, table)
        if need > width and self.shrink in cols:
            longest = max(
                (len(r[self.shrink].plain) for r in self.rows if r[self.shrink]), default=0
            )
            target = longest - (need - width)
            if target >= 12:
                table = self._table(cols, target)
                need = self._width(console, table)
        if need <= width:
            yield table
        else:
            yield from self._blocks(cols, width)
        if moved:
            yield self._constant_line(moved)

    def _blocks(self, cols: list[int], width: int) -> Any:
        """Each row as a block: its first kept cells on one line, the others indented below."""
        from rich.text import Text

        yield Text(self.title, style="italic")
        head_cols = [i for i in cols if i in self.keep]
        for r, style in zip(self.rows, self.row_styles, strict=False):
            head = Text(style=style or "")
            for n, i in enumerate(head_cols):
                if n:
                    head.append("  ")
                head.append_text(r[i] if r[i] is not None else Text("-"))
            yield shorten_words(head, max(1, width))
            items = []
            for i in cols:
                if i not in self.keep:
                    item = Text(f"{self.headers[i]} ", style="dim")
                    item.append_text(r[i] if r[i] is not None else Text("-"))
                    items.append(item)
            if items:
                yield hang("  ", Units(items))
