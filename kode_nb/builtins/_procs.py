"""The processes an ``exec`` command started, found even after they leave its process group.

A command can leave its process group and session (``setsid cmd &``, a daemon's double fork),
so signalling the group is not enough. :class:`ProcessTracker` finds them two ways (Linux
``/proc``; elsewhere only the group is stopped):

* by ancestry: :meth:`ProcessTracker.scan` (run every fraction of a second while the command
  runs, and again when stopping it) records every descendant of the shell, and of processes
  already recorded, by pid and start time (from ``/proc/<pid>/task/*/children``, or one pass
  over ``/proc/*/stat`` where those are missing) - so one that ``setsid``-ed and was
  re-parented after a scan is still known;
* by a tag: the command's environment carries ``KODE_NB_EXEC_ID=<random>``, inherited by
  everything it starts (unless a process clears its environment); :meth:`ProcessTracker.stop`
  also signals every process of ours whose ``/proc/<pid>/environ`` has it.

A pid is signalled only while its start time is the recorded one (pids are reused), and never
this process itself.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["TAG_VARIABLE", "ProcessTracker", "TrackedProcess"]

TAG_VARIABLE = "KODE_NB_EXEC_ID"
"""The environment variable that marks the processes of one ``exec`` call."""

_PROC = "/proc"


@dataclass(frozen=True)
class TrackedProcess:
    """One process the command started."""

    pid: int
    start: int
    """Its start time (clock ticks after boot), to tell it from a later process with its pid."""
    command: str
    """Its command line (capped)."""


def _stat(pid: int) -> tuple[int, int, str] | None:
    """(parent pid, start time, state) of a process, or None if it is gone."""
    try:
        with open(f"{_PROC}/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    try:
        return int(fields[1]), int(fields[19]), fields[0].decode()
    except (IndexError, ValueError):
        return None


def _command(pid: int) -> str:
    try:
        with open(f"{_PROC}/{pid}/cmdline", "rb") as f:
            raw = f.read(400)
    except OSError:
        return "?"
    text = raw.replace(b"\0", b" ").decode(errors="replace").strip()
    return text[:200] or "?"


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def _children(pid: int) -> list[int]:
    """The children of ``pid``, from ``/proc/<pid>/task/*/children``."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"{_PROC}/{pid}/task")
    except OSError:
        return out
    for task in tasks:
        try:
            with open(f"{_PROC}/{pid}/task/{task}/children", "rb") as f:
                out.extend(int(n) for n in f.read().split())
        except OSError:
            continue
    return out


def _table_lookup() -> Callable[[int], list[int]]:
    """Where ``children`` files are missing: one pass over every ``/proc/<pid>/stat``."""
    table: dict[int, list[int]] = {}
    for pid in _pids():
        info = _stat(pid)
        if info is not None:
            table.setdefault(info[0], []).append(pid)
    return lambda pid: table.get(pid, [])


_HAS_CHILDREN = os.path.exists(f"{_PROC}/self/task/{os.getpid()}/children")


class ProcessTracker:
    """Records the processes started under ``root_pid`` (the shell) and stops them."""

    def __init__(self, root_pid: int, tag: str) -> None:
        self.root_pid = root_pid
        self.tag = tag
        """The value of :data:`TAG_VARIABLE` in the command's environment."""
        self.known: dict[int, TrackedProcess] = {}
        self.enabled = os.path.isdir(f"{_PROC}/self")

    def _alive(self, proc: TrackedProcess) -> bool:
        now = _stat(proc.pid)
        return now is not None and now[1] == proc.start and now[2] not in ("Z", "X")

    def scan(self) -> None:
        """Record the current descendants of the shell and of the processes already known."""
        if not self.enabled:
            return
        frontier = [self.root_pid, *(p.pid for p in self.known.values() if self._alive(p))]
        children = _children if _HAS_CHILDREN else _table_lookup()
        seen = set(frontier)
        me = os.getpid()
        while frontier:
            for pid in children(frontier.pop()):
                if pid in seen or pid == me:
                    continue
                seen.add(pid)
                frontier.append(pid)
                info = _stat(pid)
                old = self.known.get(pid)
                if info is not None and (old is None or old.start != info[1]):
                    self.known[pid] = TrackedProcess(pid, info[1], _command(pid))

    def _tagged(self) -> None:
        """Record every process of ours whose environment carries this call's tag."""
        marker = f"{TAG_VARIABLE}={self.tag}".encode()
        me = os.getpid()
        for pid in _pids():
            if pid == me or pid in self.known:
                continue
            try:
                with open(f"{_PROC}/{pid}/environ", "rb") as f:
                    environ = f.read()
            except OSError:
                continue  # not ours, or gone
            if marker in environ.split(b"\0"):
                info = _stat(pid)
                if info is not None:
                    self.known[pid] = TrackedProcess(pid, info[1], _command(pid))

    def alive(self) -> list[TrackedProcess]:
        """The recorded processes still running (zombies excluded)."""
        return [p for p in self.known.values() if self._alive(p)]

    def _current(self, proc: TrackedProcess) -> TrackedProcess:
        """``proc`` with its command line read now: one seen between ``fork`` and ``exec``
        was recorded with its parent's command line, or none (``?``)."""
        command = _command(proc.pid)
        if command == "?" or command == proc.command:
            return proc
        fresh = replace(proc, command=command)
        self.known[proc.pid] = fresh
        return fresh

    def signal(self, sig: int) -> list[TrackedProcess]:
        """Rescan, then send ``sig`` to every recorded process still running; those signalled."""
        if not self.enabled:
            return []
        self.scan()
        self._tagged()
        hit = []
        for proc in self.alive():
            proc = self._current(proc)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(proc.pid, sig)
                hit.append(proc)
        return hit
