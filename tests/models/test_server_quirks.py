"""What the adapter does with each quirk of real local servers: calls written as text, tool_choice
forms a server ignores, wrong model ids, cut-off and empty answers, one identification per base
URL, one HTTP client per model. Payloads named ``*_recorded_*`` were recorded from the real server
(llama.cpp llama-server --jinja with Qwen2.5-Coder-0.5B-Instruct, docs/model-servers.md)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from kode_nb.models import (
    ModelNotFoundError,
    ModelRequest,
    ModelSettings,
    OpenAIChatModel,
    TextCallsRecovered,
    ToolCallRequest,
    ToolSpec,
    UserMessage,
    collect,
)
from kode_nb.models._servers import forget_servers, known_server
from kode_nb.models.openai_compat import ANSWER_NUDGE

from ._mock import MockServer, payload, sse

pytestmark = pytest.mark.anyio

ADD = ToolSpec(
    name="add",
    description="Add two integers.",
    parameters={"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]},
)  # fmt: skip
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def request(*tools: ToolSpec, **settings: Any) -> ModelRequest:
    return ModelRequest(
        system="",
        messages=(UserMessage(content="What is 48213 + 91877?"),),
        tools=tools or (ADD, WEATHER),
        settings=ModelSettings(**settings),
    )


def text_stream(*pieces: str, finish: str = "stop") -> httpx.Response:
    """An SSE answer whose content arrives in ``pieces``."""
    events = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]}]
    events += [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in pieces]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


def tool_call_stream(arguments: str, name: str = "add") -> httpx.Response:
    """An SSE answer holding one native call (``tool_calls``) to ``name``."""
    call = {"index": 0, "id": "call_1", "type": "function",
            "function": {"name": name, "arguments": arguments}}  # fmt: skip
    events = [
        {"choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [call]}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]},
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return httpx.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})


def models_listing(*ids: str, owner: str = "llamacpp") -> httpx.Response:
    return httpx.Response(
        200, json={"object": "list", "data": [{"id": i, "object": "model", "owned_by": owner} for i in ids]}
    )  # fmt: skip


def model(client: httpx.AsyncClient, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("api_key_env", None)
    kw.setdefault("retry_base_delay", 0.0)
    return OpenAIChatModel(kw.pop("id", "m"), base_url="http://127.0.0.1:9/v1", http_client=client, **kw)  # fmt: skip


def after_result(call: Any) -> ModelRequest:
    """The request after ``call`` (to add) got its result, 140090."""
    from kode_nb.models import AssistantMessage, ToolResultMessage
    from kode_nb.types import TextBlock

    return ModelRequest(system="", tools=(ADD, WEATHER), messages=(
        UserMessage(content="What is 48213 + 91877?"),
        AssistantMessage(tool_calls=(ToolCallRequest(id=call.id, name="add", arguments=call.arguments),)),
        ToolResultMessage(call_id=call.id, name="add", content=(TextBlock(text="140090"),)),
    ))  # fmt: skip


# ------------------------------------------------------------------ calls written as text


async def test_recorded_llama_server_json_call_in_content_becomes_a_call() -> None:
    server = MockServer(sse("llamaserver_recorded_text_call.txt"))
    async with server.client() as client:
        events = [e async for e in model(client, profile="llama-server").stream(request())]
    response = await collect(_replay(events))
    assert response.text == ""
    assert response.stop_reason == "tool_calls"
    [call] = response.tool_calls
    assert call.name == "add"
    assert json.loads(call.arguments) == {"a": 48213, "b": 91877}
    recovered = [e for e in events if isinstance(e, TextCallsRecovered)]
    assert len(recovered) == 1
    assert '"name": "add"' in recovered[0].text
    assert response.recovered_text == recovered[0].text
    assert any("recovered from the answer text" in n for n in response.notices)


async def test_several_fenced_calls_become_several_calls() -> None:
    server = MockServer(text_stream(
        "```json\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2}}\n```\n",
        "```json\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n```",
    ))  # fmt: skip
    async with server.client() as client:
        response = await collect(model(client).stream(request()))
    assert [c.name for c in response.tool_calls] == ["add", "get_weather"]
    assert len({c.id for c in response.tool_calls}) == 2


async def test_an_answer_cut_at_the_length_limit_keeps_its_distinct_complete_calls() -> None:
    call = '{"name": "add", "arguments": {"a": 48213, "b": 91877}}\n'
    server = MockServer(text_stream(*[call] * 6, '{"name": "add", "argu', finish="length"))
    async with server.client() as client:  # every call kept: the whole answer is read
        m = model(client, profile="llama-server", parallel_tool_calls=True)
        response = await collect(m.stream(request()))
    assert response.text == ""
    assert response.stop_reason == "tool_calls"
    [recovered] = response.tool_calls
    assert json.loads(recovered.arguments) == {"a": 48213, "b": 91877}
    [notice] = [n for n in response.notices if "recovered from the answer text" in n]
    assert "cut at the length limit: its incomplete last call dropped" in notice
    assert "5 identical repeat(s) dropped" in notice


async def test_a_call_missing_its_last_brace_is_repaired_and_said_so() -> None:
    server = MockServer(text_stream('{"name": "add", "arguments": {"a": 48213, "b": 91877}'))
    async with server.client() as client:
        response = await collect(model(client, profile="llama-server").stream(request()))
    [recovered] = response.tool_calls
    assert json.loads(recovered.arguments) == {"a": 48213, "b": 91877}
    assert any("missing closing brackets added" in n for n in response.notices)


async def test_a_call_written_with_pythons_quoting_is_read_and_said_so() -> None:
    """llama-cpp-python's own call syntax, HTML-escaped, its value single-quoted (recorded from
    Qwen2.5-Coder-0.5B in LangGraph with kode_nb's model)."""
    server = MockServer(text_stream("functions.get_weather:\n{&#34;city&#34;: 'Paris'}"))
    async with server.client() as client:
        response = await collect(model(client).stream(request()))
    [recovered] = response.tool_calls
    assert (recovered.name, json.loads(recovered.arguments)) == ("get_weather", {"city": "Paris"})
    [notice] = [n for n in response.notices if "recovered from the answer text" in n]
    assert "written HTML-escaped, read unescaped" in notice
    assert "written with Python's quotes or unquoted words, read as JSON" in notice


