"""File helpers for :mod:`kode_nb.builtins.fs`: confined paths, atomic writes, decoding, diffs.

* :func:`confined` opens a path inside the allowed roots as a
  :class:`~kode_nb.builtins._confine.Location` (a directory handle and a name); ``follow=False``
  keeps a final symlink itself (delete, move and info act on it, not on what it points to).
* :func:`atomic_write` writes the new content to an anonymous ``O_TMPFILE`` in the target's
  directory (linked in under a temporary name only once complete; where ``O_TMPFILE`` is missing,
  a ``.kode_nb-tmp-<random>`` file made with ``O_EXCL | O_NOFOLLOW``) and renames it over the
  target through the directory handle, so readers see the old content or the new, never a
  partial file; the old file's mode is kept. Temporary files of ours that an interrupted write
  left behind (older than :data:`STALE_TEMP_SECONDS`) are removed by later writes there.
* :func:`write_lock` holds ``flock(LOCK_EX)`` on the target's directory while a write tool reads,
  checks and replaces a file there: ``write_file`` and ``edit_file`` share it, so two of them
  never interleave, and a process that appends under the same lock (``flock`` on the directory,
  then ``open(O_APPEND)``, write, close) never loses a write to an edit.
* :func:`decode` turns bytes into text or raises a :class:`~kode_nb.errors.ToolError` that says
  which byte failed and how to read the file anyway.
* :func:`unified_diff` renders the approval preview of a change.
* :func:`walk` and :func:`glob_match` do ``list_files``' listing (through directory handles;
  symlinks are not followed).
"""

from __future__ import annotations

import codecs
import contextlib
import difflib
import errno
import fnmatch
import functools
import mimetypes
import os
import re
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from typing import NoReturn, Protocol

from kode_nb.builtins._confine import Location, exchange, locate
from kode_nb.errors import ToolError, ToolPermissionError
from kode_nb.types import ToolContext

__all__ = [
    "BINARY_SAMPLE",
    "ReplaceGuard",
    "STALE_TEMP_SECONDS",
    "TEMP_PREFIX",
    "atomic_write",
    "binary_message",
    "check_encoding",
    "confined",
    "decode",
    "describe_size",
    "file_type",
    "glob_match",
    "image_mime",
    "looks_binary",
    "name_of",
    "open_entry",
    "sweep_temps",
    "unified_diff",
    "walk",
    "write_lock",
]

BINARY_SAMPLE = 8192
"""How many leading bytes are checked for NUL bytes to call a file binary."""

_MAX_DIFF_LINES = 400

TEMP_PREFIX = ".kode_nb-tmp-"
"""The name prefix of the temporary files :func:`atomic_write` may leave after a hard kill."""
STALE_TEMP_SECONDS = 15 * 60
"""Temporary files of ours older than this are removed by the next write in their directory."""
_SWEEP_EVERY = 60.0
_swept: dict[tuple[int, int], float] = {}
_swept_lock = threading.Lock()


def describe_size(size: int) -> str:
    """``"512 bytes"``, ``"3.4 KiB"``, ``"2.0 MiB"``."""
    if size < 1024:
        return f"{size} bytes"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KiB"
    return f"{size / (1024 * 1024):.1f} MiB"


def confined(ctx: ToolContext, path: str, *, follow: bool = True, create: bool = False) -> Location:
    """``path`` inside the call's allowed roots, opened as a Location (close it after use).

    A missing parent directory or a file used as one is a ToolError naming the path.
    """
    try:
        return locate(path, ctx.allowed_paths, tool=ctx.tool, follow=follow, create=create)
    except FileNotFoundError:
        raise ToolError(
            ctx.tool, f"File not found: {path!r} (a parent directory is missing)."
        ) from None
    except NotADirectoryError:
        raise ToolError(
            ctx.tool, f"{path!r}: a component of the path is a file, not a directory."
        ) from None


def open_entry(loc: Location, flags: int, tool: str, shown: str) -> int:
    """Open ``loc`` (never through a symlink); a symlink swapped in meanwhile is a ToolError."""
    try:
        return loc.open(flags | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise ToolError(
            tool, f"{shown!r} was replaced by a symlink while it was being opened; try again."
        ) from None


def name_of(path: str, tool: str) -> None:
    """Refuse a path whose last component is not a name (``""``, ``.``, ``..``)."""
    name = os.path.basename(path.rstrip(os.sep) or path)
    if name in ("", ".", ".."):
        raise ToolPermissionError(
            tool, f"Invalid path {path!r}: name a file or directory inside the allowed paths."
        )


def check_encoding(tool: str, encoding: str) -> str:
    """The codec's canonical name, or a ToolError naming the unknown encoding."""
    try:
        return codecs.lookup(encoding).name
    except LookupError:
        raise ToolError(
            tool,
            f"Unknown encoding {encoding!r}: use a Python codec name such as 'utf-8', "
            "'latin-1', 'cp1252' or 'utf-16'.",
        ) from None


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
            tool,
            f"{shown!r} is not valid {encoding} text: byte 0x{bad} at offset "
            f"{start + exc.start} (line {where}) cannot be decoded ({exc.reason}). If the file "
            "uses another encoding, "
            f"pass encoding= (e.g. encoding={alternative}); to read it anyway with U+FFFD for "
            "the bad bytes, pass errors='replace'.",
        ) from None


class ReplaceGuard(Protocol):
    """Keeps a replace from losing a concurrent change to the file it replaces."""

    def before(self) -> None:
        """Raise if the file is no longer the version that was read."""

    def after(self, dir_fd: int, replaced: str) -> bool:
        """Whether the version just swapped out (now named ``replaced``) is the one checked."""

    def refuse(self) -> NoReturn:
        """Raise the error that says the file changed."""


