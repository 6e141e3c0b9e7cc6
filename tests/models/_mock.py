"""A tiny fake provider: an ``httpx.MockTransport`` serving recorded payloads, recording requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Union

import httpx

PAYLOADS = Path(__file__).parent / "payloads"

Reply = Union[httpx.Response, Callable[[httpx.Request], httpx.Response], Exception]


def payload(name: str) -> bytes:
    return (PAYLOADS / name).read_bytes()


def sse(name: str, status: int = 200, **headers: str) -> httpx.Response:
    """A streaming reply with a recorded SSE payload."""
    return httpx.Response(
        status, content=payload(name), headers={"content-type": "text/event-stream", **headers}
    )


def error(name: str, status: int, **headers: str) -> httpx.Response:
    """An error reply with a recorded JSON body (header names: ``retry_after`` -> retry-after)."""
    hdrs = {k.replace("_", "-"): v for k, v in headers.items()}
    return httpx.Response(
        status, content=payload(name), headers={"content-type": "application/json", **hdrs}
    )


class _CutStream(httpx.AsyncByteStream):
    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data
        raise httpx.ReadError("peer closed connection without sending complete message body")


def dropped(name: str, events: int) -> httpx.Response:
    """A reply whose connection drops halfway through event ``events + 1`` of a payload."""
    blocks = payload(name).split(b"\n\n")
    data = (
        b"".join(b + b"\n\n" for b in blocks[:events]) + blocks[events][: len(blocks[events]) // 2]
    )
    return httpx.Response(200, stream=_CutStream(data))


class MockServer:
    """Serves ``replies`` in order (an exception is raised as a transport error).

    The ``GET /models`` a model sends to identify the server is answered 404 and not recorded,
    unless ``probes=True``: then it is served from ``replies`` like any request."""

    def __init__(self, *replies: Reply, probes: bool = False) -> None:
        self.replies = list(replies)
        self.requests: list[httpx.Request] = []
        self.probes = probes

    def handler(self, request: httpx.Request) -> httpx.Response:
        if not self.probes and request.method == "GET" and request.url.path.endswith("/models"):
            return httpx.Response(404, json={"error": "not found"})
        self.requests.append(request)
        if not self.replies:
            raise AssertionError(f"unexpected request #{len(self.requests)} to {request.url}")
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        if callable(reply) and not isinstance(reply, httpx.Response):
            return reply(request)
        return reply

    def client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(self.handler))

    def body(self, n: int = -1) -> Any:
        return json.loads(self.requests[n].content)


async def drain(stream: AsyncIterator[Any], into: list[Any]) -> None:
    """Consume ``stream`` into ``into`` (what arrived before an error stays there)."""
    async for item in stream:
        into.append(item)
