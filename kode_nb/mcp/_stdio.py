"""The stdio transport with a size limit on each message the server sends.

The SDK's ``stdio_client`` keeps any line the server writes, however long, and joins it chunk by
chunk (a 50 MB result took over a minute and 100 MB of memory). :func:`bounded_stdio_client` is
the same transport (it uses the SDK's own process start and stop) with a bounded line reader: a
line longer than ``limit`` bytes is not kept; it is skipped to its end and, when the request id
can be read from its first bytes, that request gets a JSON-RPC error :data:`TOO_LARGE` naming the
limit, so the call ends at once with a clear error.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TextIO

import anyio
import anyio.lowlevel
import mcp.client.stdio as sdk_stdio
import mcp_types as mt
from mcp.client.stdio import StdioServerParameters
from mcp.shared.message import SessionMessage

__all__ = ["TOO_LARGE", "bounded_stdio_client", "too_large_message"]

TOO_LARGE = -32099
"""The JSON-RPC error code of a message over the size limit (a server-error code)."""

_ID = re.compile(rb'"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')
_HEAD = 512


def too_large_message(size: int, limit: int) -> str:
    """The error text for a message of ``size`` bytes (at least) over ``limit``."""
    return (
        f"the result is too large: over {_mib(limit)} (max_result_bytes; at least "
        f"{_mib(size)} was sent), so it was not read"
    )


def _mib(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB"


def _refusal(head: bytes, size: int, limit: int) -> SessionMessage | Exception:
    """The error for the request an oversized message answered, if its id is in ``head``."""
    found = _ID.search(head)
    message = too_large_message(size, limit)
    if found is None:
        return ValueError(f"MCP server message dropped: {message}")
    request_id = json.loads(found.group(1))
    error = mt.JSONRPCError(
        jsonrpc="2.0", id=request_id, error=mt.ErrorData(code=TOO_LARGE, message=message)
    )
    return SessionMessage(error)


@asynccontextmanager
async def bounded_stdio_client(
    server: StdioServerParameters, errlog: TextIO, limit: int
) -> AsyncIterator[tuple[Any, Any]]:
    """Like the SDK's ``stdio_client``, with messages from the server limited to ``limit``
    bytes (see the module docstring)."""
    command = await sdk_stdio._get_executable_command(server.command)
    process = await sdk_stdio._create_platform_compatible_process(
        command=command,
        args=server.args,
        errlog=errlog,
        cwd=server.cwd,
        env=sdk_stdio.get_default_environment() | (server.env or {}),
    )
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    shutting_down = False
    writer_done = anyio.Event()
    encoding, errors = server.encoding, server.encoding_error_handler

    async def deliver(item: SessionMessage | Exception) -> bool:
        try:
            await read_writer.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False  # the session is gone
        return True

    async def stdout_reader() -> None:
        assert process.stdout is not None
        parts: list[bytes] = []
        size = 0
        head = b""
        dropping = False
        try:
            async with read_writer:
                try:
                    async for chunk in process.stdout:
                        start = 0
                        while True:
                            end = chunk.find(b"\n", start)
                            piece = chunk[start:] if end < 0 else chunk[start:end]
                            if len(head) < _HEAD:
                                head += piece[: _HEAD - len(head)]
                            size += len(piece)
                            if not dropping:
                                if size > limit:
                                    dropping = True
                                    parts.clear()
                                else:
                                    parts.append(piece)
                            if end < 0:
                                break
                            if dropping:
                                item = _refusal(head, size, limit)
                            else:
                                line = b"".join(parts).decode(encoding, errors)
                                item = sdk_stdio._parse_line(line)
                            if not await deliver(item):
                                return
                            parts, size, head, dropping = [], 0, b"", False
                            start = end + 1
                finally:
                    await sdk_stdio._drain_stdout(process)
        except anyio.ClosedResourceError:
            pass
        except (anyio.BrokenResourceError, ConnectionError):
            if not shutting_down:
                sdk_stdio.logger.exception("Reading from the MCP server's stdout failed")

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await process.stdin.send((text + "\n").encode(encoding, errors))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            await read_writer.aclose()
        finally:
            writer_done.set()

    async def shutdown() -> None:
        read_stream.close()
        write_stream.close()
        with anyio.move_on_after(sdk_stdio._WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        await sdk_stdio._stop_server_process(process)
        await sdk_stdio._aclose_all(read_stream, write_stream, read_writer, write_reader)
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stdin_writer)
        try:
            yield read_stream, write_stream
        finally:
            shutting_down = True
            with anyio.CancelScope(shield=True):
                await shutdown()
            tg.cancel_scope.cancel()
    await anyio.lowlevel.cancel_shielded_checkpoint()
