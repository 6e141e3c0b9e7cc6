"""Served tools' updates become throttled MCP progress notifications (kode_nb.mcp._progress),
seen by the SDK's own client over streamable HTTP on 127.0.0.1."""

from __future__ import annotations

import asyncio
import time

import pytest
from mcp import ClientSession
from mcp_helpers import sdk_client, wait_for

from kode_nb import ToolContext, ToolRegistry, define_tool
from kode_nb.mcp import serve

pytestmark = pytest.mark.anyio

Seen = list[tuple[float, float | None, str | None]]


def streaming_registry() -> ToolRegistry:
    registry = ToolRegistry(name="streaming")

    def flood(count: int, ctx: ToolContext) -> str:
        """Stream ``count`` updates from a worker thread, pausing briefly every thousand."""
        for i in range(1, count + 1):
            ctx.on_update(f"update {i}")
            if i % 1000 == 0:
                time.sleep(0.005)
        return f"sent {count}"

    async def slow(count: int, ctx: ToolContext) -> str:
        """Stream ``count`` updates, one every 0.25 s (five times the throttle's interval)."""
        for i in range(1, count + 1):
            ctx.on_update({"step": i})
            await asyncio.sleep(0.25)
        return "done"

    define_tool(flood, kind="read", registry=registry)
    define_tool(slow, kind="read", registry=registry)
    return registry


async def call_with_progress(session: ClientSession, tool: str, count: int) -> tuple[Seen, float]:
    seen: Seen = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    start = time.monotonic()
    result = await session.call_tool(tool, {"count": count}, progress_callback=on_progress)
    elapsed = time.monotonic() - start
    assert not result.is_error
    # progress callbacks run in tasks of their own: the last may land just after the result
    await wait_for(lambda: seen and seen[-1][0] == count, what="the final progress")
    return seen, elapsed


async def test_a_flood_of_updates_is_throttled_and_ends_with_the_last() -> None:
    async with (
        await serve(streaming_registry()) as handle,
        sdk_client(handle.url, handle.headers) as session,
    ):
        seen, elapsed = await call_with_progress(session, "flood", 100_000)
    print(f"100000 updates in {elapsed:.2f} s -> {len(seen)} progress notifications")
    assert len(seen) <= 20 * elapsed + 2  # at most 20 a second, plus the final one
    assert len(seen) >= 2  # streamed while the tool ran, not only at the end
    assert seen[-1] == (100_000.0, None, "update 100000")
    progress = [p for p, _, _ in seen]
    assert progress == sorted(set(progress))  # the latest count each time, never repeated
    assert all(msg == f"update {p:g}" for p, _, msg in seen)  # each message matches its count


async def test_a_few_slow_updates_each_get_through() -> None:
    async with (
        await serve(streaming_registry()) as handle,
        sdk_client(handle.url, handle.headers) as session,
    ):
        seen, _ = await call_with_progress(session, "slow", 4)
    assert seen == [(float(i), None, f'{{"step": {i}}}') for i in range(1, 5)]
