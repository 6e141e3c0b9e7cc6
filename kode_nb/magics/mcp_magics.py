"""``%mcp``: use other MCP servers' tools, and serve the notebook's tools, from a kernel.

Usage::

    %mcp connect NAME -- CMD ARGS...    start a stdio server and register its tools
    %mcp connect NAME URL               connect a streamable HTTP server (http:// or https://)
    %mcp list                           servers (state, transport, tool count, a failed tools
                                        refresh) and what is served
    %mcp tools NAME                     one server's tools as registered (name, kind, description)
    %mcp disconnect NAME                unregister its tools and close it (a stdio server stops)
    %mcp trust NAME [TOOL ...]          trust the server's (or these tools') annotations: its
                                        read-only tools then run without asking
    %mcp untrust NAME [TOOL ...]        ask for every (or these) of its tools again
    %mcp serve [--port N] [--tools PATTERN ...] [--name NAME] [--no-auth]
                                        serve the notebook's tools over streamable HTTP on
                                        127.0.0.1 (``--tools``: fnmatch patterns; default all);
                                        clients must send the bearer token the cell shows
                                        (``--no-auth``: none, with a warning)
    %mcp stop                           stop serving (the port is free when it returns)

**Never blocking the loop.** In a kernel, connecting runs as a task on the kernel's loop; the
cell awaits it (at most 30 s, :mod:`kode_nb.magics.awaiting`) and prints the server's tool
list, so the next cell can use the tools. Serving starts the same
way; ``%mcp serve`` returns a :class:`~kode_nb.ui.mcp_serving.NotebookServer` (``await``
it to wait until it listens; ``.url``, ``.stop()``, ``.approve()``). The Python API is
``get_session().mcp.serve(tools=..., port=...)``. In terminal IPython (no running loop) each
command runs to completion on the session's private loop.

**Calls from outside** go through the session's executor (policy, approval, limits, events on
the session's bus). No cell is running when a client calls, so the live view of each call —
with its approval prompt — appears in the output of the cell that ran ``%mcp serve``. Connected
clients are sent ``notifications/tools/list_changed`` when a served tool is defined, defined
again (a ``%%tool`` cell run again) or removed.

**Trust.** A server's annotations (``readOnlyHint``...) are its claims: until it is trusted
(``%mcp trust NAME``, or ``trust = true`` / ``trusted_tools = [...]`` in the config file) every
tool of the server asks for approval, and the prompt shows what the server claims.
``%mcp tools NAME`` shows which tools are trusted and which were skipped (a malformed
definition or an unusable ``inputSchema``; the server's other tools are registered).

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
import importlib
import os
import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from IPython.core.error import UsageError

from kode_nb.magics.mcp_state import plural

if TYPE_CHECKING:
    from kode_nb.magics.kode_magics import KodeMagics
    from kode_nb.magics.mcp_state import NotebookMcp
    from kode_nb.magics.session import KodeSession
    from kode_nb.mcp.config import McpServerConfig

__all__ = ["CONFIG_FILES", "connect_configured", "find_config", "mcp_line"]

CONFIG_FILES = (".kode_nb/mcp.toml", "kode_nb.toml")
"""Looked for in the working directory when ``KodeMagics.mcp_config`` is empty, in this order."""

_COMMANDS = ("connect", "list", "tools", "disconnect", "trust", "untrust", "serve", "stop")
_USAGE = (
    "%mcp connect NAME -- CMD ARGS... | %mcp connect NAME URL | %mcp list | %mcp tools NAME | "
    "%mcp disconnect NAME | %mcp trust NAME [TOOL ...] | %mcp untrust NAME [TOOL ...] | "
    "%mcp serve [--port N] [--tools PATTERN ...] [--no-auth] | %mcp stop"
)


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
    except RecursionError:
        raise ConfigurationError(
            f"MCP config file {str(path)!r} nests values too deeply to be read"
        ) from None
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


# --------------------------------------------------------------------------- the magic


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _serve_parser() -> _Parser:
    parser = _Parser(prog="%mcp serve", add_help=False)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--tools", nargs="+", metavar="PATTERN")
    parser.add_argument("--name", default="kode_nb")
    parser.add_argument("--no-auth", action="store_true")
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
            print(f"Disconnected MCP server {rest[0]!r} ({plural(removed, 'tool')} removed).")
        return None
    if action in ("trust", "untrust"):
        if not rest:
            raise UsageError(f"%mcp {action} needs a server NAME (and optionally tool names)")
        names = state.trust(rest[0], rest[1:], trusted=action == "trust")
        what = f"tools {', '.join(rest[1:])}" if rest[1:] else "all its tools"
        verb = "Trusting" if action == "trust" else "No longer trusting"
        print(f"{verb} MCP server {rest[0]!r}: {what}. Trusted now: {', '.join(names) or 'none'}.")
        return None
    if action == "serve":
        args = _serve_parser().parse_args(rest)
        return state.serve(tools=args.tools, port=args.port, name=args.name, auth=not args.no_auth)
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
    from IPython.display import display

    from kode_nb.ui.records import table_record

    rows, notes = [], []
    for name, status in state.states.items():
        connection = state.manager.get(name) if state._manager is not None else None
        where = connection.config.transport if connection is not None else None
        tools = len(state.tool_names(name)) if status == "connected" else None
        rows.append({"server": name, "state": status, "transport": where, "tools": tools})
        error = connection.refresh_error if connection is not None else None
        if error and status == "connected":
            notes.append(f"{name}: tools refresh failed: {error} (the tools listed before stay)")
        skipped = connection.skipped_tools if connection is not None else {}
        if skipped and status == "connected":
            notes.append(
                f"{name}: {plural(len(skipped), 'tool')} skipped: {', '.join(skipped)}"
                f" (see %mcp tools {name})"
            )
    if state.server is not None:
        notes.append(f"Serving {state.server.describe()}")
    columns = [
        ("server", "server"),
        ("state", "state"),
        ("transport", "transport"),
        ("tools", "tools", "right"),
    ]
    display(
        table_record(
            "MCP servers",
            columns,
            rows,
            note="\n".join(notes) or None,
            empty="No MCP servers (connect one with %mcp connect NAME -- CMD or %mcp connect NAME URL).",
        )
    )


def _print_tools(state: NotebookMcp, name: str) -> None:
    from IPython.display import display

    from kode_nb.ui.records import table_record

    rows = []
    for tool_name in state.tool_names(name):
        tool = state.session.registry.get(tool_name)
        if tool is not None:
            summary = tool.description.strip().splitlines()[0] if tool.description.strip() else ""
            trusted = "yes" if tool.approval is None else "no"
            rows.append(
                {
                    "tool": tool.name,
                    "kind": tool.kind.value,
                    "trusted": trusted,
                    "description": summary[:70],
                }
            )
    columns = [
        ("tool", "tool"),
        ("kind", "kind"),
        ("trusted", "trusted"),
        ("description", "description"),
    ]
    skipped = state.manager[name].skipped_tools
    note = "\n".join(f"skipped {tool_name}: {why}" for tool_name, why in skipped.items())
    display(
        table_record(
            f"Tools of MCP server {name!r}",
            columns,
            rows,
            note=note or None,
            empty=f"{name!r} lists no tools.",
        )
    )
