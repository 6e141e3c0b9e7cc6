"""Helpers for the MCP tests: the test servers (real MCP servers, run as subprocesses) and polling.

The servers live in ``tests/mcp/servers/``: ``toolbox.py`` and ``changing.py`` (a server whose
tool list changes; both written with the SDK's MCPServer, stdio or HTTP) and ``kode_stdio.py``
(kode_nb tools served with ``serve_stdio``), and ``hostile.py`` (false annotations, huge results,
malformed tool definitions).

This directory has neither ``__init__.py`` (a test package named ``mcp`` would shadow the SDK)
nor ``conftest.py`` (a second module named ``conftest`` would shadow ``tests/conftest.py`` for
``from conftest import ...``); test modules import this module instead. Importing it skips
the importing test module when the MCP SDK is not installed.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp.client  # noqa: F401  (a dependency of kode_nb: missing, these tests fail, never skip)
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

SERVERS = Path(__file__).parent / "servers"
TOOLBOX = str(SERVERS / "toolbox.py")
KODE_STDIO = str(SERVERS / "kode_stdio.py")
CHANGING = str(SERVERS / "changing.py")
HOSTILE = str(SERVERS / "hostile.py")


@asynccontextmanager
async def sdk_client(
    url: str, headers: dict[str, str] | None = None
) -> AsyncIterator[ClientSession]:
    """The MCP SDK's own client session on a streamable HTTP server, initialized."""
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def toolbox_command(record: Path | None = None, name: str = "toolbox") -> list[str]:
    """The command line of the toolbox server over stdio."""
    command = [sys.executable, TOOLBOX, "--name", name]
    if record is not None:
        command += ["--record", str(record)]
    return command


class HttpServer:
    """A test server process (default: the toolbox) serving streamable HTTP on 127.0.0.1;
    ``args`` are more of its command line arguments."""

    def __init__(
        self,
        record: Path | None = None,
        port: int = 0,
        script: str = TOOLBOX,
        args: Sequence[str] = (),
    ) -> None:
        command = [sys.executable, script, "--http", "--port", str(port), *args]
        if record is not None:
            command += ["--record", str(record)]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.kill()
            raise RuntimeError(f"the HTTP test server did not start (said {line!r})")
        self.port = int(line.split()[1])
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(10)
        if self.process.stdout is not None:
            self.process.stdout.close()


def read_record(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


async def wait_for(
    check: Callable[[], Any], *, timeout: float = 60.0, what: str = "the condition"
) -> Any:
    """Poll ``check()`` until it returns something truthy (the server writes asynchronously)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.02)
