"""kode_nb tools in pydantic-ai (its FunctionModel, offline): calls go through kode_nb's
executor; validation errors are a ModelRetry the model answers; denials and approvals, kode_nb's
and pydantic-ai's own (deferred tools), reach the run as pydantic-ai expects; capture records
the run as a kode_nb trace through pydantic-ai's OpenTelemetry instrumentation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

import kode_nb
from kode_nb import (
    AutoApprove,
    CallbackApprover,
    ConfigurationError,
    Executor,
    ToolContext,
    ToolRegistry,
    deny,
)
from kode_nb.interop import answer_deferred, capture, pydantic_ai_toolset

pytestmark = pytest.mark.anyio


def script(*answers: Any) -> tuple[FunctionModel, list[list[ModelMessage]]]:
    """A FunctionModel answering with ``answers`` in order (a str or a ToolCallPart each)."""
    seen: list[list[ModelMessage]] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        answer = answers[len(seen) - 1]
        part = TextPart(answer) if isinstance(answer, str) else answer
        return ModelResponse(parts=[part])

    return FunctionModel(fn), seen


def last_parts(messages: list[ModelMessage]) -> list[Any]:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    return list(last.parts)


async def test_the_model_is_offered_the_kode_nb_schema_and_the_call_runs(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    offered: list[Any] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        offered.append(info.function_tools)
        if len(offered) == 1:
            return ModelResponse(parts=[ToolCallPart("read_note", {"title": "a"})])
        return ModelResponse(parts=[TextPart("done")])

    notes["a"] = "hello"
    ex = Executor(registry)
    agent = Agent(FunctionModel(fn), toolsets=[pydantic_ai_toolset(["read_note"], executor=ex)])
    result = await agent.run("read a")
    assert result.output == "done"
    (tool,) = offered[0]
    assert tool.name == "read_note"
    assert tool.parameters_json_schema == registry.get("read_note").parameters  # type: ignore[union-attr]
    returned = [p for p in result.all_messages()[-2].parts if isinstance(p, ToolReturnPart)]
    assert [p.content for p in returned] == ["hello"]


async def test_invalid_arguments_are_a_retry_the_model_answers(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    model, seen = script(
        ToolCallPart("write_note", {"title": "a"}),
        ToolCallPart("write_note", {"title": "a", "text": "fixed"}),
        "done",
    )
    ex = Executor(registry, approver=AutoApprove())
    agent = Agent(model, toolsets=[pydantic_ai_toolset(["write_note"], executor=ex)])
    assert (await agent.run("write")).output == "done"
    (retry,) = last_parts(seen[1])
    # pydantic-ai 2 returns a ModelRetry as a tool return marked "retried"
    assert isinstance(retry, ToolReturnPart)
    assert retry.outcome == "retried"
    assert retry.retry is not None
    assert retry.retry.cause == "model_retry"
    assert "`text`: required field is missing" in str(retry.content)
    assert notes == {"a": "fixed"}


async def test_a_denial_reaches_the_model_and_the_tool_does_not_run(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    model, seen = script(ToolCallPart("write_note", {"title": "a", "text": "x"}), "ok")
    ex = Executor(registry, approver=CallbackApprover(lambda r: deny("not today", by="test")))
    agent = Agent(model, toolsets=[pydantic_ai_toolset(["write_note"], executor=ex)])
    assert (await agent.run("write")).output == "ok"
    (part,) = last_parts(seen[1])
    assert "not today" in str(part.content)
    assert notes == {}


async def test_without_an_approver_a_call_that_must_ask_is_denied_saying_so(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    model, seen = script(ToolCallPart("write_note", {"title": "a", "text": "x"}), "ok")
    agent = Agent(
        model, toolsets=[pydantic_ai_toolset(["write_note"], executor=Executor(registry))]
    )
    await agent.run("write")
    (part,) = last_parts(seen[1])
    assert "approval" in str(part.content).lower()
    assert notes == {}


async def test_deferred_approval_is_answered_by_kode_nbs_approver(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    asked: list[Any] = []

    def decide(request: Any) -> Any:
        asked.append(request)
        return kode_nb.approve(by="test")

    ex = Executor(registry, approver=CallbackApprover(decide))
    model, _seen = script(
        ToolCallPart("write_note", {"title": "a", "text": "x"}, tool_call_id="c1"), "written"
    )
    agent = Agent(
        model, output_type=[str, DeferredToolRequests],
        toolsets=[pydantic_ai_toolset(["write_note"], executor=ex, approval="deferred")],
    )  # fmt: skip
    first = await agent.run("write")
    assert isinstance(first.output, DeferredToolRequests)
    assert [c.tool_name for c in first.output.approvals] == ["write_note"]
    assert notes == {}  # nothing ran before the decision
    answers = await answer_deferred(first.output, executor=ex)
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=answers)
    assert second.output == "written"
    assert notes == {"a": "x"}
    assert len(asked) == 1  # approved once, through pydantic-ai: kode_nb did not ask again
    assert asked[0].tool == "write_note"
    assert asked[0].kind == "edit"


async def test_a_deferred_denial_reaches_the_model(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    ex = Executor(registry, approver=CallbackApprover(lambda r: deny("no notes", by="test")))
    model, seen = script(ToolCallPart("write_note", {"title": "a", "text": "x"}), "fine")
    agent = Agent(
        model, output_type=[str, DeferredToolRequests],
        toolsets=[pydantic_ai_toolset(["write_note"], executor=ex, approval="deferred")],
    )  # fmt: skip
    first = await agent.run("write")
    assert isinstance(first.output, DeferredToolRequests)
    answers = await answer_deferred(first.output, executor=ex)
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=answers)
    assert second.output == "fine"
    assert "no notes" in str(last_parts(seen[1])[0].content)
    assert notes == {}


async def test_cancelling_the_run_cancels_the_kode_nb_call(registry: ToolRegistry) -> None:
    started = asyncio.Event()

    @kode_nb.tool(kind="read", registry=registry)
    def slow(ctx: ToolContext) -> str:
        """Wait until cancelled."""
        started_loop.call_soon_threadsafe(started.set)
        ctx.cancel.wait(5)
        return "cancelled" if ctx.cancelled else "finished"

    started_loop = asyncio.get_running_loop()
    ex = Executor(registry)
    events: list[str] = []
    ex.bus.subscribe(lambda e: events.append(e.type))
    model, _ = script(ToolCallPart("slow", {}), "never")
    agent = Agent(model, toolsets=[pydantic_ai_toolset(["slow"], executor=ex)])
    task = asyncio.create_task(agent.run("go"))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert events[-1] == "cancelled", events
    assert ex.running() == [] or all(c.status == "stopping" for c in ex.running())


async def test_capture_records_the_run_as_a_kode_nb_trace(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    kode_nb.register_secret("sk-test-secret-0123456789")
    model, _ = script(
        ToolCallPart("write_note", {"title": "a"}),
        ToolCallPart("write_note", {"title": "a", "text": "key sk-test-secret-0123456789"}),
        "done",
    )
    ex = Executor(registry, approver=AutoApprove())
    agent = Agent(model, name="writer", toolsets=[pydantic_ai_toolset(["write_note"], executor=ex)])
    with capture() as cap:
        await agent.run("write a note")
    assert cap.recording == ("pydantic-ai",) or "pydantic-ai" in cap.recording
    trace = cap.last
    root = trace.root
    assert (root.kind, root.name, root.status) == ("run", "writer", "completed")
    assert root.attributes["framework"] == "pydantic-ai"
    assert root.attributes["output"] == "done"
    assert root.attributes["prompt"] == "write a note"
    assert root.attributes["turns"] == 3
    models = root.find("model_call")
    tools = root.find("tool_call")
    assert len(models) == 3
    assert len(tools) == 2
    assert models[0].attributes["messages"] == [{"role": "user", "content": "write a note"}]
    assert models[0].attributes["request"]["body"]["tools"][0]["name"] == "write_note"
    # later calls store what they added to the previous one; rebuilt, each is whole
    assert models[2].attributes["request"]["extends"]["span_id"] == models[1].span_id
    wholes = [trace.request(m) for m in models]
    sent = [w["body"]["messages"] for w in wholes if w is not None]
    assert [len(m) for m in sent] == [1, 3, 5]
    assert sent[2][:3] == sent[1]
    assert all(w is not None and w["body"]["tools"] == wholes[0]["body"]["tools"] for w in wholes)
    assert models[0].attributes["response"]["tool_calls"][0]["name"] == "write_note"
    assert isinstance(models[0].attributes["usage"]["input_tokens"], int)
    assert [t.status for t in tools] == ["invalid_arguments", "ok"]
    assert tools[1].attributes["result"]["text"] == "saved a"
    assert [e["name"] for e in tools[1].events][:3] == [
        "requested",
        "approval_requested",
        "approval_resolved",
    ]
    text = trace.to_json()
    assert "sk-test-secret-0123456789" not in text
    assert "[REDACTED]" in text
    assert notes["a"].endswith("sk-test-secret-0123456789")  # the tool itself got the real value
    otel = trace.to_otel()
    assert {s["name"] for s in otel} >= {"invoke_agent writer", "execute_tool write_note"}


async def test_capture_restores_pydantic_ais_instrumentation_default() -> None:
    before = Agent._instrument_default
    with capture(["pydantic-ai"]):
        assert Agent._instrument_default is not before
    assert Agent._instrument_default is before


def test_bad_input_gets_a_specific_error(registry: ToolRegistry) -> None:
    with pytest.raises(ConfigurationError, match="unknown tool 'nope'"):
        pydantic_ai_toolset(["nope"], executor=Executor(registry))
    with pytest.raises(ConfigurationError, match="approval"):
        pydantic_ai_toolset(["write_note"], executor=Executor(registry), approval="ask")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="executor must be a kode_nb Executor"):
        pydantic_ai_toolset(["write_note"], executor="x")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="unknown"):
        capture(["crewai"])
