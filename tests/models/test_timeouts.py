"""Time limits of one model request, against real sockets on 127.0.0.1: silence before the first
byte, a stalled stream, the deadline across retries, a closed port."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress

import pytest

from kode_nb.errors import ConfigurationError
from kode_nb.models import (
    ModelConnectionError,
    ModelHTTPError,
    ModelProtocolError,
    ModelRequest,
    ModelSettings,
    OpenAIChatModel,
    UserMessage,
    collect,
)

from ._mock import payload

pytestmark = pytest.mark.anyio

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serve(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server on a free port; yields its base URL and a list counting connections."""
    connections: list[int] = []
    writers: list[asyncio.StreamWriter] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        writers.append(writer)
        with suppress(ConnectionError, asyncio.CancelledError):
            await handler(reader, writer)

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", connections
    finally:
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
        0,
    )  # fmt: skip
    await reader.readexactly(length)


def model(url: str) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=url, api_key_env=None, retry_base_delay=0.05)


def request(**settings: float | int | None) -> ModelRequest:
    return ModelRequest(
        system="", messages=(UserMessage(content="hi"),), settings=ModelSettings(**settings)
    )


async def test_a_server_that_never_answers_fails_after_first_byte_timeout_without_retry() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(30)

    async with serve(silent) as (url, connections):
        m = model(url)
        t0 = time.monotonic()
        with pytest.raises(ModelConnectionError) as caught:
            await collect(m.stream(request(first_byte_timeout=0.4)))
        took = time.monotonic() - t0
    assert 0.35 < took < 3
    assert len(connections) == 1  # a busy server is not asked again
    message = str(caught.value)
    assert message.count(m.name) == 1
    assert "within 0.4 s (first_byte_timeout, attempt 1)" in message


async def test_a_stream_that_stalls_fails_after_the_idle_timeout() -> None:
    chunk = payload("openai_text.txt").split(b"\n\n")[0] + b"\n\n"

    async def stalls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n" + f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"
        )
        await writer.drain()
        await asyncio.sleep(30)

    async with serve(stalls) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(ModelProtocolError, match=r"stalled: nothing arrived for 0\.4 s"):
            await collect(model(url).stream(request(timeout=0.4)))
        assert time.monotonic() - t0 < 3


async def test_retries_stop_at_the_deadline() -> None:
    body = payload("openai_500.json")

    async def fails(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n"
                b"retry-after: 0.4\r\n" + f"content-length: {len(body)}\r\n\r\n".encode() + body
            )
            await writer.drain()

    async with serve(fails) as (url, _):
        m = model(url)
        t0 = time.monotonic()
        with pytest.raises(ModelHTTPError) as caught:
            await collect(m.stream(request(deadline=1.0, max_retries=10)))
        took = time.monotonic() - t0
    assert took < 1.5
    assert 2 <= caught.value.attempts <= 3  # 0.4 s apart: the third wait would pass 1 s
    assert f"after {caught.value.attempts} attempts" in str(caught.value)


async def test_a_closed_port_fails_after_the_retries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    m = model(f"http://127.0.0.1:{port}/v1")
    with pytest.raises(ModelConnectionError, match=r"after 3 attempt\(s\)"):
        await collect(m.stream(request(max_retries=2)))


@pytest.mark.parametrize(
    ("field", "value"),
    [("first_byte_timeout", 0), ("timeout", -1), ("deadline", 0), ("tool_choice", "")],
)
def test_bad_settings_are_clear_errors(field: str, value: object) -> None:
    with pytest.raises(ConfigurationError, match=field):
        ModelSettings(**{field: value})  # type: ignore[arg-type]
