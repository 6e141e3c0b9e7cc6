"""What an agent does with real servers' habits: tool_choice, doubtful answers, unknown usage, a
server that behaves like llama-cpp-python's (replaying its wire payloads), and the offline
TestModel following the prompt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest
from agent_helpers import LaxModel

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.errors import ConfigurationError
from kode_nb.models import OpenAIChatModel, ScriptedModel, TestModel, call, resolve_model

pytestmark = pytest.mark.anyio

PAYLOADS = Path(__file__).parents[1] / "models" / "payloads"


@pytest.fixture
def tools(registry: ToolRegistry) -> ToolRegistry:
    def get_weather(city: str) -> str:
        """Weather for a city."""
        return f"18 C and sunny in {city}"

    def get_time(tz: str) -> str:
        """Time in a zone."""
        return f"12:00 in {tz}"

    def summarize_sales(region: Literal["north", "south", "east", "west"], year: int) -> str:
        """Sales of one region in one year."""
        return f"{region} {year}: up 4%"

    for fn in (get_weather, get_time, summarize_sales):
        define_tool(fn, inline=True)
    return registry


@pytest.mark.parametrize(
    ("answer", "warning"),
    [
        ("", "the model's final answer is empty"),
        ('{"name": "get_weather", "arguments": {"city": "Paris"}}', "call to 'get_weather'"),
        ('```json\n{"name": "get_tide", "parameters": {}}\n```', "'get_tide' (no such tool)"),
        ('<tool_call>\n{"name": "get_weather", "arguments": {}}\n</tool_call>', "get_weather"),
        ('functions.get_weather: {"city": "Paris"}', "'functions.get_weather:'"),
    ],
)
async def test_doubtful_final_answers_get_a_warning(
    tools: ToolRegistry, answer: str, warning: str
) -> None:
    agent = Agent(model=ScriptedModel([answer]), tools=["get_weather"])
    result = await agent.run("Weather in Paris?")
    assert result.status == "completed"
    assert len(result.warnings) == 1
    assert warning in result.warnings[0]
    assert result.trace.root.attributes["warnings"] == list(result.warnings)
    events = [e["name"] for s in result.trace.spans() for e in s.events]
    assert "answer_warning" in events


async def test_a_plain_answer_and_json_data_get_no_warning(tools: ToolRegistry) -> None:
    for answer in ("It is sunny.", '{"city": "Paris", "temp": 18}'):
        result = await Agent(model=ScriptedModel([answer]), tools=["get_weather"]).run("x")
        assert result.warnings == ()
        assert result.trace.root.attributes["warnings"] == []


async def test_reask_asks_once_more_and_keeps_the_warning(tools: ToolRegistry) -> None:
    model = ScriptedModel(
        [
            '{"name": "get_weather", "arguments": {"city": "Paris"}}',
            call("get_weather", city="Paris"),
            "It is 18 C and sunny.",
        ]
    )
    result = await Agent(model=model, tools=["get_weather"], reask=True).run("Weather?")
    assert result.output == "It is 18 C and sunny."
    assert len(result.warnings) == 1
    reask = model.requests[1].messages[-1]
    assert "not usable" in reask.content  # type: ignore[union-attr]
    assert "through the tools interface" in reask.content  # type: ignore[union-attr]


async def test_reask_happens_only_once(tools: ToolRegistry) -> None:
    model = ScriptedModel(["", ""])
    result = await Agent(model=model, tools=["get_weather"], reask=True).run("Weather?")
    assert result.status == "completed"
    assert result.output == ""
    assert len(result.warnings) == 2
    assert len(model.requests) == 2


async def test_a_forced_tool_choice_holds_for_the_first_call_only(tools: ToolRegistry) -> None:
    model = LaxModel([[("get_weather", {"city": "Oslo"})], "Cold."])
    agent = Agent(model=model, tools=["get_weather", "get_time"], tool_choice="get_weather")
    result = await agent.run("Weather in Oslo?")
    assert result.ok
    assert [r.settings.tool_choice for r in model.requests] == ["get_weather", "auto"]
    assert result.trace.root.attributes["settings"]["tool_choice"] == "get_weather"
    assert "tool_choice='get_weather'" in repr(agent)


async def test_tool_choice_none_holds_for_every_call(tools: ToolRegistry) -> None:
    model = LaxModel([[("get_weather", {"city": "Oslo"})], "Cold."])
    await Agent(model=model, tools=["get_weather"], tool_choice="none").run("x")
    assert [r.settings.tool_choice for r in model.requests] == ["none", "none"]


def test_a_tool_choice_outside_the_tools_is_a_clear_error(tools: ToolRegistry) -> None:
    with pytest.raises(ConfigurationError, match="'get_tide' is not one of its tools"):
        Agent(model="test", tools=["get_weather"], tool_choice="get_tide")


async def test_the_test_model_follows_the_prompt(tools: ToolRegistry) -> None:
    agent = Agent(model=TestModel(), tools=["summarize_sales"])
    result = await agent.run("How did the north region do in 2024?")
    calls = [c for m in result.messages for c in getattr(m, "tool_calls", ())]
    assert [json.loads(c.arguments) for c in calls] == [{"region": "north", "year": 2024}]
    again = await agent.run("How did the north region do in 2024?")
    assert again.output == result.output  # still deterministic


async def test_test_model_quoted_strings_and_fallbacks(tools: ToolRegistry) -> None:
    agent = Agent(model=TestModel(), tools=["get_weather", "summarize_sales"])
    result = await agent.run('Weather in "Reykjavik" and sales in 1999 for the west?')
    calls = {
        c.name: json.loads(c.arguments)
        for m in result.messages
        for c in getattr(m, "tool_calls", ())
    }
    assert calls["get_weather"] == {"city": "Reykjavik"}
    assert calls["summarize_sales"] == {"region": "west", "year": 1999}


# --------------------------------------------------------------------------- llama-cpp-python


class LlamaCppPythonDouble:
    """Answers like llama-cpp-python 0.3.x's server with chatml-function-calling, from recorded
    payloads: tools without tool_choice are dropped, stream + "auto" gets an empty 200, a null
    content gets HTTP 500, no usage in streams, ``GET /models`` lists models ``owned_by: "me"``,
    and ``tool`` messages never reach the model (its chatml-function-calling template renders
    them as an empty turn), so a model that saw no result calls the tool again. Under
    ``tool_choice: "none"`` with the tools described in the system prompt and a
    ``response_format`` schema (the profile's strategy for several tools) the model writes its
    call as the schema's JSON."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.listed = 0

    def handler(self, request: httpx.Request) -> httpx.Response:
        if request.method == "GET" and request.url.path.endswith("/models"):
            self.listed += 1
            return _reply("llamacpppython_recorded_models.json", 200, "application/json")
        body = json.loads(request.content)
        self.bodies.append(body)
        seen = [m for m in body["messages"] if m["role"] != "tool"]  # what the template keeps
        result = any(
            m["role"] == "user" and "Result of get_weather" in str(m["content"]) for m in seen[-2:]
        )
        if result and body.get("tool_choice", "none") == "none":  # answered whole
            return _reply("llamacpppython_answer.json", 200, "application/json")
        constrained = (body.get("response_format") or {}).get("schema")
        if body.get("tool_choice") == "none" and constrained and "# Tools" in seen[0]["content"]:
            call = (
                '{"name": "get_weather", "arguments": {"city": "Paris"}}'  # as the grammar has it
            )
            return httpx.Response(200, json={
                "object": "chat.completion", "model": "gemma.gguf",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": call}}],
                "usage": {"prompt_tokens": 214, "completion_tokens": 20, "total_tokens": 234},
            })  # fmt: skip
        if any(m.get("content") is None for m in body["messages"]):
            return _reply("llamacpppython_500.json", 500, "application/json")
        if body.get("tools") and body.get("tool_choice") == "auto":
            if body.get("stream"):
                return _reply("llamacpppython_stream_tools_empty.txt", 200, "text/event-stream")
            if result:
                return _reply("llamacpppython_answer.json", 200, "application/json")
            return _reply("llamacpppython_tool_call.json", 200, "application/json")
        if body.get("stream"):
            return _reply("llamacpppython_text_stream.txt", 200, "text/event-stream")
        return _reply("llamacpppython_answer.json", 200, "application/json")


def _reply(name: str, status: int, kind: str) -> httpx.Response:
    return httpx.Response(
        status, content=(PAYLOADS / name).read_bytes(), headers={"content-type": kind}
    )


async def test_defaults_work_against_a_llama_cpp_python_server(tools: ToolRegistry) -> None:
    double = LlamaCppPythonDouble()
    async with httpx.AsyncClient(transport=httpx.MockTransport(double.handler)) as client:
        model = resolve_model(
            "openai-compatible:http://127.0.0.1:8000/v1#gemma.gguf", http_client=client
        )
        agent = Agent(model=model, tools=["get_weather", "get_time"])
        result = await agent.run("Weather in Paris?")
        second = await agent.run("And now?")
    assert result.status == "completed", result.error
    assert result.output == "It is 18 degrees and sunny in Paris."
    tool_spans = [s for s in result.trace.spans() if s.kind == "tool_call"]
    assert [s.name for s in tool_spans] == ["execute_tool get_weather"]
    assert double.listed == 1  # asked once what the server is, before the first request
    assert result.trace.root.attributes["settings"]["profile"] == "llama-cpp-python"
    assert result.trace.root.attributes["settings"]["tool_strategy"] == "named-then-none"
    # known before the first request: "auto" (its failing decision step) is never sent; two
    # tools: described in the system prompt under "none", the call read from the text, then the
    # answer asked for without tools
    assert [(b["stream"], b.get("tool_choice")) for b in double.bodies[:2]] == [
        (True, "none"), (True, None)
    ]  # fmt: skip
    assert "- get_weather: " in double.bodies[0]["messages"][0]["content"]
    assert "anyOf" in double.bodies[0]["response_format"]["schema"]
    assistant = [m for m in double.bodies[1]["messages"] if m["role"] == "assistant"]
    assert assistant[0]["content"] == ""
    assert assistant[0]["tool_calls"][0]["function"]["name"] == "get_weather"
    last = double.bodies[1]["messages"][-2]
    assert last["role"] == "user"  # not "tool": this server's template would drop it
    assert last["content"].startswith("Result of get_weather (call ")
    assert "18 C and sunny in Paris" in last["content"]
    assert repr(model).count("profile='llama-cpp-python'") == 1
    calls = [s for s in result.trace.spans() if s.kind == "model_call"]
    notices = " ".join(calls[0].attributes["notices"])
    assert "tool strategy named-then-none: 2 tools, so none can be forced by name" in notices
    assert "answer-after-text-calls" in " ".join(calls[1].attributes["notices"])
    assert result.usage.input_tokens == 214 + 251
    assert second.ok
    assert double.bodies[2].get("tool_choice") == "none"  # never "auto"


async def test_unknown_usage_stays_unknown_in_the_result(tools: ToolRegistry) -> None:
    double = LlamaCppPythonDouble()
    async with httpx.AsyncClient(transport=httpx.MockTransport(double.handler)) as client:
        model = OpenAIChatModel("gemma.gguf", base_url="http://127.0.0.1:8000/v1", api_key_env=None, http_client=client)  # fmt: skip
        result = await Agent(model=model).run("Capital of France?")
    assert result.output == "Paris."
    assert result.usage.input_tokens is None
    assert result.usage.output_tokens is None
    assert result.usage.requests == 1
    assert result.total_usage.input_tokens is None
    model_span = next(s for s in result.trace.spans() if s.kind == "model_call")
    assert model_span.attributes["usage"] == {"input_tokens": None, "output_tokens": None}


async def test_a_model_error_names_the_model_once(tools: ToolRegistry) -> None:
    def always_500(request: httpx.Request) -> httpx.Response:
        return _reply("llamacpppython_500.json", 500, "application/json")

    async with httpx.AsyncClient(transport=httpx.MockTransport(always_500)) as client:
        model = OpenAIChatModel(
            "m", base_url="http://127.0.0.1:8000/v1", api_key_env=None, http_client=client,
            retry_base_delay=0.0,
        )  # fmt: skip
        result = await Agent(model=model).run("x")
    assert result.status == "error"
    assert result.error is not None
    assert result.error.count(model.name) == 1
    assert "(after 4 attempts)" in result.error
