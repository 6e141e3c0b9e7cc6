"""MCP server configuration: one :class:`McpServerConfig` per server, and the TOML file format.

A config file lists servers by name; each has either a ``command`` (stdio) or a ``url``
(streamable HTTP)::

    [servers.files]
    command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/data"]
    env = { LOG_LEVEL = "info" }      # added to a minimal inherited environment
    cwd = "/tmp"
    timeout = 60                      # seconds per tool call (default: the executor's)

    [servers.search]
    url = "http://127.0.0.1:8931/mcp"
    headers = { Authorization = "Bearer ${SEARCH_TOKEN}" }
    enabled = false                   # listed, but not connected
    trust = true                      # its tools' annotations decide approval (see below)

    [servers.db]
    command = ["python", "db_server.py"]
    trusted_tools = ["list_tables"]   # only these tools are trusted
    max_result_bytes = 1_000_000      # a bigger tool result is refused (default 10 MB)

**Trust.** A server's tool annotations (``readOnlyHint``...) are the server's claims. Until the
server (``trust = true``) or the tool (``trusted_tools``) is trusted, every tool of the server
asks for approval whatever it claims; the approval prompt shows the claim. Trusted, a tool's
kind from its annotations decides as for any tool (a read-only tool runs without asking).

``command`` may also be a string (split like a shell would) with an ``args`` list. ``${NAME}`` in
``env`` and ``headers`` values is replaced by the environment variable ``NAME`` when the file is
loaded (a missing variable is an error), so secrets stay out of the file. Any mistake raises
:class:`~kode_nb.errors.ConfigurationError` naming the file, the server and the key.

Nothing here imports the MCP SDK: reading a config file is cheap.
"""

from __future__ import annotations

import math
import os
import re
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from kode_nb.errors import ConfigurationError
from kode_nb.types import validate_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib  # type: ignore[import-not-found, no-redef, unused-ignore]

__all__ = ["McpServerConfig", "load_config", "parse_config"]

_KEYS = frozenset(
    {
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "timeout",
        "connect_timeout",
        "enabled",
        "trust",
        "trusted_tools",
        "max_result_bytes",
    }
)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True, kw_only=True)
class McpServerConfig:
    """How to reach one MCP server: a command to run (stdio) or a URL (streamable HTTP)."""

    name: str
    """The server's name: a letter, then letters, digits, ``_`` or ``-`` (it prefixes tool
    names on clashes)."""
    command: tuple[str, ...] = ()
    """The program and its arguments, for a stdio server."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra environment variables for a stdio server (the SDK passes only a minimal set of
    the parent's: HOME, PATH, SHELL, TERM, USER, LOGNAME)."""
    cwd: str | None = None
    """Working directory of a stdio server."""
    url: str | None = None
    """The endpoint of a streamable HTTP server (``http://`` or ``https://``)."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """HTTP headers sent with every request (e.g. ``Authorization``)."""
    timeout: float | None = None
    """Seconds a call to one of its tools may take; ``None``: the executor's default."""
    connect_timeout: float = 30.0
    """Seconds to start the server and complete the handshake."""
    enabled: bool = True
    """False: listed in the config file but not connected."""
    trust: bool = False
    """Trust the server's tool annotations: its read-only tools then run without asking.
    False (the default): every tool of the server asks, whatever its annotations claim."""
    trusted_tools: tuple[str, ...] = ()
    """MCP tool names (as the server lists them) whose annotations are trusted."""
    max_result_bytes: int = 10 * 1024 * 1024
    """The largest tool result accepted (bytes of the JSON message); a bigger one is an
    error result naming the limit."""

    def __post_init__(self) -> None:
        where = f"MCP server {self.name!r}"
        try:
            validate_name(self.name)
        except ValueError as exc:
            raise ConfigurationError(f"bad MCP server name: {exc}") from None
        command: Any = self.command  # accepts a string or a list too
        if isinstance(command, str):
            command = tuple(shlex.split(command))
        elif isinstance(command, (list, tuple)):
            command = tuple(command)
        else:
            raise ConfigurationError(
                f"{where}: command must be a list of strings (or one string), got {command!r}"
            )
        if any(not isinstance(part, str) or not part for part in command):
            raise ConfigurationError(
                f"{where}: command must hold non-empty strings, got {list(command)!r}"
            )
        object.__setattr__(self, "command", command)
        if bool(command) == (self.url is not None):
            raise ConfigurationError(
                f"{where}: give either command=[...] (stdio) or url='http://...' (streamable "
                "HTTP), " + ("not both" if command else "one of them is required")
            )
        url: Any = self.url
        if url is not None:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                raise ConfigurationError(
                    f"{where}: url must start with http:// or https://, got {self.url!r}"
                )
            if self.env or self.cwd is not None:
                raise ConfigurationError(
                    f"{where}: env and cwd apply to stdio servers (command=...), not to a url"
                )
        elif self.headers:
            raise ConfigurationError(
                f"{where}: headers apply to HTTP servers (url=...), not to a command"
            )
        object.__setattr__(self, "env", _str_mapping(self.env, "env", where))
        object.__setattr__(self, "headers", _str_mapping(self.headers, "headers", where))
        cwd: Any = self.cwd
        if cwd is not None and not isinstance(cwd, (str, os.PathLike)):
            raise ConfigurationError(f"{where}: cwd must be a path string, got {cwd!r}")
        if cwd is not None:
            object.__setattr__(self, "cwd", os.fspath(cwd))
        if self.timeout is not None:
            _check_seconds(self.timeout, "timeout", where)
        _check_seconds(self.connect_timeout, "connect_timeout", where)
        for key in ("enabled", "trust"):
            flag: Any = getattr(self, key)
            if not isinstance(flag, bool):
                raise ConfigurationError(f"{where}: {key} must be true or false, got {flag!r}")
        trusted: Any = self.trusted_tools
        if (
            isinstance(trusted, str)
            or not isinstance(trusted, (list, tuple))
            or not all(isinstance(t, str) and t for t in trusted)
        ):
            raise ConfigurationError(
                f"{where}: trusted_tools must be a list of tool names, got {trusted!r}"
            )
        object.__setattr__(self, "trusted_tools", tuple(trusted))
        size: Any = self.max_result_bytes
        if isinstance(size, bool) or not isinstance(size, int) or size < 1024:
            raise ConfigurationError(
                f"{where}: max_result_bytes must be an int >= 1024, got {size!r}"
            )

    @property
    def transport(self) -> Literal["stdio", "http"]:
        """``stdio`` (a command) or ``http`` (a URL)."""
        return "stdio" if self.command else "http"

    def describe(self) -> str:
        """One line for displays: the command line or the URL."""
        return shlex.join(self.command) if self.command else str(self.url)


