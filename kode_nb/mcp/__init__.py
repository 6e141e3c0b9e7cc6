"""MCP for kode_nb: use other servers' tools, and serve a registry's tools to other clients.

* :func:`connect` / :class:`McpConnection` / :class:`McpManager` — the client
  (:mod:`kode_nb.mcp.client`, :mod:`kode_nb.mcp.manager`);
* :func:`serve` / :func:`serve_stdio` / :class:`McpServerHandle` — the server
  (:mod:`kode_nb.mcp.server`);
* :class:`McpServerConfig` / :func:`load_config` — the TOML config file (:mod:`kode_nb.mcp.config`).

Names load lazily: ``import kode_nb.mcp`` does not import the MCP SDK (``pip install mcp``);
reading a config file never does.

May import: ``execution``, ``tools``, ``policy``, ``events``, ``types``, ``errors``,
``_redact``, ``_threads``, ``_version``. Nothing here imports Jupyter.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    "McpConnection": "kode_nb.mcp.client",
    "McpConnectionError": "kode_nb.mcp.errors",
    "McpManager": "kode_nb.mcp.manager",
    "McpServerConfig": "kode_nb.mcp.config",
    "McpServerHandle": "kode_nb.mcp.server",
    "McpServerUnavailableError": "kode_nb.mcp.errors",
    "connect": "kode_nb.mcp.client",
    "load_config": "kode_nb.mcp.config",
    "parse_config": "kode_nb.mcp.config",
    "serve": "kode_nb.mcp.server",
    "serve_stdio": "kode_nb.mcp.server",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from kode_nb.mcp.client import McpConnection as McpConnection
    from kode_nb.mcp.client import connect as connect
    from kode_nb.mcp.config import McpServerConfig as McpServerConfig
    from kode_nb.mcp.config import load_config as load_config
    from kode_nb.mcp.config import parse_config as parse_config
    from kode_nb.mcp.errors import McpConnectionError as McpConnectionError
    from kode_nb.mcp.errors import McpServerUnavailableError as McpServerUnavailableError
    from kode_nb.mcp.manager import McpManager as McpManager
    from kode_nb.mcp.server import McpServerHandle as McpServerHandle
    from kode_nb.mcp.server import serve as serve
    from kode_nb.mcp.server import serve_stdio as serve_stdio


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'kode_nb.mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
