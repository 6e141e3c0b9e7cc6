"""The McpManager: named connections, config files, registration and teardown."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from mcp_helpers import HttpServer, toolbox_command

from kode_nb import AutoApprove, ConfigurationError, Executor, ToolRegistry
from kode_nb.mcp import McpConnection, McpConnectionError, McpManager, McpServerConfig

pytestmark = pytest.mark.anyio


async def test_connect_registers_and_disconnect_unregisters(registry: ToolRegistry) -> None:
    async with McpManager() as manager:
        assert manager.registry is registry
        conn = await manager.connect("tb", command=toolbox_command())
        assert isinstance(conn, McpConnection)
        assert manager.get("tb") is conn
        assert manager["tb"] is conn
        assert "tb" in manager
        assert manager.names() == ["tb"]
        assert manager.list() == [conn]
        assert list(manager) == [conn]
        assert len(manager) == 1
        assert "'tb'" in repr(manager)
        assert registry.get("echo") is not None
        result = await Executor(registry, approver=AutoApprove()).call("add", {"a": 2, "b": 2})
        assert result.text == "4"
        with pytest.raises(ConfigurationError, match="already connected"):
            await manager.connect("tb", command=toolbox_command())
        assert manager["tb"] is conn  # the failed attempt left the first one alone
        with pytest.raises(KeyError, match=r"no MCP server named 'zz' \(connected: tb\)"):
            manager["zz"]
        assert await manager.disconnect("tb") is True
        assert await manager.disconnect("tb") is False
        assert len(registry) == 0
        assert len(manager) == 0
        await manager.connect("tb", command=toolbox_command(), register=False)
        assert len(registry) == 0
    assert len(manager) == 0  # leaving the block disconnected everything


async def test_connect_all_reports_each_server(tmp_path: Path) -> None:
    registry = ToolRegistry()
    http = HttpServer()
    config = tmp_path / "mcp.toml"
    config.write_text(
        "\n".join(
            [
                "[servers.local]",
                f"command = {json.dumps(toolbox_command(name='local'))}",
                "[servers.web]",
                f'url = "{http.url}"',
                "[servers.broken]",
                f'command = ["{sys.executable}", "-c", "raise SystemExit(1)"]',
                "[servers.off]",
                'command = ["never-started"]',
                "enabled = false",
            ]
        ),
        encoding="utf-8",
    )
    manager = McpManager(registry)
    try:
        report = await manager.connect_all(config)
        assert list(report) == ["local", "web", "broken"]  # disabled servers are skipped
        assert isinstance(report["local"], McpConnection)
        assert isinstance(report["web"], McpConnection)
        assert isinstance(report["broken"], McpConnectionError)
        assert manager.names() == ["local", "web"]
        # same tools on both: registered in file order, the second server's get its prefix
        assert registry.require("echo").metadata["mcp_server"] == "local"
        assert registry.require("web_echo").metadata["mcp_server"] == "web"
    finally:
        await manager.disconnect_all()
        http.kill()
    assert len(registry) == 0


async def test_manager_rejects_bad_input() -> None:
    with pytest.raises(ConfigurationError, match="needs a ToolRegistry"):
        McpManager(registry="default")  # type: ignore[arg-type]
    manager = McpManager(ToolRegistry())
    with pytest.raises(ConfigurationError, match="unknown option"):
        await manager.connect("x", command=["a"], colour="red")
    with pytest.raises(ConfigurationError, match="not both"):
        await manager.connect(McpServerConfig(name="x", command=("a",)), timeout=3)
    with pytest.raises(ConfigurationError, match="McpServerConfig items"):
        await manager.connect_all([{"name": "x"}])  # type: ignore[list-item]
    assert len(manager) == 0
