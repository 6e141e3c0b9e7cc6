"""The live run view of a model that writes its tool call as text (llama-server with a small
model): the turn shows the recovered call, never the raw text it was read from."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.execution import Executor
from kode_nb.models import OpenAIChatModel
from kode_nb.ui.agent_view import RunView
from tests.models._mock import MockServer, sse
from tests.models.test_server_quirks import text_stream

pytestmark = pytest.mark.anyio


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def _run_on_llama_server(prompt: str, *replies: Any) -> tuple[RunView, Any]:
    """Run an agent with ``add`` on an OpenAI-compatible model (the llama-server profile)
    served ``replies``, with a live run view fed its events."""
    registry = ToolRegistry()
    define_tool(add, registry=registry)
    view = RunView(
        agent="main", run_id="run_1", kinds=lambda n: "other",
        register=lambda cid, row: None, unregister=lambda cid: None, rate=1000.0,
    )  # fmt: skip
    async with MockServer(*replies).client() as client:
        model = OpenAIChatModel(
            "m", base_url="http://127.0.0.1:9/v1", http_client=client, api_key_env=None,
            profile="llama-server",
        )  # fmt: skip
        agent = Agent("main", model=model, tools=["add"], executor=Executor(registry))
        result = await agent.run(prompt, run_id="run_1", on_event=view.on_event)
    view.finish(result)
    return view, result


def _text_then_call(request: httpx.Request) -> httpx.Response:
    """Text, then a call the server returns as a call."""
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Adding."}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]  # fmt: skip
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


async def test_a_call_written_as_text_shows_as_its_call_not_its_text() -> None:
    view, result = await _run_on_llama_server(
        "What is 48213 + 91877?",
        sse("llamaserver_recorded_text_call.txt"),
        text_stream("The sum is ", "140090."),
    )
    assert result.output == "The sum is 140090."
    html = view.html()
    assert '"name"' not in html.split("<details", 1)[0]  # the raw text call is not shown
    assert "```" not in view.text
    assert "The model wrote its tool call as text; read as the call below." in html
    turn_1 = html.split("Turn 1", 1)[1].split("Turn 2", 1)[0]
    assert turn_1.index("read as the call below") < turn_1.index("add")
    row = next(iter(view.rows.values()))
    assert row.tool == "add"
    assert row.arguments == {"a": 48213, "b": 91877}
    assert view.text == "The sum is 140090."
    await asyncio.sleep(0)


async def test_streamed_text_before_a_real_call_stays() -> None:
    """Text the model wrote before a call the server returned as a call is its own text."""
    view, _ = await _run_on_llama_server("1 + 2?", _text_then_call, text_stream("3."))
    assert view.text == "Adding.3."
    assert "read as the call below" not in view.html()
    await asyncio.sleep(0)
