"""A served call's updates as MCP progress notifications, at most :data:`RATE` a second.

A tool may stream thousands of updates; the client gets the latest of them at most every
``1 / RATE`` seconds (``progress`` = how many updates so far, ``message`` = the latest as text),
each update that comes after a quiet spell at once, and the last one always, before the result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["MAX_MESSAGE", "RATE", "ProgressThrottle", "progress_message"]

RATE = 20.0
"""Progress notifications per second and call, at most (plus the final one)."""

MAX_MESSAGE = 2000
"""Characters of an update sent as a progress message; longer ones are cut."""

SendFn = Callable[[float, str], Awaitable[None]]
"""``send(progress, message)``: sends one progress notification."""


def progress_message(update: Any) -> str:
    """An update as progress message text: a string as it is, anything else as JSON."""
    if isinstance(update, str):
        text = update
    else:
        text = json.dumps(update, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


class ProgressThrottle:
    """Coalesces one call's updates: :meth:`update` is the call's ``on_update`` (loop thread),
    :meth:`run` sends, :meth:`close` makes it send what is left and return."""

    def __init__(self, send: SendFn, *, rate: float = RATE) -> None:
        self._send = send
        self._interval = 1.0 / rate
        self._latest: Any = None
        self._wake = asyncio.Event()
        self._closed = asyncio.Event()
        self.updates = 0
        """Updates seen."""
        self.sent = 0
        """Progress notifications sent."""
        self._sent_through = 0

    def update(self, item: Any) -> None:
        self.updates += 1
        self._latest = item
        self._wake.set()

    def close(self) -> None:
        """The call has ended: send the latest update now, if it was not sent, and stop."""
        self._closed.set()
        self._wake.set()

    async def run(self) -> None:
        while True:
            if self.updates == self._sent_through:
                if self._closed.is_set():
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            self._sent_through = self.updates
            await self._send(float(self.updates), progress_message(self._latest))
            self.sent += 1
            if not self._closed.is_set():  # the pause that bounds the rate; close() ends it
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._closed.wait(), self._interval)
