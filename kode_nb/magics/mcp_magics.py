"""``%mcp``: use other MCP servers' tools, and serve the notebook's tools, from a kernel.

Usage::

    %mcp connect NAME -- CMD ARGS...    start a stdio server and register its tools
    %mcp connect NAME URL               connect a streamable HTTP server (http:// or https://)
    %mcp list                           servers (state, transport, tool count, a failed tools
                                        refresh) and what is served
    %mcp tools NAME                     one server's tools as registered (name, kind, description)
    %mcp disconnect NAME                unregister its tools and close it (a stdio server stops)
    %mcp serve [--port N] [--tools PATTERN ...] [--name NAME]
                                        serve the notebook's tools over streamable HTTP on
                                        127.0.0.1 (``--tools``: fnmatch patterns; default all)
    %mcp stop                           stop serving (the port is free when it returns)

**Never blocking the cell.** In a kernel, connecting runs as a task on the kernel's loop: the
cell returns at once with a status line that turns into the server's tool list (``await
get_session().mcp.ready()`` waits for every connection in progress). Serving starts the same
way; ``%mcp serve`` returns a :class:`~kode_nb.magics.mcp_serving.NotebookServer` (``await``
it to wait until it listens; ``.url``, ``.stop()``, ``.approve()``). The Python API is
``get_session().mcp.serve(tools=..., port=...)``. In terminal IPython (no running loop) each
command runs to completion on the session's private loop.

**Calls from outside** go through the session's executor (policy, approval, limits, events on
the session's bus). No cell is running when a client calls, so the live view of each call —
with its approval prompt — appears in the output of the cell that ran ``%mcp serve``. Connected
clients are sent ``notifications/tools/list_changed`` when a served tool is defined, defined
again (a ``%%tool`` cell run again) or removed.

**A config file** of ``[servers.NAME]`` tables (format: :mod:`kode_nb.mcp.config`) is connected
when the extension loads: the file named by ``%config KodeMagics.mcp_config = 'path'`` (set it
in ``ipython_config.py`` or before ``%load_ext``), else ``.kode_nb/mcp.toml`` in the working
directory, else the ``[mcp.servers.NAME]`` tables of ``kode_nb.toml`` there. The servers
connect in a background task, so ``%load_ext`` does not wait; failures (and a broken file) are
reported as one short line, never raised. Terminal IPython connects them at the first ``%mcp``.

This module imports neither the MCP SDK nor ipywidgets until a command needs them.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import os
import shlex
import socket
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

from IPython.core.error import UsageError

if TYPE_CHECKING:
    from kode_nb.magics.kode_magics import KodeMagics
    from kode_nb.magics.mcp_serving import NotebookServer
    from kode_nb.magics.session import KodeSession
    from kode_nb.mcp.config import McpServerConfig
    from kode_nb.mcp.manager import McpManager

__all__ = ["CONFIG_FILES", "NotebookMcp", "connect_configured", "find_config", "mcp_line"]

CONFIG_FILES = (".kode_nb/mcp.toml", "kode_nb.toml")
"""Looked for in the working directory when ``KodeMagics.mcp_config`` is empty, in this order."""

_COMMANDS = ("connect", "list", "tools", "disconnect", "serve", "stop")
_USAGE = (
    "%mcp connect NAME -- CMD ARGS... | %mcp connect NAME URL | %mcp list | %mcp tools NAME | "
    "%mcp disconnect NAME | %mcp serve [--port N] [--tools PATTERN ...] | %mcp stop"
)
T = TypeVar("T")


# --------------------------------------------------------------------------- config at load


def find_config(setting: str, cwd: str | os.PathLike[str] | None = None) -> Path | None:
    """The config file to connect at load: ``setting`` if given, else a default file present."""
    base = Path(cwd) if cwd is not None else Path.cwd()
    if setting:
        path = Path(setting).expanduser()
        return path if path.is_absolute() else base / path
    for name in CONFIG_FILES:
        candidate = base / name
        if candidate.is_file():
            return candidate
    return None


def read_config(path: Path) -> dict[str, McpServerConfig]:
    """The servers of ``path`` (``kode_nb.toml`` keeps them under ``[mcp]``)."""
    from kode_nb.mcp.config import load_config, parse_config

    if path.name != "kode_nb.toml":
        return load_config(path)
    from kode_nb.errors import ConfigurationError

    tomllib: Any = importlib.import_module("kode_nb.mcp.config").tomllib  # 3.10: tomli

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigurationError(f"MCP config file {str(path)!r}: {exc}") from None
    table = data.get("mcp", {})
    return parse_config(
        table if isinstance(table, Mapping) else {"servers": table}, source=str(path)
    )


def connect_configured(magics: KodeMagics) -> None:
    """At ``%load_ext``: start connecting the config file's servers; never raises, never waits."""
    try:
        path = find_config(magics.mcp_config)
        if path is None:
            return
        configs = read_config(path)
    except Exception as exc:  # a broken file must not break the load
        print(f"kode_nb: MCP config not loaded: {exc}")
        return
    if not any(c.enabled for c in configs.values()):
        return
    magics.session.mcp.start_configs(configs, path.name)


