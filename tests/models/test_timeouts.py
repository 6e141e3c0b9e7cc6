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
        with suppress(ConnectionError, asyncio.CancelledError, asyncio.IncompleteReadError):
            while await _models_probe(reader, writer):  # GET /models: "not found", like many
                pass
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


async def _models_probe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
    """Answer a ``GET`` (the model's ``/models`` probe) with 404; ``False`` at the first POST,
    whose head is then kept for :func:`read_request`."""
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"GET "):
        reader.kode_head = head  # type: ignore[attr-defined]
        return False
    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
    await writer.drain()
    return True


async def read_request(reader: asyncio.StreamReader) -> None:
    head = getattr(reader, "kode_head", None) or await reader.readuntil(b"\r\n\r\n")
    reader.kode_head = None  # type: ignore[attr-defined]
    length = next(
        (int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")),
        0,
    )  # fmt: skip
    await reader.readexactly(length)


SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chunked(data: bytes) -> bytes:
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def then_silence(sent: bytes = b"") -> Handler:
    """Read the request, send ``sent`` (nothing, a head, a head and a chunk), then say nothing."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if sent:
            writer.write(sent)
            await writer.drain()
        await asyncio.sleep(30)

    return handler


def model(url: str) -> OpenAIChatModel:
    return OpenAIChatModel("m", base_url=url, api_key_env=None, retry_base_delay=0.05)


def request(**settings: float | int | None) -> ModelRequest:
    return ModelRequest(
        system="", messages=(UserMessage(content="hi"),), settings=ModelSettings(**settings)
    )


async def test_a_server_that_never_answers_fails_after_first_byte_timeout_without_retry() -> None:
    async with serve(then_silence()) as (url, connections):
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
    async with serve(then_silence(SSE_HEAD + chunked(chunk))) as (url, _):
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
    assert took < 2.5  # 1 s, plus the server's identification and a loaded machine
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


# ------------------------------------------------------------------ keep-alives are not progress


def comments_forever(first: bytes = b"", every: float = 0.05) -> Handler:
    """Headers, then ``first`` (data events), then ``: keep-alive`` comments forever."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD + (chunked(first) if first else b""))
        await writer.drain()
        while True:
            writer.write(chunked(b": keep-alive\n\n") + chunked(b": ping\n"))
            await writer.drain()
            await asyncio.sleep(every)

    return handler


async def test_only_comments_do_not_start_the_answer_first_byte_timeout_fires() -> None:
    async with serve(comments_forever()) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(ModelConnectionError) as caught:
            await collect(model(url).stream(request(first_byte_timeout=0.5)))
        took = time.monotonic() - t0
    assert 0.45 < took < 3
    assert "no answer started (only" in str(caught.value)
    assert "keep-alive comment line(s)) " in str(caught.value)
    assert "(first_byte_timeout, attempt 1)" in str(caught.value)


async def test_headers_then_nothing_first_byte_timeout_fires() -> None:
    async with serve(then_silence(SSE_HEAD)) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(ModelConnectionError, match=r"no answer started from .* within 0\.5 s"):
            await collect(model(url).stream(request(first_byte_timeout=0.5)))
        assert time.monotonic() - t0 < 3


async def test_chunks_then_comments_idle_timeout_fires() -> None:
    first = payload("openai_text.txt").split(b"\n\n")[0] + b"\n\n"
    async with serve(comments_forever(first)) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(ModelProtocolError) as caught:
            await collect(model(url).stream(request(timeout=0.5)))
        took = time.monotonic() - t0
    assert 0.45 < took < 3
    assert "stalled: nothing, only" in str(caught.value)
    assert "keep-alive comment(s), arrived for 0.5 s after 1 event(s)" in str(caught.value)


async def test_comments_do_not_hold_off_the_deadline() -> None:
    async with serve(comments_forever()) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(ModelConnectionError, match=r"\(deadline, attempt 1\)"):
            await collect(model(url).stream(request(first_byte_timeout=20, deadline=0.5)))
        assert time.monotonic() - t0 < 3


async def test_a_stream_that_never_ends_hits_the_total_timeout() -> None:
    chunk = payload("openai_text.txt").split(b"\n\n")[1] + b"\n\n"

    async def endless(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD)
        while True:  # real data, each within the idle timeout: only the total limit stops it
            writer.write(chunked(chunk))
            await writer.drain()
            await asyncio.sleep(0.05)

    async with serve(endless) as (url, _):
        t0 = time.monotonic()
        with pytest.raises(ModelConnectionError, match=r"did not finish within 0\.8 s "
                           r"\(ModelSettings.total_timeout\)"):  # fmt: skip
            await collect(model(url).stream(request(total_timeout=0.8, timeout=0.5)))
        assert 0.75 < time.monotonic() - t0 < 3


# Every limit against every fake server it applies to: one limit tight, the others loose (20 s),
# so only the limit under test can end the call. "answer started" servers (chunks then comments)
# are past first_byte_timeout and the deadline (both bound the wait for the answer to start): there
# the idle timeout and the total limit must hold.
JSON_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
)


