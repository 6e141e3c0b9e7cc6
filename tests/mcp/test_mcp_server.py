"""kode_nb's MCP server, exercised by the SDK's own client over HTTP, and over stdio."""

from __future__ import annotations

import asyncio
import socket
import sys
from pathlib import Path

import mcp_helpers
import mcp_types as mt
import pytest
from mcp.shared.exceptions import MCPError
from mcp_helpers import sdk_client

from kode_nb import (
    AutoApprove,
    ConfigurationError,
    Executor,
    ImageBlock,
    ToolContext,
    ToolKind,
    ToolRegistry,
    define_tool,
)
from kode_nb.mcp import McpServerHandle, connect, serve

pytestmark = pytest.mark.anyio

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63000100000500010d0a2db40000000049454e44ae426082"
)


def notes_registry() -> ToolRegistry:
    registry = ToolRegistry(name="notes")

    def read_note(name: str) -> str:
        """Read the note called ``name``."""
        return f"contents of {name}"

    def delete_note(name: str) -> str:
        """Delete the note called ``name``."""
        return "deleted"

    async def summarize(count: int, ctx: ToolContext) -> dict[str, int]:
        """Count to ``count``, streaming each step."""
        for i in range(count):
            ctx.on_update(f"step {i + 1}")
        return {"count": count}

    def snapshot() -> ImageBlock:
        """A tiny picture."""
        return ImageBlock.from_bytes(PNG, "image/png")

    define_tool(read_note, kind="read", registry=registry)
    define_tool(delete_note, kind="delete", registry=registry)
    define_tool(summarize, kind="think", registry=registry)
    define_tool(snapshot, kind="read", registry=registry)
    return registry


def port_is_free(port: int) -> bool:
    probe = socket.socket()
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        probe.bind(("127.0.0.1", port))
        probe.listen()
        return True
    except OSError:
        return False
    finally:
        probe.close()


async def test_sdk_client_lists_and_calls_over_http() -> None:
    async with await serve(notes_registry()) as handle:
        assert handle.url == f"http://127.0.0.1:{handle.port}/mcp"
        assert handle.running
        assert not port_is_free(handle.port)
        async with sdk_client(handle.url, handle.headers) as session:
            listing = await session.list_tools()
            tools = {t.name: t for t in listing.tools}
            assert set(tools) == {"read_note", "delete_note", "summarize", "snapshot"}
            read, delete = tools["read_note"].annotations, tools["delete_note"].annotations
            assert read is not None
            assert read.read_only_hint is True
            assert delete is not None
            assert delete.destructive_hint is True
            assert delete.read_only_hint is False
            assert tools["read_note"].input_schema["required"] == ["name"]
            assert tools["read_note"].description == "Read the note called ``name``."

            result = await session.call_tool("read_note", {"name": "todo"})
            assert not result.is_error
            assert result.content == [mt.TextContent(text="contents of todo")]

            picture = await session.call_tool("snapshot", {})
            assert isinstance(picture.content[0], mt.ImageContent)
            assert picture.content[0].mime_type == "image/png"

            seen: list[tuple[float, float | None, str | None]] = []

            async def on_progress(
                progress: float, total: float | None, message: str | None
            ) -> None:
                seen.append((progress, total, message))

            summary = await session.call_tool(
                "summarize", {"count": 3}, progress_callback=on_progress
            )
            assert summary.structured_content == {"count": 3}
            assert summary.content == [mt.TextContent(text='{"count": 3}')]
            # three updates in a row are coalesced (kode_nb.mcp._progress): the latest is sent
            await mcp_helpers.wait_for(lambda: seen and seen[-1] == (3.0, None, "step 3"))
            assert 1 <= len(seen) <= 3


async def test_approval_and_argument_errors_reach_the_client_as_is_error() -> None:
    registry = notes_registry()
    async with await serve(registry) as handle, sdk_client(handle.url, handle.headers) as session:
        denied = await session.call_tool("delete_note", {"name": "todo"})
        assert denied.is_error
        assert isinstance(denied.content[0], mt.TextContent)
        assert "needs approval" in denied.content[0].text
        assert "no approver is configured" in denied.content[0].text
        invalid = await session.call_tool("read_note", {"name": 7})
        assert invalid.is_error
        assert isinstance(invalid.content[0], mt.TextContent)
        assert "`name`: expected string" in invalid.content[0].text
        with pytest.raises(MCPError, match="Unknown tool: nothing"):
            await session.call_tool("nothing", {})

    approving = Executor(registry, approver=AutoApprove())
    async with (
        await serve(registry, executor=approving) as handle,
        sdk_client(handle.url, handle.headers) as s,
    ):
        allowed = await s.call_tool("delete_note", {"name": "todo"})
        assert not allowed.is_error
        assert allowed.content == [mt.TextContent(text="deleted")]
    assert not approving.closed  # an executor that was passed in is not closed by aclose()


async def test_patterns_select_the_tools_served() -> None:
    registry = notes_registry()
    async with await serve(registry, tools=["read_*", "snap*"]) as handle:
        assert handle.tool_names() == ["read_note", "snapshot"]
        assert handle.patterns == ("read_*", "snap*")
        async with sdk_client(handle.url, handle.headers) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert names == {"read_note", "snapshot"}
            with pytest.raises(MCPError, match="Unknown tool: delete_note"):
                await session.call_tool("delete_note", {"name": "x"})

            def read_later(key: str) -> str:
                """Defined after the server started."""
                return key

            define_tool(read_later, kind="read", registry=registry)
            names = {t.name for t in (await session.list_tools()).tools}
            assert "read_later" in names


