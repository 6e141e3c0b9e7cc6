"""kode_nb's MCP server announces changes of the served tools (``notifications/tools/list_changed``)
to the SDK's own clients over HTTP on 127.0.0.1, and kode_nb's own client follows them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx2
import mcp_types as mt
import pytest
from mcp import ClientSession
from mcp.client.client import Client
from mcp.client.session import IncomingMessage
from mcp.client.streamable_http import streamable_http_client
from mcp.server.subscriptions import ToolsListChanged
from mcp_helpers import wait_for

from kode_nb import AutoApprove, Executor, ToolRegistry, define_tool
from kode_nb.mcp import connect, serve

pytestmark = pytest.mark.anyio


class Heard:
    """A client's message handler that counts ``notifications/tools/list_changed``."""

    def __init__(self) -> None:
        self.changes = 0

    async def __call__(self, message: IncomingMessage) -> None:
        if isinstance(message, mt.ToolListChangedNotification):
            self.changes += 1


@asynccontextmanager
async def sdk_client(
    url: str, heard: Heard, headers: dict[str, str]
) -> AsyncIterator[tuple[ClientSession, mt.InitializeResult]]:
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, message_handler=heard) as session,
    ):
        yield session, await session.initialize()


async def names(session: ClientSession) -> set[str]:
    return {t.name for t in (await session.list_tools()).tools}


async def until_heard(registry: ToolRegistry, heard: Callable[[], object]) -> None:
    """Change a served tool until the client hears of it. The SDK's client opens the stream that
    carries notifications just after the handshake; a change announced before that reaches
    nobody (and a test must not count on it)."""

    def read_probe() -> str:
        """Registered again until a client hears of it."""
        return "probe"

    for _ in range(40):
        define_tool(read_probe, kind="read", registry=registry)
        with contextlib.suppress(AssertionError):
            await wait_for(heard, timeout=0.25, what="the probe's announcement")
            await asyncio.sleep(0.2)  # an earlier probe's announcement arriving late
            return
    raise AssertionError("no client heard of a change to the served tools")


def notes() -> ToolRegistry:
    registry = ToolRegistry(name="notes")

    def read_note(name: str) -> str:
        """Read a note."""
        return f"contents of {name}"

    def delete_note(name: str) -> str:
        """Delete a note."""
        return "deleted"

    define_tool(read_note, kind="read", registry=registry)
    define_tool(delete_note, kind="delete", registry=registry)
    return registry


async def test_added_replaced_and_removed_served_tools_are_announced() -> None:
    registry = notes()
    async with await serve(registry, tools=["read_*"]) as handle:
        heard = Heard()
        async with sdk_client(handle.url, heard, handle.headers) as (session, init):
            assert init.capabilities.tools is not None
            assert init.capabilities.tools.list_changed is True
            await until_heard(registry, lambda: heard.changes)
            heard.changes, before = 0, handle.announced

            def write_note(name: str) -> str:
                """Outside the served patterns."""
                return name

            define_tool(write_note, kind="edit", registry=registry)
            registry.unregister("delete_note")
            await asyncio.sleep(0.3)
            assert (heard.changes, handle.announced) == (0, before)  # not served: no news

            def read_later(key: str) -> str:
                """The first version."""
                return key

            define_tool(read_later, kind="read", registry=registry)
            await wait_for(lambda: heard.changes == 1, what="the addition")
            assert "read_later" in await names(session)

            def read_later(key: str) -> str:  # type: ignore[no-redef]  # a cell run again
                """The second version."""
                return key * 2

            define_tool(read_later, kind="read", registry=registry)
            await wait_for(lambda: heard.changes == 2, what="the replacement")
            listing = {t.name: t for t in (await session.list_tools()).tools}
            assert listing["read_later"].description == "The second version."

            registry.unregister("read_later")
            await wait_for(lambda: heard.changes == 3, what="the removal")
            assert "read_later" not in await names(session)
            assert handle.announced == before + 3


@pytest.fixture
async def strict_loop() -> AsyncIterator[None]:
    """Debug mode: the loop refuses work scheduled from another thread without ``*_threadsafe``."""
    loop = asyncio.get_running_loop()
    debug = loop.get_debug()
    loop.set_debug(True)
    try:
        yield
    finally:
        loop.set_debug(debug)


@pytest.mark.usefixtures("strict_loop")
async def test_a_burst_of_changes_is_announced_once_from_any_thread() -> None:
    registry = notes()
    async with await serve(registry) as handle:
        heard = Heard()
        async with sdk_client(handle.url, heard, handle.headers) as (session, _):
            await until_heard(registry, lambda: heard.changes)
            heard.changes, before = 0, handle.announced
            tools = []
            for n in range(6):

                def read_one(n: int = n) -> str:
                    """One of a cell's tools."""
                    return str(n)

                tools.append(define_tool(read_one, name=f"read_{n}", kind="read", registry=None))

            def run_the_cell() -> None:  # a cell's tools, registered by a worker thread
                registry.register_many(tools[:3])
                for tool in tools[3:]:
                    registry.register(tool)

            await asyncio.to_thread(run_the_cell)
            await wait_for(lambda: heard.changes, what="the announcement")
            await asyncio.sleep(0.3)
            assert heard.changes == 1
            assert handle.announced == before + 1
            assert {f"read_{n}" for n in range(6)} <= await names(session)


