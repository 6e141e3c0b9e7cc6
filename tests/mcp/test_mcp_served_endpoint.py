"""The served endpoint with no notebook: a registry served on the running loop, each outside call
run on the *current* executor (asked at each call) with its view told when it starts and ends,
``await`` until it listens, and a stop that frees the port and cancels the calls in flight —
over a real MCP client on 127.0.0.1."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import mcp_helpers
import pytest
from mcp_helpers import sdk_client

from kode_nb import CallbackApprover, Executor, ToolContext, ToolRegistry, approve, define_tool
from kode_nb.mcp._served import ServedEndpoint
from kode_nb.types import ToolResult

pytestmark = pytest.mark.anyio


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Hooks:
    """A view that records what it is told."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str, Any]] = []
        self.updates: list[Any] = []
        self.ended: list[ToolResult] = []
        self.statuses: list[str] = []

    def call_started(self, call_id: str, tool: str, arguments: Any) -> Any:
        self.started.append((call_id, tool, arguments))
        return self.updates.append

    def call_ended(self, call_id: str, result: ToolResult) -> None:
        self.ended.append(result)

    def status_changed(self, status: str) -> None:
        self.statuses.append(status)


def _registry(started: asyncio.Event) -> ToolRegistry:
    registry = ToolRegistry()

    def edit_note(text: str) -> str:
        """Edit the note."""
        return f"edited: {text}"

    async def wait_forever(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        ctx.on_update("waiting")
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    define_tool(edit_note, kind="edit", registry=registry)
    define_tool(wait_forever, kind="read", registry=registry)
    return registry


async def test_outside_calls_run_on_the_current_executor_and_the_view_follows_them() -> None:
    started = asyncio.Event()
    registry = _registry(started)
    asked: list[Any] = []
    first = Executor(registry, approver=CallbackApprover(lambda r: asked.append(r) or approve()))
    current = {"executor": first}
    hooks = Hooks()
    endpoint = ServedEndpoint(
        registry, lambda: current["executor"], port=_free_port(), patterns=None, name="t",
        hooks=hooks,
    )  # fmt: skip
    endpoint.start()
    assert await endpoint is endpoint
    assert hooks.statuses == ["listening"]
    assert endpoint.token
    assert endpoint.headers["Authorization"] == f"Bearer {endpoint.token}"
    async with sdk_client(endpoint.url, endpoint.headers) as session:
        result = await session.call_tool("edit_note", {"text": "a"})
        assert not result.is_error
        assert [r.tool for r in asked] == ["edit_note"]  # the executor's approver was asked
        # a rebuilt executor (new limits) takes the next call
        second = Executor(registry, approver=CallbackApprover(lambda r: approve(by="second")))
        current["executor"] = second
        await session.call_tool("edit_note", {"text": "b"})
        assert len(asked) == 1
        call = asyncio.create_task(session.call_tool("wait_forever", {}))
        await started.wait()
        assert len(endpoint.in_flight) == 1
        endpoint.stop()  # cancels what is in flight, frees the port
        await mcp_helpers.wait_for(lambda: len(hooks.ended) == 3, what="the cancelled call")
        call.cancel()
    assert [r.status for r in hooks.ended] == ["ok", "ok", "cancelled"]
    assert [t for _, t, _ in hooks.started] == ["edit_note", "edit_note", "wait_forever"]
    assert "waiting" in hooks.updates
    assert [r.text for r in endpoint.results[:2]] == ["edited: a", "edited: b"]
    assert all(cid.startswith("mcp_") for cid, _, _ in hooks.started)
    assert hooks.statuses == ["listening", "stopped"]
    assert endpoint.in_flight == set()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", endpoint.port))  # free again
    first.close()
    second.close()


async def test_an_endpoint_that_cannot_listen_says_why_and_stops() -> None:
    registry = ToolRegistry()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    stops: list[Any] = []
    try:
        endpoint = ServedEndpoint(
            registry, Executor, port=taken.getsockname()[1], patterns=None, name="t"
        )
        endpoint.on_stop.append(stops.append)
        endpoint.start()
        with pytest.raises(OSError, match="in use") as raised:
            await endpoint
        assert endpoint.error is raised.value
    finally:
        taken.close()
    assert endpoint.stopped
    assert endpoint.status.startswith("could not start: ")
    assert stops == [endpoint]
