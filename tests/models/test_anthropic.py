"""Anthropic Messages adapter against recorded message streams (httpx.MockTransport)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from kode_nb.errors import ConfigurationError
from kode_nb.models import (
    AnthropicModel,
    AssistantMessage,
    Finish,
    ModelHTTPError,
    ModelProtocolError,
    ModelRequest,
    ModelSettings,
    RequestSent,
    TextChunk,
    ToolCallPart,
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

KEY = "sk-ant-api03-SECRETSECRETSECRET-0123456789"
WEATHER = ToolSpec(
    name="get_weather",
    description="Weather for a city.",
    parameters={
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city"],
    },
)
TIME = ToolSpec(name="get_time", description="The time.", parameters={"type": "object"})


def request(*messages: Any, tools: tuple[ToolSpec, ...] = (), **settings: Any) -> ModelRequest:
    return ModelRequest(
        system="You are terse.",
        messages=messages or (UserMessage(content="Hi"),),
        tools=tools,
        settings=ModelSettings(**settings),
    )


def model(client: httpx.AsyncClient, **kw: Any) -> AnthropicModel:
    kw.setdefault("api_key", KEY)
    kw.setdefault("retry_base_delay", 0.0)
    return AnthropicModel("claude-sonnet-4-20250514", http_client=client, **kw)


async def events(m: AnthropicModel, req: ModelRequest) -> list[ModelEvent]:
    return [e async for e in m.stream(req)]


async def test_text_stream_headers_and_body() -> None:
    server = MockServer(sse("anthropic_text.txt"))
    async with server.client() as client:
        out = await events(model(client), request(tools=(WEATHER,), temperature=0.5))
    assert [e.text for e in out if isinstance(e, TextChunk)] == ["Hello", "! How can", " I help?"]
    assert out[-2:] == [
        UsageInfo(input_tokens=472, output_tokens=15),
        Finish(stop_reason="end_turn"),
    ]
    (req,) = server.requests
    assert str(req.url) == "https://api.anthropic.com/v1/messages"
    assert req.headers["x-api-key"] == KEY
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers
    assert server.body() == {
        "model": "claude-sonnet-4-20250514",
        "max_tokens": 4096,
        "system": "You are terse.",
        "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
        "stream": True,
        "tools": [
            {
                "name": "get_weather",
                "description": "Weather for a city.",
                "input_schema": WEATHER.parameters,
            }
        ],
        "temperature": 0.5,
    }


async def test_tool_use_assembled_from_input_json_deltas() -> None:
    server = MockServer(sse("anthropic_tool_use.txt"))
    async with server.client() as client:
        out = await events(model(client), request(tools=(WEATHER, TIME), max_tokens=256))
    assert server.body()["max_tokens"] == 256
    calls = [e for e in out if isinstance(e, ToolCallPart)]
    assert calls == [
        ToolCallPart(
            id="toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            name="get_weather",
            arguments='{"city": "San Francisco", "unit": "celsius"}',
        ),
        ToolCallPart(id="toolu_01AbCdEf23GhIjKl45MnOpQr", name="get_time", arguments="{}"),
    ]
    # the text comes first, each call as soon as its block stops
    kinds = [type(e).__name__ for e in out]
    assert kinds == [
        "RequestSent",
        "TextChunk",
        "TextChunk",
        "ToolCallPart",
        "ToolCallPart",
        "UsageInfo",
        "Finish",
    ]
    assert out[-2:] == [
        UsageInfo(input_tokens=472, output_tokens=89),
        Finish(stop_reason="tool_calls"),
    ]


async def test_malformed_tool_input_passes_through_raw() -> None:
    server = MockServer(sse("anthropic_malformed_args.txt"))
    async with server.client() as client:
        response = await collect(model(client).stream(request(tools=(WEATHER,))))
    assert response.tool_calls == (
        ToolCallRequest(
            id="toolu_01Mal4med5Json6Args7Here",
            name="get_weather",
            arguments='{"city": "Paris", unit',
        ),
    )


def test_message_conversion_merges_tool_results() -> None:
    png = ImageBlock.from_bytes(b"\x89PNG....", "image/png")
    req = request(
        UserMessage(content="Weather and time?"),
        AssistantMessage(
            text="Checking.",
            tool_calls=(
                ToolCallRequest(id="t1", name="get_weather", arguments='{"city": "Paris"}'),
                ToolCallRequest(id="t2", name="get_time", arguments='{"broken'),
            ),
        ),
        ToolResultMessage(
            call_id="t1", name="get_weather", content=(JsonBlock(data={"t": 21}), png)
        ),
        ToolResultMessage(
            call_id="t2", name="get_time", content=(TextBlock(text="bad arguments"),), is_error=True
        ),
        UserMessage(content="Thanks"),
        AssistantMessage(),  # empty: dropped
        UserMessage(content=""),  # empty: dropped
    )
    messages = AnthropicModel("claude-x", api_key=KEY).request_body(req)["messages"]
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "Weather and time?"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "t2", "name": "get_time", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t1",
                    "content": [
                        {"type": "text", "text": '{"t": 21}'},
                        {
                            "type": "image",
                            "source": {
                                "type": "base64",
                                "media_type": "image/png",
                                "data": png.data,
                            },
                        },
                    ],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "t2",
                    "content": [{"type": "text", "text": "bad arguments"}],
                    "is_error": True,
                },
                {"type": "text", "text": "Thanks"},
            ],
        },
    ]


async def test_stream_cut_before_message_stop() -> None:
    server = MockServer(sse("anthropic_cut.txt"))
    seen: list[ModelEvent] = []
    async with server.client() as client:
        with pytest.raises(ModelProtocolError, match="ended before 'message_stop'"):
            await drain(model(client).stream(request()), seen)
    assert seen[1:] == [TextChunk(text="Once upon")]
    assert isinstance(seen[0], RequestSent)
    assert seen[0].body == server.body()
    assert len(server.requests) == 1


async def test_connection_dropped_mid_stream() -> None:
    server = MockServer(dropped("anthropic_tool_use.txt", 3))
    async with server.client() as client:
        with pytest.raises(ModelProtocolError, match="cut off after 3 event"):
            await events(model(client), request())


async def test_error_event_mid_stream() -> None:
    server = MockServer(sse("anthropic_error_event.txt"))
    async with server.client() as client:
        with pytest.raises(ModelProtocolError, match="overloaded_error: Overloaded"):
            await events(model(client), request())


async def test_401_reports_the_provider_message_without_the_key() -> None:
    server = MockServer(error("anthropic_401.json", 401))
    async with server.client() as client:
        m = model(client)
        with pytest.raises(ModelHTTPError) as info:
            await events(m, request())
    assert len(server.requests) == 1
    assert info.value.status == 401
    assert "authentication_error: invalid x-api-key" in str(info.value)
    assert KEY not in str(info.value) + info.value.body + repr(m)


async def test_overloaded_529_is_retried() -> None:
    server = MockServer(
        error("anthropic_529.json", 529, retry_after="0"), sse("anthropic_text.txt")
    )
    async with server.client() as client:
        response = await collect(model(client).stream(request()))
    assert response.text == "Hello! How can I help?"
    assert len(server.requests) == 2


async def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    m = resolve_model("anthropic:claude-sonnet-4-20250514")
    assert m.name == "anthropic:claude-sonnet-4-20250514"
    with pytest.raises(ConfigurationError, match="ANTHROPIC_API_KEY"):
        await collect(m.stream(request()))
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    server = MockServer(sse("anthropic_text.txt"))
    async with server.client() as client:
        assert isinstance(m, AnthropicModel)
        m.http_client = client
        await collect(m.stream(request()))
    assert server.requests[0].headers["x-api-key"] == KEY


@pytest.mark.parametrize(
    ("data", "match"),
    [
        ("event: message_start\ndata: {oops\n\n", "malformed JSON in the 'message_start' event"),
        ('data: "text"\n\n', "expected a JSON object event"),
        (
            'data: {"type": "content_block_delta", "index": 4, "delta": {"type": "input_json_delta", "partial_json": "{"}}\n\n',
            "block 4, which was never started",
        ),
    ],
)
async def test_malformed_events(data: str, match: str) -> None:
    server = MockServer(httpx.Response(200, content=data.encode()))
    async with server.client() as client:
        with pytest.raises(ModelProtocolError, match=match):
            await events(model(client), request())


async def test_a_whole_json_answer_is_read_like_a_stream() -> None:
    import httpx

    from kode_nb.models import AnthropicModel, ModelRequest, ToolSpec, UserMessage, collect

    reply = httpx.Response(
        200,
        content=payload("anthropic_whole.json"),
        headers={"content-type": "application/json"},
    )
    server = MockServer(reply)
    spec = ToolSpec(name="get_weather", description="w", parameters={"type": "object"})
    async with server.client() as client:
        model = AnthropicModel(
            "claude-sonnet-4-5", api_key="sk-ant-test-123456", http_client=client
        )
        response = await collect(
            model.stream(
                ModelRequest(system="", messages=(UserMessage(content="hi"),), tools=(spec,))
            )
        )
    assert response.text == "Let me check."
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("get_weather", '{"city": "Paris"}')
    ]
    assert response.stop_reason == "tool_calls"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (412, 58)