async def test_client_cancellation_cancels_the_call() -> None:
    registry = ToolRegistry()
    started, stopped = asyncio.Event(), asyncio.Event()

    async def wait_forever(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started.set()
        try:
            await asyncio.Event().wait()
        finally:
            stopped.set()
        return "unreachable"

    define_tool(wait_forever, kind="read", registry=registry)
    async with await serve(registry) as handle, sdk_client(handle.url, handle.headers) as session:
        call = asyncio.create_task(session.call_tool("wait_forever", {}))
        await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.wait_for(stopped.wait(), 10)


async def test_stop_frees_the_port() -> None:
    handle = await serve(notes_registry())
    port = handle.port
    assert not port_is_free(port)
    handle.stop()  # on the loop thread: the listener is closed when stop() returns
    assert port_is_free(port)
    await handle.aclose()
    assert not handle.running
    assert "stopped" in repr(handle)
    assert handle.executor.closed  # the executor serve() made is closed with it
    again = await serve(notes_registry(), port=port)  # the same port can be served again
    assert again.port == port
    await again.aclose()
    assert port_is_free(port)


async def test_serve_rejects_bad_options() -> None:
    registry = notes_registry()
    with pytest.raises(ConfigurationError, match="allow_remote=True"):
        await serve(registry, host="0.0.0.0")
    with pytest.raises(ConfigurationError, match=r"port=\.\.\.\) must be 0\.\.65535"):
        await serve(registry, port=70000)
    with pytest.raises(ConfigurationError, match="must start with '/'"):
        await serve(registry, path="mcp")
    with pytest.raises(ConfigurationError, match="tool name patterns"):
        await serve(registry, tools=["read_*", ""])
    with pytest.raises(ConfigurationError, match="another registry"):
        await serve(registry, executor=Executor(ToolRegistry()))
    with pytest.raises(ConfigurationError, match="needs an Executor"):
        await serve(registry, executor="fast")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a ToolRegistry"):
        await serve({"read": 1})  # type: ignore[arg-type]
    async with await serve(registry) as handle:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{handle.port}"):
            await serve(registry, port=handle.port)


async def test_default_registry_is_served(registry: ToolRegistry) -> None:
    def ping() -> str:
        """Answer pong."""
        return "pong"

    define_tool(ping, kind="read")
    async with await serve() as handle:
        assert isinstance(handle, McpServerHandle)
        assert handle.registry is registry
        assert handle.tool_names() == ["ping"]


async def test_kode_nb_client_and_server_round_trip_over_stdio(registry: ToolRegistry) -> None:
    root = Path(__file__).parents[2]  # env and cwd: kode_nb importable even if not installed
    async with await connect(
        "notes",
        command=[sys.executable, mcp_helpers.KODE_STDIO],
        env={"PYTHONPATH": str(root)},
        cwd=str(root),
    ) as conn:
        kinds = {t.name: t.kind for t in conn.tools}
        assert kinds == {
            "read_note": ToolKind.READ,
            "write_note": ToolKind.EDIT,
            "delete_note": ToolKind.DELETE,
        }
        conn.register()
        local = Executor(registry, approver=AutoApprove())  # approves on this side...
        assert (await local.call("read_note", {"name": "a"})).text == "contents of a"
        written = await local.call("write_note", {"name": "a", "text": "hello"})
        assert written.content[0].type == "json"
        assert written.text == '{"written": 5}'
        refused = await local.call(
            "delete_note", {"name": "a"}
        )  # ...the server's policy still rules
        assert refused.is_error
        assert "denied" in refused.text.lower()


async def test_a_served_subagent_runs_under_the_servers_executor_policy(tmp_path: Path) -> None:
    from pydantic import BaseModel

    from kode_nb import Policy, ToolResult
    from kode_nb.agents import AgentDefinition, register_subagent
    from kode_nb.builtins import register_builtins
    from kode_nb.models import ScriptedModel, ToolResultMessage
    from kode_nb.models.scripted import call

    class Task(BaseModel):
        task: str

    registry = ToolRegistry(name="helpers")
    ran: list[str] = []

    def parent_denied(target: str) -> str:
        """Does something the server's policy denies."""
        ran.append(target)
        return "ran"

    define_tool(parent_denied, registry=registry)
    register_builtins(registry, ["fs"])
    root = tmp_path / "root"
    root.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-SECRET-CONTENT")
    child = ScriptedModel([call("read_file", path=str(outside)), "done"])
    helper = AgentDefinition(
        name="helper", description="Helps.", system_prompt="Help.", input_model=Task,
        tools=["parent_denied", "read_file"], model=child,
    )  # fmt: skip
    register_subagent(helper, registry=registry)
    executor = Executor(registry, policy=Policy(deny=["parent_denied"], allowed_paths=[root]))
    async with (
        await serve(registry, tools=["helper"], executor=executor) as handle,
        sdk_client(handle.url, handle.headers) as session,
    ):
        result = await session.call_tool("helper", {"task": "go"})
    executor.close()
    assert not result.is_error
    assert ran == []
    assert [spec.name for spec in child.requests[0].tools] == ["read_file"]
    answer = child.requests[1].messages[-1]
    assert isinstance(answer, ToolResultMessage)
    text = ToolResult(content=answer.content).text
    assert "outside the allowed paths" in text
    assert "OUTSIDE-SECRET-CONTENT" not in text
