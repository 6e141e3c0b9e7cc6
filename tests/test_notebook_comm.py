"""The kernel side of the ``kode_nb.notebook`` comm (``kode_nb/ui/notebook_comm.py``) against a
recording comm object (the comm is kode_nb's own boundary; ``tests/kernel/test_kernel_notebook_comm.py``
drives the same protocol through a real kernel)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kode_nb import define_tool
from kode_nb.builtins.notebook import LINK
from kode_nb.tools import ToolRegistry
from kode_nb.ui.notebook_comm import RATE, NotebookChannel

pytestmark = pytest.mark.anyio


class RecordingComm:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.handler: Any = None
        self.closed = False

    def send(self, data: dict[str, Any]) -> None:
        self.sent.append(data)

    def on_msg(self, handler: Any) -> None:
        self.handler = handler

    def on_close(self, handler: Any) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def receive(self, data: dict[str, Any]) -> None:
        self.handler({"content": {"data": data}})

    def ops(self) -> list[str]:
        return [m["op"] for m in self.sent]


def add(a: int, b: int) -> int:
    """Add.

    Args:
        a: First.
        b: Second.
    """
    return a + b


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def channel(kode_ip: Any, registry: ToolRegistry) -> Any:
    define_tool(add, registry=registry)
    comm = RecordingComm()
    magics = kode_ip.magics_manager.registry["KodeMagics"]
    channel = NotebookChannel(comm, magics, [])
    yield channel, comm
    channel.close()
    assert LINK.front_end is None


async def test_open_sends_the_snapshot_and_changes_are_coalesced(
    channel: Any, registry: ToolRegistry
) -> None:
    ch, comm = channel
    assert comm.ops() == ["tools"]
    assert comm.sent[0]["tools"][0]["required"] == ["a", "b"]
    assert LINK.front_end is ch
    for i in range(200):  # 200 registrations in one go: one message
        registry.register(define_tool(add, registry=None, name=f"add_{i}"))
    await asyncio.sleep(0.05)
    assert comm.ops() == ["tools", "tools_changed"]
    assert len(comm.sent[-1]["tools"]) == 201
    registry.unregister("add_0")
    await asyncio.sleep(0.05)  # within 1/RATE of the last message: not yet
    assert comm.ops().count("tools_changed") == 1
    await asyncio.sleep(1 / RATE)
    assert comm.ops().count("tools_changed") == 2
    assert len(comm.sent[-1]["tools"]) == 200


async def test_cards_unknown_ops_and_replies(channel: Any) -> None:
    ch, comm = channel
    comm.receive({"op": "card", "name": "add"})
    assert comm.sent[-1]["card"]["name"] == "add"
    comm.receive({"op": "card", "name": "nope"})
    assert comm.sent[-1] == {"op": "card", "name": "nope", "error": "no tool 'nope'"}
    comm.receive({"op": "frobnicate"})
    assert comm.sent[-1] == {"op": "error", "error": "unknown op 'frobnicate'"}

    task = asyncio.ensure_future(ch.request("list_cells", {"start": 0}, 5))
    await asyncio.sleep(0)
    request = comm.sent[-1]
    assert (request["op"], request["start"]) == ("list_cells", 0)
    comm.receive({"op": "reply", "request_id": "unknown", "ok": True, "result": 1})  # ignored
    comm.receive({"op": "reply", "request_id": request["request_id"], "ok": True, "result": [1]})
    assert await task == [1]

    task = asyncio.ensure_future(ch.request("run_cell", {"index": 9}, 5))
    await asyncio.sleep(0)
    comm.receive({"op": "reply", "request_id": comm.sent[-1]["request_id"], "error": "no cell 9"})
    with pytest.raises(RuntimeError, match="no cell 9"):
        await task
    with pytest.raises(TimeoutError):
        await ch.request("list_cells", {}, 0.05)


async def test_closing_fails_pending_requests_and_unlinks(channel: Any) -> None:
    ch, comm = channel
    task = asyncio.ensure_future(ch.request("list_cells", {}, 5))
    await asyncio.sleep(0)
    ch.close()
    with pytest.raises(RuntimeError, match="disconnected"):
        await task
    assert comm.closed
    assert LINK.front_end is None
    with pytest.raises(RuntimeError, match="disconnected"):
        await ch.request("list_cells", {}, 5)
