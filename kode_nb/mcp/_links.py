"""One MCP session and the task that owns it (see :mod:`kode_nb.mcp.client`).

A :class:`Link` runs an *owner* coroutine in its own task. The owner enters the transport and
the ``ClientSession`` (anyio context managers), calls :meth:`Link.opened`, waits for
:attr:`Link.stop`, and exits them — all in that one task, as anyio requires. Everyone else only
reads :attr:`Link.session` and calls :meth:`Link.lost` / :meth:`Link.close`.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import Awaitable, Callable
from typing import IO, TYPE_CHECKING, Any

import anyio
import mcp_types as mt
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kode_nb.mcp.config import McpServerConfig
from kode_nb.mcp.errors import McpConnectionError

if TYPE_CHECKING:
    from mcp.client.session import ClientSession

__all__ = ["Link", "LinkState", "describe_error"]

log = logging.getLogger("kode_nb.mcp")

_MAX_PAGES = 100
"""Pages of a tool listing read at most."""

_TEARDOWN_WAIT = 10.0
"""Seconds a failing call waits for the dead session's teardown (the SDK bounds a stdio
server's shutdown to about 6 s)."""


class LinkState(enum.Enum):
    STARTING = "starting"
    OPEN = "open"
    CLOSED = "closed"


class Link:
    """One session: started by :meth:`start`, open after the handshake, closed once."""

    def __init__(self, config: McpServerConfig, owner: Callable[[Link], Awaitable[None]]) -> None:
        self.config = config
        self.loop = asyncio.get_running_loop()
        """The event loop the owner task runs on; calls must come from it."""
        self.state = LinkState.STARTING
        self.session: ClientSession | None = None
        """The open session (set by the owner after the handshake)."""
        self.init: mt.InitializeResult | None = None
        """The handshake's result."""
        self.reason = ""
        """Why the session ended or failed to start."""
        self.aborted = False
        self.scope: anyio.CancelScope | None = None
        """The owner's outer cancel scope (cancelled to abandon a connection attempt)."""
        self.stop = anyio.Event()
        """Set to make the owner close the session."""
        self.stderr_file: IO[str] | None = None
        """Where a stdio server's stderr goes."""
        self._owner = owner
        self._ready: asyncio.Future[None] = self.loop.create_future()
        self.task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Run the owner task until the session is open; raises :class:`McpConnectionError`."""
        self.task = self.loop.create_task(self._run(), name=f"kode_nb-mcp-{self.config.name}")
        try:
            await asyncio.shield(self._ready)
        except asyncio.CancelledError:
            self.abort()
            raise
        if self.state is not LinkState.OPEN:
            await asyncio.wait({self.task})
            raise McpConnectionError(self.config.name, self.with_stderr(self.reason))

    async def _run(self) -> None:
        try:
            if not self.aborted:
                await self._owner(self)
        except Exception as exc:
            self.reason = self.reason or describe_error(exc)
            log.debug("MCP server %r: session ended: %s", self.config.name, self.reason)
        except BaseException:
            self.reason = self.reason or "the connection task was cancelled"
            raise
        finally:
            self.state = LinkState.CLOSED
            self.reason = self.reason or "the connection closed"
            if not self._ready.done():
                self._ready.set_result(None)

    def opened(self, session: ClientSession) -> None:
        """Called by the owner once the handshake is done."""
        self.session = session
        self.state = LinkState.OPEN
        self._ready.set_result(None)

    def abort(self) -> None:
        """Abandon a connection attempt (or close an open session) without waiting."""
        self.aborted = True
        self.stop.set()
        if self.scope is not None and self.state is LinkState.STARTING:
            self.scope.cancel()

    async def lost(self, why: str) -> str:
        """The session died under a call: let the owner tear it down; returns the reason."""
        self.stop.set()
        task = self.task
        if task is not None and task is not asyncio.current_task():
            await asyncio.wait({task}, timeout=_TEARDOWN_WAIT)
        if self.state is not LinkState.CLOSED or self.reason in ("", "the connection closed"):
            self.reason = why
        return self.with_stderr(self.reason)

    async def list_tools(self) -> tuple[list[mt.Tool], dict[str, str]]:
        """Every page of the server's tool listing, and the tools skipped as malformed (name →
        why: one bad definition must not cost the others); raises :class:`McpConnectionError`
        (and tears the session down if it died, not if the server answered with an error)."""
        session = self.session
        assert session is not None
        listing: list[mt.Tool] = []
        skipped: dict[str, str] = {}
        cursor: str | None = None
        try:
            for number in range(_MAX_PAGES):
                params = mt.PaginatedRequestParams(cursor=cursor) if cursor else None
                raw = _Page.model_validate(await _list_raw(session, params))
                page = mt.ListToolsResult(
                    tools=_valid_tools(raw.tools, skipped, number), next_cursor=raw.next_cursor
                )
                absorb = getattr(session, "_absorb_tool_listing", None)  # output schemas
                if absorb is not None:
                    page = absorb(page, complete=cursor is None and page.next_cursor is None)
                listing.extend(page.tools)
                cursor = page.next_cursor
                if not cursor:
                    break
        except MCPError as exc:
            if exc.code == mt.CONNECTION_CLOSED:
                reason = await self.lost(describe_error(exc))
            else:  # the server answered with an error: it is alive, the session stays
                reason = f"error {exc.code}: {exc.message}"
            raise McpConnectionError(
                self.config.name, f"listing its tools failed: {reason}"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            reason = await self.lost(describe_error(exc))
            raise McpConnectionError(
                self.config.name, f"listing its tools failed: {reason}"
            ) from None
        return listing, skipped

    async def close(self) -> None:
        """Close the session and wait for the owner to finish (a stdio server is stopped)."""
        self.abort()
        task = self.task
        if task is not None and not task.done() and self.loop is asyncio.get_running_loop():
            await asyncio.wait({task})
        if self.stderr_file is not None:
            self.stderr_file.close()

    def stderr_text(self, limit: int = 20_000) -> str:
        """The last ``limit`` characters a stdio server wrote to stderr."""
        file = self.stderr_file
        if file is None or file.closed:
            return ""
        with contextlib.suppress(OSError, ValueError):
            file.flush()
            file.seek(0)
            return file.read()[-limit:]
        return ""

    def with_stderr(self, reason: str) -> str:
        """``reason`` plus the last lines of the server's stderr, if it wrote any."""
        lines = [line.strip() for line in self.stderr_text(4000).splitlines() if line.strip()]
        if not lines:
            return reason
        return f"{reason} (server stderr: {' | '.join(lines[-5:])})"


