"""The shared fixtures in conftest.py do what they promise: no network, an isolated registry."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator

import httpx
import pytest

import kode_nb
from kode_nb.tools import ToolRegistry


@contextlib.contextmanager
def blocked(match: str | None = None) -> Iterator[None]:
    """Expect the conftest's NetworkBlockedError, matched by name: `from conftest import ...`
    can pick up tests/builtins/conftest.py, which pytest also imports as `conftest`."""
    with pytest.raises(OSError, match=match) as caught:
        yield
    assert type(caught.value).__name__ == "NetworkBlockedError"


def test_non_loopback_connections_are_refused() -> None:
    with blocked(match=r"'192\.0\.2\.1'.*loopback addresses only"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)
    with socket.socket() as sock, blocked(match="connect to"):
        sock.connect(("192.0.2.1", 80))
    with socket.socket(socket.AF_INET6) as sock, blocked():
        sock.connect_ex(("2001:db8::1", 80))


def test_name_resolution_is_refused() -> None:
    with blocked(match=r"resolving 'example\.com' refused"):
        socket.getaddrinfo("example.com", 443)


def test_http_clients_see_a_clear_error() -> None:
    with pytest.raises(httpx.ConnectError, match="tests must not use the network"):
        httpx.get("https://example.com/", timeout=1)


@pytest.mark.anyio
async def test_asyncio_connections_are_refused() -> None:
    with blocked():
        await asyncio.open_connection("example.com", 80)
    with blocked():
        await asyncio.open_connection("192.0.2.1", 80)


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_loopback_keeps_working(host: str) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as server:
        server.bind((host, 0))
        server.listen()
        port = server.getsockname()[1]
        with socket.create_connection((host, port), timeout=5):
            conn, _ = server.accept()
            conn.close()


@pytest.mark.anyio
async def test_loopback_keeps_working_with_asyncio() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(await reader.readline())
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    reader, writer = await asyncio.open_connection("localhost", port)
    writer.write(b"ping\n")
    assert await reader.readline() == b"ping\n"
    writer.close()
    server.close()
    await server.wait_closed()


def test_tools_defined_in_a_test_land_in_its_registry(registry: ToolRegistry) -> None:
    @kode_nb.tool
    def ping() -> str:
        """Answer pong."""
        return "pong"

    assert registry.get("ping") is ping


# runs after the test above: the tool it defined is gone
def test_each_test_gets_a_fresh_current_registry(registry: ToolRegistry) -> None:
    assert kode_nb.default_registry() is registry
    assert len(registry) == 0
    seen: list[ToolRegistry] = []
    thread = threading.Thread(target=lambda: seen.append(kode_nb.default_registry()))
    thread.start()
    thread.join()
    assert seen == [registry], "a plain thread must see the test's registry too"


@pytest.mark.anyio
async def test_async_tests_see_the_fresh_registry(registry: ToolRegistry) -> None:
    assert kode_nb.default_registry() is registry
    assert len(registry) == 0
