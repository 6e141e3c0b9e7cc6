"""The exact boundary of ``Agent.max_result_chars``: a result of exactly that many characters
reaches the model whole; one more character and it is cut to exactly that many, with a note."""

from __future__ import annotations

import pytest

from kode_nb import Agent, ToolRegistry, define_tool
from kode_nb.errors import ConfigurationError
from kode_nb.execution import Executor
from kode_nb.models import ScriptedModel, ToolResultMessage, call
from kode_nb.types import TextBlock

pytestmark = pytest.mark.anyio

LIMIT = 120


def text(n: int) -> str:
    """Return n characters."""
    return "".join("0123456789"[i % 10] for i in range(n))


async def _sent(n: int, limit: int = LIMIT) -> tuple[str, dict[str, object]]:
    """What the model got back for a result of ``n`` characters, and the call's span attributes."""
    registry = ToolRegistry()
    define_tool(text, registry=registry)
    model = ScriptedModel([call("text", n=n), "ok"])
    agent = Agent(model=model, tools=["text"], executor=Executor(registry), max_result_chars=limit)
    result = await agent.run("go")
    message = model.requests[1].messages[-1]
    assert isinstance(message, ToolResultMessage)
    (block,) = message.content
    assert isinstance(block, TextBlock)
    (span,) = result.trace.root.find("tool_call")
    return block.text, span.attributes


@pytest.mark.parametrize("n", [LIMIT - 1, LIMIT])
async def test_up_to_the_limit_the_result_is_sent_whole(n: int) -> None:
    sent, attributes = await _sent(n)
    assert sent == text(n)
    assert "model_text" not in attributes
    assert "cut_chars" not in attributes


@pytest.mark.parametrize("over", [1, 2])
async def test_past_the_limit_exactly_the_limit_is_sent_with_a_note(over: int) -> None:
    n = LIMIT + over
    sent, attributes = await _sent(n)
    kept, note = sent.split("\n", 1)
    assert kept == text(n)[:LIMIT]
    assert note == (
        f"[Output cut: the tool returned {n:,} characters; these are the first {LIMIT:,}. "
        "Ask for less (a smaller range, a filter, a summary) to see the rest.]"
    )
    assert attributes["model_text"] == sent
    assert attributes["cut_chars"] == over
    assert attributes["result"]["text"] == text(n)  # type: ignore[index]


def test_the_smallest_limit_is_100() -> None:
    assert Agent(model="test", max_result_chars=100).max_result_chars == 100
    with pytest.raises(ConfigurationError, match="max_result_chars must be an int >= 100"):
        Agent(model="test", max_result_chars=99)
