"""Traces: the kode_nb.trace/v3 JSON shape, the OpenTelemetry GenAI export, and that secrets
(environment values, keys, bearer tokens) never reach either."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kode_nb import Executor, ToolRegistry, define_tool
from kode_nb._redact import REDACTED
from kode_nb.agents import Agent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import call
from kode_nb.traces import SCHEMA, Span, Trace

pytestmark = pytest.mark.anyio


@pytest.fixture
def echo(registry: ToolRegistry) -> ToolRegistry:
    def echo(text: str) -> str:
        """Return the text, prefixed."""
        return f"echo: {text}"

    define_tool(echo)
    return registry


async def test_the_json_trace_follows_the_v3_schema(echo: ToolRegistry) -> None:
    model = ScriptedModel([[call("echo", text="a"), call("echo", text="b")], "done"])
    result = await Agent(model=model, system_prompt="sys", tools=["echo"]).run("go")
    data = json.loads(result.trace.to_json())
    assert data["schema"] == SCHEMA == "kode_nb.trace/v3"
    assert len(data["trace_id"]) == 32
    root = data["root"]
    keys = {"kind", "name", "span_id", "started_at", "ended_at", "duration", "status", "error",
            "attributes", "events", "children"}  # fmt: skip
    assert set(root) == keys
    assert root["kind"] == "run"
    assert root["name"] == "main"
    assert root["status"] == "completed"
    attrs = root["attributes"]
    assert attrs["prompt"] == "go"
    assert attrs["system_prompt"] == "sys"
    assert attrs["tools"] == ["echo"]
    assert attrs["output"] == "done"
    assert attrs["turns"] == 2
    assert attrs["usage"]["requests"] == 2
    assert attrs["usage"]["tool_calls"] == 2
    turn1, turn2 = root["children"]
    assert [c["kind"] for c in turn1["children"]] == ["model_call", "tool_call", "tool_call"]
    assert [c["kind"] for c in turn2["children"]] == ["model_call"]
    chat = turn1["children"][0]
    assert chat["name"] == "chat scripted"
    assert chat["attributes"]["messages"] == [{"role": "user", "content": "go"}]
    assert [c["name"] for c in chat["attributes"]["response"]["tool_calls"]] == ["echo", "echo"]
    assert chat["attributes"]["latency"] >= 0
    assert chat["attributes"]["usage"]["input_tokens"] > 0
    second_chat = turn2["children"][0]["attributes"]["messages"]
    assert [m["role"] for m in second_chat] == ["assistant", "tool", "tool"]  # only what is new
    assert second_chat[1] == {"role": "tool", "call_id": "scripted-1-1", "name": "echo",
                              "content": "echo: a", "is_error": False}  # fmt: skip
    # the request: what the second call added to the first's, rebuilt whole on demand
    stored = turn2["children"][0]["attributes"]["request"]
    assert stored["extends"] == {"span_id": chat["span_id"], "same": ["tools", "settings"],
                                 "keep": {"messages": 1}}  # fmt: skip
    assert stored["body"]["messages"] == second_chat
    whole = result.trace.request(turn2["children"][0]["span_id"])
    assert whole is not None
    assert whole["body"]["messages"] == chat["attributes"]["messages"] + second_chat
    assert whole["body"]["tools"] == chat["attributes"]["request"]["body"]["tools"]
    tool = turn1["children"][1]
    assert tool["name"] == "execute_tool echo"
    assert tool["status"] == "ok"
    assert tool["attributes"]["arguments"] == {"text": "a"}
    assert tool["attributes"]["result"]["text"] == "echo: a"
    assert [e["name"] for e in tool["events"]] == ["requested", "started", "completed"]
    for span in result.trace.spans():
        assert span.ended_at is not None
        assert span.duration is not None
        assert span.duration >= 0
    again = Trace.from_dict(data)
    assert again.to_dict() == data
    with pytest.raises(ValueError, match=r"not a kode_nb trace this version reads"):
        Trace.from_dict({"schema": "other/v9", "root": {}})


async def test_the_otel_export_uses_the_genai_conventions(echo: ToolRegistry) -> None:
    model = ScriptedModel([call("echo", text="a"), "done"])
    result = await Agent("helper", model=model, tools=["echo"]).run("go")
    spans = result.trace.to_otel()
    assert [s["name"] for s in spans] == [
        "invoke_agent helper",
        "chat scripted",
        "execute_tool echo",
        "chat scripted",
    ]
    agent, chat, tool, _ = spans
    assert {s["trace_id"] for s in spans} == {result.trace.trace_id}
    assert agent["parent_span_id"] is None
    assert {s["parent_span_id"] for s in spans[1:]} == {agent["span_id"]}
    assert len(agent["span_id"]) == 16
    assert agent["kind"] == "INTERNAL"
    assert chat["kind"] == "CLIENT"
    assert agent["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert agent["attributes"]["gen_ai.agent.name"] == "helper"
    assert agent["attributes"]["gen_ai.request.model"] == "scripted"
    assert agent["attributes"]["gen_ai.usage.input_tokens"] == result.usage.input_tokens
    assert chat["attributes"]["gen_ai.operation.name"] == "chat"
    assert chat["attributes"]["gen_ai.usage.output_tokens"] > 0
    assert chat["attributes"]["gen_ai.response.finish_reasons"] == ["tool_calls"]
    assert chat["attributes"]["kode_nb.turn"] == 1
    assert tool["attributes"]["gen_ai.operation.name"] == "execute_tool"
    assert tool["attributes"]["gen_ai.tool.name"] == "echo"
    assert tool["attributes"]["gen_ai.tool.call.id"] == "scripted-1-1"
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"]) == {"text": "a"}
    assert tool["attributes"]["gen_ai.tool.call.result"] == "echo: a"
    assert agent["status"] == {"code": "OK"}
    assert (
        agent["start_time_unix_nano"] <= chat["start_time_unix_nano"] <= chat["end_time_unix_nano"]
    )
    otlp = result.trace.to_otlp(service_name="demo")
    (resource_spans,) = otlp["resourceSpans"]
    assert resource_spans["resource"]["attributes"] == [
        {"key": "service.name", "value": {"stringValue": "demo"}}
    ]
    exported = resource_spans["scopeSpans"][0]["spans"]
    assert [s["name"] for s in exported] == [s["name"] for s in spans]
    assert "parentSpanId" not in exported[0]
    assert exported[1]["parentSpanId"] == agent["span_id"]
    assert exported[1]["kind"] == 3
    assert {"key": "gen_ai.tool.name", "value": {"stringValue": "echo"}} in exported[2][
        "attributes"
    ]
    json.dumps(otlp)  # plain JSON throughout


async def test_failed_spans_carry_their_error(echo: ToolRegistry) -> None:
    model = ScriptedModel([call("echo", text="a")])  # then exhausted
    result = await Agent(model=model, tools=["echo"]).run("go")
    spans = {s["name"]: s for s in result.trace.to_otel()}
    assert spans["invoke_agent main"]["status"]["code"] == "ERROR"
    assert "ran out of turns" in spans["invoke_agent main"]["status"]["message"]
    data = result.trace.to_dict()["root"]
    assert data["status"] == "error"
    assert "ScriptExhausted" in data["error"]


SECRET_ENV = "zq-env-secret-9137"
API_KEY = "sk-proj-abcdefghijklmnop1234"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.payload.signature"


async def test_secrets_never_reach_the_trace_or_its_exports(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_SERVICE_TOKEN", SECRET_ENV)
    received: list[str] = []

    def remote(token: str, note: str) -> dict[str, Any]:
        """Call a service with a credential."""
        received.append(token)
        return {"echoed": token, "note": note, "headers": {"Authorization": BEARER}}

    define_tool(remote)
    executor = Executor()
    model = ScriptedModel([
        call("remote", token=SECRET_ENV, note=f"key {API_KEY} and {BEARER}"),
        f"Used {SECRET_ENV} with {API_KEY}.",
    ])  # fmt: skip
    result = await Agent(model=model, tools=["remote"], executor=executor).run(f"use {SECRET_ENV}")
    assert received == [SECRET_ENV]  # the tool itself got the real value
    exports = [
        result.trace.to_json(),
        json.dumps(result.trace.to_otel()),
        json.dumps(result.trace.to_otlp()),
    ]
    for text in exports:
        for secret in (SECRET_ENV, API_KEY, "eyJhbGciOiJIUzI1NiJ9"):
            assert secret not in text
        assert REDACTED in text
    tool = result.trace.root.find(kind="tool_call")[0]
    assert tool.attributes["arguments"]["token"] == REDACTED
    assert tool.attributes["result"]["text"].count(REDACTED) >= 3


def test_spans_open_and_close_once() -> None:
    span = Span(kind="run", name="x")
    assert span.open
    assert span.status == "running"
    child = span.child("turn", "turn 1", turn=1)
    child.finish("ok")
    child.finish("error", "later")  # ignored
    assert child.status == "ok"
    assert child.error is None
    for i in range(105):
        span.event("tick", n=i)
    assert len(span.events) == 100
    assert span.dropped_events == 5
    assert span.to_dict()["dropped_events"] == 5
    otel = Trace(root=span).to_otel()
    assert otel[0]["status"] == {"code": "UNSET"}
    assert otel[0]["end_time_unix_nano"] is None


async def test_a_secret_known_only_after_a_model_call_is_redacted_from_the_later_calls(
    registry: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run records its earlier messages and tool schemas in their redacted form from the
    first model call; a secret that became known since is redacted from the later records."""
    late = "late-secret-0451-value"

    def reveal(text: str) -> str:
        """Set a credential in the environment."""
        monkeypatch.setenv("LATE_API_TOKEN", late)
        return "set"

    define_tool(reveal, description=f"Reveal. The example value is {late}.")
    model = ScriptedModel([call("reveal", text="x"), "done"])
    result = await Agent(model=model, tools=["reveal"]).run(f"remember {late}")
    first, second = result.trace.root.find("model_call")
    assert late in json.dumps(result.trace.request(first))  # not a secret yet at the first call
    later = json.dumps(result.trace.request(second))
    assert late not in later
    assert f"remember {REDACTED}" in later
    assert f"The example value is {REDACTED}." in later