async def test_a_fragment_cut_at_the_length_limit_stays_text() -> None:
    answer = '{"name": "add", "arguments": {"a": 48213'
    server = MockServer(text_stream(answer, finish="length"))
    async with server.client() as client:
        response = await collect(model(client, profile="llama-server").stream(request()))
    assert response.text == answer
    assert response.tool_calls == ()


async def test_text_that_mentions_a_tool_stays_text() -> None:
    answer = 'I could use add: {"name": "add", "arguments": {"a": 1, "b": 2}} gives 3.'
    server = MockServer(text_stream(answer))
    async with server.client() as client:
        response = await collect(model(client).stream(request()))
    assert response.text == answer
    assert response.tool_calls == ()
    assert response.recovered_text is None


async def test_a_call_to_a_tool_not_offered_stays_text() -> None:
    """Never made; asked once more naming the tools offered, and the second answer stands."""
    answer = '{"name": "rm_rf", "arguments": {"path": "/"}}'
    server = MockServer(text_stream(answer), text_stream(answer))
    async with server.client() as client:
        response = await collect(model(client).stream(request()))
    assert response.text == answer
    assert response.tool_calls == ()
    assert "There is no tool called rm_rf." in server.body(1)["messages"][-1]["content"]


async def test_text_calls_false_turns_recovery_off() -> None:
    answer = '{"name": "add", "arguments": {"a": 1, "b": 2}}'
    server = MockServer(text_stream(answer), text_stream(answer))
    async with server.client() as client:
        off = await collect(model(client, text_calls=False).stream(request()))
        hosted = OpenAIChatModel("m", base_url="https://api.openai.com/v1", http_client=client,
                                 api_key="sk-test-123456")  # fmt: skip
        assert hosted.text_calls is False  # a profile without text calls
        assert hosted.describe()["text_calls"] is False
    assert off.text == answer
    assert off.tool_calls == ()


async def test_a_server_call_wins_over_text() -> None:
    server = MockServer(sse("llamaserver_tool_call.txt"))
    async with server.client() as client:
        response = await collect(model(client, profile="llama-server").stream(request(WEATHER)))
    assert [c.name for c in response.tool_calls] == ["get_weather"]
    assert response.recovered_text is None


async def test_an_empty_answer_names_the_server_limitation() -> None:
    server = MockServer(text_stream(), text_stream())
    async with server.client() as client:
        response = await collect(model(client, profile="llama-cpp-python", stream=False).stream(
            request(WEATHER)))  # fmt: skip
    assert response.text == ""
    assert any("returned neither text nor a tool call" in n and "'auto' step" in n
               for n in response.notices)  # fmt: skip


# ------------------------------------------------------------------ tool_choice each server honours


