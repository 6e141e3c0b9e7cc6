"""What the model sees and what it costs: the wire request on model-call spans, the text a tool
result was cut to, prices, and the cost roll-up through nested subagents."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from kode_nb import ConfigurationError, ToolRegistry, define_tool, register_secret
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import (
    AnthropicModel,
    OpenAIChatModel,
    Price,
    ScriptedModel,
    estimate_tokens,
    price_for,
    set_price,
)
from kode_nb.models._cost import catalog_price
from kode_nb.models.scripted import call
from kode_nb.ui.records import run_record
from tests.models._mock import MockServer, sse

TASK = {"inputs": {"task": {"description": "What to do", "type": "string", "required": True}}}

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_prices")]

KEY = "sk-test-0123456789abcdefghij"


def _model_calls(result: Any) -> list[dict[str, Any]]:
    return [s.attributes for s in result.trace.spans() if s.kind == "model_call"]


# --------------------------------------------------------------------------- the wire request


async def test_openai_span_request_is_the_body_sent_and_redacted(registry: ToolRegistry) -> None:
    secret = "hunter2-very-secret-value"
    register_secret(secret)
    server = MockServer(sse("openai_text.txt"))
    async with server.client() as client:
        model = OpenAIChatModel("gpt-4.1-mini", http_client=client, api_key=KEY,
                                retry_base_delay=0.0)  # fmt: skip
        result = await Agent(model=model, system_prompt="Be terse.").run(
            f"What is the capital of France? my password is {secret}"
        )
    assert result.ok, result.error
    (attrs,) = _model_calls(result)
    sent = server.body()
    request = attrs["request"]
    assert request["provider"] == "openai"
    assert request["path"] == "/chat/completions"
    assert request["model"] == "gpt-4.1-mini"
    assert secret in json.dumps(sent)  # the wire had it; the trace does not
    dumped = json.dumps(request)
    assert secret not in dumped
    assert KEY not in dumped
    assert "Authorization" not in dumped
    assert json.loads(dumped.replace("[REDACTED]", secret)) == {**request, "body": sent}
    assert attrs["request_tokens_estimate"] == estimate_tokens(sent)
    assert attrs["request_tokens_estimate"] == -(-len(json.dumps(
        sent, ensure_ascii=False, separators=(",", ":"))) // 4)  # fmt: skip
    # gpt-4.1-mini has a listed price: 24 input and 7 output tokens
    assert attrs["usage"] == {"input_tokens": 24, "output_tokens": 7}
    assert attrs["cost"] == pytest.approx((24 * 0.40 + 7 * 1.60) / 1e6)
    assert result.cost == pytest.approx(attrs["cost"])
    assert result.trace.root.attributes["cost"] == pytest.approx(attrs["cost"])


async def test_anthropic_span_request_is_the_body_sent(registry: ToolRegistry) -> None:
    server = MockServer(sse("anthropic_text.txt"))

    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    define_tool(weather, inline=True)
    async with server.client() as client:
        model = AnthropicModel("claude-sonnet-4-20250514", http_client=client, api_key=KEY,
                               retry_base_delay=0.0)  # fmt: skip
        result = await Agent(model=model, tools=["weather"], system_prompt="Terse.").run("Hi")
    (attrs,) = _model_calls(result)
    assert attrs["request"] == {"provider": "anthropic", "path": "/messages",
                                "model": "claude-sonnet-4-20250514", "body": server.body()}  # fmt: skip
    assert attrs["request"]["body"]["tools"][0]["input_schema"]["properties"] == {
        "city": {"type": "string"}
    }
    assert KEY not in json.dumps(attrs)
    assert "x-api-key" not in json.dumps(attrs)
    usage = attrs["usage"]
    assert attrs["cost"] == pytest.approx(
        (usage["input_tokens"] * 3.0 + usage["output_tokens"] * 15.0) / 1e6
    )


async def test_an_offline_model_records_the_neutral_request(registry: ToolRegistry) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    model = ScriptedModel([call("add", a=1, b=2), "3"])
    result = await Agent(model=model, tools=["add"], system_prompt="Sum.").run("1+2?")
    first, second = _model_calls(result)
    assert first["request"]["provider"] == "neutral"
    whole = result.trace.request(result.trace.root.find(kind="model_call")[1])
    assert whole is not None
    assert whole["provider"] == "neutral"
    body = whole["body"]
    assert list(body) == ["system", "messages", "tools", "settings"]
    assert body["system"] == "Sum."
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "tool"]
    assert body["tools"][0]["name"] == "add"
    assert "properties" in body["tools"][0]["parameters"]
    assert body["settings"]["tool_choice"] == "auto"
    # "new this turn": only what the second call added
    assert [m["role"] for m in second["messages"]] == ["assistant", "tool"]
    assert second["request_tokens_estimate"] > first["request_tokens_estimate"]
    # scripted has no price: unknown, not 0
    assert first["cost"] is None
    assert result.cost is None
    assert result.trace.root.attributes["cost"] is None
    assert result.trace.root.attributes["total_usage"]["input_tokens"] > 0


async def test_a_cut_tool_result_records_what_the_model_got(registry: ToolRegistry) -> None:
    def big() -> str:
        """A long text."""
        return "x" * 500

    define_tool(big, inline=True)
    model = ScriptedModel([call("big"), "done"])
    result = await Agent(model=model, tools=["big"], max_result_chars=100).run("go")
    (span,) = result.trace.root.find(kind="tool_call")
    assert span.attributes["result"]["text"] == "x" * 500
    assert span.attributes["cut_chars"] == 400
    sent = span.attributes["model_text"]
    assert sent.startswith("x" * 100 + "\n[Output cut: the tool returned 500 characters")
    tool_message = _model_calls(result)[1]["messages"][-1]
    assert tool_message["content"] == sent


async def test_an_uncut_tool_result_has_no_model_text(registry: ToolRegistry) -> None:
    define_tool(lambda: "short", name="small", description="Short.", inline=True)
    result = await Agent(model=ScriptedModel([call("small"), "ok"]), tools=["small"]).run("go")
    (span,) = result.trace.root.find(kind="tool_call")
    assert "model_text" not in span.attributes
    assert "cut_chars" not in span.attributes


# --------------------------------------------------------------------------- prices and roll-up


def test_prices_lookup_and_set_price() -> None:
    assert price_for("openai:gpt-4.1-mini") == Price(0.40, 1.60)  # the catalog's
    assert price_for("my-local-model") is None
    assert price_for("ollama:my-local-model") is None
    assert price_for(None) is None
    set_price("my-local-model", input=0, output=0.5)
    assert price_for("ollama:my-local-model") == Price(0.0, 0.5)
    set_price("openai:gpt-4.1-mini", input=1, output=2)  # yours win over the catalog
    assert price_for("openai:gpt-4.1-mini") == Price(1.0, 2.0)
    with pytest.raises(ConfigurationError, match="input must be >= 0"):
        set_price("m", input=-1, output=1)
    with pytest.raises(ConfigurationError, match="output must be a number"):
        set_price("m", input=1, output="cheap")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="non-empty string"):
        set_price(" ", input=1, output=1)


@pytest.mark.parametrize(
    ("model_id", "url", "price"),
    [
        ("gpt-4.1-mini", "https://api.openai.com/v1", Price(0.40, 1.60)),
        ("claude-sonnet-4-20250514", "https://api.anthropic.com/v1", Price(3.0, 15.0)),
        ("gpt-4.1-mini", "http://127.0.0.1:8000/v1", None),  # a local server: no provider's URL
        ("no-such-model", "https://api.openai.com/v1", None),
    ],
)
def test_the_catalog_prices_a_model_by_the_url_its_request_went_to(
    model_id: str, url: str, price: Price | None
) -> None:
    assert catalog_price(model_id, api_url=url) == price


async def test_a_local_server_serving_a_cloud_model_name_costs_unknown(
    registry: ToolRegistry,
) -> None:
    server = MockServer(sse("openai_text.txt"))
    async with server.client() as client:
        model = OpenAIChatModel("gpt-4.1-mini", base_url="http://127.0.0.1:8000/v1",
                                http_client=client, api_key=KEY, retry_base_delay=0.0)  # fmt: skip
        result = await Agent(model=model).run("What is the capital of France?")
    assert result.ok, result.error
    (attrs,) = _model_calls(result)
    assert attrs["usage"] == {"input_tokens": 24, "output_tokens": 7}
    assert attrs["cost"] is None
    set_price("gpt-4.1-mini", input=1.0, output=2.0)  # unless you price it
    async with MockServer(sse("openai_text.txt")).client() as client:
        model = OpenAIChatModel("gpt-4.1-mini", base_url="http://127.0.0.1:8000/v1",
                                http_client=client, api_key=KEY, retry_base_delay=0.0)  # fmt: skip
        priced = await Agent(model=model).run("What is the capital of France?")
    assert _model_calls(priced)[0]["cost"] == pytest.approx((24 * 1.0 + 7 * 2.0) / 1e6)


async def test_cost_rolls_up_through_nested_subagents(registry: ToolRegistry) -> None:
    set_price("inner", input=1.0, output=2.0)
    set_price("middle", input=10.0, output=20.0)
    set_price("outer", input=100.0, output=200.0)
    inner = ScriptedModel(["leaf answer"], name="inner")
    register_subagent(AgentDefinition(name="leaf", description="Leaf.", system_prompt="Leaf.", input_config=TASK,
                                      tools=[], model=inner))  # fmt: skip
    middle = ScriptedModel([call("leaf", task="go deeper"), "middle answer"], name="middle")
    register_subagent(AgentDefinition(name="mid", description="Mid.", system_prompt="Mid.", input_config=TASK,
                                      tools=["leaf"], model=middle))  # fmt: skip
    outer = ScriptedModel([call("mid", task="look"), "top answer"], name="outer")
    result = await Agent(model=outer, tools=["mid"]).run("start")
    assert result.ok, result.error

    def cost(span: Any) -> float:
        return float(span.attributes["cost"])

    calls = result.trace.root.find(kind="model_call")
    assert len(calls) == 5  # outer 2, middle 2, inner 1
    for span in calls:
        usage = span.attributes["usage"]
        rate = {"outer": (100, 200), "middle": (10, 20), "inner": (1, 2)}[span.attributes["model"]]
        want = (usage["input_tokens"] * rate[0] + usage["output_tokens"] * rate[1]) / 1e6
        assert cost(span) == pytest.approx(want)
    total = sum(cost(s) for s in calls)
    assert result.cost == pytest.approx(total)
    root = result.trace.root.attributes
    assert root["cost"] == pytest.approx(total)
    assert root["total_requests"] == 5
    assert root["usage"]["requests"] == 2  # the run's own calls, as before
    assert root["total_usage"]["input_tokens"] == sum(
        s.attributes["usage"]["input_tokens"] for s in calls
    )
    (mid_call,) = result.trace.root.find(kind="tool_call", name="execute_tool mid")
    below = [s for s in mid_call.walk() if s.kind == "model_call"]
    assert len(below) == 3
    assert mid_call.attributes["subtree_cost"] == pytest.approx(sum(cost(s) for s in below))
    assert mid_call.attributes["subtree_requests"] == 3
    (leaf_call,) = result.trace.root.find(kind="tool_call", name="execute_tool leaf")
    assert leaf_call.attributes["subtree_cost"] == pytest.approx(
        cost(result.trace.root.find(kind="model_call", name="chat inner")[0])
    )
    record = run_record(agent="main", model="outer", result=result)
    assert record.data["cost"] == pytest.approx(total)
    assert "$" in record.text


async def test_one_unpriced_model_makes_the_total_unknown(registry: ToolRegistry) -> None:
    set_price("outer", input=1.0, output=1.0)
    register_subagent(AgentDefinition(name="helper", description="H.", system_prompt="H.", input_config=TASK,
                                      tools=[], model=ScriptedModel(["hi"], name="unpriced")))  # fmt: skip
    outer = ScriptedModel([call("helper", task="x"), "done"], name="outer")
    result = await Agent(model=outer, tools=["helper"]).run("start")
    assert result.ok, result.error
    assert result.cost is None
    (helper,) = result.trace.root.find(kind="tool_call")
    assert helper.attributes["subtree_cost"] is None
    assert helper.attributes["subtree_usage"]["input_tokens"] is not None
    record = run_record(agent="main", model="outer", result=result)
    assert record.data["cost"] is None
    assert "cost unknown" in record.text


async def test_unknown_token_counts_make_the_cost_unknown() -> None:
    body = (
        b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}\n\n'
        b"data: [DONE]\n\n"
    )
    server = MockServer(httpx.Response(200, content=body,
                                       headers={"content-type": "text/event-stream"}))  # fmt: skip
    async with server.client() as client:
        model = OpenAIChatModel("gpt-4.1-mini", http_client=client, api_key=KEY)
        result = await Agent(model=model).run("Hi")
    (attrs,) = _model_calls(result)
    assert attrs["usage"] == {"input_tokens": None, "output_tokens": None}
    assert attrs["cost"] is None
    assert result.cost is None
