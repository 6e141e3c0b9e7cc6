"""The client follows ``notifications/tools/list_changed`` from a real server whose tools change
(tests/mcp/servers/changing.py, a subprocess, over stdio and HTTP)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import CHANGING, HttpServer, wait_for

from kode_nb import AutoApprove, Executor, ToolKind, ToolRegistry, define_tool
from kode_nb.mcp import connect
from kode_nb.mcp._refresh import Refresher

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["stdio", "http"])
def where(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """How to reach the changing server: ``connect()`` options."""
    if request.param == "stdio":
        yield {"command": [sys.executable, CHANGING]}
        return
    server = HttpServer(script=CHANGING)
    try:
        yield {"url": server.url}
    finally:
        server.kill()


def executor(registry: ToolRegistry) -> Executor:
    return Executor(registry, approver=AutoApprove())


async def test_tool_list_changes_update_every_registry(
    registry: ToolRegistry, where: dict[str, Any]
) -> None:
    def echo(text: str) -> str:
        """A notebook tool that holds the name first."""
        return text.upper()

    define_tool(echo)
    prefixed = ToolRegistry(name="prefixed")
    async with await connect("ch", **where) as conn:
        conn.register()
        conn.register(prefixed, prefix=True)
        ex = executor(registry)
        assert {"ch_echo", "stable", "old_tool", "tweak_me"} <= set(registry.names())
        stable, ch_echo = registry.require("stable"), registry.require("ch_echo")
        assert registry.require("tweak_me").kind is ToolKind.EXECUTE
        changes: list[tuple[str, str]] = []
        registry.on_change(lambda action, name: changes.append((action, name)))

        assert (await ex.call("change", {"burst": 20})).text == "changed"
        await wait_for(lambda: registry.get("new_tool"), what="new_tool in the registry")
        await conn.tools_refreshed()

        assert registry.get("old_tool") is None
        assert sorted(changes) == [
            ("registered", "new_tool"),
            ("replaced", "tweak_me"),
            ("unregistered", "old_tool"),
        ]
        assert registry.require("stable") is stable  # unchanged tools are left as they are
        assert registry.require("ch_echo") is ch_echo  # and keep their clash prefix
        assert registry.require("echo").source.endswith(".echo")  # the notebook's, untouched
        tweak = registry.require("tweak_me")
        assert (tweak.description, tweak.kind) == ("The second version.", ToolKind.READ)
        assert (await ex.call("new_tool", {"word": "hi"})).text == "new:hi"
        assert (await ex.call("tweak_me", {"x": 4})).text == "8"
        assert "ch_new_tool" in prefixed.names()
        assert "ch_old_tool" not in prefixed.names()
        assert {t.name for t in conn.tools} >= {"new_tool", "echo"}
        assert conn.refresh_error is None
        # twenty notifications in a row: the initial listing plus one or two refreshes
        assert 2 <= int((await ex.call("listings")).text) <= 3


async def test_a_refresh_the_server_refuses_keeps_the_tools_and_the_session(
    registry: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    async with await connect("ch", command=[sys.executable, CHANGING]) as conn:
        conn.register()
        before = {t.name: t for t in registry.list()}
        ex = executor(registry)
        pid = (await ex.call("pid")).text
        with caplog.at_level(logging.WARNING, logger="kode_nb.mcp"):
            assert (await ex.call("break_listing")).text == "broken"
            error = await wait_for(lambda: conn.refresh_error, what="the refresh to fail")
        assert "the tool catalogue is being rebuilt" in error
        assert any("refreshing its tools failed" in r.getMessage() for r in caplog.records)
        assert {t.name: t for t in registry.list()} == before  # nothing half-updated
        assert conn.connected
        assert (await ex.call("pid")).text == pid  # the same session and server
        assert (await ex.call("echo", {"text": "still"})).text == "still"

        assert (await ex.call("fix_listing")).text == "fixed"
        await wait_for(lambda: registry.get("new_tool"), what="the next refresh")
        await conn.tools_refreshed()
        assert conn.refresh_error is None


async def test_a_clash_in_one_registry_leaves_it_as_it_was(registry: ToolRegistry) -> None:
    def new_tool(word: str) -> str:
        """A notebook tool holding the name the server's next tool will want."""
        return word

    define_tool(new_tool)
    elsewhere = ToolRegistry(name="elsewhere")
    async with await connect("ch", command=[sys.executable, CHANGING]) as conn:
        conn.register(prefix=False)  # no prefix: a clash is an error
        conn.register(elsewhere)
        before = {t.name: t for t in registry.list()}
        assert (await executor(registry).call("change")).text == "changed"
        error = await wait_for(lambda: conn.refresh_error, what="the refresh to fail")
        assert "new_tool" in error
        assert {t.name: t for t in registry.list()} == before  # all of it, or none
        assert registry.require("tweak_me").description == "The first version."
        assert "new_tool" in elsewhere.names()  # the other registry follows the server
        assert "old_tool" not in elsewhere.names()


