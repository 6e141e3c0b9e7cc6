"""The writing half of the ``fs`` tools: ``write_file`` and ``edit_file`` and their previews.

Both write atomically (:func:`~kode_nb.builtins._files.atomic_write`) through a handle on the
target's directory and keep an existing file's mode, holding the directory's write lock
(:func:`~kode_nb.builtins._files.write_lock`, ``flock``) from the read to the replace: two
kode_nb writes never interleave, and a process that appends under the same lock loses nothing. ``edit_file`` reads the file through a
handle and, just before the new version replaces it, checks that the file there still has the
same inode, size, modification time and SHA-256; if another process changed it in between, the
edit is refused (nothing is written) with a message telling the model to read it again. Where
``renameat2(RENAME_EXCHANGE)`` works, the new version is swapped in and the version swapped out
is checked once more: a write that landed on it during the replace makes the edit swap it back
and refuse, instead of losing that write. Their approval previews are unified diffs of the change, computed exactly as the
call would compute it; an edit that would fail previews the error instead.

``edit_file`` replaces ``old_string`` with ``new_string``. ``old_string`` must match exactly -
whitespace, indentation and line endings included - and exactly once, unless
``replace_all=true``; zero matches and several matches are errors that say what to do.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import stat
from collections.abc import Mapping
from typing import Any, NoReturn

from kode_nb.builtins._confine import Location, locate
from kode_nb.builtins._files import (
    BINARY_SAMPLE,
    atomic_write,
    binary_message,
    check_encoding,
    confined,
    decode,
    describe_size,
    looks_binary,
    open_entry,
    unified_diff,
    write_lock,
)
from kode_nb.errors import ToolError
from kode_nb.types import ToolContext

__all__ = ["EditTools", "apply_edit"]


def _encode(tool: str, text: str, encoding: str, shown: str) -> bytes:
    try:
        return text.encode(encoding)
    except UnicodeEncodeError as exc:
        raise ToolError(
            tool,
            f"Cannot write {shown!r} as {encoding}: character {text[exc.start]!r} at "
            f"position {exc.start} has no {encoding} encoding; use encoding='utf-8'.",
        ) from None


def apply_edit(
    text: str, old: str, new: str, replace_all: bool, *, tool: str, shown: str
) -> tuple[str, int]:
    """``(new text, replacements)``, or a ToolError saying why the edit cannot apply."""
    if not old:
        raise ToolError(
            tool,
            "old_string is empty: give the exact text to replace (to create or overwrite "
            "a whole file, use write_file).",
        )
    if old == new:
        raise ToolError(tool, "old_string and new_string are identical; there is nothing to do.")
    count = text.count(old)
    if count == 0:
        raise ToolError(tool, f"old_string was not found in {shown!r}. {_near_miss(text, old)}")
    if count > 1 and not replace_all:
        raise ToolError(
            tool,
            f"old_string was found {count} times in {shown!r}; it must match exactly once. "
            "Include more surrounding lines to make it unique, or pass replace_all=true to "
            f"replace all {count}.",
        )
    return text.replace(old, new, -1 if replace_all else 1), count if replace_all else 1


def _near_miss(text: str, old: str) -> str:
    """A hint for a string that was not found: line endings, or the closest line."""
    advice = "It must match exactly, including whitespace and indentation; read the file first."
    if "\r\n" in text and "\r\n" not in old and old.replace("\n", "\r\n") in text:
        return "The file uses CRLF (\\r\\n) line endings; old_string must use them too."
    first = next((line.strip() for line in old.splitlines() if line.strip()), "")
    lines = text.splitlines()
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(first, stripped, n=1, cutoff=0.6) if first else []
    if close:
        number = stripped.index(close[0]) + 1
        return f"The closest line is line {number}: {lines[number - 1]!r}. {advice}"
    return advice


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


Version = tuple[int, int, int, int, str]
"""(device, inode, size, mtime_ns, sha256) of a file's content."""