async def test_llama_server_gets_required_for_a_named_tool_choice_and_says_so() -> None:
    server = MockServer(sse("llamaserver_tool_call.txt"))
    async with server.client() as client:
        m = model(client, profile="llama-server")
        response = await collect(m.stream(request(tool_choice="get_weather")))
    assert server.body()["tool_choice"] == "required"
    assert any("'get_weather' is not supported by llama.cpp llama-server; sent 'required'" in n
               for n in response.notices)  # fmt: skip


async def test_an_unsupported_required_is_never_dropped() -> None:
    server = MockServer(text_stream("x"), text_stream("x"))
    async with server.client() as client:
        m = model(client, profile="llama-cpp-python", stream=False)
        one = await collect(m.stream(request(WEATHER, tool_choice="required")))
        two = await collect(m.stream(request(tool_choice="required")))
    assert server.body(0)["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    assert server.body(1)["tool_choice"] == "auto"  # several tools: the closest it honours
    assert "sent 'get_weather' instead" in one.notices[0]
    assert "sent 'auto' instead" in two.notices[0]


async def test_llama_cpp_python_strategy_forces_the_one_tool_then_none() -> None:
    from kode_nb.models import AssistantMessage, ToolResultMessage
    from kode_nb.types import TextBlock

    server = MockServer(text_stream("x"), text_stream("x"))
    after = ModelRequest(system="", tools=(WEATHER,), messages=(
        UserMessage(content="Weather in Paris?"),
        AssistantMessage(tool_calls=(ToolCallRequest(id="c1", name="get_weather",
                                                     arguments='{"city": "Paris"}'),)),
        ToolResultMessage(call_id="c1", name="get_weather", content=(TextBlock(text="18 C"),)),
    ))  # fmt: skip
    async with server.client() as client:
        m = model(client, profile="llama-cpp-python", stream=False)
        first = await collect(m.stream(request(WEATHER)))
        second = await collect(m.stream(after))
    assert server.body(0)["tool_choice"] == {
        "type": "function",
        "function": {"name": "get_weather"},
    }
    # after the results (max_tool_rounds 1, the default) the answer is asked for, no tools
    assert "tools" not in server.body(1)
    assert "tool_choice" not in server.body(1)
    assert server.body(1)["messages"][-1]["content"].startswith("Answer my question")
    assert "tool strategy named-then-none: forced 'get_weather'" in first.notices
    assert any("max_tool_rounds=1" in n for n in second.notices)
    assert m.describe()["tool_strategy"] == "named-then-none"


async def test_llama_cpp_python_strategy_prompts_for_several_tools_then_asks_for_the_answer() -> (
    None
):
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 48213, "b": 91877}}\n</tool_call>'
    server = MockServer(text_stream(call), text_stream("The sum is 140090."))
    async with server.client() as client:
        m = model(client, profile="llama-cpp-python", stream=False)
        first = await collect(m.stream(request()))
        [made] = first.tool_calls
        second = await collect(m.stream(after_result(made)))
    body = server.body(0)
    assert body["tool_choice"] == "none"  # its "auto" step is what small models fail
    system = body["messages"][0]
    assert system["role"] == "system"
    # in plain words: its template HTML-escapes quotes and angle brackets, which the model copies
    assert "- add: " in system["content"]
    assert "- get_weather: " in system["content"]
    assert not set(system["content"]) & set("\"'<>&")
    # ...and the answer constrained to one call of an offered tool, arguments that fit
    schema = body["response_format"]["schema"]
    assert body["response_format"]["type"] == "json_object"
    assert [c["properties"]["name"]["const"] for c in schema["anyOf"]] == ["add", "get_weather"]
    assert schema["anyOf"][0]["properties"]["arguments"]["required"] == ["a", "b"]
    assert json.loads(made.arguments) == {"a": 48213, "b": 91877}
    assert any("2 tools, so none can be forced by name" in n for n in first.notices)
    assert any("constrained (response_format schema)" in n for n in first.notices)
    assert any("recovered from the answer text" in n for n in first.notices)
    after_body = server.body(1)
    assert "tools" not in after_body  # then asked for the answer, as after any text calls
    assert "response_format" not in after_body
    assert after_body["messages"][-2]["content"].startswith("Result of add (call text_call_1):")
    assert after_body["messages"][-1] == {"role": "user", "content": ANSWER_NUDGE}
    assert second.text == "The sum is 140090."


async def test_the_prompted_strategy_needs_text_calls() -> None:
    server = MockServer(text_stream("x"))
    async with server.client() as client:
        m = model(client, profile="llama-cpp-python", stream=False, text_calls=False)
        response = await collect(m.stream(request()))
    assert server.body(0)["tool_choice"] == "auto"
    assert server.body(0)["messages"][0]["role"] == "user"  # no tools section added
    assert "tool strategy named-then-none: 'auto' (2 tools)" in response.notices


