"""OpenAI strict function calling in the Chat Completions adapter, against recorded streams:
strict schemas in the request body, the default per base URL, the per-tool fallback, and the
``null`` of an optional argument dropped before the call reaches the agent loop."""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

import httpx
import pytest
from pydantic import BaseModel

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.errors import ConfigurationError
from kode_nb.models import (
    ModelRequest,
    OpenAIChatModel,
    ToolSpec,
    UserMessage,
    collect,
    resolve_model,
)
from kode_nb.tools import Tool
from kode_nb.tools._schema_dialects import openai_strict_schema

from ._mock import MockServer, sse

pytestmark = pytest.mark.anyio

KEY = "sk-test-0123456789abcdefSECRET"
OLLAMA = "http://127.0.0.1:11434/v1"


class Place(BaseModel):
    """A point on the map."""

    lat: float
    lon: float
    label: str = ""


def forecast(
    city: str,
    note: str | None,
    days: int = 3,
    unit: Literal["C", "F"] = "C",
    where: Place | None = None,
) -> str:
    """Weather forecast for a city."""
    at = f" at {where.lat},{where.lon} {where.label!r}" if where else ""
    return f"{city}: {days} days in {unit}, note {note}{at}"


def tally(counts: dict[str, int], scale: int = 1) -> int:
    """Sum counts (a free-form dict: OpenAI strict mode cannot express it)."""
    return scale * sum(counts.values())


def spec(fn: Any) -> ToolSpec:
    tool: Tool = define_tool(fn, registry=None)
    return ToolSpec.from_tool(tool)


FORECAST = spec(forecast)
TALLY = spec(tally)


def request(*tools: ToolSpec) -> ModelRequest:
    return ModelRequest(
        system="", messages=(UserMessage(content="Weather in Paris?"),), tools=tools
    )


def model(client: httpx.AsyncClient | None = None, **kw: Any) -> OpenAIChatModel:
    kw.setdefault("api_key", KEY)
    return OpenAIChatModel("gpt-4.1-mini", http_client=client, retry_base_delay=0.0, **kw)


def functions(m: OpenAIChatModel, *tools: ToolSpec) -> dict[str, dict[str, Any]]:
    return {e["function"]["name"]: e["function"] for e in m.request_body(request(*tools))["tools"]}


def nullable(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    return (isinstance(kind, list) and "null" in kind) or {"type": "null"} in schema.get(
        "anyOf", []
    )


# --------------------------------------------------------------------------- request body


async def test_strict_tools_on_the_wire() -> None:
    server = MockServer(sse("openai_text.txt"))
    async with server.client() as client:
        await collect(model(client).stream(request(FORECAST)))
    (entry,) = server.body()["tools"]
    function = entry["function"]
    assert function["strict"] is True
    params = function["parameters"]
    assert params == openai_strict_schema(FORECAST.parameters, tool="forecast")
    assert params["required"] == ["city", "note", "days", "unit", "where"]  # all of them
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert [n for n in props if nullable(props[n])] == ["note", "days", "unit", "where"]
    assert props["days"] == {"type": ["integer", "null"], "description": "Default: 3."}
    place = params["$defs"]["Place"]  # nested objects too
    assert place["required"] == ["lat", "lon", "label"]
    assert place["additionalProperties"] is False
    assert nullable(place["properties"]["label"])
    assert not nullable(place["properties"]["lat"])
    assert FORECAST.parameters["required"] == ["city", "note"]  # the tool's schema is untouched


async def test_non_strict_tools_are_sent_as_they_are() -> None:
    server = MockServer(sse("openai_text.txt"))
    async with server.client() as client:
        await collect(model(client, strict=False).stream(request(FORECAST)))
    assert server.body()["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "forecast",
                "description": "Weather forecast for a city.",
                "parameters": FORECAST.parameters,
            },
        }
    ]


@pytest.mark.parametrize(
    ("make", "strict"),
    [
        (lambda: model(), True),
        (lambda: model(base_url="https://api.openai.com/v1/"), True),
        (lambda: model(base_url=OLLAMA), False),
        (lambda: model(base_url="http://vllm.internal:8000/v1"), False),
        (lambda: model(strict=False), False),  # an explicit value always wins
        (lambda: model(base_url=OLLAMA, strict=True), True),
        (lambda: resolve_model("openai:gpt-4.1-mini"), True),
        (lambda: resolve_model("openai:gpt-4.1-mini", strict=False), False),
        (lambda: resolve_model(f"openai-compatible:{OLLAMA}#llama3.2"), False),
        (lambda: resolve_model(f"openai-compatible:{OLLAMA}#llama3.2", strict=True), True),
    ],
)
def test_default_per_base_url_and_explicit_value(make: Any, strict: bool) -> None:
    m = make()
    assert isinstance(m, OpenAIChatModel)
    assert m.strict is strict
    assert ("strict" in functions(m, FORECAST)["forecast"]) is strict


