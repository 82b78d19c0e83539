"""Input and output at the edge: open only what can be read, cap every read, write safely,
and make text that came from a target or a file harmless to a terminal.

Standard library only (rich is imported lazily by ``markup``), so every layer may use it.

- ``check_source(path, what)``: a path given as input must be a readable regular file; a FIFO,
  a device, a socket or a directory would hang or never end a read. Raises ``BadInput`` with
  one line naming the problem.
- ``read_capped(fh, cap, what)``: at most ``cap`` bytes, ``BadInput`` when there are more.
- ``check_output(path, force)`` and ``write_file(path, data, force)``: an output file is never
  written through a symbolic link, never replaces a non-regular file, replaces an existing
  file only with ``force``, and is written whole (a temporary file renamed into place).
- ``plain(text)``: C0/C1 control characters and ESC sequences removed (newlines and tabs kept);
  ``markup(text)``: ``plain`` then escaped for rich markup.
- ``loads_json(data, what)``: JSON with a one-line error and a nesting limit (parsed JSON is
  walked by recursive code later; its depth is measured here without recursion).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import tempfile
from typing import BinaryIO

from epdoctor.model import EpdoctorError

# ESC sequences (CSI, OSC up to BEL or ST, other two-byte ones), then any other control char
# except \t and \n. C1 controls (0x80-0x9f) as characters: a terminal may read them as CSI.
_ESC = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST (hyperlinks, titles)
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC ... ST
    r"|\x1b[ -/]*[0-~]?"  # two-byte (and a lone ESC)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"  # 8-bit OSC
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)


class BadInput(EpdoctorError):
    """An input or output path epdoctor will not use; the message is one line."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def check_source(path: str, what: str = "file") -> None:
    """Refuse a path that is not a readable regular file (a symlink to one is fine).

    Opened with O_NONBLOCK only to learn whether it can be read, so a FIFO never blocks here."""
    if path == "":
        raise BadInput(f"{what}: the path is empty")
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if what == "log file":
            raise BadInput(f"no such log file: {path}") from None
        raise BadInput(f"cannot read {what} {path}: no such file") from None
    except OSError as exc:
        raise BadInput(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if not stat.S_ISREG(st.st_mode):
        raise BadInput(f"{what} {path} is {_kind(st.st_mode)}, not a regular file")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except PermissionError:
        raise BadInput(f"cannot read {what} {path}: permission denied") from None
    except OSError as exc:
        raise BadInput(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    os.close(fd)


def read_capped(fh: BinaryIO, cap: int, what: str) -> bytes:
    """Read at most ``cap`` bytes; more than that is an error, not a silent cut."""
    data = fh.read(cap + 1)
    if len(data) > cap:
        raise BadInput(f"{what} is larger than {_size(cap)}")
    return data


def _size(n: int) -> str:
    for unit in ("GiB", "MiB", "KiB"):
        scale = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10}[unit]
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"


# ---- output --------------------------------------------------------------------------------


def check_output(path: str, force: bool = False, what: str = "output file") -> None:
    """Refuse an output path before any work is done: see the module docstring."""
    if path == "":
        raise BadInput(f"{what}: the path is empty")
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise BadInput(f"{path} is a symbolic link; not writing through it")
        if not stat.S_ISREG(st.st_mode):
            raise BadInput(f"{path} is {_kind(st.st_mode)}, not a regular file; not writing it")
        if not force:
            raise BadInput(f"{path} exists; pass --force to replace it")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise BadInput(f"cannot write {path}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise BadInput(f"cannot write {path}: directory {parent} is not writable")


def write_file(path: str, data: bytes, force: bool = False, mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` whole: to a temporary file next to it, renamed into place."""
    check_output(path, force)
    parent = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".epdoctor-", dir=parent)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        check_output(path, force)  # nothing swapped in meanwhile
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


# ---- foreign text --------------------------------------------------------------------------


def plain(text: object) -> str:
    """Text without control characters or escape sequences (newlines and tabs kept)."""
    s = text if isinstance(text, str) else str(text)
    return _ESC.sub("", s) if _needs_clean(s) else s


def _needs_clean(s: str) -> bool:
    return any((c < " " and c not in "\t\n") or "\x7f" <= c <= "\x9f" for c in s)


def markup(text: object) -> str:
    """Foreign text for a rich markup string: cleaned, then every ``[`` escaped."""
    from rich.markup import escape

    return escape(plain(text))


def json_depth(doc: object, limit: int) -> int:
    """Nesting depth of parsed JSON up to ``limit`` (returns limit + 1 when deeper)."""
    stack: list[tuple[object, int]] = [(doc, 1)]
    deepest = 0
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)
    return deepest


def loads_json(data: bytes | str, what: str, max_depth: int = 64) -> object:
    """json.loads with one-line errors, and a nesting limit (deep JSON breaks recursive code)."""
    import json

    try:
        doc = json.loads(data)
    except RecursionError:
        raise BadInput(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise BadInput(f"{what} is not valid JSON: {exc}") from None
    if json_depth(doc, max_depth) > max_depth:
        raise BadInput(f"{what} is nested too deeply (more than {max_depth} levels)")
    return doc
