"""File helpers for :mod:`kode_nb.builtins.fs`: confined paths, atomic writes, decoding, diffs.

* :func:`entry_path` confines a path whose *last component is not followed* (delete and move act
  on a symlink itself, not on what it points to); :meth:`ToolContext.resolve_path` follows it.
* :func:`atomic_write` writes a temporary file in the target's directory and ``os.replace``-s it
  over the target, so readers see the old content or the new, never a partial file; the old
  file's mode is kept.
* :func:`decode` turns bytes into text or raises a :class:`~kode_nb.errors.ToolError` that says
  which byte failed and how to read the file anyway.
* :func:`unified_diff` renders the approval preview of a change.
* :func:`walk` and :func:`glob_match` do ``list_files``' listing (symlinks are not followed).
"""

from __future__ import annotations

import codecs
import difflib
import fnmatch
import functools
import mimetypes
import os
import re
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from kode_nb.errors import ToolError, ToolPermissionError
from kode_nb.types import ToolContext

__all__ = [
    "BINARY_SAMPLE",
    "atomic_write",
    "binary_message",
    "check_encoding",
    "decode",
    "describe_size",
    "entry_path",
    "file_type",
    "glob_match",
    "image_mime",
    "looks_binary",
    "unified_diff",
    "walk",
]

BINARY_SAMPLE = 8192
"""How many leading bytes are checked for NUL bytes to call a file binary."""

_MAX_DIFF_LINES = 400


def describe_size(size: int) -> str:
    """``"512 bytes"``, ``"3.4 KiB"``, ``"2.0 MiB"``."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def entry_path(ctx: ToolContext, path: str) -> Path:
    """``path`` inside the allowed roots, its parent resolved but its last component kept."""
    text = os.path.expanduser(path)
    parent, name = os.path.split(text.rstrip(os.sep) or text)
    if name in ("", ".", ".."):
        raise ToolPermissionError(
            ctx.tool, f"Invalid path {path!r}: name a file or directory inside the allowed paths."
        )
    return ctx.resolve_path(parent or ".") / name


def check_encoding(tool: str, encoding: str) -> str:
    """The codec's canonical name, or a ToolError naming the unknown encoding."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ToolError(
            tool, f"Unknown encoding {encoding!r}: use a Python codec name such as 'utf-8', "
            "'latin-1', 'cp1252' or 'utf-16'.",
        ) from None  # fmt: skip


_IMAGE_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_mime(head: bytes) -> str | None:
    """The MIME type of a PNG, JPEG, GIF or WEBP image starting with ``head``, else ``None``."""
    for signature, mime in _IMAGE_SIGNATURES:
        if head.startswith(signature):
            return mime
    return "image/webp" if head[:4] == b"RIFF" and head[8:12] == b"WEBP" else None


def looks_binary(sample: bytes, encoding: str) -> bool:
    """NUL bytes in ``sample`` mean binary (except for UTF-16/32 text, which has them)."""
    return not encoding.startswith(("utf-16", "utf-32")) and b"\x00" in sample


def binary_message(shown: str, size: int, tool: str) -> str:
    """The error text for a binary file that read_file will not return as text."""
    guess = mimetypes.guess_type(shown)[0] or "unknown type"
    return (
        f"{shown!r} is a binary file ({describe_size(size)}, {guess}; it contains NUL bytes), "
        f"not text; {tool} returns text files and PNG/JPEG/GIF/WEBP images only."
    )


def decode(
    data: bytes, encoding: str, errors: str, *, tool: str, shown: str, start: int = 0, line: int = 1
) -> str:
    """Decode ``data``; a failure raises a ToolError with the bad byte and what to try instead.

    ``start`` and ``line`` locate ``data`` in the file (the byte offset and line it begins at).
    """
    try:
        return data.decode(encoding, errors)
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        where = line + data.count(b"\n", 0, exc.start)
        alternative = "'latin-1'" if encoding != "iso8859-1" else "'cp1252'"
        raise ToolError(
            tool, f"{shown!r} is not valid {encoding} text: byte 0x{bad} at offset "
            f"{start + exc.start} (line {where}) cannot be decoded ({exc.reason}). If the file "
            "uses another encoding, "
            f"pass encoding= (e.g. encoding={alternative}); to read it anyway with U+FFFD for "
            "the bad bytes, pass errors='replace'.",
        ) from None  # fmt: skip


def atomic_write(target: Path, data: bytes) -> bool:
    """Write ``data`` to ``target`` atomically; True if it created the file.

    A temporary file in the same directory gets the data (flushed and fsynced), the mode of the
    file it replaces (new files: 0o666 less the umask), then ``os.replace``s the target. On any
    failure the temporary file is removed and the target is left as it was.
    """
    try:
        mode: int | None = stat.S_IMODE(os.stat(target).st_mode)
    except FileNotFoundError:
        mode = None
    temp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666 if mode is None else 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return mode is None


def unified_diff(old: str | None, new: str, name: str) -> str:
    """A unified diff from ``old`` (``None``: the file does not exist) to ``new``, capped."""
    before = [] if old is None else old.splitlines(keepends=True)
    after = new.splitlines(keepends=True)
    lines = list(
        difflib.unified_diff(
            before, after, "/dev/null" if old is None else f"a/{name}", f"b/{name}", n=3
        )
    )
    if not lines:
        return f"(no change to {name})"
    out = [
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    ]
    if len(out) > _MAX_DIFF_LINES:
        dropped = len(out) - _MAX_DIFF_LINES
        out = [*out[:_MAX_DIFF_LINES], f"... ({dropped} more diff lines not shown)\n"]
    return "".join(out).rstrip("\n")


def file_type(mode: int) -> str:
    """``file``, ``directory``, ``symlink`` or ``other`` for an ``st_mode``."""
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "directory"
    return "file" if stat.S_ISREG(mode) else "other"


def walk(top: Path, recursive: bool, hidden: bool) -> Iterator[tuple[str, os.stat_result]]:
    """(relative posix path, lstat) of each entry under ``top``, without following symlinks."""
    pending = [top]
    while pending:
        folder = pending.pop()
        try:
            with os.scandir(folder) as it:
                items = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable directory: skip it
        for item in items:
            if not hidden and item.name.startswith("."):
                continue
            info = item.stat(follow_symlinks=False)
            yield Path(item.path).relative_to(top).as_posix(), info
            if recursive and stat.S_ISDIR(info.st_mode):
                pending.append(Path(item.path))


def glob_match(rel: str, pattern: str) -> bool:
    """Glob match: a pattern without ``/`` matches names, one with ``/`` relative paths.

    In paths ``*`` and ``?`` stop at ``/``; ``**/`` matches any number of directories.
    """
    if "/" not in pattern:
        return fnmatch.fnmatchcase(rel.rsplit("/", 1)[-1], pattern)
    return _glob_regex(pattern).fullmatch(rel) is not None


@functools.lru_cache(maxsize=64)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    out: list[str] = []
    i = 0
    while i < len(pattern):
        char = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        end = pattern.find("]", i + 2) if char == "[" else -1
        if char == "*":
            out.append("[^/]*")
        elif char == "?":
            out.append("[^/]")
        elif end != -1:
            body = pattern[i + 1 : end].replace("\\", "\\\\")
            out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
            i = end
        else:
            out.append(re.escape(char))
        i += 1
    return re.compile("".join(out))