# ------------------------------------------------------------------ lengths


async def test_local_servers_get_a_default_max_tokens() -> None:
    server = MockServer(text_stream("x"), text_stream("x"))
    async with server.client() as client:
        await collect(model(client, profile="llama-server").stream(request()))
        await collect(model(client, profile="llama-server").stream(request(max_tokens=50)))
    assert server.body(0)["max_tokens"] == 2048
    assert server.body(1)["max_tokens"] == 50


async def test_recorded_length_cut_is_reported_as_max_tokens() -> None:
    server = MockServer(sse("llamaserver_recorded_length.txt"))
    async with server.client() as client:
        response = await collect(
            model(client, profile="llama-server").stream(request(max_tokens=8))
        )
    assert response.stop_reason == "max_tokens"


# ------------------------------------------------------------------ identification


async def test_the_server_is_identified_once_per_base_url_before_the_first_request() -> None:
    server = MockServer(models_listing("qwen"), text_stream("a"), text_stream("b"), probes=True)
    async with server.client() as client:
        first = model(client, id="qwen")
        await first.prepare()
        assert first.profile.name == "llama-server"  # known before any request
        second = model(client, id="qwen")
        await collect(first.stream(request()))
        await collect(second.stream(request()))
        assert second.profile.name == "llama-server"
        assert known_server("http://127.0.0.1:9/v1", client) is not None
    assert [(r.method, r.url.path) for r in server.requests] == [
        ("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("POST", "/v1/chat/completions")
    ]  # fmt: skip


async def test_a_model_id_the_server_does_not_list_is_an_error_naming_the_ids() -> None:
    server = MockServer(httpx.Response(200, content=payload("llamaserver_recorded_models.json")),
                        probes=True)  # fmt: skip
    async with server.client() as client:
        with pytest.raises(ModelNotFoundError) as caught:
            await collect(model(client, id="gpt-4o").stream(request()))
    assert "does not serve the model 'gpt-4o'; it lists: 'qwen2.5-coder-0.5b'" in str(caught.value)
    assert [r.method for r in server.requests] == ["GET"]  # nothing was generated


async def test_hosted_providers_are_never_probed() -> None:
    server = MockServer(sse("openai_text.txt"), probes=True)
    async with server.client() as client:
        m = OpenAIChatModel("gpt-4.1-mini", http_client=client, api_key="sk-test-123456")
        await collect(m.stream(request()))
    assert [r.method for r in server.requests] == ["POST"]


def test_forget_servers_clears_the_cache() -> None:
    forget_servers()
    assert known_server("http://127.0.0.1:9/v1") is None


async def _replay(events: list[Any]) -> Any:
    for event in events:
        yield event


async def test_recorded_context_overflow_is_an_error_naming_it() -> None:
    from kode_nb.models import ModelHTTPError

    server = MockServer(httpx.Response(400, content=payload("llamaserver_recorded_context_400.json"),
                                       headers={"content-type": "application/json"}))  # fmt: skip
    async with server.client() as client:
        with pytest.raises(ModelHTTPError) as caught:
            await collect(model(client, profile="llama-server").stream(request()))
    assert caught.value.status == 400
    assert "exceeds the available context size (4096 tokens)" in str(caught.value)
    assert len(server.requests) == 1  # a 400 is not retried


async def test_recorded_progress_events_are_read_as_part_of_the_answer() -> None:
    server = MockServer(sse("llamaserver_recorded_length.txt"))
    async with server.client() as client:
        response = await collect(model(client, profile="llama-server").stream(request()))
    assert b"prompt_progress" in payload("llamaserver_recorded_length.txt")
    assert response.text  # the progress fields are skipped, the text kept
    assert response.usage.input_tokens is not None


async def test_a_model_that_wrote_calls_as_text_gets_no_tools_after_their_results() -> None:
    server = MockServer(sse("llamaserver_recorded_text_call.txt"), text_stream("140090"))
    async with server.client() as client:
        m = model(client, profile="llama-server", id="qwen2.5-coder-0.5b")
        first = await collect(m.stream(request()))
        [call] = first.tool_calls
        second = await collect(m.stream(after_result(call)))
    assert "tools" in server.body(0)
    assert "tools" not in server.body(1)
    assert "tool_choice" not in server.body(1)
    assert server.body(1)["messages"][-2]["role"] == "tool"
    assert server.body(1)["messages"][-1] == {"role": "user", "content": ANSWER_NUDGE}
    assert second.text == "140090"
    assert any("answer-after-text-calls" in n for n in second.notices)