def _version_of(fd: int) -> Version:
    info = os.fstat(fd)
    chunks: list[bytes] = []
    offset = 0
    while chunk := os.pread(fd, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    data = b"".join(chunks)
    return (info.st_dev, info.st_ino, len(data), info.st_mtime_ns, _digest(data))


class _Unchanged:
    """The :class:`~kode_nb.builtins._files.ReplaceGuard` of ``edit_file``: the file must still
    be the version it read, and the version it replaces must not change during the replace."""

    def __init__(self, loc: Location, seen: Version, tool: str, shown: str) -> None:
        self.loc, self.seen, self.tool, self.shown = loc, seen, tool, shown

    def before(self) -> None:
        try:
            fd = self.loc.open(os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            self.refuse()
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode) or _version_of(fd) != self.seen:
                self.refuse()
        finally:
            os.close(fd)

    def after(self, dir_fd: int, replaced: str) -> bool:
        try:
            fd = os.open(replaced, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
        except OSError:
            return False
        try:
            return _version_of(fd) == self.seen
        finally:
            os.close(fd)

    def refuse(self) -> NoReturn:
        raise ToolError(
            self.tool,
            f"{self.shown!r} changed since edit_file read it (another process wrote "
            "to it meanwhile); nothing was written. Read the file again and redo the edit on "
            "its current content.",
        )


class EditTools:
    """``write_file`` and ``edit_file`` (mixed into :class:`kode_nb.builtins.fs.FileTools`)."""

    def __init__(self, max_edit_bytes: int) -> None:
        self.max_edit_bytes = max_edit_bytes

    def write_file(self, path: str, content: str, ctx: ToolContext, encoding: str = "utf-8") -> str:
        """Create a file, or replace its whole content. Missing parent directories are created.

        Args:
            path: The file, relative to the working directory or absolute.
            content: The complete new content.
            encoding: The text encoding to write, e.g. "utf-8".
        """
        tool = ctx.tool
        data = _encode(tool, content, check_encoding(tool, encoding), path)
        with confined(ctx, path, create=True) as loc:
            info = loc.lstat()
            if loc.name == "." or (info is not None and stat.S_ISDIR(info.st_mode)):
                raise ToolError(tool, f"{path!r} is a directory; write_file writes files.")
            previous = None if info is None else info.st_size
            with write_lock(loc):
                atomic_write(loc, data)
        if previous is None:
            return f"Created {path} ({len(data)} bytes)."
        return f"Wrote {len(data)} bytes to {path} (replacing {previous} bytes)."

    def edit_file(
        self,
        path: str,
        old_string: str,
        new_string: str,
        ctx: ToolContext,
        replace_all: bool = False,
        encoding: str = "utf-8",
    ) -> str:
        """Replace exact text in a file. old_string must appear exactly once (or use replace_all).

        Args:
            path: The file to edit.
            old_string: The exact text to replace, with enough context to be unique.
            new_string: The replacement text.
            replace_all: Replace every occurrence instead of requiring exactly one.
            encoding: The file's text encoding.
        """
        tool = ctx.tool
        enc = check_encoding(tool, encoding)
        with confined(ctx, path) as loc, write_lock(loc):
            text, seen = self._read_text(loc, enc, tool, path)
            new_text, count = apply_edit(
                text, old_string, new_string, replace_all, tool=tool, shown=path
            )
            data = _encode(tool, new_text, enc, path)
            atomic_write(loc, data, guard=_Unchanged(loc, seen, tool, path))
        return f"Edited {path}: {count} replacement{'s' if count != 1 else ''}."

    def _read_text(self, loc: Location, enc: str, tool: str, shown: str) -> tuple[str, Version]:
        """The text of an existing file to edit (size-limited, not binary, decodable), and its
        version (see :func:`_version`)."""
        try:
            fd = open_entry(loc, os.O_RDONLY, tool, shown)
        except FileNotFoundError:
            raise ToolError(
                tool, f"File not found: {shown!r}. To create a file, use write_file."
            ) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            what = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
            raise ToolError(tool, f"{shown!r} is {what}, not a file.")
        with os.fdopen(fd, "rb") as f:
            if info.st_size > self.max_edit_bytes:
                raise ToolError(
                    tool,
                    f"{shown!r} is {describe_size(info.st_size)}, over the "
                    f"{describe_size(self.max_edit_bytes)} limit for editing.",
                )
            data = f.read(self.max_edit_bytes + 1)
        seen = (info.st_dev, info.st_ino, len(data), info.st_mtime_ns, _digest(data))
        if looks_binary(data[:BINARY_SAMPLE], enc):
            raise ToolError(tool, binary_message(shown, len(data), tool))
        return decode(data, enc, "strict", tool=tool, shown=shown), seen

    # ----------------------------------------------------------------- approval previews

    def preview_write(self, arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
        """The diff ``write_file`` would make (against an empty file for a new one)."""
        path, content = str(arguments.get("path", "")), str(arguments.get("content", ""))
        if ctx is None:
            return f"write {path} ({len(content)} characters)"
        enc = check_encoding(ctx.tool, str(arguments.get("encoding", "utf-8")))
        try:
            loc = locate(path, ctx.allowed_paths, tool=ctx.tool)
        except (FileNotFoundError, NotADirectoryError):
            return unified_diff(None, content, path)  # its directory will be made
        with loc:
            if loc.lstat() is None:
                return unified_diff(None, content, path)
            try:
                old = self._read_text(loc, enc, ctx.tool, path)[0]
            except ToolError as exc:
                return f"replace {loc.path} (its current content cannot be shown: {exc.message})"
        return unified_diff(old, content, path)

    def preview_edit(self, arguments: Mapping[str, Any], ctx: ToolContext | None) -> str:
        """The diff ``edit_file`` would make, or why it would fail."""
        path = str(arguments.get("path", ""))
        if ctx is None:
            return f"edit {path}"
        tool = ctx.tool
        try:
            enc = check_encoding(tool, str(arguments.get("encoding", "utf-8")))
            with confined(ctx, path) as loc:
                text = self._read_text(loc, enc, tool, path)[0]
            new_text, _ = apply_edit(
                text,
                str(arguments.get("old_string", "")),
                str(arguments.get("new_string", "")),
                bool(arguments.get("replace_all", False)),
                tool=tool,
                shown=path,
            )
        except ToolError as exc:
            return f"(this edit would fail: {exc.message})"
        return unified_diff(text, new_text, path)
