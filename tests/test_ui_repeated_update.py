"""A streaming tool whose last update is also its result (a generator's last item) shows it
once, as the result: in the live view, its HTML snapshot and its saved record."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kode_nb import Executor, ToolRegistry, ToolResult, define_tool
from kode_nb.ui.call_view import CallView
from kode_nb.ui.stream import StreamView

pytestmark = pytest.mark.anyio


async def progress(steps: int) -> AsyncIterator[str]:
    """Report progress, then the answer (the last item is the result)."""
    for i in range(1, steps):
        yield f"step {i} of {steps}\n"
        await asyncio.sleep(0)
    yield "All 3 cells counted."


async def _run(steps: int) -> tuple[CallView, ToolResult]:
    registry = ToolRegistry()
    define_tool(progress, registry=registry)
    view = CallView(tool="progress", call_id="c1", rate=1000.0)
    result = await Executor(registry).call("progress", {"steps": steps}, on_update=view.on_update)
    assert result.text == "All 3 cells counted."
    view.finish(result)
    return view, result


async def test_the_last_update_repeated_as_the_result_is_shown_once() -> None:
    view, _ = await _run(3)
    assert view.text == "step 1 of 3\nstep 2 of 3\n"
    assert view.updates == 3
    html = view._repr_mimebundle_()["text/html"]
    assert html.count("All 3 cells counted.") == 1
    record = view.record().data
    assert record["updates"]["text"] == "step 1 of 3\nstep 2 of 3\n"
    assert record["result"]["text"] == "All 3 cells counted."


async def test_a_single_update_that_is_the_result_leaves_no_stream_shown() -> None:
    view, _ = await _run(1)
    assert view.text == ""
    assert view.stream not in view.children
    assert view._repr_mimebundle_()["text/html"].count("All 3 cells counted.") == 1


async def test_only_a_last_update_equal_to_a_successful_result_goes() -> None:
    view = CallView(tool="t", call_id="c", rate=1000.0)
    for piece in ("a", "b", "c"):
        view.on_update(piece)
    view.finish(ToolResult.from_text("c", tool="t"))  # the last update is the result
    assert view.text == "ab"
    view = CallView(tool="t", call_id="c", rate=1000.0)
    for piece in ("ab", "c"):
        view.on_update(piece)
    view.finish(ToolResult.from_text("abc", tool="t"))
    assert view.text == "abc"
    view = CallView(tool="t", call_id="c", rate=1000.0)
    view.on_update("boom")
    view.finish(ToolResult.error("boom", tool="t"))
    assert view.text == "boom"


def test_drop_tail_sends_the_text_left() -> None:
    stream = StreamView()
    sent: list[Any] = []
    stream.send = sent.append
    stream.append("ab")
    stream.append("cd")
    assert not stream.drop_tail("x")
    assert not stream.drop_tail("")
    assert stream.drop_tail("cd")
    assert stream.text == "ab"
    assert sent[-1] == {"reset": "ab"}
    stream._on_front_end_msg(stream, {"event": "replay"}, [])
    assert sent[-1] == {"reset": "ab"}
    assert stream.drop_tail("ab")
    assert stream.text == ""
    n = len(sent)
    stream._on_front_end_msg(stream, {"event": "replay"}, [])
    assert len(sent) == n  # nothing to replay