# --------------------------------------------------------------------------- per-session state


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
                parts.append(f"{name} ({_count(len(self.tool_names(name)), 'tool')})")
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
        from kode_nb.magics.mcp_serving import StatusLine

        line = StatusLine(self.session, f"MCP server {name!r} ({config.transport}): connecting…")
        line.show()
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
            message = f"MCP server {config.name!r}: connected, {_count(len(names), 'tool')}: " + (
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

    def require(self, name: str, magic: str, *, connected: bool = True) -> None:
        state = self.states.get(name)
        if state is None:
            known = ", ".join(self.states) or "none (connect one with %mcp connect)"
            raise UsageError(f"{magic}: no MCP server named {name!r}; servers: {known}")
        if connected and state != "connected":
            hint = (
                "; wait for it (await get_session().mcp.ready())" if state == "connecting" else ""
            )
            raise UsageError(f"{magic}: MCP server {name!r} is {state}{hint}")

    # ------------------------------------------------------------------ serving

    def serve(
        self, *, tools: list[str] | None = None, port: int = 0, name: str = "kode_nb"
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
        from kode_nb.magics.mcp_serving import NotebookServer

        server = NotebookServer(self.session, port=port, patterns=tools, name=name)
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


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# --------------------------------------------------------------------------- the magic


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _serve_parser() -> _Parser:
    parser = _Parser(prog="%mcp serve", add_help=False)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tools", nargs="+", metavar="PATTERN")
    parser.add_argument("--name", default="kode_nb")
    return parser


def mcp_line(session: KodeSession, line: str) -> Any:
    """Parse and run one ``%mcp`` line (see the module docstring)."""
    try:
        words = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"%mcp: cannot parse the line: {exc}") from None
    state = session.mcp
    state.run_deferred()
    action, rest = (words[0], words[1:]) if words else ("list", [])
    if action not in _COMMANDS:
        raise UsageError(f"%mcp: unknown subcommand {action!r}. Usage: {_USAGE}")
    if action == "connect":
        return _connect(state, rest)
    if action in ("tools", "disconnect"):
        if len(rest) != 1:
            raise UsageError(f"%mcp {action} needs one server NAME (got {len(rest)} words)")
        if action == "tools":
            state.require(rest[0], "%mcp tools")
            _print_tools(state, rest[0])
        else:
            removed = state.disconnect(rest[0])
            print(f"Disconnected MCP server {rest[0]!r} ({_count(removed, 'tool')} removed).")
        return None
    if action == "serve":
        args = _serve_parser().parse_args(rest)
        return state.serve(tools=args.tools, port=args.port, name=args.name)
    if rest:
        raise UsageError(f"%mcp {action} takes no arguments, got {' '.join(rest)!r}")
    if action == "stop":
        server = state.stop()
        print(f"Stopped serving {server.url}.")
        return None
    _print_list(state)
    return None


def _connect(state: NotebookMcp, words: list[str]) -> None:
    example = "%mcp connect NAME -- CMD ARGS... or %mcp connect NAME http://127.0.0.1:PORT/mcp"
    if not words or words[0] == "--":
        raise UsageError(f"%mcp connect needs a server NAME: {example}")
    name, rest = words[0], words[1:]
    if rest and rest[0] == "--":
        if len(rest) == 1:
            raise UsageError(f"%mcp connect {name}: give the command after '--': {example}")
        state.connect(name, command=rest[1:])
        return
    if len(rest) != 1:
        raise UsageError(f"%mcp connect {name}: give a URL, or '--' and a command: {example}")
    url = rest[0]
    if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) == 0:
        raise UsageError(
            f"%mcp connect {name}: {url!r} is not a URL (http://... or https://...); "
            "for a local program put '--' before its command"
        )
    state.connect(name, url=url)


def _print_list(state: NotebookMcp) -> None:
    rows, notes = [], []
    for name, status in state.states.items():
        connection = state.manager.get(name) if state._manager is not None else None
        where = connection.config.transport if connection is not None else "-"
        tools = str(len(state.tool_names(name))) if status == "connected" else "-"
        rows.append((name, status, where, tools))
        error = connection.refresh_error if connection is not None else None
        if error and status == "connected":
            notes.append(f"{name}: tools refresh failed: {error} (the tools listed before stay)")
    if rows:
        print(_table(("SERVER", "STATE", "TRANSPORT", "TOOLS"), rows))
        for note in notes:
            print(note)
    else:
        print(
            "No MCP servers (connect one with %mcp connect NAME -- CMD or %mcp connect NAME URL)."
        )
    if state.server is not None:
        print(f"Serving {state.server.describe()}")


def _print_tools(state: NotebookMcp, name: str) -> None:
    rows = []
    for tool_name in state.tool_names(name):
        tool = state.session.registry.get(tool_name)
        if tool is not None:
            summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
            rows.append((tool.name, tool.kind.value, summary[:70]))
    print(_table(("TOOL", "KIND", "DESCRIPTION"), rows) if rows else f"{name!r} lists no tools.")


def _table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
             for row in (header, tuple("-" * w for w in widths), *rows)]  # fmt: skip
    return "\n".join(lines)
