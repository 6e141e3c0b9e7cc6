"""Server profiles: detection, request shape per profile, and each documented quirk replayed from
wire payloads (docs/model-servers.md lists the quirks and their sources)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from kode_nb.errors import ConfigurationError
from kode_nb.models import (
    AssistantMessage,
    ModelHTTPError,
    ModelProtocolError,
    ModelRequest,
    ModelSettings,
    OpenAIChatModel,
    ToolCallRequest,
    ToolResultMessage,
    ToolSpec,
    UsageInfo,
    UserMessage,
    collect,
    resolve_model,
)
from kode_nb.models._profiles import PROFILES, detect_profile
from kode_nb.models.openai_compat import NEXT_NUDGE
from kode_nb.types import TextBlock

from ._mock import MockServer, error, payload, sse

pytestmark = pytest.mark.anyio

WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
TIME = ToolSpec(
    name="get_time",
    description="Time in a zone.",
    parameters={"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
)


def request(
    *messages: Any, tools: tuple[ToolSpec, ...] = (WEATHER,), **settings: Any
) -> ModelRequest:
    return ModelRequest(
        system="Be brief.",
        messages=messages or (UserMessage(content="Weather in Paris?"),),
        tools=tools,
        settings=ModelSettings(**settings),
    )


def json_reply(name: str, status: int = 200) -> httpx.Response:
    return httpx.Response(
        status, content=payload(name), headers={"content-type": "application/json"}
    )


def local(server: MockServer, client: httpx.AsyncClient, url: str, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("retry_base_delay", 0.0)
    kw.setdefault("api_key_env", None)
    return OpenAIChatModel(kw.pop("model_id", "m"), base_url=url, http_client=client, **kw)


@pytest.mark.parametrize(
    ("url", "profile"),
    [
        ("https://api.openai.com/v1", "openai"),
        ("https://my-res.openai.azure.com/openai/deployments/gpt4o", "azure"),
        ("https://my-res.cognitiveservices.azure.com/openai/deployments/x", "azure"),
        ("http://127.0.0.1:11434/v1", "ollama"),
        ("http://localhost:1234/v1", "lmstudio"),
        ("http://127.0.0.1:8080/v1", "llama-server"),
        ("https://openrouter.ai/api/v1", "openrouter"),
        ("https://generativelanguage.googleapis.com/v1beta/openai", "gemini"),
        ("http://127.0.0.1:8000/v1", "generic"),  # vLLM and llama-cpp-python both use 8000
        ("http://gpu-box.internal:11434/v1", "generic"),  # a port means something only locally
    ],
)
def test_profiles_are_detected_from_the_base_url(url: str, profile: str) -> None:
    assert detect_profile(url).name == profile


def test_an_unknown_profile_is_a_clear_error() -> None:
    with pytest.raises(ConfigurationError, match=r"unknown server profile 'olama'.*ollama"):
        OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", profile="olama")


def test_repr_and_describe_show_the_settings_a_user_picks() -> None:
    model = resolve_model(
        "openai-compatible:http://127.0.0.1:8000/v1#qwen", tool_choice="required", stream=False
    )
    assert repr(model) == (
        "OpenAIChatModel(name='openai-compatible:http://127.0.0.1:8000/v1#qwen', "
        "base_url='http://127.0.0.1:8000/v1', profile='generic', tool_choice='required', "
        "stream=False)"
    )
    assert model.describe()["stream"] is False  # type: ignore[attr-defined]


async def test_generic_server_gets_explicit_tool_choice_usage_request_and_max_tokens() -> None:
    server = MockServer(sse("vllm_tool_call.txt"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1")
        response = await collect(model.stream(request(max_tokens=50)))
    body = server.body()
    assert body["tool_choice"] == "auto"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_tokens"] == 50
    assert "max_completion_tokens" not in body
    assert "strict" not in body["tools"][0]["function"]
    assert "authorization" not in server.requests[0].headers
    assert response.tool_calls == (
        ToolCallRequest(id="chatcmpl-tool-3f9a7c2e1d", name="get_weather", arguments='{"city": "Paris"}'),
    )  # fmt: skip
    assert response.usage == UsageInfo(input_tokens=187, output_tokens=21)


async def test_vllm_without_auto_tool_choice_says_what_the_server_needs() -> None:
    server = MockServer(error("vllm_400_auto_tool_choice.json", 400))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", profile="vllm")
        with pytest.raises(ModelHTTPError) as caught:
            await collect(model.stream(request()))
    assert str(caught.value).count(model.name) == 1
    assert "--enable-auto-tool-choice" in str(caught.value)
    assert len(server.requests) == 1  # a 400 is not retried


@pytest.mark.parametrize("choice", ["required", "none", "get_weather"])
async def test_tool_choice_forms_are_sent_as_openai_documents_them(choice: str) -> None:
    server = MockServer(sse("vllm_tool_call.txt"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", tool_choice=choice)
        await collect(model.stream(request()))
    expected: Any = choice
    if choice == "get_weather":
        expected = {"type": "function", "function": {"name": "get_weather"}}
    assert server.body()["tool_choice"] == expected


async def test_a_tool_choice_naming_no_offered_tool_is_a_clear_error() -> None:
    model = OpenAIChatModel("m", base_url="http://127.0.0.1:8000/v1", api_key_env=None)
    with pytest.raises(ConfigurationError, match=r"'get_tide' names no offered tool.*get_weather"):
        await collect(model.stream(request(tool_choice="get_tide")))


async def test_a_request_setting_wins_over_the_model_default() -> None:
    server = MockServer(sse("vllm_tool_call.txt"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", tool_choice="none")
        await collect(model.stream(request(tool_choice="required")))
    assert server.body()["tool_choice"] == "required"


async def test_no_tools_means_no_tool_choice() -> None:
    server = MockServer(sse("llamacpppython_text_stream.txt"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1")
        response = await collect(model.stream(request(tools=())))
    assert "tool_choice" not in server.body()
    assert "tools" not in server.body()
    assert response.text == "Paris."


# --------------------------------------------------------------------------- llama-cpp-python


async def test_llama_cpp_python_empty_stream_is_retried_once_without_streaming() -> None:
    """Its server answers stream + tool_choice "auto" with HTTP 200 and an empty body."""
    server = MockServer(sse("llamacpppython_stream_tools_empty.txt"), json_reply("llamacpppython_tool_call.json"))  # fmt: skip
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1")  # generic: detected by failing
        events = [e async for e in model.stream(request())]
        response = await collect(_replay(events))
    first, second = server.body(0), server.body(1)
    assert first["stream"] is True
    assert first["tool_choice"] == "auto"
    assert second["stream"] is False
    assert "stream_options" not in second
    assert response.tool_calls == (
        ToolCallRequest(
            id="call__0_get_weather_cmpl-6f0f1c2e-7a41-4b8e-9d7e-3c2b1a0f9e8d",
            name="get_weather",
            arguments='{"city": "Paris"}',
        ),
    )
    assert response.stop_reason == "tool_calls"
    assert response.usage == UsageInfo(input_tokens=214, output_tokens=12)
    assert response.notices == (
        "the server sent an empty answer to a streamed request; retried once without streaming",
    )
    assert model.no_stream_with_tools  # learned: the next request with tools is not streamed


async def test_llama_cpp_python_profile_never_streams_requests_with_auto_tools() -> None:
    server = MockServer(json_reply("llamacpppython_tool_call.json"), sse("llamacpppython_text_stream.txt"))  # fmt: skip
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", profile="llama-cpp-python")
        response = await collect(model.stream(request(tools=(WEATHER, TIME), tool_choice="auto")))
        plain = await collect(model.stream(request(tools=())))
    assert server.body(0)["stream"] is False
    assert server.body(0)["tool_choice"] == "auto"
    assert response.tool_calls[0].name == "get_weather"
    assert any("does not stream answers with tools" in n for n in response.notices)
    assert server.body(1)["stream"] is True
    assert plain.text == "Paris."
    assert plain.usage == UsageInfo()  # it sent none: unknown, not 0
    assert plain.usage.input_tokens is None


async def test_llama_cpp_python_does_not_get_tool_choice_required() -> None:
    server = MockServer(json_reply("llamacpppython_tool_call.json"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", profile="llama-cpp-python")
        response = await collect(model.stream(request(tool_choice="required")))
    assert server.body()["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert "not supported by llama-cpp-python server; sent 'get_weather'" in response.notices[0]


async def test_an_assistant_turn_with_only_tool_calls_sends_empty_content_not_null() -> None:
    def server_reply(req: httpx.Request) -> httpx.Response:  # llama-cpp-python's behaviour
        body = json.loads(req.content)
        if any(m.get("content") is None for m in body["messages"]):
            return json_reply("llamacpppython_500.json", 500)
        return json_reply("llamacpppython_answer.json")

    history = (
        UserMessage(content="Weather in Paris?"),
        AssistantMessage(
            tool_calls=(ToolCallRequest(id="c1", name="get_weather", arguments='{"city":"Paris"}'),)
        ),
        ToolResultMessage(call_id="c1", name="get_weather", content=(TextBlock(text="18 C, sun"),)),
    )
    server = MockServer(server_reply)
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", profile="llama-cpp-python")
        response = await collect(model.stream(request(*history)))
    assert server.body()["messages"][2]["content"] == ""
    assert response.text == "It is 18 degrees and sunny in Paris."


async def test_stream_false_asks_for_whole_answers() -> None:
    server = MockServer(json_reply("llamacpppython_answer.json"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", stream=False)
        response = await collect(model.stream(request(tools=())))
    assert server.body()["stream"] is False
    assert "stream_options" not in server.body()
    assert server.requests[0].headers["accept"] == "text/event-stream"
    assert response.text == "It is 18 degrees and sunny in Paris."
    assert response.notices == ()


async def test_a_json_answer_to_a_streamed_request_is_read_as_an_answer() -> None:
    server = MockServer(json_reply("llamacpppython_tool_call.json"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1")
        response = await collect(model.stream(request()))
    assert response.tool_calls[0].arguments == '{"city": "Paris"}'
    assert response.notices == ("the server answered a streamed request with a whole JSON answer",)


async def test_empty_both_ways_is_a_protocol_error_naming_the_model_once() -> None:
    empty = httpx.Response(200, content=b"", headers={"content-type": "application/json"})
    server = MockServer(sse("llamacpppython_stream_tools_empty.txt"), empty)
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1")
        with pytest.raises(ModelProtocolError) as caught:
            await collect(model.stream(request()))
    assert "empty body, streamed and not streamed" in str(caught.value)
    assert str(caught.value).count(model.name) == 1


# --------------------------------------------------------------------------- other profiles


async def test_gemini_tool_calls_without_index_and_finish_reason_stop() -> None:
    server = MockServer(sse("gemini_tool_calls_no_index.txt"))
    async with server.client() as client:
        model = local(
            server,
            client,
            "https://generativelanguage.googleapis.com/v1beta/openai",
            api_key="AIza-test-key-123456",
            api_key_env="GEMINI_API_KEY",
            parallel_tool_calls=True,
        )
        response = await collect(model.stream(request(tools=(WEATHER, TIME))))
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("get_weather", '{"city":"Paris"}'),
        ("get_time", '{"tz":"Europe/Paris"}'),
    ]
    assert response.stop_reason == "tool_calls"
    assert "parallel_tool_calls" not in server.body()  # not accepted there
    assert server.requests[0].headers["authorization"] == "Bearer AIza-test-key-123456"


async def test_azure_uses_api_key_header_api_version_and_skips_filter_chunks() -> None:
    server = MockServer(sse("azure_text.txt"))
    async with server.client() as client:
        model = local(
            server,
            client,
            "https://my-res.openai.azure.com/openai/deployments/gpt4o",
            api_key="azure-key-0123456789",
            api_key_env="AZURE_OPENAI_API_KEY",
        )
        response = await collect(model.stream(request(tools=(), max_tokens=20)))
    sent = server.requests[0]
    assert sent.url.params["api-version"] == PROFILES["azure"].api_version
    assert sent.headers["api-key"] == "azure-key-0123456789"
    assert "authorization" not in sent.headers
    assert server.body()["max_completion_tokens"] == 20
    assert response.text == "Paris."
    assert response.usage == UsageInfo(input_tokens=21, output_tokens=3)


async def test_ollama_only_gets_tool_choice_auto() -> None:
    server = MockServer(sse("ollama_tool_call.txt"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:11434/v1", tool_choice="required")
        response = await collect(model.stream(request()))
    assert server.body()["tool_choice"] == "auto"  # the closest form it honours, never none
    assert "not supported by Ollama; sent 'auto' instead" in response.notices[0]
    assert response.stop_reason == "tool_calls"  # Ollama says "stop" with tool calls
    assert response.usage == UsageInfo(input_tokens=160, output_tokens=18)


async def test_llama_server_streams_tool_calls_with_timings() -> None:
    server = MockServer(sse("llamaserver_tool_call.txt"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8080/v1")
        response = await collect(model.stream(request()))
    assert response.tool_calls[0].arguments == '{"city":"Paris"}'
    assert response.usage == UsageInfo(input_tokens=201, output_tokens=19)


async def test_lm_studio_sends_no_stream_usage_so_it_is_unknown() -> None:
    server = MockServer(sse("lmstudio_tool_call.txt"))
    async with server.client() as client:
        model = local(server, client, "http://localhost:1234/v1")
        response = await collect(model.stream(request()))
    assert response.tool_calls == (
        ToolCallRequest(id="365174485", name="get_weather", arguments='{"city":"Paris"}'),
    )
    assert response.usage.input_tokens is None
    assert response.usage.output_tokens is None


async def test_openrouter_keepalive_comments_are_ignored() -> None:
    server = MockServer(sse("openrouter_text.txt"))
    async with server.client() as client:
        model = local(
            server,
            client,
            "https://openrouter.ai/api/v1",
            api_key="sk-or-v1-0123456789abcdef",
            api_key_env="OPENROUTER_API_KEY",
        )
        response = await collect(model.stream(request(tools=())))
    assert response.text == "Paris."
    assert response.usage == UsageInfo(input_tokens=22, output_tokens=3)


def test_every_profile_has_a_payload_test() -> None:
    tested = {"generic", "openai", "azure", "ollama", "vllm", "llama-server"}
    tested |= {"llama-cpp-python", "lmstudio", "openrouter", "gemini"}
    assert set(PROFILES) == tested


async def _replay(events: list[Any]) -> Any:
    for event in events:
        yield event


# Recorded from a real llama-cpp-python 0.3.36 server (`--chat_format chatml-function-calling`,
# Gemma 3 270M Q4_K_M) on 127.0.0.1: the same quirks, byte for byte as the server sent them.


async def test_recorded_llama_cpp_python_stream_with_tools_is_retried_unstreamed() -> None:
    server = MockServer(
        sse("llamacpppython_recorded_stream_tools_empty.txt"),
        json_reply("llamacpppython_recorded_tool_call.json"),
    )
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1")
        response = await collect(_replay([e async for e in model.stream(request())]))
    assert [server.body(0)["stream"], server.body(1)["stream"]] == [True, False]
    assert server.body(0)["tool_choice"] == "auto"
    (call,) = response.tool_calls
    assert call.name == "get_weather"  # from tool_calls, not the legacy function_call (name "")
    assert json.loads(call.arguments) == {"city": "Paris"}
    assert response.usage == UsageInfo(input_tokens=44, output_tokens=9)


async def test_recorded_llama_cpp_python_stream_has_no_usage() -> None:
    """Asked for usage (stream_options.include_usage), its stream sends none: unknown, not 0."""
    server = MockServer(sse("llamacpppython_recorded_text_stream.txt"))
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1")
        response = await collect(model.stream(request(tools=())))
    assert response.text == "Say hello in four words."
    assert response.usage.input_tokens is None
    assert response.usage.output_tokens is None


# --------------------------------------------------------------------------- identifying a server

RESULT_HISTORY = (
    UserMessage(content="Weather in Paris?"),
    AssistantMessage(
        tool_calls=(
            ToolCallRequest(id="c1", name="get_weather", arguments='{"city":"Paris"}'),
            ToolCallRequest(id="c2", name="get_time", arguments='{"tz":"Europe/Paris"}'),
        )
    ),
    ToolResultMessage(call_id="c1", name="get_weather", content=(TextBlock(text="18 C, sun"),)),
    ToolResultMessage(call_id="c2", name="get_time", content=(TextBlock(text="12:00"),)),
)


def models_reply(owners: list[str]) -> httpx.Response:
    listed = [{"id": f"m{i}" if i else "m", "object": "model", "owned_by": o}
              for i, o in enumerate(owners)]  # fmt: skip
    return httpx.Response(200, json={"object": "list", "data": listed})


async def test_a_generic_server_is_identified_before_the_first_request() -> None:
    server = MockServer(
        json_reply("llamacpppython_recorded_models.json"),  # recorded: owned_by "me"
        json_reply("llamacpppython_answer.json"),
        json_reply("llamacpppython_answer.json"),
        probes=True,
    )
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", stream=False,
                      model_id="gemma.gguf")  # fmt: skip
        assert model.profile.name == "generic"
        response = await collect(model.stream(request(*RESULT_HISTORY, tools=(WEATHER, TIME))))
        await collect(model.stream(request(*RESULT_HISTORY, tools=(WEATHER, TIME))))
    probe, first, again = server.requests
    assert (probe.method, probe.url.path) == ("GET", "/v1/models")
    assert (first.method, again.method) == ("POST", "POST")  # asked once only
    assert model.profile.name == "llama-cpp-python"
    messages = server.body(1)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "user"]
    assert messages[3]["content"] == (
        "Result of get_weather (call c1):\n18 C, sun\n\nResult of get_time (call c2):\n12:00"
    )
    assert messages[4]["content"] == NEXT_NUDGE  # the strategy: the next call or the answer
    assert "tool_choice" in server.body(1)  # "auto" is honoured by this server
    assert response.notices[0].startswith("the server is a llama-cpp-python server")
    assert "tool results are sent as a user message" in response.notices[0]


async def test_the_probe_comes_before_any_request() -> None:
    server = MockServer(models_reply(["vllm"]), json_reply("llamacpppython_answer.json"),
                        probes=True)  # fmt: skip
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", stream=False)
        assert not model.identified
        await collect(model.stream(request()))
    assert [r.method for r in server.requests] == ["GET", "POST"]
    assert model.identified
    assert model.profile.name == "vllm"


@pytest.mark.parametrize(
    "listing",
    [
        httpx.Response(404, json={"detail": "Not Found"}),
        httpx.Response(200, content=b"<html>not json</html>"),
        models_reply(["me", "vllm"]),  # mixed owners say nothing
        models_reply(["openai"]),
        httpx.ConnectError("refused"),
    ],
)
async def test_a_server_that_says_nothing_stays_generic(listing: Any) -> None:
    server = MockServer(listing, json_reply("llamacpppython_answer.json"), probes=True)
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:8000/v1", stream=False)
        response = await collect(model.stream(request(*RESULT_HISTORY)))
    assert model.profile.name == "generic"
    assert model.identified
    roles = [m["role"] for m in server.body(-1)["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "tool"]
    assert response.notices == ()
    assert response.text == "It is 18 degrees and sunny in Paris."


async def test_identification_keeps_what_the_user_set() -> None:
    server = MockServer(models_reply(["vllm"]), json_reply("llamacpppython_answer.json"),
                        probes=True)  # fmt: skip
    async with server.client() as client:
        model = local(server, client, "http://127.0.0.1:9999/v1", stream=False, max_tokens_field="max_completion_tokens")  # fmt: skip
        await collect(model.stream(request(*RESULT_HISTORY, max_tokens=20)))
    assert model.profile.name == "vllm"
    assert server.body(-1)["max_completion_tokens"] == 20


async def test_a_named_or_detected_profile_is_kept() -> None:
    for url, profile in (("http://127.0.0.1:8000/v1", "vllm"), ("http://localhost:11434/v1", None)):
        server = MockServer(json_reply("llamacpppython_answer.json"))
        async with server.client() as client:
            model = local(server, client, url, stream=False, profile=profile)
            await collect(model.stream(request(*RESULT_HISTORY)))
        assert [r.method for r in server.requests] == ["POST"]
        assert server.body()["messages"][-1]["role"] == "tool"
