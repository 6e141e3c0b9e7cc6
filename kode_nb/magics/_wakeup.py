"""A kernel interrupt is acted on at once, even while the kernel's loop sleeps.

Python runs a signal's handler on the main thread, between two bytecodes. A kernel whose loop
waits in ``select()`` with nothing to do — a cell awaiting a run that waits for an approval, or
an idle kernel whose background call waits for one — may run no bytecode for minutes when the
signal arrives on another thread; the interrupt then waits for the next message or timer, and a
cell awaiting the run looks hung. :class:`LoopWakeup` makes every signal wake the loop: the
C-level handler writes the signal's number to a socket (``signal.set_wakeup_fd``) that the loop
reads, so the main thread runs the handler (ipykernel's, which cancels the cell, or the
session's, which cancels its calls) right away. asyncio's own ``add_signal_handler`` works the
same way; a wakeup descriptor someone else set first is left alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import threading

__all__ = ["LoopWakeup"]


class LoopWakeup:
    """Wake ``loop`` whenever the process gets a signal (install on the main thread)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._read: socket.socket | None = None
        self._write: socket.socket | None = None

    def install(self) -> bool:
        """True if this loop now wakes on signals; False when it cannot (not the main thread,
        or another wakeup descriptor is already set, which is kept)."""
        if threading.current_thread() is not threading.main_thread() or self._read is not None:
            return False
        read, write = socket.socketpair()
        read.setblocking(False)
        write.setblocking(False)
        try:
            previous = signal.set_wakeup_fd(write.fileno(), warn_on_full_buffer=False)
        except (ValueError, OSError):
            read.close()
            write.close()
            return False
        if previous != -1:  # someone else wakes on signals already: theirs stays
            signal.set_wakeup_fd(previous)
            read.close()
            write.close()
            return False
        self._read, self._write = read, write
        self.loop.add_reader(read.fileno(), self._drain)
        return True

    def _drain(self) -> None:
        """Empty the socket; waking the loop was the point (the handler runs after this)."""
        read = self._read
        if read is None:
            return
        with contextlib.suppress(OSError):
            while read.recv(4096):
                pass

    def uninstall(self) -> None:
        """Stop waking the loop (only if the descriptor set is still ours)."""
        read, write = self._read, self._write
        if read is None or write is None:
            return
        self._read = self._write = None
        if threading.current_thread() is threading.main_thread():
            current = signal.set_wakeup_fd(-1)
            if current != write.fileno():  # someone replaced ours since: put theirs back
                signal.set_wakeup_fd(current)
        with contextlib.suppress(Exception):
            self.loop.remove_reader(read.fileno())
        read.close()
        write.close()
