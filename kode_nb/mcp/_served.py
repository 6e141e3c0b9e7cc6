"""A registry served over MCP on a loop someone else owns (a notebook's ``%mcp serve``).

:class:`ServedEndpoint` is the part of serving that needs no display: what is served, starting
and stopping :func:`kode_nb.mcp.serve` on the running loop (``await endpoint`` until it listens,
or raises why it could not), and the outside calls — each runs through the *current* executor
(:attr:`ServedEndpoint.executor` is a function: a session may rebuild its executor) under its
own call id ``mcp_<hex>``, so policy, approval, limits and the executor's event bus apply; a
stopped endpoint cancels the calls still in flight. A :class:`CallHooks` (the notebook's panel)
is told when an outside call starts and ends, and when the status changes: that is all a view
needs to draw them.
"""

from __future__ import annotations

import asyncio
import fnmatch
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from kode_nb.execution._executor import Executor
from kode_nb.types import ToolResult

if TYPE_CHECKING:
    from kode_nb.mcp.server import McpServerHandle
    from kode_nb.tools._registry import ToolRegistry

__all__ = ["CallHooks", "ServedEndpoint"]


class CallHooks(Protocol):
    """What a view of the endpoint is told."""

    def call_started(self, call_id: str, tool: str, arguments: Any) -> Callable[[Any], object]:
        """An outside call of a registered ``tool`` starts: return what takes its updates."""

    def call_ended(self, call_id: str, result: ToolResult) -> None:
        """The call ended with ``result`` (cancelled ones too)."""

    def status_changed(self, status: str) -> None:
        """``listening``, ``stopped`` or ``could not start: ...``."""


class _Forwarding(Executor):
    """What :func:`kode_nb.mcp.serve` calls: hands each call to the endpoint."""

    def __init__(self, endpoint: ServedEndpoint) -> None:
        super().__init__(endpoint.registry, max_concurrency=None)
        self._endpoint = endpoint

    async def call(
        self,
        name: str,
        arguments: str | bytes | Mapping[str, Any] | None = None,
        *,
        call_id: str | None = None,
        run_id: str | None = None,
        parent_call_id: str | None = None,
        on_update: Callable[[Any], object] | None = None,
        approver: Any = None,
    ) -> ToolResult:
        return await self._endpoint.call(name, arguments, on_update)


