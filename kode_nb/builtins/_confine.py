"""Confined file access: every path is resolved from an open handle on an allowed root.

A path string is never resolved twice. :func:`locate` opens the allowed root (resolved once,
when it was allowed) and walks the path one component at a time from that handle:
``os.open(name, O_NOFOLLOW, dir_fd=...)`` on each component, so a directory or symlink that
another process swaps in half-way cannot lead outside the root. The result is a
:class:`Location`: an open handle on the directory that holds the final name, plus that name.
The ``fs`` tools then act only through it (``dir_fd=`` for open, stat, unlink, rename, link,
mkdir, readlink; :func:`os.scandir` on a handle), never on a re-built path string.

Rules of the walk:

* A relative path starts at the first root; an absolute one must name a place under one of the
  roots (lexically, or once resolved with :func:`os.path.realpath` - only to pick the root and
  the components; the walk still checks every step).
* ``..`` goes up one directory handle and is refused at the root.
* Symlinks inside the root are followed only when their target lies beneath the same root,
  resolved by the same walk (at most 40 links per path); absolute targets must start with the
  root's path. Anything else is refused with :class:`~kode_nb.errors.ToolPermissionError`.
* With ``follow=False`` the last component is not followed (delete, move and info act on a
  symlink itself).
* Where the kernel has ``openat2`` (Linux >= 5.6), the directories are resolved with
  ``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`` in one system call; any refusal from it is
  re-checked by the portable walk, which gives the precise reason (and accepts absolute
  symlinks pointing inside the root, which ``RESOLVE_BENEATH`` refuses).
* After the walk, the directory handle's path (``/proc/self/fd``) is checked to still lie
  beneath the root; the shown path is that one.

What this cannot see: a hard link inside the root to a file outside it is an ordinary file.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import stat
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from kode_nb.errors import ToolError, ToolPermissionError

__all__ = ["Location", "exchange", "locate"]

O_PATH: int = getattr(os, "O_PATH", 0)
# (getattr: importable where these are missing; the handles need POSIX ``dir_fd`` support)
_DIR = (O_PATH or os.O_RDONLY) | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_MAX_LINKS = 40
_PROC_FD = "/proc/self/fd"

_RESOLVE_NO_MAGICLINKS = 0x02
_RESOLVE_BENEATH = 0x08
_SYS_OPENAT2 = 437  # the same number on every Linux architecture


try:
    _LIBC: Any = ctypes.CDLL(None, use_errno=True)
except OSError:  # no C library to load symbols from
    _LIBC = None


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


class _Openat2:
    """``openat2`` through ``syscall(2)``; ``available`` turns False at the first ENOSYS."""

    def __init__(self) -> None:
        self.available = False
        self._syscall: Any = getattr(_LIBC, "syscall", None)
        self.available = self._syscall is not None and sys.platform == "linux"

    def __call__(self, dir_fd: int, path: str, flags: int) -> int:
        how = _OpenHow(flags | os.O_CLOEXEC, 0, _RESOLVE_BENEATH | _RESOLVE_NO_MAGICLINKS)
        fd = int(
            self._syscall(
                ctypes.c_long(_SYS_OPENAT2),
                ctypes.c_int(dir_fd),
                ctypes.c_char_p(os.fsencode(path)),
                ctypes.byref(how),
                ctypes.c_size_t(ctypes.sizeof(how)),
            )
        )
        if fd < 0:
            code = ctypes.get_errno()
            if code in (errno.ENOSYS, errno.EPERM, errno.E2BIG):  # absent, or filtered out
                self.available = False
            raise OSError(code, os.strerror(code), path)
        return fd


openat2 = _Openat2()
"""The ``openat2`` wrapper (tests switch ``openat2.available`` off to exercise the walk)."""

_RENAME_EXCHANGE = 2
_renameat2: Any = getattr(_LIBC, "renameat2", None) if sys.platform == "linux" else None


def exchange(dir_fd: int, a: str, b: str) -> bool:
    """Swap the entries ``a`` and ``b`` of ``dir_fd`` atomically (``renameat2`` with
    ``RENAME_EXCHANGE``); False where the system or file system cannot."""
    if _renameat2 is None:
        return False
    done = _renameat2(dir_fd, os.fsencode(a), dir_fd, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
        return False
    raise OSError(code, os.strerror(code), b)


@dataclass(eq=False)
class Location:
    """An open handle on a directory inside a root, and a name in it (``"."``: the directory)."""

    root: Path
    """The allowed root this location lies in."""
    dir_fd: int
    """The directory's handle (``O_PATH`` on Linux); closed by :meth:`close`."""
    name: str
    """The last component (never a symlink when located with ``follow=True``, unless swapped)."""
    path: Path
    """Where it is, for messages (the directory handle's real path + ``name``)."""

    def lstat(self) -> os.stat_result | None:
        """The entry's own stat (symlinks not followed), or ``None`` if it does not exist."""
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open(self, flags: int, mode: int = 0o666) -> int:
        """``openat`` the entry with ``O_NOFOLLOW | O_CLOEXEC`` added."""
        return os.open(self.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=self.dir_fd)

    def child(self, name: str) -> Location:
        """A Location for ``name`` inside this entry, which must be a directory."""
        fd = self.open(_DIR)
        return Location(self.root, fd, name, self.path / name)

    def close(self) -> None:
        if self.dir_fd >= 0:
            os.close(self.dir_fd)
            self.dir_fd = -1

    def __enter__(self) -> Location:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _denied(tool: str, text: str, roots: Sequence[Path], why: str = "") -> ToolPermissionError:
    shown = ", ".join(str(r) for r in roots)
    return ToolPermissionError(
        tool, f"Access denied: path {text!r}{why} is outside the allowed paths: {shown}."
    )


