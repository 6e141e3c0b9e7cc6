"""OpenAI-compatible adapter against recorded Chat Completions streams (httpx.MockTransport)."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from kode_nb.errors import ConfigurationError
from kode_nb.models import (
    AssistantMessage,
    Finish,
    ModelConnectionError,
    ModelHTTPError,
    ModelProtocolError,
    ModelRequest,
    ModelSettings,
    OpenAIChatModel,
    TextChunk,
    ToolCallRequest,
    ToolResultMessage,
    ToolSpec,
    UsageInfo,
    UserMessage,
    collect,
    resolve_model,
)
from kode_nb.models.base import ModelEvent
from kode_nb.types import ImageBlock, JsonBlock, TextBlock

from ._mock import MockServer, drain, dropped, error, payload, sse

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdefSECRET"
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


def request(*messages: Any, tools: tuple[ToolSpec, ...] = (), **settings: Any) -> ModelRequest:
    return ModelRequest(
        system="Be brief.",
        messages=messages or (UserMessage(content="What is the capital of France?"),),
        tools=tools,
        settings=ModelSettings(**settings),
    )


def model(server: MockServer, client: httpx.AsyncClient, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("api_key", KEY)
    kw.setdefault("retry_base_delay", 0.0)
    return OpenAIChatModel("gpt-4.1-mini", http_client=client, **kw)


async def events(m: OpenAIChatModel, req: ModelRequest) -> list[ModelEvent]:
    return [e async for e in m.stream(req)]


async def test_plain_text_stream_and_request_body() -> None:
    server = MockServer(sse("openai_text.txt"))
    async with server.client() as client:
        out = await events(model(server, client), request(tools=(WEATHER,)))
    texts = [e.text for e in out if isinstance(e, TextChunk)]
    assert texts == ["The", " capital", " of France", " is Paris."]
    assert out[-2:] == [UsageInfo(input_tokens=24, output_tokens=7), Finish(stop_reason="end_turn")]
    (req,) = server.requests
    assert req.method == "POST"
    assert str(req.url) == "https://api.openai.com/v1/chat/completions"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert server.body() == {
        "model": "gpt-4.1-mini",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "What is the capital of France?"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "tools": [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather for a city.",
                    "parameters": {**WEATHER.parameters, "additionalProperties": False},
                    "strict": True,  # the default for api.openai.com (test_openai_strict.py)
                },
            }
        ],
        "tool_choice": "auto",  # explicit: some servers read a missing one as "none"
    }


async def test_parallel_tool_calls_are_assembled_per_index() -> None:
    server = MockServer(sse("openai_parallel_tools.txt"))
    async with server.client() as client:
        response = await collect(model(server, client).stream(request(tools=(WEATHER, TIME))))
    assert response.tool_calls == (
        ToolCallRequest(
            id="call_Qm7vB2xT9kLp4RzN8sW1aE3c", name="get_weather", arguments='{"city": "Paris"}'
        ),
        ToolCallRequest(
            id="call_Zr5yH8nD2gFq6VtJ0pX4mK7b", name="get_time", arguments='{"tz": "Europe/Paris"}'
        ),
    )
    assert response.stop_reason == "tool_calls"
    assert response.usage == UsageInfo(input_tokens=81, output_tokens=46)
    assert response.text == ""


async def test_malformed_tool_arguments_pass_through_raw() -> None:
    server = MockServer(sse("openai_malformed_args.txt"))
    async with server.client() as client:
        response = await collect(model(server, client).stream(request(tools=(WEATHER,))))
    (call,) = response.tool_calls
    assert call.arguments == '{"city": "Paris", unit: cel'
    with pytest.raises(ValueError, match="Expecting property name"):
        json.loads(call.arguments)


async def test_ollama_style_stop_with_tool_calls_and_no_key() -> None:
    server = MockServer(sse("ollama_tool_call.txt"))
    m = resolve_model("openai-compatible:http://127.0.0.1:11434/v1#llama3.2")
    assert isinstance(m, OpenAIChatModel)
    async with server.client() as client:
        m.http_client = client
        response = await collect(m.stream(request(tools=(WEATHER,), max_tokens=50)))
    assert response.tool_calls == (
        ToolCallRequest(id="call_x1y2z3w4", name="get_weather", arguments='{"city":"Paris"}'),
    )
    assert response.stop_reason == "tool_calls"
    (req,) = server.requests
    assert str(req.url) == "http://127.0.0.1:11434/v1/chat/completions"
    assert "authorization" not in req.headers
    body = server.body()
    assert body["model"] == "llama3.2"
    assert body["max_tokens"] == 50
    assert "max_completion_tokens" not in body


async def test_settings_go_into_the_body() -> None:
    server = MockServer(sse("openai_text.txt"))
    async with server.client() as client:
        m = model(server, client, parallel_tool_calls=False, extra_body={"seed": 7})
        await events(m, request(tools=(WEATHER,), temperature=0.2, max_tokens=64))
    body = server.body()
    assert body["temperature"] == 0.2
    assert body["max_completion_tokens"] == 64
    assert body["parallel_tool_calls"] is False
    assert body["seed"] == 7


def test_message_conversion_with_tool_calls_results_and_images() -> None:
    png = ImageBlock.from_bytes(b"\x89PNG....", "image/png")
    req = request(
        UserMessage(content="Weather in Paris and the time?"),
        AssistantMessage(
            text="",
            tool_calls=(
                ToolCallRequest(id="c1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCallRequest(id="c2", name="get_time", arguments='{"tz": "Europe/Paris"}'),
            ),
        ),
        ToolResultMessage(
            call_id="c1", name="get_weather", content=(JsonBlock(data={"temp": 21}), png)
        ),
        ToolResultMessage(
            call_id="c2", name="get_time", content=(TextBlock(text="no such zone"),), is_error=True
        ),
        AssistantMessage(text="It is 21 degrees."),
    )
    m = OpenAIChatModel("gpt-4.1-mini", api_key=KEY)
    messages = m.request_body(req)["messages"]
    assert messages[2] == {
        "role": "assistant",
        "content": "",  # not null: llama-cpp-python answers null with HTTP 500
        "tool_calls": [
            {
                "id": "c1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            },
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "get_time", "arguments": '{"tz": "Europe/Paris"}'},
            },
        ],
    }
    assert messages[3] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": '{"temp": 21}\n[image: image/png, 8 bytes] (attached in the next message)',
    }
    assert messages[4] == {"role": "tool", "tool_call_id": "c2", "content": "no such zone"}
    # the image follows all the turn's tool messages, as a user message
    assert messages[5]["role"] == "user"
    assert messages[5]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{png.data}"},
    }
    assert messages[6] == {"role": "assistant", "content": "It is 21 degrees."}
    assert len(messages) == 7

    no_images = OpenAIChatModel("llama", api_key_env=None, supports_images=False)
    plain = no_images.request_body(req)["messages"]
    assert plain[3]["content"] == '{"temp": 21}\n[image: image/png, 8 bytes]'
    assert [m["role"] for m in plain] == [
        "system",
        "user",
        "assistant",
        "tool",
        "tool",
        "assistant",
    ]


async def test_429_then_success_honours_retry_after() -> None:
    server = MockServer(error("openai_429.json", 429, retry_after="0.05"), sse("openai_text.txt"))
    async with server.client() as client:
        m = model(server, client, retry_base_delay=10.0)  # Retry-After wins over backoff
        start = time.monotonic()
        response = await collect(m.stream(request()))
        elapsed = time.monotonic() - start
    assert response.text == "The capital of France is Paris."
    assert len(server.requests) == 2
    assert 0.05 <= elapsed < 5


async def test_retry_after_ms_header() -> None:
    server = MockServer(error("openai_429.json", 429, retry_after_ms="30"), sse("openai_text.txt"))
    async with server.client() as client:
        start = time.monotonic()
        await events(model(server, client, retry_base_delay=10.0), request())
        assert 0.03 <= time.monotonic() - start < 5
    assert len(server.requests) == 2


async def test_500s_exhaust_retries() -> None:
    server = MockServer(*(error("openai_500.json", 500) for _ in range(3)))
    async with server.client() as client:
        with pytest.raises(ModelHTTPError) as info:
            await events(model(server, client), request(max_retries=2))
    assert len(server.requests) == 3
    assert info.value.status == 500
    assert "server_error" in str(info.value)
    assert "The server had an error" in info.value.body
    assert info.value.model == "openai:gpt-4.1-mini"


async def test_401_fails_at_once_and_never_shows_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    server = MockServer(error("openai_401.json", 401))
    async with server.client() as client:
        m = OpenAIChatModel("gpt-4.1-mini", http_client=client, retry_base_delay=0.0)
        with pytest.raises(ModelHTTPError) as info:
            await events(m, request())
    assert len(server.requests) == 1
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    err = info.value
    assert err.status == 401
    assert "invalid_request_error: Incorrect API key provided" in str(err)
    assert "sk-proj-***" not in err.body  # even the masked key is scrubbed
    for text in (str(err), err.body, repr(err), repr(m)):
        assert KEY not in text


async def test_missing_key_is_a_configuration_error_at_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    m = resolve_model("openai:gpt-4.1-mini")  # constructing is fine
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        await events(m, request())  # type: ignore[arg-type]


async def test_stream_ending_before_done_is_a_protocol_error() -> None:
    server = MockServer(sse("openai_cut.txt"))
    seen: list[ModelEvent] = []
    async with server.client() as client:
        with pytest.raises(ModelProtocolError, match=r"ended before 'data: \[DONE\]'"):
            await drain(model(server, client).stream(request()), seen)
    assert [e.text for e in seen if isinstance(e, TextChunk)] == ["Once upon", " a time"]
    assert len(server.requests) == 1  # a started stream is never retried


async def test_connection_dropped_mid_stream() -> None:
    server = MockServer(dropped("openai_text.txt", 2))
    async with server.client() as client:
        with pytest.raises(ModelProtocolError, match="cut off after 2 event"):
            await events(model(server, client), request())
    assert len(server.requests) == 1


async def test_connect_errors_are_retried_then_reported() -> None:
    server = MockServer(httpx.ConnectError("connection refused"), sse("openai_text.txt"))
    async with server.client() as client:
        assert (await collect(model(server, client).stream(request()))).text
    server = MockServer(*(httpx.ConnectError("connection refused") for _ in range(2)))
    async with server.client() as client:
        with pytest.raises(ModelConnectionError, match=r"no response from .*connection refused"):
            await events(model(server, client), request(max_retries=1))
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("data: {not json}\n\n", "malformed JSON in the stream chunk"),
        (
            'data: {"error": {"message": "model overloaded"}}\n\n',
            "reported an error: model overloaded",
        ),
        ("data: [1, 2]\n\n", "expected a JSON object chunk"),
    ],
)
async def test_bad_chunks_are_protocol_errors(data: str, match: str) -> None:
    server = MockServer(httpx.Response(200, content=data.encode()))
    async with server.client() as client:
        with pytest.raises(ModelProtocolError, match=match):
            await events(model(server, client), request())


def test_bad_configuration() -> None:
    with pytest.raises(ConfigurationError, match="base_url must start with http"):
        OpenAIChatModel("m", base_url="127.0.0.1:8000/v1")
    with pytest.raises(ConfigurationError, match="model must be a non-empty string"):
        OpenAIChatModel(" ")
    with (
        httpx.Client() as sync_client,
        pytest.raises(ConfigurationError, match=r"http_client must be an httpx\.AsyncClient"),
    ):
        OpenAIChatModel("m", http_client=sync_client)  # type: ignore[arg-type]


async def test_response_is_closed_at_done() -> None:
    class Recorded(httpx.AsyncByteStream):
        closed = False

        async def __aiter__(self) -> AsyncIterator[bytes]:
            yield payload("openai_text.txt")
            yield b'data: {"ignored": "after [DONE]"}\n\n'

        async def aclose(self) -> None:
            Recorded.closed = True

    server = MockServer(httpx.Response(200, stream=Recorded()))
    async with server.client() as client:
        response = await collect(model(server, client).stream(request()))
        assert Recorded.closed
    assert response.text == "The capital of France is Paris."
