"""Telling the clients of kode_nb's MCP server that the served tools changed.

A :class:`ToolListAnnouncer` follows the served registry (:meth:`ToolRegistry.on_change
<kode_nb.ToolRegistry.on_change>`, whose callbacks may come from any thread: they hop to the
server's loop with ``call_soon_threadsafe``). A change to a served tool (added, replaced — a
``%%tool`` cell run again — or removed; a tool outside the served patterns is ignored) makes it
publish one ``ToolsListChanged`` event :data:`SETTLE` seconds later, so a burst of changes
becomes one event, on an ``InMemorySubscriptionBus``. Two kinds of client hear it:

* a client that did the handshake (protocol versions up to 2025-11-25): the server's
  ``notifications/initialized`` handler (:meth:`ToolListAnnouncer.follow`) stays running for as
  long as that connection lives — the SDK cancels it when the connection ends, so sessions
  that come and go leave nothing behind — and sends ``notifications/tools/list_changed`` on
  the connection's own stream (for streamable HTTP, the client's GET stream) after each event;
* a 2026-07-28 client, on its ``subscriptions/listen`` stream (the SDK's ``ListenHandler``).

:class:`AnnouncingServer` is the SDK's low-level ``Server`` wired to both, advertising
``tools.listChanged``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import mcp_types as mt
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import NotificationOptions, Server
from mcp.server.models import InitializationOptions
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged

from kode_nb.tools._registry import ToolRegistry

__all__ = ["SETTLE", "AnnouncingServer", "ToolListAnnouncer"]

log = logging.getLogger("kode_nb.mcp")

SETTLE = 0.05
"""Seconds between a change to the served tools and the announcement (a burst folds into one)."""


class ToolListAnnouncer:
    """Announces changes of the tools ``selects`` picks from ``registry``; make it on the loop
    that serves, :meth:`close` it when the server stops."""

    def __init__(
        self, registry: ToolRegistry, selects: Callable[[str], bool], *, settle: float = SETTLE
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._selects = selects
        self._settle = settle
        self._due = False  # an announcement is waiting out SETTLE
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False
        self.bus = InMemorySubscriptionBus()
        """Where the ``ToolsListChanged`` events go."""
        self.listen = ListenHandler(self.bus)
        """The ``subscriptions/listen`` handler (2026-07-28 clients)."""
        self.announced = 0
        """How many changes were announced (bursts count once)."""
        self._unsubscribe = registry.on_change(self._changed)

    def _changed(self, action: str, name: str) -> None:
        """The registry's callback (any thread)."""
        if self._closed or not self._selects(name):
            return
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody is listening any more
            self._loop.call_soon_threadsafe(self._soon)

    def _soon(self) -> None:
        if self._closed or self._due:
            return  # the announcement due covers this change too
        self._due = True
        task = self._loop.create_task(self._announce(), name="kode_nb-mcp-announce")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _announce(self) -> None:
        await asyncio.sleep(self._settle)
        self._due = False  # a change from now on makes another announcement
        self.announced += 1
        await self.bus.publish(ToolsListChanged())

    async def follow(self, ctx: ServerRequestContext[Any], params: mt.NotificationParams) -> None:
        """The ``notifications/initialized`` handler: send this connection
        ``notifications/tools/list_changed`` after each announcement, until it ends."""
        wake = asyncio.Event()

        def heard(event: object) -> None:
            if isinstance(event, ToolsListChanged):
                wake.set()

        unsubscribe = self.bus.subscribe(heard)
        try:
            while True:
                await wake.wait()
                wake.clear()  # announcements while sending fold into the next one
                try:
                    await ctx.session.send_tool_list_changed()
                except Exception as exc:  # the connection is going away: the SDK ends us
                    log.debug("MCP server: could not send tools/list_changed: %r", exc)
        finally:
            unsubscribe()

    def close(self) -> None:
        """Stop following the registry, drop an announcement due, end the listen streams."""
        if self._closed:
            return
        self._closed = True
        self._unsubscribe()
        for task in list(self._tasks):
            task.cancel()
        self.listen.close()


class AnnouncingServer(Server[Any]):
    """The SDK's low-level server with tool list change announcements from ``announcer``."""

    def __init__(self, name: str, announcer: ToolListAnnouncer, **options: Any) -> None:
        super().__init__(name, on_subscriptions_listen=announcer.listen, **options)
        self.add_notification_handler(
            "notifications/initialized", mt.NotificationParams, announcer.follow
        )

    def create_initialization_options(
        self,
        notification_options: NotificationOptions | None = None,
        experimental_capabilities: dict[str, dict[str, Any]] | None = None,
        extensions: dict[str, dict[str, Any]] | None = None,
    ) -> InitializationOptions:
        """The handshake's options, with ``tools.listChanged: true`` (streamable HTTP asks
        without arguments)."""
        return super().create_initialization_options(
            notification_options or NotificationOptions(tools_changed=True),
            experimental_capabilities,
            extensions,
        )