class ServedEndpoint:
    """``registry``'s tools (those matching ``patterns``, all with ``None``) served over
    streamable HTTP on 127.0.0.1:``port``; calls run on ``executor()``."""

    def __init__(
        self,
        registry: ToolRegistry,
        executor: Callable[[], Executor],
        *,
        port: int,
        patterns: list[str] | None,
        name: str,
        auth: bool = True,
        hooks: CallHooks | None = None,
    ) -> None:
        self.registry = registry
        self.executor = executor
        """The executor outside calls run on, asked at each call."""
        self.auth = auth
        """Clients must send the bearer token (False: ``--no-auth``)."""
        self.port = port
        """The port it listens on (127.0.0.1)."""
        self.patterns = tuple(patterns) if patterns is not None else None
        """The tool name patterns served (``None``: every tool)."""
        self.name = name
        self.url = f"http://127.0.0.1:{port}/mcp"
        """The endpoint to give MCP clients."""
        self.hooks = hooks
        self.handle: McpServerHandle | None = None
        """The running :class:`~kode_nb.mcp.McpServerHandle` once started."""
        self.error: BaseException | None = None
        """Why it could not start."""
        self.status = "starting"
        """``starting``, ``listening``, ``stopped`` or ``could not start: ...``."""
        self.stopped = False
        self.in_flight: set[str] = set()
        """Call ids of outside calls running now."""
        self.results: list[ToolResult] = []
        """The results of finished outside calls, oldest first."""
        self.on_stop: list[Callable[[ServedEndpoint], object]] = []
        """Called once when it stops (or could not start)."""
        self._task: asyncio.Task[None] | None = None
        self._forwarding = _Forwarding(self)

    # ------------------------------------------------------------------ what is served

    def tool_names(self) -> list[str]:
        """The names served right now."""
        if self.handle is not None:
            return self.handle.tool_names()
        if self.patterns is None:
            return self.registry.names()
        return [
            t.name
            for t in self.registry.list()
            if any(
                fnmatch.fnmatchcase(t.name, p) or fnmatch.fnmatchcase(t.key, p.lower())
                for p in self.patterns
            )
        ]

    @property
    def token(self) -> str | None:
        """The bearer token clients must send (``None`` before it listens, or without auth)."""
        return self.handle.token if self.handle is not None else None

    @property
    def headers(self) -> dict[str, str]:
        """The HTTP headers an MCP client must send (the token)."""
        return self.handle.headers if self.handle is not None else {}

    def client_config(self) -> dict[str, Any]:
        """The ``mcpServers`` entry an MCP client needs (URL and token)."""
        if self.handle is not None:
            return self.handle.client_config()
        return {"mcpServers": {self.name: {"type": "http", "url": self.url}}}

    def describe(self) -> str:
        names = self.tool_names()
        listed = ", ".join(names) if len(names) <= 8 else ", ".join(names[:8]) + ", ..."
        return f"{len(names)} tool{'' if len(names) == 1 else 's'} ({listed}) at {self.url}"

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start serving in a task on the running loop (``await`` the endpoint for it)."""
        self._task = asyncio.get_running_loop().create_task(
            self._start(), name=f"kode_nb MCP serve {self.port}"
        )

    async def _start(self) -> None:
        from kode_nb.mcp.server import serve

        try:
            handle = await serve(
                self.registry,
                port=self.port,
                tools=self.patterns,
                executor=self._forwarding,
                name=self.name,
                auth=self.auth,
            )
        except Exception as exc:  # reported by status; `await endpoint` raises it
            self.error = exc
            self._finish(f"could not start: {exc}")
            return
        self.handle = handle
        if self.stopped:
            handle.stop()
        else:
            self._set_status("listening")

    def __await__(self) -> Any:
        return self._wait_started().__await__()

    async def _wait_started(self) -> ServedEndpoint:
        if self._task is not None:
            await asyncio.shield(self._task)
        if self.error is not None:
            raise self.error
        return self

    def stop(self) -> None:
        """Stop listening (the port is free when this returns) and cancel outside calls in
        flight. Idempotent."""
        if self.stopped:
            return
        self.stopped = True
        if self.handle is not None:
            self.handle.stop()
        elif self._task is not None:
            self._task.cancel()
        executor = self.executor()
        for call_id in list(self.in_flight):
            executor.cancel(call_id=call_id, reason="the MCP server was stopped")
        self._finish("stopped")

    def _finish(self, status: str) -> None:
        self.stopped = True
        self._forwarding.close()
        self._set_status(status)
        for fn in self.on_stop:
            fn(self)

    def _set_status(self, status: str) -> None:
        self.status = status
        if self.hooks is not None:
            self.hooks.status_changed(status)

    # ------------------------------------------------------------------ outside calls

    async def call(
        self, name: str, arguments: Any, on_update: Callable[[Any], object] | None = None
    ) -> ToolResult:
        """One call from an MCP client, through :attr:`executor`."""
        call_id = f"mcp_{uuid.uuid4().hex[:10]}"
        hooks = self.hooks if self.registry.get(name) is not None else None
        shown = hooks.call_started(call_id, name, arguments) if hooks is not None else None

        def updates(data: Any) -> None:
            if shown is not None:
                shown(data)
            if on_update is not None:
                on_update(data)

        self.in_flight.add(call_id)
        result: ToolResult | None = None
        try:
            result = await self.executor().call(name, arguments, call_id=call_id, on_update=updates)
            return result
        finally:
            if result is None:
                result = ToolResult.error(
                    "The call was cancelled.", status="cancelled", tool=name, call_id=call_id
                )
            self.in_flight.discard(call_id)
            self.results.append(result)
            if hooks is not None:
                hooks.call_ended(call_id, result)

    def __repr__(self) -> str:
        return f"<ServedEndpoint {self.url} {self.status}>"