def headers_then(head: bytes, first: bytes = b"") -> Handler:
    """Headers (and ``first``), then nothing at all: the connection stays open."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(head + (chunked(first) if first else b""))
        await writer.drain()
        await asyncio.sleep(30)

    return handler


def first_event() -> bytes:
    return payload("openai_text.txt").split(b"\n\n")[0] + b"\n\n"


SERVERS: dict[str, Callable[[], Handler]] = {
    "only comments": lambda: comments_forever(),
    "headers then nothing": lambda: headers_then(SSE_HEAD),
    "chunks then comments": lambda: comments_forever(first_event()),
    "JSON headers then nothing": lambda: headers_then(JSON_HEAD),
    "part of a JSON body then nothing": lambda: headers_then(JSON_HEAD, b'{"choices": ['),
}
LOOSE = {"first_byte_timeout": 20.0, "timeout": 20.0, "deadline": 20.0, "total_timeout": 20.0}
MATRIX = [
    # (server, streamed, tight limit, error type, the message names)
    ("only comments", True, "first_byte_timeout", ModelConnectionError, "(first_byte_timeout,"),
    ("headers then nothing", True, "first_byte_timeout", ModelConnectionError, "(first_byte_timeout,"),
    ("chunks then comments", True, "timeout", ModelProtocolError, "(ModelSettings.timeout)"),
    ("only comments", True, "deadline", ModelConnectionError, "(deadline,"),
    ("headers then nothing", True, "deadline", ModelConnectionError, "(deadline,"),
    ("only comments", True, "total_timeout", ModelConnectionError, "total_timeout"),
    ("headers then nothing", True, "total_timeout", ModelConnectionError, "total_timeout"),
    ("chunks then comments", True, "total_timeout", ModelConnectionError, "total_timeout"),
    # a whole (non-streamed) answer: `timeout` is its first-response limit
    ("JSON headers then nothing", False, "timeout", ModelConnectionError, "(timeout,"),
    ("part of a JSON body then nothing", False, "timeout", ModelConnectionError, "(timeout,"),
    ("JSON headers then nothing", False, "deadline", ModelConnectionError, "(deadline,"),
    ("part of a JSON body then nothing", False, "deadline", ModelConnectionError, "(deadline,"),
    ("JSON headers then nothing", False, "total_timeout", ModelConnectionError, "total_timeout"),
    ("part of a JSON body then nothing", False, "total_timeout", ModelConnectionError, "total_timeout"),
]  # fmt: skip


@pytest.mark.parametrize(("server", "streamed", "limit", "error", "names"), MATRIX)
async def test_every_limit_fires_against_every_server_it_applies_to(
    server: str, streamed: bool, limit: str, error: type[Exception], names: str
) -> None:
    async with serve(SERVERS[server]()) as (url, connections):
        m = OpenAIChatModel("m", base_url=url, api_key_env=None, stream=streamed)
        t0 = time.monotonic()
        with pytest.raises(error) as caught:
            await collect(m.stream(request(**{**LOOSE, limit: 0.6})))
        took = time.monotonic() - t0
    assert 0.55 < took < 5, f"{server}: {limit} took {took:.2f} s"
    assert names in str(caught.value), caught.value
    assert len(connections) == 1  # an answer that did not come in time is not asked again


def test_a_model_call_has_a_total_timeout_by_default() -> None:
    assert ModelSettings().total_timeout == 600.0
    assert ModelSettings().describe()["total_timeout"] == 600.0


# ------------------------------------------------------------------ a long prompt is not a hang

DONE = b"data: [DONE]\n\n"


def late_answer(delay: float, progress: bool = False) -> Handler:
    """Answers after ``delay`` s; with ``progress``, llama-server's prompt_progress events meanwhile."""
    text = payload("openai_text.txt")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(SSE_HEAD)
        await writer.drain()
        t0 = time.monotonic()
        while time.monotonic() - t0 < delay:
            await asyncio.sleep(0.1)
            if progress:
                event = (b'data: {"choices":[],"object":"chat.completion.chunk","prompt_progress":'
                         b'{"total":4000,"cache":0,"processed":1000,"time_ms":100}}\n\n')  # fmt: skip
                writer.write(chunked(event))
                await writer.drain()
        writer.write(chunked(text))
        writer.write(b"0\r\n\r\n")
        await writer.drain()

    return handler