async def test_a_server_dying_during_a_refresh_breaks_nothing(registry: ToolRegistry) -> None:
    async with await connect("ch", command=[sys.executable, CHANGING]) as conn:
        conn.register()
        names = registry.names()
        ex = executor(registry)
        pid = (await ex.call("pid")).text
        assert (await ex.call("die_on_listing")).text == "dying"
        error = await wait_for(lambda: conn.refresh_error, what="the refresh to fail")
        assert "listing its tools failed" in error
        assert registry.names() == names
        assert registry.get("never_seen") is None
        assert not bool(conn.connected)  # (bool(): keeps mypy from narrowing the property)
        again = await ex.call("pid")  # the next call starts a new server
        assert again.status == "ok"
        assert again.text != pid
        assert (await ex.call("echo", {"text": "back"})).text == "back"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_restarted_server_is_listed_again(
    registry: ToolRegistry, tmp_path: Path, transport: str
) -> None:
    generation = tmp_path / "generation"
    generation.write_text("one", encoding="utf-8")
    args = ["--generation-file", str(generation)]  # gen_<word>: the tool list of this run
    server = HttpServer(script=CHANGING, args=args) if transport == "http" else None
    where = {"url": server.url} if server else {"command": [sys.executable, CHANGING, *args]}
    try:
        async with await connect("ch", **where) as conn:
            conn.register()
            ex = executor(registry)
            assert registry.get("gen_one") is not None
            assert (await ex.call("listings")).text == "1"  # the first connect lists once
            pid = (await ex.call("pid")).text
            generation.write_text("two", encoding="utf-8")
            if server is None:
                assert (await ex.call("crash")).is_error  # the process exits under the call
            else:
                server.kill()
                assert (await ex.call("pid")).is_error
                server = HttpServer(port=server.port, script=CHANGING, args=args)
            again = await ex.call("pid")  # the next call starts a new session...
            assert again.status == "ok"
            assert again.text != pid
            # ...and the tools are listed again, with no notification from the server
            await wait_for(lambda: registry.get("gen_two"), what="the restarted server's tools")
            await conn.tools_refreshed()
            assert registry.get("gen_one") is None
            assert conn.refresh_error is None
            assert (await ex.call("gen_two")).text == "two"
            # on the new server: the SDK's own listing before its first call (it wants the
            # tools' output schemas) and the refresh; no more
            assert (await ex.call("listings")).text == "2"
    finally:
        if server is not None:
            server.kill()


async def test_disconnect_drops_a_pending_refresh(registry: ToolRegistry) -> None:
    conn = await connect("ch", command=[sys.executable, CHANGING])
    conn.register()
    assert (await executor(registry).call("change")).text == "changed"
    await wait_for(lambda: conn.refreshing, what="the notification")
    await conn.disconnect()  # the refresh due must not run, nor start a new session
    await conn.tools_refreshed()
    await asyncio.sleep(0.1)
    assert not bool(conn.connected)
    assert registry.names() == []


async def test_refresher_coalesces_requests_and_survives_failures() -> None:
    release = asyncio.Event()
    runs: list[int] = []
    fail = [False]

    async def refresh() -> None:
        runs.append(len(runs))
        await release.wait()
        if fail[0]:
            raise RuntimeError("listing failed")

    refresher = Refresher("srv", refresh, settle=0)
    refresher.request()
    await wait_for(lambda: runs, what="the first refresh")
    for _ in range(5):  # a burst while the first refresh runs: one more refresh
        refresher.request()
    release.set()
    await refresher.wait()
    assert runs == [0, 1]
    assert refresher.runs == 2

    fail[0] = True
    refresher.request()
    await refresher.wait()
    assert refresher.error == "RuntimeError: listing failed"
    fail[0] = False
    refresher.request()
    await refresher.wait()
    assert refresher.error is None
    assert refresher.runs == 4