async def test_every_connected_client_hears_while_clients_come_and_go() -> None:
    registry = notes()
    async with await serve(registry) as handle:
        first, second = Heard(), Heard()
        async with sdk_client(handle.url, first, handle.headers) as (one, _):
            async with sdk_client(handle.url, second, handle.headers):
                await until_heard(registry, lambda: first.changes and second.changes)
                first.changes = second.changes = 0
                registry.unregister("delete_note")
                await wait_for(lambda: first.changes and second.changes, what="both clients")
            # the second client has gone (its session with it); the first still hears
            before = second.changes
            registry.unregister("read_note")
            await wait_for(lambda: first.changes == 2, what="the remaining client")
            assert second.changes == before
            assert "read_note" not in await names(one)
        async with sdk_client(handle.url, third := Heard(), handle.headers) as (
            again,
            _,
        ):  # a new session
            await until_heard(registry, lambda: third.changes)
            assert "read_probe" in await names(again)


async def test_a_2026_client_hears_on_its_listen_stream() -> None:
    registry = notes()
    async with (
        await serve(registry, tools=["read_*"], auth=False) as handle,
        Client(handle.url) as client,
    ):
        assert client.protocol_version == "2026-07-28"
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        async with client.listen(tools_list_changed=True) as events:  # open once acknowledged
            registry.unregister("delete_note")  # not served: no event

            def read_later() -> str:
                """Defined while the client listens."""
                return "later"

            define_tool(read_later, kind="read", registry=registry)
            event = await asyncio.wait_for(anext(aiter(events)), 10)
            assert event == ToolsListChanged()
            assert handle.announced == 1
        assert "read_later" in {t.name for t in (await client.list_tools()).tools}


async def test_kode_nb_client_follows_kode_nb_server() -> None:
    served, mine = notes(), ToolRegistry(name="mine")
    async with (
        await serve(served) as handle,
        await connect("nb", url=handle.url, headers=handle.headers) as conn,
    ):
        conn.register(mine)
        await until_heard(served, lambda: mine.get("read_probe"))
        await conn.tools_refreshed()

        def read_later(key: str) -> str:
            """Defined on the serving side after the client connected."""
            return f"later:{key}"

        define_tool(read_later, kind="read", registry=served)
        await wait_for(lambda: mine.get("read_later"), what="the client to list it")
        result = await Executor(mine, approver=AutoApprove()).call("read_later", {"key": "k"})
        assert result.text == "later:k"
        served.unregister("delete_note")
        await wait_for(lambda: mine.get("delete_note") is None, what="the removal to reach it")
        await conn.tools_refreshed()
        assert conn.refresh_error is None
        assert set(mine.names()) == {"read_note", "read_later", "read_probe"}


async def test_a_notebook_connected_to_its_own_endpoint_is_not_served_its_copies() -> None:
    registry = notes()
    async with (
        await serve(registry) as handle,
        await connect("me", url=handle.url, headers=handle.headers) as me,
    ):
        me.register(registry)  # the copies clash with the originals: me_read_note, ...
        await asyncio.sleep(0.5)  # served back, they would come round again, renamed, forever
        await me.tools_refreshed()
        assert registry.names() == ["delete_note", "me_delete_note", "me_read_note", "read_note"]
        assert handle.tool_names() == ["delete_note", "read_note"]
        assert handle.announced == 0  # the copies are not served: adding them changed nothing


async def test_two_servers_connected_to_each_other_settle() -> None:
    here, there = notes(), ToolRegistry(name="there")

    def fetch_page(url: str) -> str:
        """There's own tool."""
        return url

    define_tool(fetch_page, kind="read", registry=there)
    async with (
        await serve(here) as a,
        await serve(there) as b,
        await connect("b", url=b.url, headers=b.headers) as to_b,
        await connect("a", url=a.url, headers=a.headers) as to_a,
    ):
        to_b.register(here)  # each notebook uses the other's tools, and serves its own...
        to_a.register(there)  # ...and those copies: each hears of the other's changes
        await asyncio.sleep(1.0)
        sizes = (len(here), len(there), a.announced, b.announced)
        await asyncio.sleep(0.5)
        assert (len(here), len(there), a.announced, b.announced) == sizes  # settled
        assert {"fetch_page", "read_note"} <= set(here.names())
        assert {"fetch_page", "read_note"} <= set(there.names())
        assert not [n for n in [*here.names(), *there.names()] if n.count("_") > 2]
