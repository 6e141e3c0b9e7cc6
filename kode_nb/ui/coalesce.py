"""Coalescing of streamed updates: many cheap pushes in, a few flushes out.

A tool may call ``on_update`` 100,000 times; a browser can draw ~20 updates a second and the
Jupyter server stops IOPub above ~1,000 messages a second (its default ``iopub_msg_rate_limit``). A
:class:`Coalescer` takes text chunks from any thread at O(1) cost and hands the concatenation
of everything new to ``sink`` on the event loop, at most ``rate`` times a second, plus one
guaranteed final flush from :meth:`Coalescer.close`. The sink therefore sees every character
exactly once, in order, except secrets, which it sees as ``[REDACTED]``
(:func:`kode_nb._redact.redact_stream`: a tail that may begin a known secret waits for the next
flush, so a secret split across chunks is never sent in parts).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from kode_nb._redact import redact_stream

__all__ = ["Coalescer", "update_text"]


def update_text(data: Any) -> str:
    """How one ``on_update`` payload is appended to a stream: strings as they are (token
    streaming), anything else as one line of JSON."""
    if isinstance(data, str):
        return data
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return json.dumps(data, ensure_ascii=False, default=str) + "\n"


class Coalescer:
    """Buffers chunks and flushes them to ``sink`` on ``loop`` at most ``rate`` times a second.

    ``push`` may be called from any thread. ``sink`` always runs on the loop's thread (or in
    the caller's thread for :meth:`flush` / :meth:`close`, which must be called there). The
    first chunk after a quiet period is flushed at once, later ones wait for the interval.
    """

    def __init__(
        self,
        sink: Callable[[str], object],
        *,
        rate: float = 20.0,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        if not rate > 0:
            raise ValueError(f"rate must be a positive number of flushes per second, got {rate!r}")
        self.sink = sink
        self.interval = 1.0 / rate
        """Minimum seconds between two flushes."""
        self.loop = loop if loop is not None else asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self._held = ""
        """Streamed text that may be the start of a secret: sent with the next flush."""
        self._scheduled = False
        self._closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._last_flush = 0.0
        self.pushes = 0
        """How many chunks were pushed."""
        self.flushes = 0
        """How many times ``sink`` was called."""
        self.size = 0
        """Characters flushed so far."""

    def push(self, chunk: str) -> None:
        """Queue ``chunk`` (any thread, O(1))."""
        if not chunk:
            return
        with self._lock:
            if self._closed:
                return
            self._pending.append(chunk)
            self.pushes += 1
            if self._scheduled:
                return
            self._scheduled = True
        if threading.get_ident() == self._loop_thread:
            self._schedule()
        else:
            with contextlib.suppress(RuntimeError):  # loop closed: nobody will draw this any more
                self.loop.call_soon_threadsafe(self._schedule)

    def _schedule(self) -> None:
        if self._closed:
            return
        delay = self._last_flush + self.interval - time.monotonic()
        self._timer = self.loop.call_later(max(delay, 0.0), self.flush)

    def flush(self) -> None:
        """Send everything pending now (on the loop thread)."""
        with self._lock:
            data = "".join(self._pending)
            self._pending.clear()
            self._scheduled = False
            final = self._closed
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._last_flush = time.monotonic()
        if data or (final and self._held):
            self.size += len(data)
            shown, self._held = redact_stream(self._held + data, final=final)
            if shown:
                self.flushes += 1
                self.sink(shown)

    def close(self) -> None:
        """The final flush; later pushes are ignored."""
        with self._lock:
            self._closed = True
        self.flush()