async def test_a_long_prompt_gets_more_time_to_start() -> None:
    long = ModelRequest(
        system="",
        messages=(UserMessage(content="word " * 2160),),  # ~2,700 tokens: 2,200 over the free 500
        settings=ModelSettings(first_byte_timeout=0.3),
    )
    async with serve(late_answer(0.9)) as (url, _):
        m = model(url)  # generic: read at >= 20 tokens/s, so 110 s more
        response = await collect(m.stream(long))
        assert response.text
        with pytest.raises(ModelConnectionError, match="first_byte_timeout"):
            await collect(m.stream(request(first_byte_timeout=0.3)))  # a short prompt does not


async def test_llama_server_progress_events_keep_a_long_read_alive() -> None:
    async with serve(late_answer(1.2, progress=True)) as (url, _):
        m = OpenAIChatModel("m", base_url=url, api_key_env=None, profile="llama-server")
        req = request(first_byte_timeout=0.4, timeout=0.4)
        assert m.request_body(req)["return_progress"] is True
        response = await collect(m.stream(req))
    assert response.text


# ------------------------------------------------------------------ one client per model


def answers_forever() -> Handler:
    text = payload("openai_text.txt")

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         + f"content-length: {len(text)}\r\n\r\n".encode() + text)  # fmt: skip
            await writer.drain()

    return handler


async def test_a_model_reuses_one_connection_and_aclose_closes_it() -> None:
    async with serve(answers_forever()) as (url, connections):
        m = model(url)
        for _ in range(3):
            assert (await collect(m.stream(request()))).text
        assert len(connections) == 1  # the probe and three calls on one kept-alive connection
        client = m._own
        assert client is not None
        await m.aclose()
        assert client.is_closed
        assert (await collect(m.stream(request()))).text  # a new client after closing
        assert len(connections) == 2
        assert m._own is not client


def test_close_from_sync_code_after_the_loop_ended() -> None:
    async def use() -> OpenAIChatModel:
        async with serve(answers_forever()) as (url, _):
            m = model(url)
            await collect(m.stream(request()))
            return m

    m = asyncio.run(use())
    assert m._own is not None
    assert m._own.is_closed  # closed as asyncio.run shut the loop down
    m.close()  # its loop is gone: nothing to do, and no error
    assert m._own is None


async def test_unloading_the_extension_closes_the_models_clients(kode_ip: object) -> None:
    async with serve(answers_forever()) as (url, _):
        m = model(url)
        assert (await collect(m.stream(request()))).text
        client = m._own
        assert client is not None
        assert not client.is_closed
        kode_ip.run_line_magic("unload_ext", "kode_nb")  # type: ignore[attr-defined]
        for _ in range(50):  # scheduled on this (running) loop
            if client.is_closed:
                break
            await asyncio.sleep(0.02)
        assert client.is_closed
        assert m._own is None