def _split(root: Path, absolute: str) -> list[str] | None:
    """The components of ``absolute`` below ``root``, or None if it is not under it."""
    base = str(root).rstrip(os.sep)
    if absolute == base or absolute == base + os.sep:
        return []
    if absolute.startswith(base + os.sep):
        return absolute[len(base) + 1 :].split(os.sep)
    return None


def _start(text: str, roots: Sequence[Path], tool: str) -> tuple[Path, list[str]]:
    """The root a path starts from and the components to walk from it."""
    if not isinstance(text, str) or not text.strip() or "\x00" in text:
        raise ToolPermissionError(tool, f"Invalid path {text!r}: expected a non-empty file path.")
    if not roots:
        raise ToolPermissionError(
            tool,
            f"File access is disabled: no allowed paths are configured, so {text!r} cannot "
            "be used. Allow a directory with Policy(allowed_paths=[...]) or policy.add_path(dir).",
        )
    candidate = os.path.expanduser(text)
    if not os.path.isabs(candidate):
        return roots[0], candidate.split(os.sep)
    for root in roots:
        parts = _split(root, candidate)
        if parts is not None:
            return root, parts
    real = os.path.realpath(candidate)  # an alias of a root (only picks root and components)
    for root in roots:
        parts = _split(root, real)
        if parts is not None:
            return root, parts
    raise _denied(tool, text, roots, "" if real == text else f" (resolves to {real!r})")


def _proc_path(fd: int) -> str | None:
    try:
        return os.readlink(f"{_PROC_FD}/{fd}")
    except OSError:
        return None


