"""The :class:`McpManager`: named MCP connections whose tools live in one registry.

The notebook layer keeps one manager per kernel: it connects the servers of the config file when
the extension loads (:meth:`McpManager.connect_all`, failures reported, not raised) and the
``%mcp`` magics add, list and drop servers by name.
"""

from __future__ import annotations

import asyncio
import builtins
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.mcp.client import McpConnection
from kode_nb.mcp.config import McpServerConfig, load_config
from kode_nb.tools._registry import ToolRegistry, default_registry

__all__ = ["McpManager"]


class McpManager:
    """Named :class:`McpConnection` objects; tools registered in :attr:`registry` on connect."""

    def __init__(self, registry: ToolRegistry | None = None) -> None:
        if registry is not None and not isinstance(registry, ToolRegistry):
            raise ConfigurationError(
                f"McpManager(registry=...) needs a ToolRegistry, got {registry!r}"
            )
        self._registry = registry
        self._connections: dict[str, McpConnection] = {}

    @property
    def registry(self) -> ToolRegistry:
        """Where tools are registered: the one given, else the current default registry."""
        return self._registry if self._registry is not None else default_registry()

    # ----------------------------------------------------------------- lookup

    def get(self, name: str) -> McpConnection | None:
        """The connection named ``name``, or ``None``."""
        return self._connections.get(name)

    def __getitem__(self, name: str) -> McpConnection:
        connection = self._connections.get(name)
        if connection is None:
            known = ", ".join(sorted(self._connections)) or "none"
            raise KeyError(f"no MCP server named {name!r} (connected: {known})")
        return connection

    def list(self) -> builtins.list[McpConnection]:
        """The connections, in the order they were made."""
        return list(self._connections.values())

    def names(self) -> builtins.list[str]:
        return list(self._connections)

    def __contains__(self, name: object) -> bool:
        return name in self._connections

    def __len__(self) -> int:
        return len(self._connections)

    def __iter__(self) -> Iterator[McpConnection]:
        return iter(list(self._connections.values()))

    def __repr__(self) -> str:
        return f"McpManager({', '.join(map(repr, self._connections)) or 'no servers'})"

    # ----------------------------------------------------------------- connecting

    async def connect(
        self,
        name: str | McpServerConfig,
        *,
        register: bool = True,
        prefix: bool | None = None,
        **options: Any,
    ) -> McpConnection:
        """Connect a server (``options`` as :func:`kode_nb.mcp.connect`) and keep it by name.

        With ``register`` its tools go into :attr:`registry` (``prefix`` as
        :meth:`McpConnection.register`). A name already in use raises
        :class:`~kode_nb.ConfigurationError`; disconnect it first.
        """
        config = name if isinstance(name, McpServerConfig) else _config(name, options)
        if isinstance(name, McpServerConfig) and options:
            raise ConfigurationError(
                f"connect(): give an McpServerConfig or options, not both ({', '.join(options)})"
            )
        if config.name in self._connections:
            raise ConfigurationError(
                f"an MCP server named {config.name!r} is already connected; disconnect it first"
            )
        connection = McpConnection(config)
        self._connections[config.name] = connection  # reserve the name while connecting
        try:
            await connection.open()
            if register:
                connection.register(self.registry, prefix=prefix)
        except BaseException:
            del self._connections[config.name]
            await asyncio.shield(connection.disconnect())
            raise
        return connection

    async def connect_all(
        self,
        configs: Mapping[str, McpServerConfig] | Iterable[McpServerConfig] | str | os.PathLike[str],
        *,
        register: bool = True,
    ) -> dict[str, McpConnection | Exception]:
        """Connect every enabled server (a config file path, or configs) at once.

        Returns, by name, the connection or the exception that prevented it (the exception is
        an :class:`McpConnectionError`, or a ``KodeUsageError`` for a name clash); one failure
        does not stop the others. Disabled servers are skipped.
        """
        if isinstance(configs, (str, os.PathLike)):
            configs = load_config(configs)
        items = list(configs.values()) if isinstance(configs, Mapping) else list(configs)
        for item in items:
            if not isinstance(item, McpServerConfig):
                raise ConfigurationError(f"connect_all() needs McpServerConfig items, got {item!r}")
        enabled = [c for c in items if c.enabled]
        outcomes = await asyncio.gather(
            *(self.connect(c, register=False) for c in enabled), return_exceptions=True
        )
        report: dict[str, McpConnection | Exception] = {}
        for config, outcome in zip(enabled, outcomes, strict=True):
            if isinstance(outcome, McpConnection) and register:
                try:  # one at a time, in file order, so clashes are prefixed predictably
                    outcome.register(self.registry)
                except Exception as exc:
                    await self.disconnect(config.name)
                    outcome = exc
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome
            report[config.name] = outcome
        return report

    async def disconnect(self, name: str) -> bool:
        """Disconnect and forget a server (its tools are unregistered); False if unknown."""
        connection = self._connections.pop(name, None)
        if connection is None:
            return False
        await connection.disconnect()
        return True

    async def disconnect_all(self) -> None:
        """Disconnect every server."""
        connections = list(self._connections.values())
        self._connections.clear()
        await asyncio.gather(*(c.disconnect() for c in connections))

    async def __aenter__(self) -> McpManager:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.disconnect_all()


def _config(name: str, options: dict[str, Any]) -> McpServerConfig:
    allowed = {
        "command",
        "url",
        "env",
        "cwd",
        "headers",
        "timeout",
        "connect_timeout",
        "trust",
        "trusted_tools",
        "max_result_bytes",
    }
    unknown = sorted(set(options) - allowed)
    if unknown:
        raise ConfigurationError(
            f"connect(): unknown option(s) {', '.join(unknown)}; valid: {', '.join(sorted(allowed))}"
        )
    values = {k: v for k, v in options.items() if v is not None}
    return McpServerConfig(name=name, **values)
