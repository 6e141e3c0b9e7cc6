"""The MCP client: connect to a server, wrap its tools as kode_nb tools, keep the session alive.

``conn = await connect("files", command=["python", "server.py"])`` (stdio) or
``await connect("search", url="http://127.0.0.1:8931/mcp", headers={...})`` (streamable HTTP)
returns an :class:`McpConnection`; ``conn.register()`` puts its tools in a registry. Each tool
(category ``mcp``, group ``mcp_<server>``, kind from the annotations, see
:mod:`kode_nb.mcp._convert`) validates its arguments with ``jsonschema`` against the server's
``inputSchema`` (exactly as declared: no restriction is added) before anything is sent, and runs
through the :class:`~kode_nb.Executor` like any tool: policy, approval, timeout, cancellation.

**One owner task per session.** The SDK's transports and ``ClientSession`` are anyio context
managers whose cancel scopes must be entered and exited by the same task, so each session is
opened, held and closed by one long-lived task on the event loop that connected it (an
``AsyncExitStack`` in ``McpConnection._own``). Calls are made from the callers' own tasks on that
loop, so cancelling a call (executor timeout, ``Executor.cancel``, an interrupt) cancels the
request, and the SDK sends ``notifications/cancelled`` to the server.

**Tool list changes.** When the server sends ``notifications/tools/list_changed``, and when a
call starts a new session after the last one died (a restarted server may list other tools),
the tools are listed again in a task of their own (:mod:`kode_nb.mcp._refresh`: bursts
coalesce) and every registry they were registered in is updated: new tools added, tools no
longer listed removed, changed ones replaced, unchanged ones left as they are. A refresh that
fails is logged and kept in :attr:`McpConnection.refresh_error`; the tools registered before stay.

**Limits.** A message from the server larger than ``config.max_result_bytes`` (default 10 MB)
is not read: over stdio it is skipped as it arrives (:mod:`kode_nb.mcp._stdio`), over HTTP the
response body stops being read at the limit (:mod:`kode_nb.mcp._http_limit`); the call returns
an error naming the limit.

**Failures.** Progress notifications become ``ctx.on_update("[3/5] message\\n")`` lines.
``isError`` results are error results with the server's message. When the server crashes or the
connection drops, the call returns an error result from :class:`McpServerUnavailableError`
(with the tail of a stdio server's stderr), the dead session is torn down, and the next call
starts a new one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import tempfile
from typing import Any, TextIO, cast

import anyio
import httpx2
import mcp_types as mt
from mcp.client.session import ClientSession, IncomingMessage
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from kode_nb._version import __version__
from kode_nb.errors import ConfigurationError, ToolError
from kode_nb.mcp._convert import from_mcp_result, progress_text
from kode_nb.mcp._http_limit import is_too_large, limit_json_bodies
from kode_nb.mcp._links import Link, LinkState, describe_error
from kode_nb.mcp._refresh import Refresher
from kode_nb.mcp._registration import register_tools, unregister_tools
from kode_nb.mcp._stdio import bounded_stdio_client
from kode_nb.mcp._wrapping import Listed, wrap_listing
from kode_nb.mcp.config import McpServerConfig
from kode_nb.mcp.errors import McpConnectionError, McpServerUnavailableError
from kode_nb.tools._model import Tool
from kode_nb.tools._registry import ToolRegistry, default_registry
from kode_nb.types import ToolContext, ToolResult

__all__ = ["McpConnection", "McpConnectionError", "McpServerUnavailableError", "connect"]

log = logging.getLogger("kode_nb.mcp")

_CLIENT_INFO = mt.Implementation(name="kode_nb", version=__version__)


class McpConnection:
    """A connection to one MCP server and the kode_nb tools wrapping the server's tools."""

    def __init__(self, config: McpServerConfig) -> None:
        if not isinstance(config, McpServerConfig):
            raise ConfigurationError(f"McpConnection needs an McpServerConfig, got {config!r}")
        self.config = config
        """How the server is reached."""
        self._link: Link | None = None
        self._lock: asyncio.Lock | None = None
        self._lock_loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._listed: Listed = {}
        self._refresher = Refresher(config.name, self._refresh_tools)
        self._sessions = 0  # sessions opened so far: a later one is a reconnect
        self._registrations: dict[int, tuple[ToolRegistry, bool | None]] = {}
        self._trust_all = config.trust
        self._trusted: set[str] = set(config.trusted_tools)
        self._distrusted: set[str] = set()
        self._skipped: dict[str, str] = {}

    # ----------------------------------------------------------------- state

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def connected(self) -> bool:
        """A session is open (it may still turn out dead on the next call)."""
        return self._link is not None and self._link.state is LinkState.OPEN

    @property
    def tools(self) -> list[Tool]:
        """The wrapped tools from the last listing, with their unprefixed names."""
        return [tool for _, tool in self._listed.values()]

    @property
    def skipped_tools(self) -> dict[str, str]:
        """Tools of the last listing left out, by MCP name, with why (a malformed definition,
        an unusable ``inputSchema``); the server's other tools are registered."""
        return dict(self._skipped)

    @property
    def refresh_error(self) -> str | None:
        """Why listing the tools again (after ``notifications/tools/list_changed`` or a
        reconnect) last failed (``None``: the last refresh worked, or none was needed)."""
        return self._refresher.error

    @property
    def refreshing(self) -> bool:
        """The tools are being listed again (after ``notifications/tools/list_changed`` or a
        reconnect)."""
        return self._refresher.running

    async def tools_refreshed(self) -> list[Tool]:
        """Wait until no tool refresh is running or due; returns :attr:`tools`."""
        await self._refresher.wait()
        return self.tools

    @property
    def server_info(self) -> mt.Implementation | None:
        """The server's name and version from the handshake."""
        link = self._link
        return link.init.server_info if link is not None and link.init is not None else None

    @property
    def instructions(self) -> str | None:
        """The server's usage instructions from the handshake, if it sent any."""
        link = self._link
        return link.init.instructions if link is not None and link.init is not None else None

    def stderr(self) -> str:
        """What a stdio server wrote to stderr in its current (or last) session."""
        return self._link.stderr_text() if self._link is not None else ""

    def __repr__(self) -> str:
        state = "closed" if self._closed else "connected" if self.connected else "not connected"
        return (
            f"McpConnection({self.name!r}, {self.config.transport} {self.config.describe()!r}, "
            f"{len(self._listed)} tools, {state})"
        )

    # ----------------------------------------------------------------- trust

    def is_trusted(self, mcp_name: str) -> bool:
        """Whether the annotations of the server's tool ``mcp_name`` are trusted (see
        :mod:`kode_nb.mcp.config`): untrusted tools always ask for approval."""
        if mcp_name in self._distrusted:
            return False
        return self._trust_all or mcp_name in self._trusted

    def trust(self, *tools: str) -> list[Tool]:
        """Trust the server (no ``tools``) or these tools (MCP names, as listed); the tools are
        wrapped again (and re-registered) with their annotations deciding approval."""
        if tools:
            self._trusted.update(tools)
            self._distrusted.difference_update(tools)
        else:
            self._trust_all = True
            self._distrusted.clear()
        return self._rewrap()

    def untrust(self, *tools: str) -> list[Tool]:
        """Stop trusting the server (no ``tools``: also every tool trusted one by one) or these
        tools; they ask for approval again whatever their annotations claim."""
        if tools:
            self._trusted.difference_update(tools)
            self._distrusted.update(tools)
        else:
            self._trust_all = False
            self._trusted.clear()
            self._distrusted.clear()
        return self._rewrap()

    def _rewrap(self) -> list[Tool]:
        self._apply([item for item, _ in self._listed.values()], self._skipped)
        return self.tools

    # ----------------------------------------------------------------- lifecycle

    async def open(self) -> McpConnection:
        """Start the session (if none is open) and list the tools. Returns ``self``."""
        self._closed = False
        await self._session_link()
        await self.list_tools()
        return self

    async def reconnect(self) -> McpConnection:
        """Close the current session, open a new one and list the tools again."""
        link, self._link = self._link, None
        if link is not None:
            await link.close()
        return await self.open()

    async def disconnect(self) -> None:
        """Unregister the tools and close the session (stops a stdio server). Idempotent."""
        self._closed = True
        self._refresher.cancel()
        self.unregister()
        link, self._link = self._link, None
        if link is not None:
            await link.close()

    async def __aenter__(self) -> McpConnection:
        if not self.connected:
            await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect()

    async def _session_link(self, *, relist: bool = False) -> Link:
        """The open session, starting one if needed; raises :class:`McpConnectionError`.

        ``relist``: a session started here that is not the first has the tools listed again
        (the caller does not list them itself).
        """
        loop = asyncio.get_running_loop()
        link = self._link
        if link is not None and link.state is LinkState.OPEN and link.loop is loop:
            return link
        if self._lock is None or self._lock_loop is not loop:
            self._lock, self._lock_loop = asyncio.Lock(), loop
        async with self._lock:
            link = self._link
            if link is not None and link.loop is not loop and not link.loop.is_closed():
                raise McpConnectionError(
                    self.name,
                    "the connection is open on another event loop; use it from that loop",
                )
            if link is not None and link.state is LinkState.OPEN and link.loop is loop:
                return link
            if link is not None:
                await link.close()
            link = self._link = Link(self.config, self._own)
            await link.start()
            self._sessions += 1
            if relist and self._sessions > 1:
                self._refresher.request("was reconnected")
            return link

    async def _own(self, link: Link) -> None:
        """The owner task: enter the transport and the session, wait, exit them (same task)."""
        cfg = self.config
        with anyio.CancelScope() as scope:
            link.scope = scope
            scope.deadline = anyio.current_time() + cfg.connect_timeout
            async with contextlib.AsyncExitStack() as stack:
                if cfg.command:
                    # Closed by Link.close(): it outlives the session, for the error message.
                    link.stderr_file = tempfile.TemporaryFile(  # noqa: SIM115
                        mode="a+", encoding="utf-8", errors="replace"
                    )
                    params = StdioServerParameters(
                        command=cfg.command[0],
                        args=list(cfg.command[1:]),
                        env=dict(cfg.env) or None,
                        cwd=cfg.cwd,
                    )
                    errlog = cast(TextIO, link.stderr_file)
                    read, write = await stack.enter_async_context(
                        bounded_stdio_client(params, errlog, cfg.max_result_bytes)
                    )
                else:
                    client = httpx2.AsyncClient(
                        headers=dict(cfg.headers),
                        timeout=httpx2.Timeout(30.0, read=300.0),
                        event_hooks={"response": [limit_json_bodies(cfg.max_result_bytes)]},
                    )
                    await stack.enter_async_context(client)
                    read, write = await stack.enter_async_context(
                        streamable_http_client(
                            str(cfg.url),
                            http_client=client,
                            max_sse_event_size=cfg.max_result_bytes,
                        )
                    )
                session = ClientSession(
                    read, write, client_info=_CLIENT_INFO, message_handler=self._on_message
                )
                await stack.enter_async_context(session)
                link.init = await session.initialize()
                scope.deadline = math.inf
                link.opened(session)
                await link.stop.wait()
        if scope.cancelled_caught and link.state is LinkState.STARTING:
            link.reason = link.reason or (
                f"no handshake within {cfg.connect_timeout:g} s (connect_timeout)"
                if not link.aborted
                else "the connection attempt was abandoned"
            )

    # ----------------------------------------------------------------- tools

    async def list_tools(self) -> list[Tool]:
        """Ask the server for its tools, rebuild :attr:`tools`, update registered copies."""
        link = await self._session_link()
        self._apply(*await link.list_tools())
        return self.tools

    def _apply(self, listing: list[mt.Tool], skipped: dict[str, str]) -> None:
        """Make ``listing`` the tools, also in every registry they were registered in (each
        registry all or nothing); raises the first registry's failure after trying them all.
        ``skipped``: tools the listing left out (more are added for unusable schemas)."""
        skipped = dict(skipped)
        self._listed = wrap_listing(
            listing,
            self._listed,
            server=self.name,
            timeout=self.config.timeout,
            call=self._call,
            trusted=self.is_trusted,
            skipped=skipped,
        )
        self._skipped = skipped
        for name, why in skipped.items():
            log.warning("MCP server %r: tool %r skipped: %s", self.name, name, why)
        tools = self.tools
        failures: list[Exception] = []
        for registry, prefix in list(self._registrations.values()):
            try:
                register_tools(tools, registry, self.name, prefix)
            except Exception as exc:
                failures.append(exc)
        if failures:
            raise failures[0]

    async def _on_message(self, message: IncomingMessage) -> None:
        """The session's handler of what the server sends unasked: follows tool list changes."""
        if isinstance(message, mt.ToolListChangedNotification) and not self._closed:
            self._refresher.request("said its tools changed")  # in a task of its own

    async def _refresh_tools(self) -> None:
        """List the tools again on the open session (a refresh never starts a session)."""
        link = self._link
        if self._closed or link is None or link.state is not LinkState.OPEN:
            return  # no open session: nothing to list from
        listing, skipped = await link.list_tools()
        if self._closed or self._link is not link:
            return  # disconnected or reconnected meanwhile: this listing is stale
        self._apply(listing, skipped)

    def _unavailable(self, tool: str, reason: str) -> McpServerUnavailableError:
        if self._closed:
            return McpServerUnavailableError(
                tool, self.name, "disconnect() was called", disconnected=True
            )
        return McpServerUnavailableError(tool, self.name, reason)

    async def _call(self, mcp_name: str, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        if self._closed:
            raise self._unavailable(ctx.tool, "")
        try:
            link = await self._session_link(relist=True)
        except McpConnectionError as exc:
            raise self._unavailable(ctx.tool, exc.reason) from None
        session = link.session
        assert session is not None
        finished = False
        on_update = ctx.on_update

        async def progress(progress: float, total: float | None, message: str | None) -> None:
            if not finished:
                on_update(progress_text(progress, total, message))

        try:
            result = await session.call_tool(mcp_name, arguments, progress_callback=progress)
        except MCPError as exc:
            if is_too_large(exc.message):  # the session is fine: only this result was refused
                size = self.config.max_result_bytes
                raise ToolError(
                    ctx.tool,
                    f"MCP server '{self.name}', tool '{mcp_name}': the result is too large: "
                    f"over {size / 1024 / 1024:.1f} MB (max_result_bytes), so it was not read",
                ) from None
            if exc.code == mt.CONNECTION_CLOSED:
                reason = await link.lost(
                    "the server process ended the connection (did it exit?)"
                    if self.config.command
                    else "the connection closed"
                )
                raise self._unavailable(ctx.tool, reason) from None
            raise ToolError(
                ctx.tool,
                f"MCP server '{self.name}' answered the call to '{mcp_name}' with error "
                f"{exc.code}: {exc.message}",
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            reason = await link.lost(describe_error(exc))
            raise self._unavailable(ctx.tool, reason) from None
        except RuntimeError as exc:  # the SDK's checks of the result (e.g. structured content)
            raise ToolError(
                ctx.tool, f"MCP server '{self.name}', tool '{mcp_name}': {exc}"
            ) from None
        finally:
            finished = True
        return from_mcp_result(result, server=self.name, tool=ctx.tool, mcp_tool=mcp_name)

    # ----------------------------------------------------------------- registration

    def register(
        self, registry: ToolRegistry | None = None, *, prefix: bool | None = None
    ) -> list[Tool]:
        """Register the tools in ``registry`` (default: the current one); returns them.

        ``prefix=None`` (auto) names a tool ``<server>_<tool>`` only when its name is taken by
        another tool (a notebook tool, another server's); ``True`` prefixes all, ``False``
        none (a clash then raises :class:`~kode_nb.DuplicateToolError`). Re-registering (and
        every :meth:`list_tools` later) keeps the registry in step with the server's list.
        """
        target = registry if registry is not None else default_registry()
        if not isinstance(target, ToolRegistry):
            raise ConfigurationError(f"register() needs a ToolRegistry, got {target!r}")
        if prefix is not None and not isinstance(prefix, bool):
            raise ConfigurationError(f"prefix must be True, False or None (auto), got {prefix!r}")
        tools = register_tools(self.tools, target, self.name, prefix)
        self._registrations[id(target)] = (target, prefix)
        return tools

    def unregister(self, registry: ToolRegistry | None = None) -> list[str]:
        """Remove this server's tools from ``registry`` (default: every registry they were
        registered in); returns the names removed."""
        targets = (
            [registry] if registry is not None else [r for r, _ in self._registrations.values()]
        )
        removed: list[str] = []
        for target in targets:
            removed += unregister_tools(target, self.name)
            self._registrations.pop(id(target), None)
        return removed


async def connect(
    name: str | McpServerConfig,
    *,
    command: list[str] | tuple[str, ...] | str | None = None,
    url: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    headers: dict[str, str] | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - the tools' call timeout, not this call's
    connect_timeout: float = 30.0,
) -> McpConnection:
    """Connect to an MCP server and list its tools; returns the open :class:`McpConnection`.

    Give ``command`` (stdio: the program and its arguments, run with ``env`` in ``cwd``) or
    ``url`` (streamable HTTP, with ``headers``), or an :class:`McpServerConfig` as ``name``.
    ``timeout`` is each tool call's limit (default: the executor's). Raises
    :class:`McpConnectionError` when the server cannot be started or does not answer.
    """
    if isinstance(name, McpServerConfig):
        config = name
    else:
        config = McpServerConfig(
            name=name,
            command=cast(Any, command or ()),
            url=url,
            env=env or {},
            cwd=cwd,
            headers=headers or {},
            timeout=timeout,
            connect_timeout=connect_timeout,
        )
    connection = McpConnection(config)
    try:
        return await connection.open()
    except BaseException:
        await asyncio.shield(connection.disconnect())
        raise