def describe_error(exc: BaseException) -> str:
    """``Type: message`` for an exception; the leaves, for an exception group."""
    leaves: list[str] = []

    def walk(e: BaseException) -> None:
        group = getattr(e, "exceptions", None)
        if isinstance(group, tuple) and group:
            for inner in group:
                walk(inner)
            return
        message = getattr(e, "message", None) if type(e).__name__ == "MCPError" else None
        item = message or (f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
        if item not in leaves:
            leaves.append(item)

    walk(exc)
    return "; ".join(leaves)


async def _list_raw(
    session: ClientSession, params: mt.PaginatedRequestParams | None
) -> dict[str, Any]:
    """One ``tools/list`` page as the server sent it. The SDK's own ``list_tools`` validates
    the page as a whole, so one malformed tool would fail it: the request goes through the
    session's dispatcher (the SDK's raw request) when it has one."""
    dispatcher = getattr(session, "_dispatcher", None)
    if dispatcher is None or not hasattr(dispatcher, "send_raw_request"):
        page = await session.list_tools(params=params)
        return page.model_dump(by_alias=True, exclude_none=True)
    body = params.model_dump(by_alias=True, exclude_none=True) if params is not None else None
    raw = await dispatcher.send_raw_request("tools/list", body, {})
    return raw if isinstance(raw, dict) else {"tools": []}


class _Page(BaseModel):
    """A ``tools/list`` page whose tools are checked one by one (:func:`_valid_tools`)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    tools: list[Any]
    next_cursor: str | None = Field(default=None, alias="nextCursor")


def _valid_tools(raw: list[Any], skipped: dict[str, str], page: int) -> list[mt.Tool]:
    """The well-formed tool definitions of ``raw``; the others go to ``skipped``."""
    tools: list[mt.Tool] = []
    for index, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        label = name if isinstance(name, str) else f"#{index + 1} of page {page + 1}"
        try:
            tools.append(mt.Tool.model_validate(item))
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem.get("loc", ())) or "definition"
            skipped[label] = f"malformed definition ({where}: {problem.get('msg', exc)})"
    return tools
