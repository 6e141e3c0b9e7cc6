"""The MCP server's bearer token: raw HTTP requests and real MCP clients, with and without it.

Everything runs on 127.0.0.1: kode_nb's server, the SDK's client and kode_nb's own client.
"""

from __future__ import annotations

import http.client
import json
import logging
from collections.abc import Callable
from typing import Any

import anyio.to_thread
import httpx2
import mcp_helpers  # noqa: F401 - skips this module without the MCP SDK
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from kode_nb import ToolRegistry, define_tool
from kode_nb._redact import REDACTED, redact_text
from kode_nb.mcp import McpConnectionError, McpServerHandle, connect, serve

pytestmark = pytest.mark.anyio

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "raw", "version": "1"}},
}  # fmt: skip


def served() -> ToolRegistry:
    registry = ToolRegistry(name="served")

    def read_answer() -> str:
        """The answer."""
        return "42"

    define_tool(read_answer, kind="read", registry=registry)
    return registry


def raw_post(handle: McpServerHandle, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP request (no MCP client at all)."""
    conn = http.client.HTTPConnection("127.0.0.1", handle.port, timeout=10)
    try:
        conn.request("POST", "/mcp", body=json.dumps(INIT), headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            **headers,
        })  # fmt: skip
        response = conn.getresponse()
        return response.status, dict(response.getheaders()), response.read()
    finally:
        conn.close()


async def sdk_list(
    handle: McpServerHandle, headers: dict[str, str], statuses: list[int] | None = None
) -> list[str]:
    """The tools the SDK's own client lists; ``statuses`` gets every HTTP status it saw."""

    async def seen(response: httpx2.Response) -> None:
        if statuses is not None:
            statuses.append(response.status_code)

    async with (
        httpx2.AsyncClient(headers=headers, event_hooks={"response": [seen]}) as http,
        streamable_http_client(handle.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return [t.name for t in (await session.list_tools()).tools]


async def test_requests_without_the_token_get_401() -> None:
    async with await serve(served()) as handle:
        assert handle.token is not None
        assert len(handle.token) >= 40
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token"},
            {"Authorization": f"Basic {handle.token}"},
            {"Authorization": f"Bearer {handle.token}x"},
            {"Authorization": handle.token},
        ):
            status, got, _ = await anyio_thread(raw_post, handle, headers)
            assert status == 401, headers
            assert got["www-authenticate"].startswith("Bearer")
        status, _, body = await anyio_thread(raw_post, handle, handle.headers)
        assert status == 200
        assert b'"serverInfo"' in body
        for scheme in ("bearer", "BEARER"):  # the scheme is case-insensitive
            auth = {"Authorization": f"{scheme} {handle.token}"}
            assert (await anyio_thread(raw_post, handle, auth))[0] == 200


async def test_the_host_and_origin_checks_still_apply() -> None:
    async with await serve(served()) as handle:
        for extra in ({"Host": "evil.example"}, {"Origin": "http://evil.example"}):
            status, _, _ = await anyio_thread(raw_post, handle, {**handle.headers, **extra})
            assert status in (400, 403, 421), extra


async def test_real_clients_need_the_token() -> None:
    async with await serve(served()) as handle:
        assert await sdk_list(handle, handle.headers) == ["read_answer"]
        statuses: list[int] = []
        with pytest.raises(Exception, match="error"):  # the SDK's error, in exception groups
            await sdk_list(handle, {"Authorization": "Bearer nope"}, statuses)
        assert statuses == [401]
        with pytest.raises(McpConnectionError):
            await connect("nb", url=handle.url, connect_timeout=10)
        async with await connect("nb", url=handle.url, headers=handle.headers) as conn:
            assert [t.name for t in conn.tools] == ["read_answer"]


async def test_each_server_has_its_own_token_and_a_client_config() -> None:
    async with await serve(served()) as one, await serve(served(), name="two") as two:
        assert one.token != two.token
        status, _, _ = await anyio_thread(raw_post, two, one.headers)
        assert status == 401
        assert two.client_config() == {"mcpServers": {"two": {
            "type": "http", "url": two.url, "headers": {"Authorization": f"Bearer {two.token}"},
        }}}  # fmt: skip


async def test_the_token_is_redacted_while_served() -> None:
    handle = await serve(served())
    token = handle.token
    assert token is not None
    assert redact_text(f"token={token}") == f"token={REDACTED}"
    await handle.aclose()  # a stopped server's token opens nothing, and is text again
    assert redact_text(f"token={token}") == f"token={token}"


async def test_no_auth_is_an_explicit_choice(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kode_nb.mcp"):
        async with await serve(served(), auth=False) as handle:
            assert handle.token is None
            assert handle.headers == {}
            assert "headers" not in handle.client_config()["mcpServers"]["kode_nb"]
            assert (await anyio_thread(raw_post, handle, {}))[0] == 200
    assert "without authentication" in caplog.text
    with pytest.raises(Exception, match="auth"):
        await serve(served(), auth="yes")  # type: ignore[arg-type]


async def anyio_thread(
    fn: Callable[..., tuple[int, dict[str, str], bytes]], *args: Any
) -> tuple[int, dict[str, str], bytes]:
    """Run a blocking raw request off the event loop (the server runs on it)."""
    return await anyio.to_thread.run_sync(fn, *args)