class _Walk:
    """One walk of ``parts`` from ``root``: a stack of directory handles."""

    def __init__(self, root: Path, text: str, roots: Sequence[Path], tool: str) -> None:
        self.root, self.text, self.roots, self.tool = root, text, roots, tool
        self.stack = [os.open(root, _DIR)]
        self.names: list[str] = []
        self.links = 0

    def close(self) -> None:
        while self.stack:
            os.close(self.stack.pop())

    def up(self) -> None:
        if len(self.stack) == 1:
            raise _denied(self.tool, self.text, self.roots)
        os.close(self.stack.pop())
        self.names.pop()

    def link(self, name: str, pending: list[str]) -> None:
        """Queue a symlink's target in front of ``pending`` (absolute: from the root)."""
        self.links += 1
        if self.links > _MAX_LINKS:
            raise ToolError(self.tool, f"Too many levels of symbolic links in {self.text!r}.")
        target = os.readlink(name, dir_fd=self.stack[-1])
        if os.path.isabs(target):
            parts = _split(self.root, target)
            if parts is None:
                where = "/".join([*self.names, name])
                raise _denied(self.tool, self.text, self.roots, f" (symlink {where} -> {target})")
            while len(self.stack) > 1:
                self.up()
            pending[:0] = parts
        else:
            pending[:0] = target.split("/")

    def run(self, parts: list[str], follow: bool, create: bool) -> str:
        """Walk ``parts``; the last name (``"."`` for a directory itself), its parent on top."""
        pending = list(parts)
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                if not pending:
                    return "."
                continue
            if name == "..":
                self.up()
                if not pending:
                    return "."
                continue
            last = not pending
            if last:
                try:
                    mode = os.stat(name, dir_fd=self.stack[-1], follow_symlinks=False).st_mode
                except FileNotFoundError:
                    return name
                if follow and stat.S_ISLNK(mode):
                    self.link(name, pending)
                    continue
                return name
            try:
                self.stack.append(os.open(name, _DIR | os.O_NOFOLLOW, dir_fd=self.stack[-1]))
                self.names.append(name)
                continue
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):  # made meanwhile: open it as it is now
                    os.mkdir(name, 0o777, dir_fd=self.stack[-1])
                pending.insert(0, name)
                continue
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
            mode = os.stat(name, dir_fd=self.stack[-1], follow_symlinks=False).st_mode
            if not stat.S_ISLNK(mode):
                raise NotADirectoryError(errno.ENOTDIR, "Not a directory", name)
            self.link(name, pending)
        return "."


def _fast_parent(root_fd: int, parts: list[str], follow: bool) -> int | None:
    """The parent directory of ``parts`` by one ``openat2``; None where the walk must decide."""
    head = [p for p in parts[:-1] if p not in ("", ".")]
    if not openat2.available or not parts or parts[-1] in ("", ".", "..") or not head:
        return None
    try:
        fd = openat2(root_fd, "/".join(head), _DIR)
    except OSError:
        return None  # missing, a symlink out, a race...: the walk decides and explains
    if follow:
        try:
            linked = stat.S_ISLNK(os.stat(parts[-1], dir_fd=fd, follow_symlinks=False).st_mode)
        except FileNotFoundError:
            linked = False
        except OSError:
            linked = True
        if linked:  # the walk follows it (within the root) and records where it went
            os.close(fd)
            return None
    return fd


def locate(
    path: str | os.PathLike[str],
    roots: Sequence[Path],
    *,
    tool: str = "",
    follow: bool = True,
    create: bool = False,
) -> Location:
    """``path`` inside ``roots`` as an open :class:`Location` (close it; it is a context manager).

    ``follow`` follows a final symlink (to a target inside the same root); ``create`` makes
    missing parent directories. Refusals raise ``ToolPermissionError``; a missing parent raises
    ``FileNotFoundError``, a file used as a directory ``NotADirectoryError``.
    """
    text = os.fspath(path)
    root, parts = _start(text, roots, tool)
    walk = _Walk(root, text, roots, tool)
    try:
        dir_fd = _fast_parent(walk.stack[0], parts, follow)
        if dir_fd is not None:
            name = parts[-1]
        else:
            name = walk.run(parts, follow, create)
            dir_fd = walk.stack.pop() if len(walk.stack) > 1 else os.dup(walk.stack[0])
        real = _proc_path(dir_fd)
        if real is None:  # no /proc: the walk's own record
            real = os.path.join(root, *walk.names)
        elif (
            _split(root, real) is None
            and _split(Path(_proc_path(walk.stack[0]) or root), real) is None
        ):
            os.close(dir_fd)  # moved away while we walked
            raise _denied(tool, text, roots, f" (it was moved to {real!r} while being opened)")
    finally:
        walk.close()
    return Location(root, dir_fd, name, Path(real) if name == "." else Path(real, name))
