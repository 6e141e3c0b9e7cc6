"""Built-in ``fs`` tools (``group:fs``): read, write, edit, list, delete, move, inspect files.

============= ====== ========================================================================
read_file     read   text by lines (``offset``/``limit``), any encoding; images as image blocks
write_file    edit   create or replace a file, atomically; approval shows the diff
edit_file     edit   replace an exact string (once, or every time with ``replace_all``)
list_files    read   a directory, optionally recursive and filtered by a glob
delete_file   delete one file or symlink; approval shows what goes
move_file     move   move or rename a file or directory
get_file_info read   exists, type, size, modification time, mode
============= ====== ========================================================================

Every path is confined to the policy's allowed paths by resolving it from an open handle on
the root, one component at a time (:mod:`kode_nb.builtins._confine`), and every operation then
acts through directory handles, never on a path string resolved earlier: relative paths start
at the first allowed root, and ``..``, symlinks or absolute paths that end up outside the root
are refused (status ``denied``), also when another process swaps directories and symlinks while
a call runs. Reading, writing and editing follow symlinks (to a target inside the same root);
delete, move and info act on a symlink itself.

Writes are atomic (:func:`~kode_nb.builtins._files.atomic_write`): an anonymous temporary file
in the same directory, then a rename; an edited file keeps its mode; an edit refuses to replace
a file that changed after it was read. Limits are set per tool set with :class:`FsLimits`.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Annotated, Any, Literal

from pydantic import Field

from kode_nb.builtins._common import make_tool
from kode_nb.builtins._confine import Location
from kode_nb.builtins._files import (
    BINARY_SAMPLE,
    binary_message,
    check_encoding,
    confined,
    decode,
    describe_size,
    file_type,
    glob_match,
    image_mime,
    looks_binary,
    name_of,
    open_entry,
    walk,
)
from kode_nb.builtins.fs_edit import EditTools
from kode_nb.errors import ConfigurationError, ToolError
from kode_nb.tools._model import Tool
from kode_nb.types import ImageBlock, TextBlock, ToolContext, ToolResult

__all__ = ["FsLimits", "fs_tools"]

MiB = 1024 * 1024


@dataclass(frozen=True, kw_only=True)
class FsLimits:
    """Size limits of the ``fs`` tools."""

    max_read_bytes: int = MiB
    """The most ``read_file`` returns in one call (use ``offset``/``limit`` for more)."""
    max_edit_bytes: int = 10 * MiB
    """The largest file ``edit_file`` edits (and write/edit previews diff)."""
    max_list_entries: int = 1000
    """The most entries ``list_files`` returns."""

    def __post_init__(self) -> None:
        for name in ("max_read_bytes", "max_edit_bytes", "max_list_entries"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigurationError(f"FsLimits({name}=...) must be an int >= 1, got {value!r}")


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, timezone.utc).isoformat()


def _lines(f: IO[bytes], cap: int) -> Iterator[tuple[bytes, bool]]:
    """Each line (with its newline) and whether it is whole; a line over ``cap`` is cut."""
    while chunk := f.readline(cap):
        whole = chunk.endswith(b"\n") or len(chunk) < cap
        while not whole and (rest := f.readline(cap)):
            if rest.endswith(b"\n"):
                break
        yield chunk, whole


def _open_file(tool: str, loc: Location, shown: str) -> tuple[IO[bytes], os.stat_result]:
    """The regular file at ``loc``, open for reading, and its stat."""
    try:
        fd = open_entry(loc, os.O_RDONLY, tool, shown)
    except FileNotFoundError:
        raise ToolError(tool, f"File not found: {shown!r}.") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ToolError(tool, f"{shown!r} is a directory, not a file; use list_files for it.")
        raise ToolError(tool, f"{shown!r} is not a regular file (a device, FIFO or socket).")
    return os.fdopen(fd, "rb"), info


class FileTools(EditTools):
    """The ``fs`` tools over one :class:`FsLimits`; each public method is a tool."""

    def __init__(self, limits: FsLimits) -> None:
        super().__init__(limits.max_edit_bytes)
        self.limits = limits

    def read_file(
        self,
        path: str,
        ctx: ToolContext,
        offset: Annotated[int, Field(ge=1)] = 1,
        limit: Annotated[int | None, Field(ge=1)] = None,
        encoding: str = "utf-8",
        errors: Literal["strict", "replace"] = "strict",
    ) -> ToolResult:
        """Read a text file (or an image). Large files: read them in parts with offset and limit.

        Args:
            path: The file, relative to the working directory or absolute.
            offset: The first line to return (1-based).
            limit: How many lines to return (default: all, up to the size limit).
            encoding: The file's text encoding, e.g. "utf-8", "latin-1", "utf-16".
            errors: "strict" fails on bytes that are not valid in the encoding; "replace"
                shows them as U+FFFD.
        """
        tool, cap = ctx.tool, self.limits.max_read_bytes
        enc = check_encoding(tool, encoding)
        with confined(ctx, path) as loc:
            f, info = _open_file(tool, loc, path)
        size = info.st_size
        details: dict[str, Any] = {"path": str(loc.path), "size": size, "encoding": enc}
        whole = offset == 1 and limit is None
        with f:
            sample = f.read(BINARY_SAMPLE)
            mime = image_mime(sample)
            if mime is not None and whole and size <= cap:
                data = sample + f.read()
                note = TextBlock(text=f"{path} ({mime}, {describe_size(size)})")
                return ToolResult(
                    content=(note, ImageBlock.from_bytes(data, mime)),
                    details={**details, "mime_type": mime},
                )
            if mime is not None or looks_binary(sample, enc):
                raise ToolError(tool, binary_message(path, size, tool))
            if whole or enc.startswith(("utf-16", "utf-32")):
                if size > cap:
                    raise ToolError(
                        tool,
                        f"{path!r} is {describe_size(size)}, over the "
                        f"{describe_size(cap)} read_file limit. Read it in parts: offset (the "
                        "first line, 1-based) and limit (number of lines), e.g. offset=1, "
                        "limit=500; then offset=501...",
                    )
                text = decode(sample + f.read(), enc, errors, tool=tool, shown=path)
                if whole:
                    details["lines"] = text.count("\n") + (not text.endswith("\n") and bool(text))
                    return ToolResult(
                        content=(TextBlock(text=text or f"({path} is empty)"),), details=details
                    )
                return _slice(text.splitlines(keepends=True), offset, limit, path, details)
            f.seek(0)
            return self._read_lines(f, offset, limit, enc, errors, path, details, tool)

    def _read_lines(
        self,
        f: IO[bytes],
        offset: int,
        limit: int | None,
        enc: str,
        errors: str,
        path: str,
        details: dict[str, Any],
        tool: str,
    ) -> ToolResult:
        cap = self.limits.max_read_bytes
        parts: list[str] = []
        used = position = 0
        stop = ""
        for number, (line, whole) in enumerate(_lines(f, cap + 1), 1):
            if number >= offset:
                if limit is not None and len(parts) >= limit:
                    stop = "limit"
                    break
                if not whole or used + len(line) > cap:
                    if not parts:
                        raise ToolError(
                            tool,
                            f"Line {number} of {path!r} alone is longer than the "
                            f"{describe_size(cap)} read_file limit; it cannot be shown.",
                        )
                    stop = "size"
                    break
                parts.append(
                    decode(line, enc, errors, tool=tool, shown=path, start=position, line=number)
                )
                used += len(line)
            position += len(line)
        return _result(parts, offset, stop, path, details)

    def list_files(
        self,
        ctx: ToolContext,
        path: str = ".",
        recursive: bool = False,
        pattern: str | None = None,
        include_hidden: bool = False,
    ) -> dict[str, Any]:
        """List a directory's entries (name, type, size), optionally recursively and by glob.

        Args:
            path: The directory, relative to the working directory or absolute.
            recursive: Include subdirectories' contents (symlinked directories are not entered).
            pattern: A glob such as "*.py" (matched against names) or "src/**/*.py" (against
                paths relative to the directory).
            include_hidden: Include names starting with "." (and enter hidden directories).
        """
        with confined(ctx, path) as loc:
            try:
                fd = open_entry(loc, os.O_RDONLY | os.O_DIRECTORY, ctx.tool, path)
            except (FileNotFoundError, NotADirectoryError) as exc:
                what = (
                    "does not exist" if isinstance(exc, FileNotFoundError) else "is not a directory"
                )
                raise ToolError(
                    ctx.tool, f"{path!r} {what}; list_files lists directories."
                ) from None
        cap = self.limits.max_list_entries
        entries: list[dict[str, Any]] = []
        truncated = False
        try:
            for rel, info in walk(fd, recursive, include_hidden):
                if pattern is not None and not glob_match(rel, pattern):
                    continue
                if len(entries) >= cap:
                    truncated = True
                    break
                entry: dict[str, Any] = {"path": rel, "type": file_type(info.st_mode)}
                if stat.S_ISREG(info.st_mode):
                    entry["size"] = info.st_size
                entries.append(entry)
        finally:
            os.close(fd)
        entries.sort(key=lambda e: str(e["path"]))
        result: dict[str, Any] = {"path": str(loc.path), "entries": entries, "count": len(entries)}
        if truncated:
            result["truncated"] = (
                f"only the first {cap} entries are shown; narrow the listing with a pattern or "
                "a subdirectory"
            )
        return result

    def get_file_info(self, path: str, ctx: ToolContext) -> dict[str, Any]:
        """Whether a path exists, and its type, size, modification time and mode.

        Args:
            path: The file or directory.
        """
        last = os.path.basename(path.rstrip(os.sep))
        try:
            loc = confined(ctx, path, follow=last in ("", ".", ".."))
        except ToolError as exc:
            if not exc.message.startswith("File not found"):
                raise
            return {"path": path, "exists": False}
        with loc:
            info = loc.lstat()
            if info is None:
                return {"path": str(loc.path), "exists": False}
            result: dict[str, Any] = {
                "path": str(loc.path),
                "exists": True,
                "type": file_type(info.st_mode),
                "size": info.st_size,
                "modified": info.st_mtime,
                "modified_iso": _iso(info.st_mtime),
                "mode": oct(stat.S_IMODE(info.st_mode)),
            }
            if stat.S_ISLNK(info.st_mode):
                result["target"] = os.readlink(loc.name, dir_fd=loc.dir_fd)
        return result

    def delete_file(self, path: str, ctx: ToolContext) -> str:
        """Delete one file (or a symlink itself, not what it points to). Directories are refused.

        Args:
            path: The file to delete.
        """
        name_of(path, ctx.tool)
        with confined(ctx, path, follow=False) as loc:
            info = loc.lstat()
            if info is None:
                raise ToolError(ctx.tool, f"Cannot delete {path!r}: no such file.")
            if stat.S_ISDIR(info.st_mode):
                raise ToolError(
                    ctx.tool,
                    f"{path!r} is a directory; delete_file deletes files and symlinks only.",
                )
            try:
                os.unlink(loc.name, dir_fd=loc.dir_fd)
            except IsADirectoryError:  # swapped for a directory meanwhile
                raise ToolError(
                    ctx.tool, f"{path!r} became a directory; nothing was deleted."
                ) from None
        what = "symlink" if stat.S_ISLNK(info.st_mode) else describe_size(info.st_size)
        return f"Deleted {path} ({what})."

    def move_file(
        self, source: str, destination: str, ctx: ToolContext, overwrite: bool = False
    ) -> str:
        """Move or rename a file or directory. Into an existing directory if destination is one.

        Args:
            source: What to move.
            destination: The new path, or an existing directory to move it into.
            overwrite: Replace an existing destination file.
        """
        src, dst = _move_paths(ctx, source, destination, create=True)
        with src, dst:
            there = dst.lstat()
            if there is not None:
                if stat.S_ISDIR(there.st_mode):
                    raise ToolError(
                        ctx.tool, f"Cannot move to {destination!r}: {dst.path} is a directory."
                    )
                if not overwrite:
                    raise ToolError(
                        ctx.tool,
                        f"Cannot move to {destination!r}: {dst.path} exists; pass "
                        "overwrite=true to replace it.",
                    )
            try:
                os.rename(src.name, dst.name, src_dir_fd=src.dir_fd, dst_dir_fd=dst.dir_fd)
            except OSError as exc:
                if exc.errno == errno.EINVAL:  # a directory into itself
                    raise ToolError(
                        ctx.tool, f"Cannot move directory {source!r} into itself ({dst.path})."
                    ) from None
                if exc.errno != errno.EXDEV:  # another file system: copy by path, then delete
                    raise
                shutil.move(src.path, dst.path)
        return f"Moved {source} to {dst.path}."

    def preview_delete(self, arguments: dict[str, Any], ctx: ToolContext | None) -> str:
        path = str(arguments.get("path", ""))
        if ctx is None:
            return f"delete {path}"
        name_of(path, ctx.tool)
        with confined(ctx, path, follow=False) as loc:
            info = loc.lstat()
        if info is None:
            return f"delete {loc.path} (it does not exist)"
        what = "symlink" if stat.S_ISLNK(info.st_mode) else f"{info.st_size} bytes"
        return f"delete {loc.path} ({what})"

    def preview_move(self, arguments: dict[str, Any], ctx: ToolContext | None) -> str:
        source, destination = str(arguments.get("source")), str(arguments.get("destination"))
        if ctx is None:
            return f"move {source} -> {destination}"
        try:
            src, dst = _move_paths(ctx, source, destination, create=False)
        except ToolError as exc:
            if not exc.message.startswith("File not found"):
                raise
            return f"move {source} -> {destination} (a new directory)"
        with src, dst:
            replaces = " (replaces the existing file)" if dst.lstat() is not None else ""
        return f"move {src.path} -> {dst.path}{replaces}"


def _move_paths(
    ctx: ToolContext, source: str, destination: str, *, create: bool
) -> tuple[Location, Location]:
    """The source (not followed) and the destination (into it if it is a directory)."""
    name_of(source, ctx.tool)
    src = confined(ctx, source, follow=False)
    try:
        if src.lstat() is None:
            raise ToolError(ctx.tool, f"Cannot move {source!r}: no such file or directory.")
        into = confined(ctx, destination, create=create)  # a directory, through a symlink too
        try:
            target = into.lstat()
            if target is not None and stat.S_ISDIR(target.st_mode):
                return src, into.child(src.name)
        finally:
            into.close()
        name_of(destination, ctx.tool)
        return src, confined(ctx, destination, follow=False, create=create)
    except BaseException:
        src.close()
        raise


def _slice(
    lines: list[str], offset: int, limit: int | None, path: str, details: dict[str, Any]
) -> ToolResult:
    end = len(lines) if limit is None else min(len(lines), offset - 1 + limit)
    stop = "limit" if end < len(lines) else ""
    return _result(lines[offset - 1 : end], offset, stop, path, details)


def _result(
    parts: list[str], offset: int, stop: str, path: str, details: dict[str, Any]
) -> ToolResult:
    last = offset + len(parts) - 1
    if not parts:
        note = f"({path} has fewer than {offset} lines; nothing to show from line {offset})"
    elif stop:
        why = "the size limit" if stop == "size" else "the limit"
        note = (
            f"[lines {offset}-{last} shown; more follow ({why}): continue with offset={last + 1}]"
        )
    else:
        note = f"[lines {offset}-{last} shown; end of file]"
    details = {**details, "offset": offset, "lines": len(parts), "more": bool(stop)}
    text = "".join(parts)
    blocks = (TextBlock(text=text), TextBlock(text=note)) if text else (TextBlock(text=note),)
    return ToolResult(content=blocks, details=details)


def fs_tools(limits: FsLimits | None = None) -> list[Tool]:
    """New ``fs`` tools (not registered), sharing ``limits`` (default :class:`FsLimits`)."""
    tools = FileTools(limits if limits is not None else FsLimits())
    fs: dict[str, Any] = {"category": "file"}
    return [
        make_tool(tools.read_file, "fs", kind="read", **fs),
        make_tool(tools.write_file, "fs", kind="edit", preview=tools.preview_write, **fs),
        make_tool(tools.edit_file, "fs", kind="edit", preview=tools.preview_edit, **fs),
        make_tool(tools.list_files, "fs", kind="read", **fs),
        make_tool(tools.delete_file, "fs", kind="delete", preview=tools.preview_delete, **fs),
        make_tool(tools.move_file, "fs", kind="move", preview=tools.preview_move, **fs),
        make_tool(tools.get_file_info, "fs", kind="read", **fs),
    ]
