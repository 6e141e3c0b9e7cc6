"""Serve a registry's tools over MCP: streamable HTTP on 127.0.0.1, or stdio for scripts.

``handle = await serve(registry, tools=["read_*", "search"])`` starts a streamable HTTP server
at ``handle.url`` (``http://127.0.0.1:<port>/mcp``) **on the running event loop**: a uvicorn
server runs in a task of that loop (no thread), so in a notebook the kernel's loop serves it
and tool calls run exactly as the notebook's own calls do. ``await handle.aclose()`` (or
``handle.stop()``, which frees the port at once) stops it. ``await serve_stdio(registry)`` serves
over stdin/stdout until the client closes them (for a script run by an MCP client).

What is served, and how:

* the tools whose name matches one of the ``tools`` fnmatch patterns (all when ``None``),
  looked up at each request, so tools defined later appear; when a served tool is added,
  replaced (a ``%%tool`` cell run again) or removed, connected clients get
  ``notifications/tools/list_changed`` (``tools.listChanged`` is advertised; a burst of
  changes is announced once; see :mod:`kode_nb.mcp._announce`);
* each tool's schema and annotations via :func:`kode_nb.tools._formats.mcp_tool` (kinds → hints),
  and the servers it came through (``_meta``, see :mod:`kode_nb.mcp._convert`): a tool that
  came from this server itself, through a kode_nb client, is not served back;
* every call goes through ``executor`` (default: a new :class:`~kode_nb.Executor` on the
  registry with the default :class:`~kode_nb.Policy`), so policy and approval apply: a tool that
  must ask is put to the executor's approver, and without one the call is denied and the client
  gets an ``isError`` result saying so;
* a tool's updates (``ctx.on_update``, yields) become progress notifications (``progress`` =
  update count, ``message`` = the update as text) when the client asked for progress, at most
  20 a second per call (:mod:`kode_nb.mcp._progress`: the latest update is sent, and the last
  one always before the result);
* **a bearer token**: the HTTP endpoint answers only requests that carry
  ``Authorization: Bearer <handle.token>`` (a new random token per server, compared in constant
  time; anything else gets ``401`` with ``WWW-Authenticate: Bearer``), because any local
  process (another user's too) can reach 127.0.0.1. ``handle.headers`` and
  ``handle.client_config()`` are what a client needs. The token is registered with
  :func:`kode_nb._redact.register_secret` while it serves, so traces and event logs never show it. ``auth=False``
  turns this off (a warning is logged). The SDK's Host and Origin checks (against DNS
  rebinding from web pages) apply either way. Over stdio only the parent process can talk to
  the server, so there is no token;
* results: text and images as they are, JSON blocks as text (one JSON object also as
  ``structuredContent``), errors with ``isError``; a client's ``notifications/cancelled``
  cancels the call.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import hmac
import ipaddress
import logging
import secrets
import socket
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import anyio
import mcp_types as mt
import uvicorn
from mcp.server.context import ServerRequestContext
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from kode_nb._redact import register_secret, unregister_secret
from kode_nb._version import __version__
from kode_nb.errors import ConfigurationError
from kode_nb.execution._executor import Executor
from kode_nb.mcp._announce import AnnouncingServer, ToolListAnnouncer
from kode_nb.mcp._convert import SERVED_BY, served_by, to_mcp_result
from kode_nb.mcp._progress import ProgressThrottle
from kode_nb.tools import _formats as formats
from kode_nb.tools._model import Tool
from kode_nb.tools._registry import ToolRegistry, default_registry
from kode_nb.types import normalize_name

__all__ = ["McpServerHandle", "serve", "serve_stdio"]

_STARTUP_TIMEOUT = 10.0

log = logging.getLogger("kode_nb.mcp")


class _BearerAuth:
    """ASGI middleware: HTTP requests without ``Authorization: Bearer <token>`` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self._token = token.encode("ascii")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            body = b'{"error": "unauthorized: send Authorization: Bearer <token>"}'
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b'Bearer realm="kode_nb"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Any) -> bool:
        given = next((v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"), b"")
        scheme, _, value = bytes(given).partition(b" ")
        # compare_digest takes the same time wherever the values differ
        return hmac.compare_digest(value.strip(), self._token) and scheme.lower() == b"bearer"


class _Tools:
    """The served selection of a registry, and the calls made to it."""

    def __init__(self, registry: ToolRegistry, patterns: Sequence[str] | None, executor: Executor):
        self.registry = registry
        self.patterns = tuple(patterns) if patterns is not None else None
        self.executor = executor
        self.id = uuid.uuid4().hex
        """This server's id in the served-by lists."""

    def selected(self) -> list[Tool]:
        return [t for t in self.registry.list() if self.matches(t)]

    def matches(self, tool: Tool) -> bool:
        return self.id not in served_by(tool) and self.selects(tool.name)

    def announces(self, name: str) -> bool:
        """A change to the tool named ``name`` changes what is served."""
        tool = self.registry.get(name)
        return self.matches(tool) if tool is not None else self.selects(name)

    def selects(self, name: str) -> bool:
        """A tool named ``name`` is served (also for a name no longer registered)."""
        if self.patterns is None:
            return True
        key = normalize_name(name)
        return any(
            fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(key, p.lower())
            for p in self.patterns
        )

    async def list_tools(
        self, ctx: ServerRequestContext[Any], params: mt.PaginatedRequestParams | None
    ) -> mt.ListToolsResult:
        return mt.ListToolsResult(
            tools=[
                mt.Tool.model_validate(
                    {**formats.mcp_tool(t), "_meta": {SERVED_BY: [*served_by(t), self.id]}}
                )
                for t in self.selected()
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any], params: mt.CallToolRequestParams
    ) -> mt.CallToolResult:
        tool = self.registry.get(params.name)
        if tool is None or not self.matches(tool):
            raise MCPError(code=mt.INVALID_PARAMS, message=f"Unknown tool: {params.name}")

        async def send(progress: float, message: str) -> None:
            await ctx.session.report_progress(progress, None, message)

        progress = ProgressThrottle(send)
        async with anyio.create_task_group() as tg:
            tg.start_soon(progress.run)
            try:
                result = await self.executor.call(
                    tool.name, params.arguments or {}, on_update=progress.update
                )
            finally:
                progress.close()  # the last update is sent before the result
        return to_mcp_result(result)

    def server(self, name: str, announcer: ToolListAnnouncer) -> AnnouncingServer:
        return AnnouncingServer(
            name,
            announcer,
            version=__version__,
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
        )

    def announcer(self) -> ToolListAnnouncer:
        """Follows the registry and announces changes of the selection (on the running loop)."""
        return ToolListAnnouncer(self.registry, self.announces)


def _prepare(
    registry: ToolRegistry | None,
    tools: Sequence[str] | str | None,
    executor: Executor | None,
) -> tuple[_Tools, bool]:
    """The selection to serve, and whether the executor was made here (and must be closed)."""
    if executor is not None and not isinstance(executor, Executor):
        raise ConfigurationError(f"serve(executor=...) needs an Executor, got {executor!r}")
    if registry is not None and not isinstance(registry, ToolRegistry):
        raise ConfigurationError(f"serve() needs a ToolRegistry, got {registry!r}")
    if registry is None:
        found = executor.registry if executor is not None else default_registry()
        if not isinstance(found, ToolRegistry):
            raise ConfigurationError("serve() needs a ToolRegistry; pass registry=...")
        registry = found
    if executor is not None and executor.registry is not registry:
        raise ConfigurationError(
            "serve(): the executor runs tools from another registry; pass "
            "Executor(registry) for the registry you serve"
        )
    if isinstance(tools, str):
        tools = [tools]
    if tools is not None:
        tools = list(tools)
        bad = [p for p in tools if not isinstance(p, str) or not p.strip()]
        if bad:
            raise ConfigurationError(
                f"serve(tools=...) takes tool name patterns like 'read_*', got {bad[0]!r}"
            )
    made = executor is None
    return _Tools(registry, tools, executor or Executor(registry)), made


# --------------------------------------------------------------------------- HTTP


class _Uvicorn(uvicorn.Server):
    """A uvicorn server that leaves the process's signal handlers alone (a kernel owns them)
    and says when it has started."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.ready.set()


class McpServerHandle:
    """A running MCP HTTP server; stop it with :meth:`aclose` (or :meth:`stop`)."""

    def __init__(
        self,
        *,
        server: _Uvicorn,
        task: asyncio.Task[None],
        tools: _Tools,
        host: str,
        port: int,
        path: str,
        owns_executor: bool,
        announcer: ToolListAnnouncer,
        token: str | None = None,
        name: str = "kode_nb",
    ) -> None:
        self._server = server
        self._task = task
        self._tools = tools
        self._announcer = announcer
        self._owns_executor = owns_executor
        self._loop = asyncio.get_running_loop()
        self.host = host
        """The address it listens on."""
        self.port = port
        """The port it listens on."""
        self.url = f"http://{_url_host(host)}:{port}{path}"
        """The endpoint to give MCP clients."""
        self.name = name
        """The server's name (in the handshake and :meth:`client_config`)."""
        self.token = token
        """The bearer token clients must send (``None``: served with ``auth=False``)."""

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers a client must send: ``{"Authorization": "Bearer <token>"}``."""
        return {"Authorization": f"Bearer {self.token}"} if self.token is not None else {}

    def client_config(self) -> dict[str, Any]:
        """An MCP client's config entry for this server (the ``mcpServers`` format most
        clients read): type, URL and headers (with the token)."""
        entry: dict[str, Any] = {"type": "http", "url": self.url}
        if self.token is not None:
            entry["headers"] = self.headers
        return {"mcpServers": {self.name: entry}}

    @property
    def registry(self) -> ToolRegistry:
        return self._tools.registry

    @property
    def executor(self) -> Executor:
        """The executor every call goes through."""
        return self._tools.executor

    @property
    def patterns(self) -> tuple[str, ...] | None:
        """The tool name patterns served (``None``: all tools)."""
        return self._tools.patterns

    @property
    def running(self) -> bool:
        return not self._task.done()

    @property
    def announced(self) -> int:
        """How many changes of the served tools were announced to clients (a burst: one)."""
        return self._announcer.announced

    def tool_names(self) -> list[str]:
        """The names served right now."""
        return [t.name for t in self._tools.selected()]

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"McpServerHandle({self.url!r}, {len(self.tool_names())} tools, {state})"

    def stop(self) -> None:
        """Stop listening now (the port is free when this returns, if called on the server's
        loop thread) and finish open requests in the background. Thread-safe; idempotent."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._stop_now()
        elif not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._stop_now)

    def _stop_now(self) -> None:
        if self.token is not None:
            unregister_secret(self.token)  # a stopped server's token opens nothing
        self._announcer.close()
        server = self._server
        server.should_exit = True
        for listener in getattr(server, "servers", ()):
            listener.close()
        if self._owns_executor:
            self._tools.executor.close()

    async def aclose(self) -> None:
        """Stop and wait until the server has shut down."""
        self.stop()
        await asyncio.wait({self._task})

    async def __aenter__(self) -> McpServerHandle:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def serve(
    registry: ToolRegistry | None = None,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tools: Sequence[str] | str | None = None,
    executor: Executor | None = None,
    name: str = "kode_nb",
    path: str = "/mcp",
    allow_remote: bool = False,
    auth: bool = True,
) -> McpServerHandle:
    """Serve ``registry`` (default: the current one) over streamable HTTP; see the module doc.

    ``port=0`` picks a free port (``handle.port``). A host other than loopback needs
    ``allow_remote=True``: served tools run in this process with its permissions.
    ``auth`` (default): clients must send ``handle.headers`` (a bearer token made for this
    server); ``auth=False`` lets any process that can reach the port call the tools.
    """
    if not isinstance(auth, bool):
        raise ConfigurationError(f"serve(auth=...) must be True or False, got {auth!r}")
    selection, owns = _prepare(registry, tools, executor)
    if not isinstance(host, str) or not host:
        raise ConfigurationError(f"serve(host=...) must be an address string, got {host!r}")
    if not _is_loopback(host) and not allow_remote:
        raise ConfigurationError(
            f"serve(host={host!r}) would expose the tools beyond this machine; serve on "
            "127.0.0.1, or pass allow_remote=True if that is what you want"
        )
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigurationError(
            f"serve(port=...) must be 0..65535 (0: any free port), got {port!r}"
        )
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigurationError(f"serve(path=...) must start with '/', got {path!r}")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if owns:
            selection.executor.close()
        raise OSError(
            exc.errno, f"serve(): cannot listen on {host}:{port}: {exc.strerror}"
        ) from None
    bound = int(sock.getsockname()[1])
    announcer = selection.announcer()
    app: Any = selection.server(name, announcer).streamable_http_app(
        streamable_http_path=path, host=host
    )
    token = secrets.token_urlsafe(32) if auth else None
    if token is not None:
        register_secret(token)
        app = _BearerAuth(app, token)
    else:
        log.warning(
            "MCP server on %s:%s serves without authentication (auth=False): any process "
            "that can connect to it can call its tools",
            host,
            bound,
        )
    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        lifespan="on",
        ws="none",
        timeout_graceful_shutdown=1,
    )
    server = _Uvicorn(config)
    task = asyncio.get_running_loop().create_task(
        _run(server, sock, announcer), name=f"kode_nb-mcp-serve-{bound}"
    )
    handle = McpServerHandle(
        server=server,
        task=task,
        tools=selection,
        host=host,
        port=bound,
        path=path,
        owns_executor=owns,
        announcer=announcer,
        token=token,
        name=name,
    )
    ready = asyncio.ensure_future(server.ready.wait())
    try:
        await asyncio.wait(
            {ready, task}, timeout=_STARTUP_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        ready.cancel()
    if not server.started:
        await handle.aclose()
        raise RuntimeError(f"serve(): the MCP server on {host}:{bound} did not start")
    return handle


async def _run(server: _Uvicorn, sock: socket.socket, announcer: ToolListAnnouncer) -> None:
    try:
        await server.serve(sockets=[sock])
    except SystemExit:  # uvicorn's way of failing a startup; serve() reports it
        pass
    finally:
        announcer.close()
        sock.close()


# --------------------------------------------------------------------------- stdio


async def serve_stdio(
    registry: ToolRegistry | None = None,
    *,
    tools: Sequence[str] | str | None = None,
    executor: Executor | None = None,
    name: str = "kode_nb",
) -> None:
    """Serve ``registry`` over this process's stdin/stdout until the client closes stdin.

    For a script an MCP client runs: ``asyncio.run(serve_stdio(registry))``. While serving,
    the process's stdout is reserved for the protocol (prints go to stderr).
    """
    selection, owns = _prepare(registry, tools, executor)
    announcer = selection.announcer()
    server = selection.server(name, announcer)
    try:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
    finally:
        announcer.close()
        if owns:
            selection.executor.close()
