"""Re-listing a server's tools when it says they changed (or after a reconnect), one at a time.

The session's notification handler only calls :meth:`Refresher.request`: the refresh itself runs
in a task of its own (the handler must not wait on the session it is serving). A refresh starts
:data:`SETTLE` seconds after the request that scheduled it, so the rest of a burst of
``notifications/tools/list_changed`` folds into it, and requests that arrive while a refresh
runs are coalesced into one more refresh after it. A refresh that fails is logged
and recorded in :attr:`Refresher.error`; it never raises into the session.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kode_nb.mcp._links import describe_error
from kode_nb.mcp.errors import McpConnectionError

__all__ = ["SETTLE", "Refresher"]

log = logging.getLogger("kode_nb.mcp")

SETTLE = 0.05
"""Seconds a refresh waits after being requested, for the rest of a burst of notifications."""


class Refresher:
    """Runs ``refresh()`` in a task on request; requests during a run make one more run."""

    def __init__(
        self, server: str, refresh: Callable[[], Awaitable[None]], *, settle: float = SETTLE
    ) -> None:
        self._server = server
        self._refresh = refresh
        self._settle = settle
        self._task: asyncio.Task[None] | None = None
        self._again = False
        self._why = "said its tools changed"
        self.runs = 0
        """How many refreshes have finished (succeeded or failed)."""
        self.error: str | None = None
        """Why the last refresh failed; ``None`` when it succeeded (or none ran)."""

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def request(self, why: str = "said its tools changed") -> None:
        """Refresh soon: now if idle, else once more after the running refresh. Loop thread only.

        ``why`` completes "MCP server 'x' ..." in the warning logged if the refresh fails.
        """
        self._why = why
        if self.running:
            self._again = True
            return
        self._again = False
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"kode_nb-mcp-{self._server}-refresh-tools"
        )

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self._settle)
            self._again = False
            try:
                await self._refresh()
            except Exception as exc:
                self.error = (
                    exc.reason if isinstance(exc, McpConnectionError) else describe_error(exc)
                )
                log.warning(
                    "MCP server %r %s; refreshing its tools failed: %s (where they could not "
                    "be updated, the tools registered before stay)",
                    self._server,
                    self._why,
                    self.error,
                )
            else:
                self.error = None
            self.runs += 1
            if not self._again:
                return

    async def wait(self) -> None:
        """Return once no refresh is running or requested."""
        while (task := self._task) is not None and not task.done():
            await asyncio.wait({task})

    def cancel(self) -> None:
        """Stop a running refresh and drop a requested one."""
        self._again = False
        if self._task is not None and not self._task.done():
            self._task.cancel()
