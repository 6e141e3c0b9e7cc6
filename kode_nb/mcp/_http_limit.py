"""The size limit on what a streamable HTTP MCP server sends (see :mod:`kode_nb.mcp.client`).

A server answers a request with an SSE stream or a JSON body. The SDK limits each SSE event
(``max_sse_event_size``: given ``max_result_bytes``) but reads a JSON body whole, so
:func:`limit_json_bodies` is an httpx response hook that stops reading a JSON body at the limit
(the SDK then fails that request alone with a parse error carrying :func:`too_large_message`).
:func:`is_too_large` recognises both failures.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable

import httpx2

from kode_nb.mcp._stdio import too_large_message

__all__ = ["is_too_large", "limit_json_bodies"]

_SSE_LIMIT = (
    "exceeded the"  # the SDK: "SSE stream failed: Server-sent event exceeded the N byte limit."
)


class _Capped(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream, limit: int) -> None:
        self._inner = inner
        self._limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                raise httpx2.StreamError(too_large_message(seen, self._limit))
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


def limit_json_bodies(limit: int) -> Callable[[httpx2.Response], Awaitable[None]]:
    """A response hook: a JSON body is read up to ``limit`` bytes, then fails."""

    async def hook(response: httpx2.Response) -> None:
        kind = response.headers.get("content-type", "").lower()
        if kind.startswith("application/json") and isinstance(
            response.stream, httpx2.AsyncByteStream
        ):
            response.stream = _Capped(response.stream, limit)

    return hook


def is_too_large(message: str) -> bool:
    """Whether an SDK error message says a response went over the size limit."""
    return "the result is too large" in message or (
        "Server-sent event" in message and _SSE_LIMIT in message and "byte limit" in message
    )
