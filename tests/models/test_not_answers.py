"""What a small model writes that is neither a call to an offered tool nor an answer, as met on
the wire through the frameworks' own tool schemas (Qwen2.5-Coder-0.5B on llama-server; payloads
``llamaserver_recorded_*``, docs/model-servers.md): a call named by its schema's title, calls to
tools not offered, the tools' description, an argument copied from its own description, a result
fed back into the tool that gave it, an answer that restates the calls without their results,
and calls written on and on after the first."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.models import ModelRequest, ModelSettings, OpenAIChatModel, ToolSpec, UserMessage
from kode_nb.models import collect as collect_response
from kode_nb.models.openai_compat import ANSWER_NUDGE

from ._mock import MockServer, sse
from .test_server_quirks import text_stream

pytestmark = pytest.mark.anyio

SDK_ADD = ToolSpec(
    name="add",
    description="Add two integers exactly.",
    parameters={"properties": {"a": {"description": "The first integer.", "title": "A", "type": "integer"},
                               "b": {"description": "The second integer.", "title": "B", "type": "integer"}},
                "required": ["a", "b"], "title": "add_args", "type": "object",
                "additionalProperties": False},
)  # fmt: skip
"""``add`` as the OpenAI Agents SDK's ``function_tool`` offers it (recorded): its parameters
titled ``add_args``."""
CALCULATOR = ToolSpec(
    name="calculator",
    description="Answers an arithmetic question asked in words, exactly.",
    parameters={"additionalProperties": False, "properties": {"task": {
        "description": "The whole question, in words.", "type": "string"}},
        "required": ["task"], "type": "object"},
)  # fmt: skip
"""A subagent as pydantic-ai offers it (recorded): no titles."""
WEATHER = ToolSpec(
    name="get_weather",
    description="Get the current weather in a city.",
    parameters={"additionalProperties": False, "properties": {"city": {
        "description": "The city name, e.g. Paris.", "type": "string"}},
        "required": ["city"], "type": "object"},
)  # fmt: skip


def model(client: httpx.AsyncClient, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("max_tool_rounds", 4)
    return OpenAIChatModel("qwen2.5-coder-0.5b", base_url="http://127.0.0.1:9/v1",
                           http_client=client, api_key_env=None, profile="llama-server", **kw)  # fmt: skip


def request(question: str, *tools: ToolSpec, system: str = "") -> ModelRequest:
    return ModelRequest(system=system, messages=(UserMessage(content=question),), tools=tools,
                        settings=ModelSettings())  # fmt: skip


def notices(result: Any) -> list[str]:
    return [n for s in result.trace.spans() if s.kind == "model_call"
            for n in s.attributes.get("notices") or ()]  # fmt: skip


async def test_a_call_named_by_its_schemas_title_is_a_call_to_that_tool() -> None:
    """The SDK's helper agent wrote ``add_args`` (its parameters' title) for ``add``: before,
    that text was the helper's answer and ``add`` never ran."""
    server = MockServer(sse("llamaserver_recorded_schema_title.txt"))
    async with server.client() as client:
        got = await collect_response(model(client).stream(request("30517 + 66284", SDK_ADD)))
    [call] = got.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("add", {"a": 30517, "b": 66284})
    assert got.text == ""
    assert any("add_args -> add" in n for n in got.notices)


async def test_calls_only_to_tools_not_offered_are_asked_for_again_naming_the_tools() -> None:
    """Recorded: the SDK's agent answered a call to ``get_weather_args`` (a title, here of no
    offered tool). Not an answer: asked once more, told which tools there are."""
    unknown = '{"name": "get_weather_args", "arguments": {"city": "Paris"}}'
    server = MockServer(
        text_stream(unknown),
        text_stream('{"name": "calculator", "arguments": {"task": "48213 + 91877"}}'),
    )
    question = "What is 48213 + 91877? Use the calculator tool."
    async with server.client() as client:
        got = await collect_response(model(client).stream(request(question, CALCULATOR, WEATHER)))
    [call] = got.tool_calls
    assert call.name == "calculator"
    nudge = server.body(1)["messages"][-1]
    assert nudge["role"] == "user"
    assert "There is no tool called get_weather_args." in nudge["content"]
    assert "The tools you can call are: calculator, get_weather." in nudge["content"]
    assert server.body(1)["messages"][:-1] == server.body(0)["messages"]
    assert any("called only tools that are not offered (get_weather_args)" in n
               for n in got.notices)  # fmt: skip


async def test_the_tools_description_as_a_first_answer_is_asked_for_again() -> None:
    echo = '<tools> {"type": "function", "function": {"name": "add", "parameters": {}}} </tools>'
    server = MockServer(text_stream(echo), text_stream("The sum is 140090."))
    async with server.client() as client:
        got = await collect_response(model(client).stream(request("48213 + 91877?", SDK_ADD)))
    assert got.text == "The sum is 140090."
    assert "The tools you can call are: add." in server.body(1)["messages"][-1]["content"]
    assert any("repeated the tools' description" in n for n in got.notices)


async def test_plain_words_stream_as_they_come_and_stand() -> None:
    server = MockServer(text_stream("It is ", "140090."))
    async with server.client() as client:
        got = await collect_response(model(client).stream(request("48213 + 91877?", SDK_ADD)))
    assert got.text == "It is 140090."
    assert len(server.requests) == 1


