"""ScriptedModel: turns played in order, checked against the request's tools."""

from __future__ import annotations

import json
from typing import Any

import pytest

import kode_nb
from kode_nb.models import (
    Finish,
    ModelRequest,
    ScriptedCall,
    ScriptedModel,
    ScriptExhausted,
    ScriptMismatch,
    TextChunk,
    ToolCallPart,
    ToolSpec,
    Turn,
    UserMessage,
    call,
    collect,
    raw_call,
)
from kode_nb.models.base import Model, ModelEvent
from kode_nb.tools import ToolRegistry

pytestmark = pytest.mark.anyio


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _specs(registry: ToolRegistry) -> tuple[ToolSpec, ...]:
    kode_nb.define_tool(add, registry=registry)
    raw = ToolSpec(
        name="search",
        description="Search.",
        parameters={
            "type": "object",
            "properties": {"query": {"type": "string", "minLength": 2}},
            "required": ["query"],
        },
    )
    return (ToolSpec.from_tool(registry.list()[0]), raw)


def request(tools: tuple[ToolSpec, ...] = (), text: str = "Add 1 and 2") -> ModelRequest:
    return ModelRequest(system="", messages=(UserMessage(content=text),), tools=tools)


async def events(model: ScriptedModel, req: ModelRequest) -> list[ModelEvent]:
    return [e async for e in model.stream(req)]


async def test_plays_each_turn_in_order(registry: ToolRegistry) -> None:
    tools = _specs(registry)
    model = ScriptedModel(
        [
            call("add", a=1, b=2),
            [call("add", a=3, b=4), call("search", query="primes")],
            Turn(calls=[call("add", a=5, b=6)], text="Once more."),
            "The sum is 3.",
        ]
    )
    assert isinstance(model, Model)
    first = await events(model, request(tools))
    assert first[0] == ToolCallPart(id="scripted-1-1", name="add", arguments='{"a": 1, "b": 2}')
    assert first[-1] == Finish(stop_reason="tool_calls")

    second = await collect(model.stream(request(tools)))
    assert [(c.id, c.name, json.loads(c.arguments)) for c in second.tool_calls] == [
        ("scripted-2-1", "add", {"a": 3, "b": 4}),
        ("scripted-2-2", "search", {"query": "primes"}),
    ]

    third = await events(model, request(tools))
    assert [type(e).__name__ for e in third] == [
        "TextChunk",
        "TextChunk",
        "ToolCallPart",
        "UsageInfo",
        "Finish",
    ]

    final = await events(model, request(tools))
    deltas = [e.text for e in final if isinstance(e, TextChunk)]
    assert deltas == ["The ", "sum ", "is ", "3."]  # word pieces, for live views
    assert final[-1] == Finish(stop_reason="end_turn")
    assert model.turns_played == 4
    assert model.remaining == 0
    assert len(model.requests) == 4


async def test_exhausted_script_says_how_many_turns() -> None:
    model = ScriptedModel(["one", "two"])
    await events(model, request())
    await events(model, request())
    with pytest.raises(ScriptExhausted, match=r"has 2 turn\(s\) and turn 3 was requested") as info:
        await events(model, request())
    assert (info.value.turns, info.value.requested) == (2, 3)
    model.reset()
    assert (await collect(model.stream(request()))).text == "one"


async def test_call_to_a_tool_not_offered(registry: ToolRegistry) -> None:
    tools = _specs(registry)
    model = ScriptedModel(["fine", call("ADD", a=1, b=2)])
    await events(model, request(tools))
    with pytest.raises(ScriptMismatch) as info:
        await events(model, request(tools))
    message = str(info.value)
    assert "turn 2" in message
    assert "'ADD'" in message
    assert "did you mean 'add'?" in message
    assert "offered: 'add', 'search'" in message
    assert (info.value.tool, info.value.turn) == ("ADD", 2)


async def test_arguments_that_do_not_validate(registry: ToolRegistry) -> None:
    tools = _specs(registry)
    model = ScriptedModel([call("add", a="one", b=2)])
    with pytest.raises(ScriptMismatch, match=r"turn 1: call to 'add'.*`a`"):
        await events(model, request(tools))
    # a raw-schema tool (no validator on the spec) is checked against its JSON Schema
    model = ScriptedModel([call("search", query="x")])
    with pytest.raises(ScriptMismatch, match="`query`"):
        await events(model, request(tools))
    model = ScriptedModel([call("search")])
    with pytest.raises(ScriptMismatch, match="`query`: required field is missing"):
        await events(model, request(tools))


async def test_raw_call_sends_invalid_arguments_on_purpose(registry: ToolRegistry) -> None:
    tools = _specs(registry)
    model = ScriptedModel([raw_call("add", '{"a": 1, "b": '), ScriptedCall(name="add", id="mine")])
    (part,) = [e for e in await events(model, request(tools)) if isinstance(e, ToolCallPart)]
    assert part.arguments == '{"a": 1, "b": '
    with pytest.raises(ScriptMismatch, match="`a`: required field is missing"):
        await events(model, request(tools))


async def test_a_turn_can_be_decided_from_the_request() -> None:
    def answer(req: ModelRequest) -> Any:
        last = req.messages[-1]
        assert isinstance(last, UserMessage)
        return f"You said: {last.content}"

    model = ScriptedModel([answer])
    assert (await collect(model.stream(request(text="hello")))).text == "You said: hello"

    model = ScriptedModel([lambda req: 42])
    with pytest.raises(TypeError, match="turn 1: expected a str"):
        await events(model, request())


@pytest.mark.parametrize(
    ("script", "match"),
    [
        ("just a string", "takes a list of turns"),
        ([42], "turn 1: expected a str"),
        (["ok", []], "turn 2: expected"),
        ([Turn(calls=["add"])], "Turn.calls must hold call"),  # type: ignore[list-item]
    ],
)
def test_malformed_scripts_fail_at_construction(script: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        ScriptedModel(script)


async def test_usage_is_deterministic() -> None:
    model = ScriptedModel(["three word answer", "three word answer"])
    a = await collect(model.stream(request(text="one two")))
    b = await collect(model.stream(request(text="one two")))
    assert a.usage == b.usage
    assert (a.usage.input_tokens, a.usage.output_tokens) == (2, 3)