def _str_mapping(value: object, key: str, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigurationError(f"{where}: {key} must map strings to strings, got {value!r}")
    return dict(value)


def _check_seconds(value: object, key: str, where: str) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not value > 0
        or math.isinf(value)
    ):
        raise ConfigurationError(
            f"{where}: {key} must be a positive number of seconds, got {value!r}"
        )


# --------------------------------------------------------------------------- files


def load_config(path: str | os.PathLike[str]) -> dict[str, McpServerConfig]:
    """Read a TOML file of ``[servers.NAME]`` tables; returns the configs by name, in file order.

    Disabled servers are included (``enabled=False``); the caller skips them.
    """
    file = Path(path)
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigurationError(f"MCP config file {str(file)!r} does not exist") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(
            f"MCP config file {str(file)!r} is not valid TOML: {exc}"
        ) from None
    except RecursionError:
        raise ConfigurationError(
            f"MCP config file {str(file)!r} nests values too deeply to be read"
        ) from None
    return parse_config(data, source=str(file))


def parse_config(
    data: Mapping[str, Any], *, source: str = "<config>", environ: Mapping[str, str] | None = None
) -> dict[str, McpServerConfig]:
    """Configs from already-parsed data: ``{"servers": {name: {...}}}``.

    ``environ`` (default ``os.environ``) supplies the ``${NAME}`` substitutions.
    """
    if not isinstance(data, Mapping):
        raise ConfigurationError(f"{source}: expected a table, got {type(data).__name__}")
    unknown = sorted(set(data) - {"servers"})
    if unknown:
        raise ConfigurationError(
            f"{source}: unknown top-level key(s) {', '.join(map(repr, unknown))}; "
            "MCP servers go in [servers.NAME] tables"
        )
    servers = data.get("servers", {})
    if not isinstance(servers, Mapping):
        raise ConfigurationError(f"{source}: 'servers' must be a table of [servers.NAME] tables")
    env = os.environ if environ is None else environ
    configs: dict[str, McpServerConfig] = {}
    for name, table in servers.items():
        where = f"{source}: [servers.{name}]"
        if not isinstance(table, Mapping):
            raise ConfigurationError(f"{where} must be a table, got {table!r}")
        bad = sorted(set(table) - _KEYS)
        if bad:
            raise ConfigurationError(
                f"{where}: unknown key(s) {', '.join(map(repr, bad))}; valid keys: "
                + ", ".join(sorted(_KEYS))
            )
        options = dict(table)
        command = options.pop("command", ())
        args = options.pop("args", None)
        if args is not None:
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ConfigurationError(f"{where}: args must be a list of strings, got {args!r}")
            if isinstance(command, str):
                command = shlex.split(command)
            if not isinstance(command, list) or not command:
                raise ConfigurationError(f"{where}: args needs a command")
            command = [*command, *args]
        for key in ("env", "headers"):
            if isinstance(options.get(key), Mapping):
                options[key] = {
                    k: _expand(v, env, f"{where}: {key}.{k}") if isinstance(v, str) else v
                    for k, v in options[key].items()
                }
        try:
            configs[name] = McpServerConfig(name=name, command=command, **options)
        except ConfigurationError as exc:
            raise ConfigurationError(f"{source}: {exc}") from None
    return configs


def _expand(value: str, environ: Mapping[str, str], where: str) -> str:
    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in environ:
            raise ConfigurationError(
                f"{where}: environment variable {name!r} (used as ${{{name}}}) is not set"
            )
        return environ[name]

    return _VAR.sub(replace, value)