async def test_an_argument_copied_from_its_description_is_asked_for_again() -> None:
    """Recorded: pydantic-ai's agent called the subagent with ``task`` = the parameter's own
    description; the subagent then added two numbers it made up. The call does not fit: it is
    asked for again with the tool forced (llama-server: a response_format schema)."""
    refit = '{"name": "calculator", "arguments": {"task": "What is 55120 + 38967?"}}'
    server = MockServer(sse("llamaserver_recorded_described_value.txt"), text_stream(refit))
    question = "What is 55120 + 38967? Use the calculator tool."
    async with server.client() as client:
        got = await collect_response(model(client).stream(request(question, CALCULATOR, WEATHER)))
    [call] = got.tool_calls
    assert json.loads(call.arguments) == {"task": "What is 55120 + 38967?"}
    assert server.body(1)["tool_choice"] == "none"
    assert "response_format" in server.body(1)
    assert any("the value of 'task' is its description in the schema, copied" in n
               for n in got.notices)  # fmt: skip


@pytest.fixture
def ran(registry: ToolRegistry) -> list[tuple[str, Any]]:
    calls: list[tuple[str, Any]] = []

    def add(a: int, b: int) -> str:
        """Add two integers exactly."""
        calls.append(("add", (a, b)))
        return f"{a} + {b} = {a + b}"

    def calculator(task: str) -> str:
        """Answers an arithmetic question asked in words, exactly."""
        calls.append(("calculator", task))
        return "The sum of 48213 and 91877 is 140090."

    define_tool(add, inline=True)
    define_tool(calculator, inline=True)
    return calls


@pytest.mark.parametrize(
    ("question", "first", "again"),
    [
        # recorded (SDK): the subagent's answer fed back to it
        ("What is 48213 + 91877? Use the calculator tool.",
         '{"name": "calculator", "arguments": {"task": "48213 + 91877"}}',
         '{"name": "calculator", "arguments": {"task": "140090"}}'),
        # recorded (pydantic-ai's subagent): the sum added to a number already added
        ("71409 + 12836",
         '{"name": "add", "arguments": {"a": 71409, "b": 12836}}',
         '{"name": "add", "arguments": {"a": 84245, "b": 12836}}'),
    ],
)  # fmt: skip
async def test_a_result_fed_back_into_its_tool_is_not_made(
    ran: list[tuple[str, Any]], question: str, first: str, again: str
) -> None:
    server = MockServer(text_stream(first), text_stream(again), text_stream("It is the sum."))
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add", "calculator"]).run(question)
    assert result.status == "completed", result.error
    assert len(ran) == 1  # the first call only
    assert "tools" not in server.body(2)
    assert server.body(2)["messages"][-1] == {"role": "user", "content": ANSWER_NUDGE}
    assert any("(its values come from the results and the earlier calls: fed back)" in n
               for n in notices(result))  # fmt: skip


async def test_a_next_step_with_a_value_of_the_questions_own_is_made(
    ran: list[tuple[str, Any]],
) -> None:
    """The same tool again is a step of its own when the question gives it a new value."""
    server = MockServer(
        text_stream('{"name": "add", "arguments": {"a": 71409, "b": 12836}}'),
        text_stream('{"name": "add", "arguments": {"a": 84245, "b": 2718}}'),
        text_stream("86963"),
    )
    async with server.client() as client:
        agent = Agent(model=model(client), tools=["add"])
        result = await agent.run("Add 71409 and 12836, then add 2718 to the sum.")
    assert [c for _, c in ran] == [(71409, 12836), (84245, 2718)]
    assert result.output == "86963"


async def test_an_answer_that_restates_the_call_without_its_result_is_asked_for_again(
    ran: list[tuple[str, Any]],
) -> None:
    """Recorded: the subagent's answer after add's result named the numbers it added, not the
    sum; the calling agent then had no sum to give."""
    server = MockServer(
        text_stream('{"name": "add", "arguments": {"a": 48213, "b": 91877}}'),
        sse("llamaserver_recorded_left_out.txt"),
        text_stream("The sum of 48213 and 91877 is 140090."),
    )
    async with server.client() as client:
        result = await Agent(model=model(client), tools=["add"]).run("48213 + 91877")
    assert result.output == "The sum of 48213 and 91877 is 140090."
    assert "tools" not in server.body(2)
    assert any("restated the calls without their results (none of 140090)" in n
               for n in notices(result))  # fmt: skip


async def test_calls_written_on_after_the_first_are_not_read() -> None:
    """Recorded (trimmed in the middle): after the first call the model wrote calls until the
    server's context was full, minutes on a CPU, and the stream ended with the server's error
    event (read to its end, the request fails). On a server that keeps one call per answer, the
    answer is read no further than the first call and the connection is closed (after at most
    half a second's drain), so the server stops writing."""
    server = MockServer(sse("llamaserver_recorded_runaway_trimmed.txt"))
    question = "What is 55120 + 38967? Use the calculator tool."
    async with server.client() as client:
        got = await collect_response(model(client).stream(request(question, CALCULATOR, WEATHER)))
    [call] = got.tool_calls
    assert (call.name, json.loads(call.arguments)) == ("calculator", {"task": "55120 + 38967"})
    assert any("read no further than its first call" in n for n in got.notices)
