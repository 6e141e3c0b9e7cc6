"""The MCP client's defences against a server: its annotations are claims (untrusted tools ask),
malformed tool definitions are skipped, names of the client's own tools are not taken, and a
result over ``max_result_bytes`` is refused without being read.

Against ``tests/mcp/servers/hostile.py``, a real MCP server run over stdio.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from mcp_helpers import HOSTILE, HttpServer

from kode_nb import AutoApprove, Executor, ToolKind, ToolRegistry, define_tool
from kode_nb.errors import ConfigurationError
from kode_nb.mcp import McpServerConfig, connect
from kode_nb.mcp.config import parse_config
from kode_nb.policy import ApprovalRequest, approve

pytestmark = pytest.mark.anyio

COMMAND = [sys.executable, HOSTILE]


class Recorder:
    """An approver that approves and keeps the requests."""

    def __init__(self) -> None:
        self.requests: list[ApprovalRequest] = []

    async def __call__(self, request: ApprovalRequest) -> Any:
        self.requests.append(request)
        return approve(by="test")


async def test_a_read_only_claim_does_not_skip_approval(registry: ToolRegistry) -> None:
    async with await connect("db", command=COMMAND) as conn:
        conn.register()
        tool = registry.require("drop_database")
        assert tool.kind is ToolKind.READ  # the claim is still shown (cards, %mcp tools)
        assert tool.metadata["mcp_annotations"] == {"readOnlyHint": True}
        headless = await Executor(registry).call("drop_database", {"name": "prod"})
        assert headless.status == "denied"
        assert "MCP server 'db' is not trusted (server says: read-only)" in headless.text
        asked = Recorder()
        result = await Executor(registry, approver=asked).call("drop_database", {"name": "prod"})
        assert result.text == "dropped prod"
        assert [r.reason for r in asked.requests] == [
            "MCP server 'db' is not trusted (server says: read-only); "
            "trust it with %mcp trust db drop_database"
        ]


async def test_trusted_tools_run_as_their_annotations_say(registry: ToolRegistry) -> None:
    async with await connect("db", command=COMMAND) as conn:
        conn.register()
        headless = Executor(registry)
        conn.trust("drop_database")
        assert (await headless.call("drop_database", {"name": "a"})).text == "dropped a"
        assert (await headless.call("big", {"megabytes": 0})).status == "denied"  # not trusted
        conn.untrust("drop_database")
        assert (await headless.call("drop_database", {"name": "b"})).status == "denied"
        conn.trust()  # the whole server
        assert (await headless.call("drop_database", {"name": "c"})).text == "dropped c"
        assert (await headless.call("big", {"megabytes": 0})).status == "denied"  # no hints: asks
        conn.untrust()
        assert (await headless.call("drop_database", {"name": "d"})).status == "denied"


async def test_trust_from_the_config(registry: ToolRegistry) -> None:
    configs = parse_config({"servers": {
        "whole": {"command": COMMAND, "trust": True},
        "one": {"command": COMMAND, "trusted_tools": ["drop_database"]},
    }})  # fmt: skip
    for name, config in configs.items():
        async with await connect(config) as conn:
            conn.register(prefix=True)
            result = await Executor(registry).call(f"{name}_drop_database", {"name": name})
            assert result.text == f"dropped {name}"
    for bad in ({"trust": "yes"}, {"trusted_tools": "drop_database"}, {"max_result_bytes": 10}):
        with pytest.raises(ConfigurationError, match=next(iter(bad))):
            McpServerConfig(name="x", command=COMMAND, **bad)  # type: ignore[arg-type]


async def test_malformed_tools_are_skipped_and_the_others_register(
    registry: ToolRegistry,
) -> None:
    async with await connect("h", command=COMMAND) as conn:
        names = [t.name for t in conn.register()]
        assert names == ["drop_database", "big"]
        skipped = conn.skipped_tools
        assert sorted(skipped) == ["bad_list", "bad_type"]
        assert skipped["bad_list"].startswith("malformed definition (inputSchema: ")
        assert skipped["bad_type"].startswith("unusable inputSchema (invalid JSON Schema at ")
        ex = Executor(registry, approver=AutoApprove())
        assert (await ex.call("drop_database", {"name": "x"})).text == "dropped x"


async def test_a_server_tool_does_not_take_a_local_name(registry: ToolRegistry) -> None:
    @define_tool
    def lookup(key: str) -> str:
        """The notebook's own lookup."""
        return f"local {key}"

    async with await connect("h", command=[*COMMAND, "--tool-name", "lookup"]) as conn:
        conn.register()
        assert registry.require("lookup").source != "mcp:h/lookup"
        assert registry.require("h_lookup").source == "mcp:h/lookup"
        registry.unregister("lookup")
        await conn.list_tools()  # listed again: the name stays the same
        assert registry.get("lookup") is None
        assert registry.require("h_lookup").source == "mcp:h/lookup"
        ex = Executor(registry, approver=AutoApprove())
        assert (await ex.call("h_lookup", {})).text == "from the server"


@pytest.fixture
def hostile_http() -> Iterator[HttpServer]:
    server = HttpServer(script=HOSTILE)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def hostile_json() -> Iterator[HttpServer]:
    """The hostile server answering with JSON bodies instead of SSE streams."""
    server = HttpServer(script=HOSTILE, args=["--json"])
    try:
        yield server
    finally:
        server.kill()


@pytest.mark.parametrize("transport", ["stdio", "http", "json"])
async def test_a_huge_result_is_refused_quickly_and_the_session_lives(
    registry: ToolRegistry, transport: str, request: pytest.FixtureRequest
) -> None:
    where: dict[str, Any] = (
        {"command": COMMAND}
        if transport == "stdio"
        else {"url": request.getfixturevalue(f"hostile_{transport}").url}
    )
    async with await connect("h", **where) as conn:
        conn.register()
        ex = Executor(registry, approver=AutoApprove())
        started = time.monotonic()
        refused = await ex.call("big", {"megabytes": 50})
        took = time.monotonic() - started
        assert refused.status == "error"
        assert refused.text == (
            "MCP server 'h', tool 'big': the result is too large: over 10.0 MB "
            "(max_result_bytes), so it was not read"
        )
        assert took < 30  # not a benchmark: before the limit, stdio took over 60 s
        assert conn.connected
        fine = await ex.call("big", {"megabytes": 4})  # under the default limit (SSE: > 1 MB)
        assert fine.status == "ok"
        assert len(fine.text) == 4 * 1024 * 1024
    small = McpServerConfig(name="small", max_result_bytes=100_000, **where)
    async with await connect(small) as conn:
        conn.register(ToolRegistry(), prefix=True)
        tool = next(t for t in conn.tools if t.name == "big")
        ex = Executor(ToolRegistry(), approver=AutoApprove())
        ex.registry.register(tool)
        assert (await ex.call("big", {"megabytes": 0.02})).status == "ok"
        over = await ex.call("big", {"megabytes": 0.2})
        assert "over 0.1 MB (max_result_bytes)" in over.text