@contextlib.contextmanager
def write_lock(loc: Location) -> Iterator[None]:
    """``flock(LOCK_EX)`` on ``loc``'s directory for the block (see the module docstring).
    Another thread of this process holding it for the same directory waits too: the lock
    belongs to the directory handle, and each call opens its own."""
    try:
        import fcntl
    except ImportError:  # no flock (Windows): the version checks alone guard the edit
        yield
        return
    fd = os.open(".", os.O_RDONLY | os.O_CLOEXEC, dir_fd=loc.dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def atomic_write(loc: Location, data: bytes, guard: ReplaceGuard | None = None) -> bool:
    """Write ``data`` to ``loc`` atomically; True if it created the file.

    The data goes to a temporary file in the same directory (flushed and fsynced), with the mode
    of the file it replaces (new files: 0o666 less the umask), then replaces the target. On any
    failure the temporary file is removed and the target is left as it was.

    With a ``guard``, ``guard.before()`` runs just before the replace and may refuse it; where
    ``renameat2(RENAME_EXCHANGE)`` works the new version is swapped in and ``guard.after``
    checks the version swapped out: if something wrote to it in between, it is swapped back
    and ``guard.refuse()`` raises - so a write landing during the replace is not lost.
    """
    old = loc.lstat()
    mode = None if old is None else stat.S_IMODE(old.st_mode)
    fd, temp = _temp_file(loc.dir_fd, 0o666 if mode is None else 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
            if temp is None:
                temp = _link_in(fd, loc.dir_fd)
        finally:
            os.close(fd)
        if guard is not None:
            guard.before()
        if guard is not None and old is not None and exchange(loc.dir_fd, temp, loc.name):
            if not guard.after(loc.dir_fd, temp):  # temp: now the version replaced
                exchange(loc.dir_fd, temp, loc.name)  # put the changed version back
                guard.refuse()
            os.unlink(temp, dir_fd=loc.dir_fd)
        else:
            os.rename(temp, loc.name, src_dir_fd=loc.dir_fd, dst_dir_fd=loc.dir_fd)
    except BaseException:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=loc.dir_fd)
        raise
    sweep_temps(loc.dir_fd)
    return mode is None


_O_TMPFILE: int = getattr(os, "O_TMPFILE", 0)


def _temp_file(dir_fd: int, mode: int) -> tuple[int, str | None]:
    """An anonymous temporary file in ``dir_fd`` (name None), or a new named one."""
    if _O_TMPFILE and os.path.isdir("/proc/self/fd"):
        try:
            return os.open(".", _O_TMPFILE | os.O_WRONLY | os.O_CLOEXEC, mode, dir_fd=dir_fd), None
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT):
                raise
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    name = TEMP_PREFIX + secrets.token_hex(8)
    return os.open(name, flags, mode, dir_fd=dir_fd), name


def _link_in(fd: int, dir_fd: int) -> str:
    """Give the complete anonymous file a temporary name in ``dir_fd``."""
    while True:
        name = TEMP_PREFIX + secrets.token_hex(8)
        try:
            os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dir_fd, follow_symlinks=True)
            return name
        except FileExistsError:
            continue


def sweep_temps(dir_fd: int, *, now: float | None = None) -> list[str]:
    """Remove our temporary files older than STALE_TEMP_SECONDS from ``dir_fd``'s directory.

    At most once a minute per directory (per process); returns the names removed.
    """
    now = time.time() if now is None else now
    info = os.fstat(dir_fd)
    key = (info.st_dev, info.st_ino)
    with _swept_lock:
        if now - _swept.get(key, 0.0) < _SWEEP_EVERY:
            return []
        _swept[key] = now
    removed: list[str] = []
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return removed
    try:
        with os.scandir(listing) as entries:
            for entry in entries:
                if not entry.name.startswith(TEMP_PREFIX):
                    continue
                with contextlib.suppress(OSError):
                    if now - entry.stat(follow_symlinks=False).st_mtime > STALE_TEMP_SECONDS:
                        os.unlink(entry.name, dir_fd=dir_fd)
                        removed.append(entry.name)
    finally:
        os.close(listing)
    return removed


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


def walk(dir_fd: int, recursive: bool, hidden: bool) -> Iterator[tuple[str, os.stat_result]]:
    """(relative posix path, lstat) of each entry under the directory ``dir_fd``.

    Directories are entered through handles (``O_NOFOLLOW``), so symlinks are never followed.
    """
    yield from _walk(dir_fd, "", recursive, hidden)


def _walk(
    dir_fd: int, prefix: str, recursive: bool, hidden: bool
) -> Iterator[tuple[str, os.stat_result]]:
    try:
        listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return  # unreadable directory: skip it
    try:
        with os.scandir(listing) as it:
            items = sorted(it, key=lambda e: e.name)
    finally:
        os.close(listing)
    for item in items:
        if not hidden and item.name.startswith("."):
            continue
        try:
            info = os.stat(item.name, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            continue  # gone meanwhile
        yield prefix + item.name, info
        if recursive and stat.S_ISDIR(info.st_mode):
            flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            try:
                child = os.open(item.name, flags, dir_fd=dir_fd)
            except OSError:
                continue  # replaced by a symlink or unreadable: not entered
            try:
                yield from _walk(child, prefix + item.name + "/", recursive, hidden)
            finally:
                os.close(child)


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