def test_strict_must_be_a_bool() -> None:
    with pytest.raises(ConfigurationError, match="strict must be True, False or None"):
        model(strict="no")


@pytest.mark.parametrize(
    ("parameters", "why"),
    [
        (TALLY.parameters, "free-form object"),
        ({"type": "object", "properties": {"ids": {"type": "array"}}}, "array without an item"),
        ({"type": "object", "properties": {"value": {}}}, "accepts any value"),
    ],
)
def test_a_tool_strict_mode_cannot_express_falls_back_alone(
    parameters: dict[str, Any], why: str, caplog: pytest.LogCaptureFixture
) -> None:
    loose = ToolSpec(name="loose", description="Loose.", parameters=parameters)
    with caplog.at_level(logging.INFO, logger="kode_nb.models"):
        sent = functions(model(), FORECAST, loose)
    assert sent["loose"] == {"name": "loose", "description": "Loose.", "parameters": parameters}
    assert sent["forecast"]["strict"] is True  # the others stay strict
    (record,) = caplog.records
    assert "'loose'" in record.getMessage()
    assert why in record.getMessage()
    assert "offering it without strict mode" in record.getMessage()


# --------------------------------------------------------------------------- returned arguments


async def test_null_for_an_optional_argument_is_dropped_for_strict_tools_only() -> None:
    server = MockServer(sse("openai_strict_nulls.txt"))
    async with server.client() as client:
        response = await collect(model(client).stream(request(FORECAST, TALLY)))
    sent = {e["function"]["name"]: e["function"].get("strict") for e in server.body()["tools"]}
    assert sent == {"forecast": True, "tally": None}
    strict_call, loose_call = response.tool_calls
    assert strict_call.name == "forecast"
    assert json.loads(strict_call.arguments) == {
        "city": "Paris",
        "note": None,  # required and nullable: the model's null is the value
        "where": {"lat": 48.85, "lon": 2.35},  # days, unit and where.label: defaults apply
    }
    assert loose_call.arguments == '{"counts":{"sunny":2},"scale":null}'  # not sent strict


async def test_arguments_are_untouched_when_not_strict() -> None:
    server = MockServer(sse("openai_strict_nulls.txt"))
    async with server.client() as client:
        response = await collect(model(client, strict=False).stream(request(FORECAST, TALLY)))
    assert response.tool_calls[0].arguments == (
        '{"city":"Paris","note":null,"days":null,"unit":null,'
        '"where":{"lat":48.85,"lon":2.35,"label":null}}'
    )


async def test_malformed_arguments_of_a_strict_tool_pass_through_raw() -> None:
    weather = ToolSpec(
        name="get_weather",
        description="Weather for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}},
    )
    server = MockServer(sse("openai_malformed_args.txt"))
    async with server.client() as client:
        response = await collect(model(client).stream(request(weather)))
    assert server.body()["tools"][0]["function"]["strict"] is True
    (call,) = response.tool_calls
    assert call.arguments == '{"city": "Paris", unit: cel'


async def test_the_agent_loop_gets_defaults_for_strict_nulls(registry: ToolRegistry) -> None:
    define_tool(forecast, inline=True)
    define_tool(tally, inline=True)
    server = MockServer(sse("openai_strict_nulls.txt"), sse("openai_text.txt"))
    async with server.client() as client:
        agent = Agent(model=model(client), tools=["forecast", "tally"])
        result = await agent.run("Weather in Paris?")
    assert result.output == "The capital of France is Paris."
    results = {
        m["tool_call_id"]: m["content"] for m in server.body()["messages"] if m["role"] == "tool"
    }
    assert results["call_Fc8sK2mQ7wN4xR1tB6yL9pV3"] == (
        "Paris: 3 days in C, note None at 48.85,2.35 ''"
    )
    # tally was offered without strict: its null stays and fails validation as before
    invalid = results["call_Tl3vD9hJ5gZ1cW8nM2qX6rA4"]
    assert invalid.startswith("Invalid arguments for tool 'tally'")
    assert "`scale`" in invalid
