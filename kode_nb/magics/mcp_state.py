"""The per-session MCP state behind ``%mcp``: connections and the notebook's own server.

:class:`NotebookMcp` runs each command as a task on the kernel's loop when there is one (the cell
never waits), else to completion on the session's private loop (terminal IPython). It imports
neither the MCP SDK nor ipywidgets until a command needs them. The magic is
:mod:`kode_nb.magics.mcp_magics`.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from kode_nb.magics.session import KodeSession
    from kode_nb.mcp.config import McpServerConfig
    from kode_nb.mcp.manager import McpManager
    from kode_nb.ui.mcp_serving import NotebookServer

__all__ = ["NotebookMcp", "plural"]

T = TypeVar("T")


class NotebookMcp:
    """The MCP side of one session: connected servers (an :class:`McpManager`) and the served
    endpoint. Reach it with ``get_session().mcp``."""

    def __init__(self, session: KodeSession) -> None:
        self.session = session
        self.states: dict[str, str] = {}
        """Each server's state by name: ``connecting``, ``connected`` or ``failed: why``."""
        self.server: NotebookServer | None = None
        """The running :class:`NotebookServer` (``%mcp serve``), if any."""
        self._manager: McpManager | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._deferred: tuple[dict[str, McpServerConfig], str] | None = None
        self.awaited = False
        """The next ``connect`` is awaited by its cell (:mod:`kode_nb.magics.awaiting`): no
        status line, the outcome is printed."""
        self.gave_up: set[str] = set()
        """Connections a cell stopped waiting for (timeout): later cells do not wait again."""

    @property
    def manager(self) -> McpManager:
        """The connections (created on first use: it imports the MCP SDK)."""
        if self._manager is None:
            from kode_nb.mcp.manager import McpManager

            self._manager = McpManager(self.session.registry)
        return self._manager

    def __repr__(self) -> str:
        served = f", serving {self.server.url}" if self.server is not None else ""
        return f"NotebookMcp({', '.join(self.states) or 'no servers'}{served})"

    # ------------------------------------------------------------------ running coroutines

    @staticmethod
    def _loop() -> asyncio.AbstractEventLoop | None:
        try:
            return asyncio.get_running_loop()
        except RuntimeError:
            return None

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        loop = self._loop()
        assert loop is not None
        task = loop.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Terminal IPython: run on the session's private loop (which also runs its calls)."""
        return self.session._loop().run_until_complete(coro)

    async def ready(self) -> dict[str, str]:
        """Wait for the connections in progress (and a config load); returns :attr:`states`."""
        current = asyncio.current_task()
        while pending := [t for t in self._tasks if not t.done() and t is not current]:
            await asyncio.wait(pending)
        return dict(self.states)

    # ------------------------------------------------------------------ connecting

    def start_configs(self, configs: dict[str, McpServerConfig], source: str) -> None:
        """Connect the enabled ``configs`` in the background (terminal: at the first command)."""
        enabled = [c for c in configs.values() if c.enabled]
        if self._loop() is None:
            self._deferred = ({c.name: c for c in enabled}, source)
            return
        for config in enabled:
            self.states[config.name] = "connecting"
        self._spawn(self._connect_configs(enabled, source), "kode_nb MCP config")

    def run_deferred(self) -> None:
        if self._deferred is not None:
            configs, source = self._deferred
            self._deferred = None
            for config in configs.values():
                self.states[config.name] = "connecting"
            self._run(self._connect_configs(list(configs.values()), source))

    async def _connect_configs(self, configs: list[McpServerConfig], source: str) -> None:
        report = await self.manager.connect_all(configs)
        parts = []
        for name, outcome in report.items():
            if isinstance(outcome, Exception):
                self.states[name] = f"failed: {_reason(outcome)}"
                parts.append(f"{name} failed ({_reason(outcome)})")
            else:
                self.states[name] = "connected"
                parts.append(f"{name} ({plural(len(self.tool_names(name)), 'tool')})")
        print(f"kode_nb MCP servers from {source}: " + "; ".join(parts))

    def connect(
        self, name: str, *, command: list[str] | None = None, url: str | None = None
    ) -> None:
        from kode_nb.errors import ConfigurationError
        from kode_nb.mcp.config import McpServerConfig

        state = self.states.get(name, "")
        if state and not state.startswith("failed"):
            raise UsageError(
                f"%mcp connect: a server named {name!r} is already {state}; "
                f"run %mcp disconnect {name} first"
            )
        try:
            config = McpServerConfig(name=name, command=tuple(command or ()), url=url)
        except ConfigurationError as exc:
            raise UsageError(f"%mcp connect: {exc}") from None
        self.states[name] = "connecting"
        if self._loop() is None:
            self._run(self._connect(config, None))
            return
        if self.awaited:  # the cell waits for it and prints the outcome
            self.awaited = False
            self._spawn(self._connect(config, None), f"kode_nb MCP connect {name}")
            return
        from kode_nb.ui.mcp_serving import StatusLine

        line = StatusLine(self.session, f"MCP server {name!r} ({config.transport}): connecting…")
        line.show()
        self.session.remember(line)
        self._spawn(self._connect(config, line), f"kode_nb MCP connect {name}")

    async def _connect(self, config: McpServerConfig, line: Any) -> None:
        try:
            await self.manager.connect(config)
        except Exception as exc:  # reported, not raised: the cell returned long ago
            self.states[config.name] = f"failed: {_reason(exc)}"
            message = f"MCP server {config.name!r}: could not connect: {_reason(exc)}"
        else:
            self.states[config.name] = "connected"
            names = self.tool_names(config.name)
            message = f"MCP server {config.name!r}: connected, {plural(len(names), 'tool')}: " + (
                ", ".join(names) or "none"
            )
        if line is None:
            print(message)
        else:
            line.set(message)

    def tool_names(self, name: str) -> list[str]:
        """The registry names of a server's tools (prefixed where they clashed)."""
        own = f"mcp:{name}/"
        return [t.name for t in self.session.registry.list() if t.source.startswith(own)]

    def disconnect(self, name: str) -> int:
        """Unregister ``name``'s tools at once and close it in the background; how many tools."""
        self.require(name, "%mcp disconnect", connected=False)
        self.states.pop(name)
        connection = self.manager.get(name)
        if connection is None:  # a failed connection: nothing to close
            return 0
        removed = len(connection.unregister())
        if self._loop() is None:
            self._run(self.manager.disconnect(name))
        else:
            self._spawn(self.manager.disconnect(name), f"kode_nb MCP disconnect {name}")
        return removed

    def trust(self, name: str, tools: list[str], *, trusted: bool = True) -> list[str]:
        """Trust (or stop trusting) server ``name`` or some of its tools (MCP names); returns
        the registry names of the tools that are trusted now."""
        magic = "%mcp trust" if trusted else "%mcp untrust"
        self.require(name, magic)
        connection = self.manager[name]
        listed = {str(t.metadata.get("mcp_tool")) for t in connection.tools}
        unknown = [t for t in tools if t not in listed]
        if unknown:
            raise UsageError(
                f"{magic} {name}: no tool {unknown[0]!r} on that server; its tools: "
                + (", ".join(sorted(listed)) or "none")
            )
        tools_now = connection.trust(*tools) if trusted else connection.untrust(*tools)
        own = {t.source for t in tools_now if connection.is_trusted(str(t.metadata["mcp_tool"]))}
        return [t.name for t in self.session.registry.list() if t.source in own]

    def require(self, name: str, magic: str, *, connected: bool = True) -> None:
        state = self.states.get(name)
        if state is None:
            known = ", ".join(self.states) or "none (connect one with %mcp connect)"
            raise UsageError(f"{magic}: no MCP server named {name!r}; servers: {known}")
        if connected and state != "connected":
            hint = "; wait for it (await kode_nb.settle())" if state == "connecting" else ""
            raise UsageError(f"{magic}: MCP server {name!r} is {state}{hint}")

    # ------------------------------------------------------------------ serving

    def serve(
        self,
        *,
        tools: list[str] | None = None,
        port: int = 0,
        name: str = "kode_nb",
        auth: bool = True,
    ) -> NotebookServer:
        """Serve the session's tools on 127.0.0.1 from the running kernel (see the module doc)."""
        if self._loop() is None:
            raise UsageError(
                "%mcp serve needs a running event loop (a Jupyter kernel); in a script use "
                "`await kode_nb.mcp.serve(registry)`"
            )
        if self.server is not None:
            raise UsageError(
                f"%mcp serve: already serving at {self.server.url}; run %mcp stop first"
            )
        if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
            raise UsageError(
                f"%mcp serve: --port must be 0..65535 (0: any free port), got {port!r}"
            )
        if tools is not None and (not tools or not all(p.strip() for p in tools)):
            raise UsageError("%mcp serve: --tools needs one or more tool name patterns")
        port = _free_port(port)
        from kode_nb.ui.mcp_serving import NotebookServer

        server = NotebookServer(self.session, port=port, patterns=tools, name=name, auth=auth)
        self.server = server
        server.on_stop = self._forget_server
        server.show()
        server.start()
        return server

    def _forget_server(self, server: NotebookServer) -> None:
        if self.server is server:
            self.server = None

    def stop(self) -> NotebookServer:
        if self.server is None:
            raise UsageError("%mcp stop: nothing is being served (start with %mcp serve)")
        server = self.server
        server.stop()
        return server

    # ------------------------------------------------------------------ teardown

    def close(self) -> None:
        """Stop serving and disconnect every server (unload, kernel shutdown)."""
        if self.server is not None:
            self.server.stop()
        for task in list(self._tasks):
            task.cancel()
        if self._manager is None:
            return
        manager = self._manager
        for connection in manager.list():
            connection.unregister()
        if self._loop() is not None:
            self._spawn(manager.disconnect_all(), "kode_nb MCP close")
        else:
            loop = self.session._private_loop
            if loop is not None and not loop.is_closed():
                loop.run_until_complete(manager.disconnect_all())
        self.states.clear()


def _free_port(port: int) -> int:
    """``port`` if it can be bound on 127.0.0.1 (a free one for 0); UsageError when taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        return int(sock.getsockname()[1])
    except OSError as exc:
        raise UsageError(
            f"%mcp serve: port {port} on 127.0.0.1 is in use ({exc.strerror}); pick another "
            "--port, or leave it out for any free port"
        ) from None
    finally:
        sock.close()


def _reason(exc: BaseException) -> str:
    return getattr(exc, "reason", None) or str(exc) or type(exc).__name__


def plural(n: int, word: str) -> str:
    """``"1 tool"``, ``"3 tools"``."""
    return f"{n} {word}{'' if n == 1 else 's'}"
