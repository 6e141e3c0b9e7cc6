"""The MCP client against real MCP servers (tests/mcp/servers/toolbox.py) over stdio and HTTP."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_helpers import HttpServer, read_record, toolbox_command, wait_for

from kode_nb import (
    AutoApprove,
    DuplicateToolError,
    Executor,
    ImageBlock,
    JsonBlock,
    TextBlock,
    ToolCategory,
    ToolKind,
    ToolRegistry,
    define_tool,
)
from kode_nb.mcp import McpConnectionError, McpServerConfig, connect
from kode_nb.mcp.client import McpConnection

pytestmark = pytest.mark.anyio


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpServer]:
    """The toolbox server over streamable HTTP on 127.0.0.1 (a subprocess)."""
    server = HttpServer(record=tmp_path / "record.jsonl")
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def record(tmp_path: Path) -> Path:
    """A file the toolbox server appends what it saw to (one JSON object per line)."""
    return tmp_path / "record.jsonl"


def executor(registry: ToolRegistry, **options: object) -> Executor:
    return Executor(registry, approver=AutoApprove(), **options)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- listing


async def test_lists_tools_as_kode_nb_tools_with_kinds_from_annotations(
    registry: ToolRegistry,
) -> None:
    async with await connect("tb", command=toolbox_command()) as conn:
        assert conn.connected
        assert conn.server_info is not None
        assert conn.server_info.name == "toolbox"
        tools = {t.name: t for t in conn.tools}
        assert {"echo", "add", "count", "fail", "crash", "hang", "stats"} <= set(tools)
        kinds = {name: tools[name].kind for name in
                 ("echo", "remove_item", "overwrite", "append_note", "add")}  # fmt: skip
        assert kinds == {
            "echo": ToolKind.READ,  # readOnlyHint
            "remove_item": ToolKind.DELETE,  # destructive + idempotent
            "overwrite": ToolKind.EDIT,  # destructive
            "append_note": ToolKind.EDIT,  # destructiveHint false: additive
            "add": ToolKind.EXECUTE,  # no hints: asks by default
        }
        echo = tools["echo"]
        assert echo.category is ToolCategory.MCP
        assert echo.groups == ("mcp_tb",)
        assert echo.description == "Return the text unchanged."
        assert echo.parameters["properties"]["text"]["type"] == "string"
        assert echo.metadata["mcp_server"] == "tb"
        assert echo.metadata["mcp_annotations"] == {"readOnlyHint": True}
        assert echo.can_update_output
        assert len(registry) == 0  # nothing registered until register()
        conn.register()
        assert registry.get("echo") is not None
        assert "stats" in {t.name for t in registry.list_by_group("mcp_tb")}
    assert len(registry) == 0  # disconnect unregistered them


# --------------------------------------------------------------------------- calls


async def test_calls_results_errors_and_validation_over_stdio(registry: ToolRegistry) -> None:
    async with await connect("tb", command=toolbox_command()) as conn:
        conn.register()
        ex = executor(registry)
        result = await ex.call("echo", {"text": "hi"})
        assert (result.status, result.content) == ("ok", (TextBlock(text="hi"),))
        assert result.details["structured_content"] == {"result": "hi"}  # kept out of the text

        stats = await ex.call("stats", '{"values": [1, 2, 3]}')
        assert stats.content == (JsonBlock(data={"min": 1.0, "max": 3.0, "mean": 2.0}),)

        picture = await ex.call("picture")
        assert picture.content[0] == TextBlock(text="a pixel")
        assert isinstance(picture.content[1], ImageBlock)
        assert picture.content[1].mime_type == "image/png"

        failed = await ex.call("fail", {"reason": "the disk is full"})
        assert failed.is_error
        assert failed.status == "error"
        assert "the disk is full" in failed.text
        assert failed.error_type == "McpToolError"

        invalid = await ex.call("echo", {"text": 5})
        assert invalid.status == "invalid_arguments"
        assert "`text`: expected string" in invalid.text
        missing = await ex.call("add", {"a": 1})
        assert missing.status == "invalid_arguments"
        assert "`b`" in missing.text

        # The server's schema allows other properties, so kode_nb does not forbid them either.
        extra = await ex.call("echo", {"text": "x", "unknown": 1})
        assert extra.status == "ok"
        assert extra.text == "x"


async def test_mutating_mcp_tools_ask_by_default(registry: ToolRegistry) -> None:
    async with await connect("tb", command=toolbox_command()) as conn:
        conn.register()
        conn.trust()  # annotations decide only for a trusted server
        headless = Executor(registry)  # no approver: what asks is denied
        assert (await headless.call("echo", {"text": "read-only runs"})).status == "ok"
        for name, args in (("add", {"a": 1, "b": 2}), ("remove_item", {"item": "x"})):
            denied = await headless.call(name, args)
            assert denied.status == "denied", name
        assert (await executor(registry).call("add", {"a": 1, "b": 2})).text == "3"


async def test_progress_notifications_arrive_as_updates_in_order(registry: ToolRegistry) -> None:
    async with await connect("tb", command=toolbox_command()) as conn:
        conn.register()
        updates: list[object] = []
        result = await executor(registry).call("count", {"steps": 5}, on_update=updates.append)
        assert result.text == "counted to 5"
        assert updates == [f"[{i}/5] step {i}\n" for i in range(1, 6)]


async def test_http_listing_calls_progress_and_headers(
    registry: ToolRegistry, http_server: HttpServer
) -> None:
    async with await connect("web", url=http_server.url, headers={"X-Kode-Test": "yes"}) as conn:
        assert conn.config.transport == "http"
        conn.register()
        ex = executor(registry)
        assert (await ex.call("echo", {"text": "over http"})).text == "over http"
        assert (await ex.call("header", {"name": "X-Kode-Test"})).text == "yes"
        updates: list[object] = []
        await ex.call("count", {"steps": 3}, on_update=updates.append)
        assert updates == ["[1/3] step 1\n", "[2/3] step 2\n", "[3/3] step 3\n"]


# --------------------------------------------------------------------------- failures


async def test_crash_mid_call_gives_unavailable_then_reconnects(registry: ToolRegistry) -> None:
    async with await connect("tb", command=toolbox_command()) as conn:
        conn.register()
        ex = executor(registry)
        first_pid = (await ex.call("pid")).text
        crashed = await ex.call("crash")
        assert crashed.is_error
        assert crashed.status == "error"
        assert crashed.text.startswith("MCP server 'tb' is unavailable: ")
        assert crashed.text.endswith("It will be reconnected on the next call.")
        assert crashed.error_type == "McpServerUnavailableError"
        assert not bool(conn.connected)  # (bool(): keeps mypy from narrowing the property)
        second_pid = await ex.call("pid")
        assert second_pid.status == "ok"
        assert second_pid.text != first_pid
        assert conn.connected
        await conn.reconnect()  # by hand: a new server process
        assert (await ex.call("pid")).text not in (first_pid, second_pid.text)


async def test_concurrent_calls_share_one_session(registry: ToolRegistry) -> None:
    async with await connect("tb", command=toolbox_command()) as conn:
        conn.register()
        ex = executor(registry, max_concurrency=None)
        calls = [("echo", {"text": str(i)}) for i in range(8)] + [("count", {"steps": 2})]
        results = await ex.call_many(calls)
        assert [r.text for r in results] == [*map(str, range(8)), "counted to 2"]
        assert len({(await ex.call("pid")).text for _ in range(3)}) == 1


async def test_unavailable_http_server_then_back(tmp_path: Path, registry: ToolRegistry) -> None:
    server = HttpServer()
    try:
        conn = await connect("web", url=server.url)
        conn.register()
        ex = executor(registry)
        assert (await ex.call("echo", {"text": "1"})).text == "1"
        server.kill()
        gone = await ex.call("echo", {"text": "2"})
        assert gone.is_error
        assert "MCP server 'web' is unavailable" in gone.text
        server = HttpServer(port=server.port)  # back on the same port
        assert (await ex.call("echo", {"text": "3"})).text == "3"
    finally:
        await conn.disconnect()
        server.kill()


async def test_timeout_sends_cancellation_to_the_server(
    registry: ToolRegistry, record: Path
) -> None:
    async with await connect("tb", command=toolbox_command(record), timeout=0.5) as conn:
        conn.register()
        assert registry.require("hang").timeout == 0.5
        result = await executor(registry).call("hang", {"label": "slow"})
        assert result.status == "timed_out"
        seen = await wait_for(
            lambda: [e for e in read_record(record) if e["event"] == "notifications/cancelled"],
            what="notifications/cancelled at the server",
        )
        assert seen[0]["params"]["requestId"] is not None
        await wait_for(lambda: {"event": "tool_cancelled", "label": "slow"} in read_record(record))
        # the session survives a cancelled call
        assert (await executor(registry).call("echo", {"text": "still here"})).status == "ok"


async def test_executor_cancel_sends_cancellation_to_the_server(
    registry: ToolRegistry, record: Path
) -> None:
    async with await connect("tb", command=toolbox_command(record)) as conn:
        conn.register()
        ex = executor(registry)
        call = asyncio.create_task(ex.call("hang", {"label": "stop me"}, run_id="r1"))
        # cancel once the server runs the tool (a request never sent is not cancelled on the wire)
        await wait_for(lambda: {"event": "tool_started", "label": "stop me"} in read_record(record))
        assert ex.cancel(run_id="r1", reason="user pressed stop") == 1
        result = await call
        assert result.status == "cancelled"
        assert "user pressed stop" in result.text
        cancelled = await wait_for(
            lambda: [e for e in read_record(record) if e["event"] == "notifications/cancelled"]
        )
        assert cancelled[0]["params"]["reason"] == "caller cancelled"
        await wait_for(
            lambda: {"event": "tool_cancelled", "label": "stop me"} in read_record(record)
        )


async def test_connect_failures_are_clear() -> None:
    with pytest.raises(McpConnectionError, match=r"'nope'.*(No such file|not found)"):
        await connect("nope", command=["/nonexistent/mcp-server-binary"])
    script = "import sys; sys.stderr.write('missing API key\\n'); sys.exit(2)"
    with pytest.raises(McpConnectionError) as info:
        await connect("broken", command=[sys.executable, "-c", script])
    assert "missing API key" in str(info.value)  # the server's stderr is in the message
    silent = "import sys; sys.stdin.read()"  # never answers the handshake
    with pytest.raises(McpConnectionError, match=r"no handshake within 0.5 s"):
        await connect("silent", command=[sys.executable, "-c", silent], connect_timeout=0.5)
    with pytest.raises(McpConnectionError, match=r"Could not connect to MCP server 'down'"):
        await connect("down", url="http://127.0.0.1:9/mcp", connect_timeout=5)


async def test_disconnected_tool_says_so(registry: ToolRegistry) -> None:
    conn = await connect("tb", command=toolbox_command())
    conn.register()
    stale = registry.require("echo")
    await conn.disconnect()
    assert registry.get("echo") is None
    elsewhere = ToolRegistry()
    elsewhere.register(stale)
    result = await Executor(elsewhere, approver=AutoApprove()).call("echo", {"text": "x"})
    assert result.is_error
    assert "MCP server 'tb' is disconnected" in result.text
    assert "tb" in repr(conn)
    assert "closed" in repr(conn)


async def test_disconnect_during_a_call(registry: ToolRegistry, record: Path) -> None:
    conn = await connect("tb", command=toolbox_command(record))
    conn.register()
    call = asyncio.create_task(executor(registry).call("hang", {"label": "orphan"}))
    await wait_for(lambda: {"event": "tool_started", "label": "orphan"} in read_record(record))
    await conn.disconnect()
    result = await call
    assert result.is_error
    assert "MCP server 'tb' is disconnected (disconnect() was called)" in result.text


# --------------------------------------------------------------------------- names


async def test_name_clashes_get_the_server_prefix(registry: ToolRegistry) -> None:
    def add(a: int, b: int) -> int:
        """A notebook tool that holds the name first."""
        return a - b

    define_tool(add)
    one = await connect("one", command=toolbox_command(name="one"))
    two = await connect("two", command=toolbox_command(name="two"))
    try:
        one.register()
        two.register()
        names = set(registry.names())
        assert {"echo", "one_add", "two_echo", "two_add", "two_count"} <= names
        assert registry.require("add").source.endswith(".add")  # the notebook's, untouched
        ex = executor(registry)
        assert (await ex.call("one_add", {"a": 5, "b": 3})).text == "8"
        assert (await ex.call("add", {"a": 5, "b": 3})).text == "2"
        pids = {(await ex.call(n)).text for n in ("pid", "two_pid")}
        assert len(pids) == 2  # two different server processes
        one.register()  # registering again keeps the same names
        assert set(registry.names()) == names
        with pytest.raises(DuplicateToolError):
            two.register(ToolRegistry([registry.require("add")]), prefix=False)
        everything = ToolRegistry()
        assert all(t.name.startswith("one_") for t in one.register(everything, prefix=True))
    finally:
        await one.disconnect()
        await two.disconnect()
    assert registry.names() == ["add"]


async def test_connection_validates_its_options() -> None:
    from kode_nb import ConfigurationError

    with pytest.raises(ConfigurationError, match="either command"):
        await connect("x")
    with pytest.raises(ConfigurationError, match="bad MCP server name"):
        await connect("not a name!", command=["x"])
    with pytest.raises(ConfigurationError, match="McpServerConfig"):
        McpConnection("x")  # type: ignore[arg-type]
    conn = McpConnection(McpServerConfig(name="x", command=("x",)))
    with pytest.raises(ConfigurationError, match="prefix must be"):
        conn.register(ToolRegistry(), prefix="yes")  # type: ignore[arg-type]
