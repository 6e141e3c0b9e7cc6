"""Several rounds of calls on small models: after tool results the tools are offered again (so a
run can make the next call it needs), and loops are kept out by the repeated-call rule, a budget
of rounds, and echoes (the tools' description too) asked about (docs/model-servers.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.errors import ConfigurationError
from kode_nb.models import OpenAIChatModel
from kode_nb.models.openai_compat import ANSWER_NUDGE, NEXT_NUDGE

from ._mock import MockServer
from .test_server_quirks import text_stream

pytestmark = pytest.mark.anyio


@pytest.fixture
def ran(registry: ToolRegistry) -> list[tuple[str, int, int]]:
    calls: list[tuple[str, int, int]] = []

    def add(a: int, b: int) -> str:
        """Add two integers exactly."""
        calls.append(("add", a, b))
        return f"{a} + {b} = {a + b}"

    def multiply(a: int, b: int) -> str:
        """Multiply two integers exactly."""
        calls.append(("multiply", a, b))
        return f"{a} * {b} = {a * b}"

    define_tool(add, inline=True)
    define_tool(multiply, inline=True)
    return calls


def call(name: str, a: int, b: int) -> str:
    return json.dumps({"name": name, "arguments": {"a": a, "b": b}})


def model(client: Any, **options: Any) -> OpenAIChatModel:
    """A llama-server model offering several rounds of calls (``max_tool_rounds`` 4 unless
    given: the default, 1, asks for the answer after the first round)."""
    options.setdefault("max_tool_rounds", 4)
    return OpenAIChatModel("qwen", base_url="http://127.0.0.1:9/v1", http_client=client,
                           api_key_env=None, profile="llama-server", **options)  # fmt: skip


def notices(result: Any) -> list[str]:
    return [n for s in result.trace.spans() if s.kind == "model_call"
            for n in s.attributes.get("notices") or ()]  # fmt: skip


QUESTION = "Add 48213 and 91877, then multiply the sum by 3."


async def test_a_chain_makes_its_second_call_with_the_first_calls_result(
    ran: list[tuple[str, int, int]],
) -> None:
    server = MockServer(
        text_stream(call("add", 48213, 91877)),
        text_stream(call("multiply", 140090, 3)),
        text_stream("The result is 420270."),
    )
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add", "multiply"]).run(QUESTION)
    assert result.status == "completed", result.error
    assert ran == [("add", 48213, 91877), ("multiply", 140090, 3)]
    assert result.output == "The result is 420270."
    for n in (1, 2):  # offered the tools again after each result, asked for the next step
        assert [t["function"]["name"] for t in server.body(n)["tools"]] == ["add", "multiply"]
        assert server.body(n)["messages"][-1] == {"role": "user", "content": NEXT_NUDGE}
    calls = [m for m in server.body(2)["messages"] if m.get("tool_calls")]
    assert [c["tool_calls"][0]["id"] for c in calls] == ["text_call_1", "text_call_2"]  # unique


async def test_a_repeated_call_is_not_made_again_and_the_answer_is_asked_for(
    ran: list[tuple[str, int, int]],
) -> None:
    server = MockServer(
        text_stream(call("add", 48213, 91877)),
        text_stream(call("add", 48213, 91877)),  # the same call again, as small models do
        text_stream("It is 140090."),
    )
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add", "multiply"]).run(QUESTION)
    assert result.status == "completed", result.error
    assert ran == [("add", 48213, 91877)]  # made once
    assert result.output == "It is 140090."
    assert "tools" not in server.body(2)
    assert server.body(2)["messages"][-1] == {"role": "user", "content": ANSWER_NUDGE}
    [note] = [n for n in notices(result) if "again with the same arguments" in n]
    assert 'add({"a": 48213, "b": 91877})' in note
    assert len([s for s in result.trace.spans() if s.kind == "model_call"]) == 2  # one turn


async def test_a_repeat_beside_a_new_call_is_dropped_and_the_new_one_made(
    ran: list[tuple[str, int, int]],
) -> None:
    both = call("add", 48213, 91877) + "\n" + call("multiply", 140090, 3)
    server = MockServer(
        text_stream(call("add", 48213, 91877)), text_stream(both), text_stream("420270")
    )
    async with server.client() as client:
        m = model(client, parallel_tool_calls=True)
        result = await Agent(model=m, tools=["add", "multiply"]).run(QUESTION)
    assert result.status == "completed", result.error
    assert ran == [("add", 48213, 91877), ("multiply", 140090, 3)]
    assert any(
        "dropped the call(s) add" in n and "again with the same arguments (answered above)" in n
        for n in notices(result)
    )


async def test_the_rounds_budget_asks_for_the_answer_without_tools(
    ran: list[tuple[str, int, int]],
) -> None:
    server = MockServer(
        text_stream(call("add", 48213, 91877)),
        text_stream(call("multiply", 140090, 3)),
        text_stream("Done: 420270."),
    )
    async with server.client() as client:
        m = model(client, max_tool_rounds=2)
        result = await Agent(model=m, tools=["add", "multiply"]).run(QUESTION)
    assert result.status == "completed", result.error
    assert ran == [("add", 48213, 91877), ("multiply", 140090, 3)]
    assert "tools" not in server.body(2)
    assert server.body(2)["messages"][-1]["content"] == ANSWER_NUDGE
    assert any("2 rounds of calls (max_tool_rounds=2)" in n for n in notices(result))
    assert m.describe()["max_tool_rounds"] == 2


@pytest.mark.parametrize(
    "made_up",
    [
        '{"name": "get_weather", "arguments": {"city": "Paris"}}',  # an example value
        call("add", 140090, 1),  # a number from nowhere
    ],
)
async def test_a_call_with_made_up_values_after_results_is_not_made(
    ran: list[tuple[str, int, int]], made_up: str
) -> None:
    def get_weather(city: str) -> str:
        """Weather in a city."""
        ran.append(("get_weather", 0, 0))
        return "foggy"

    define_tool(get_weather, inline=True)
    server = MockServer(
        text_stream(call("add", 48213, 91877)), text_stream(made_up), text_stream("It is 140090.")
    )
    async with server.client() as client:
        agent = Agent(model=model(client), tools=["add", "get_weather"])
        result = await agent.run("What is 48213 + 91877? Use the add tool.")
    assert result.output == "It is 140090."
    assert ran == [("add", 48213, 91877)]
    assert "tools" not in server.body(2)
    assert any("(made up)" in n for n in notices(result))


@pytest.mark.parametrize(
    "echo",
    [
        '<tools> {"type": "function", "function": {"name": "add", "parameters": {}}} </tools>',
        'Here: {"type": "function", "function": {"name": "add", "description": "Add", '
        '"parameters": {"type": "object"}}}',
    ],
)
async def test_an_answer_that_is_the_tools_description_is_asked_for_again(
    ran: list[tuple[str, int, int]], echo: str
) -> None:
    server = MockServer(
        text_stream(call("add", 48213, 91877)), text_stream(echo), text_stream("140090")
    )
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"]).run("What is 48213 + 91877?")
    assert result.output == "140090"
    assert "tools" not in server.body(2)
    assert any("repeated the tools' description" in n for n in notices(result))


async def test_a_native_caller_is_left_alone(ran: list[tuple[str, int, int]]) -> None:
    """A model whose calls arrive as tool_calls keeps the server's own behaviour: no nudge."""
    from .test_server_quirks import tool_call_stream

    server = MockServer(tool_call_stream('{"a": 1, "b": 2}'), text_stream("3"))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"]).run("1 + 2?")
    assert result.output == "3"
    assert server.body(1)["messages"][-1]["role"] == "tool"


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "3"])
def test_max_tool_rounds_must_be_a_positive_integer(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_tool_rounds must be a positive integer"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", max_tool_rounds=bad)


async def test_of_several_calls_written_the_one_kept_is_to_an_offered_tool(
    ran: list[tuple[str, int, int]],
) -> None:
    """A small model copies a schema's title (``add_args``) as a tool's name beside the real
    call: where one call per answer is kept, it is the one to an offered tool."""
    both = '{"name": "add_args", "arguments": {"a": 1, "b": 2}}\n' + call("add", 48213, 91877)
    server = MockServer(text_stream(both), text_stream("It is 140090."))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"]).run("What is 48213 + 91877?")
    assert ran == [("add", 48213, 91877)]
    assert result.output == "It is 140090."
