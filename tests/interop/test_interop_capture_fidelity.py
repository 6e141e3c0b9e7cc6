"""What kode_nb.capture() records is what happened, checked against what a scripted
OpenAI-compatible server on 127.0.0.1 received (fake_openai_server): one model call per
request, the tools each request offered, the usage the server reported (unknown stays unknown,
never 0 tokens or $0), and denied calls recorded as denied."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, Runner
from fake_openai_server import FakeOpenAI, fake_openai
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from openai import AsyncOpenAI
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tools import DeferredToolRequests

import kode_nb
from kode_nb import AutoApprove, CallbackApprover, Executor, ToolRegistry, deny
from kode_nb.interop import (
    answer_deferred,
    capture,
    openai_agents_tools,
    pydantic_ai_toolset,
    run_with_approvals,
)
from kode_nb.models import set_price
from kode_nb.traces import Trace

pytestmark = pytest.mark.anyio

WRITE = [("write_note", {"title": "a", "text": "x"})]
MODEL = "fake-model"


def approver(approved: bool) -> CallbackApprover:
    return CallbackApprover(
        lambda r: kode_nb.approve(by="tester") if approved else deny("not this", by="tester")
    )


def model_calls(trace: Trace) -> list[Any]:
    return [s for s in trace.root.walk() if s.kind == "model_call"]


def assert_matches_server(trace: Trace, server: FakeOpenAI) -> None:
    """One model call per request, each with the tools and usage that request had."""
    calls = model_calls(trace)
    assert len(calls) == len(server.requests)
    for n, call in enumerate(calls):
        assert call.attributes["tools"] == server.tool_names(n)
        body = call.attributes["request"]["body"]
        if n == 0:  # later calls keep only what changed in their request (RequestChain)
            assert [t["name"] for t in body["tools"]] == server.tool_names(n)
            sent = {t["function"]["name"]: t["function"] for t in server.requests[0]["tools"]}
            for t in body["tools"]:
                if t["name"] in ("write_note", "read_note"):  # kode_nb's: the schema sent
                    assert t["parameters"] == sent[t["name"]]["parameters"]
        reported = server.usage[n]
        assert call.attributes["usage"] == {
            "input_tokens": reported["prompt_tokens"] if reported else None,
            "output_tokens": reported["completion_tokens"] if reported else None,
        }
        if reported is None:
            assert call.attributes["cost"] is None
    tin, tout = server.reported()
    if tin is not None:
        total = trace.root.attributes["total_usage"]
        assert (total["input_tokens"], total["output_tokens"]) == (tin, tout)


def sdk_agent(server: FakeOpenAI, ex: Executor, approval: Any) -> Agent[Any]:
    client = AsyncOpenAI(base_url=server.base_url, api_key="test-key")
    model = OpenAIChatCompletionsModel(model=MODEL, openai_client=client)
    tools = openai_agents_tools(["write_note", "read_note"], executor=ex, approval=approval)
    return Agent(name="writer", model=model, tools=tools)


# --------------------------------------------------------------------------- OpenAI Agents SDK


@pytest.mark.parametrize("approved", [True, False])
async def test_an_sdk_run_resumed_after_an_approval_is_recorded_whole(
    registry: ToolRegistry, notes: dict[str, str], approved: bool
) -> None:
    ex = Executor(registry, approver=approver(approved))
    with fake_openai([WRITE, "done"]) as server, capture(["openai-agents"]) as cap:
        result = await run_with_approvals(sdk_agent(server, ex, "sdk"), "go", executor=ex)
    assert result.final_output == "done"
    assert len(server.requests) == 2
    assert len(cap) == 1  # the run and its resumption: one run
    assert_matches_server(cap.last, server)
    assert server.tool_names(0) == ["write_note", "read_note"]
    (write,) = cap.last.root.find("tool_call")
    assert write.attributes["call_id"] == "call_1_0"
    assert write.attributes["approval"] == {
        "approved": approved,
        "decided_by": "tester",
        "reason": None if approved else "not this",
    }
    if approved:
        assert write.status == "ok"
        assert write.attributes["result"]["text"] == "saved a"
    else:
        assert write.status == "denied"
        assert write.attributes["result"]["status"] == "denied"
        assert notes == {}


async def test_an_sdk_call_kode_nb_denies_is_recorded_denied(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    ex = Executor(registry, approver=approver(False))
    with fake_openai([WRITE, "done"]) as server, capture(["openai-agents"]) as cap:
        await Runner.run(sdk_agent(server, ex, "kode_nb"), "go")
    assert_matches_server(cap.last, server)
    (write,) = cap.last.root.find("tool_call")
    assert write.status == "denied"
    assert notes == {}


async def test_a_run_left_waiting_for_approval_records_the_call_as_asked_not_run(
    registry: ToolRegistry,
) -> None:
    ex = Executor(registry, approver=approver(True))
    with fake_openai([WRITE]) as server, capture(["openai-agents"]) as cap:
        first = await Runner.run(sdk_agent(server, ex, "sdk"), "go")
    assert len(first.interruptions) == 1
    assert_matches_server(cap.last, server)
    (write,) = cap.last.root.find("tool_call")
    assert write.status == "approval_requested"


async def test_a_streamed_sdk_run_without_usage_records_unknown_tokens_and_cost(
    registry: ToolRegistry, restore_prices: None
) -> None:
    set_price(MODEL, input=1.0, output=2.0)
    ex = Executor(registry, approver=AutoApprove())
    with fake_openai([WRITE, "done"]) as server, capture(["openai-agents"]) as cap:
        run = Runner.run_streamed(sdk_agent(server, ex, "kode_nb"), "go")
        async for _ in run.stream_events():
            pass
    assert server.usage == [None, None]  # the stream asked for no usage
    assert_matches_server(cap.last, server)
    root = cap.last.root
    assert root.attributes["total_usage"] == {"input_tokens": None, "output_tokens": None}
    assert root.attributes["cost"] is None


async def test_an_sdk_run_with_usage_is_priced(
    registry: ToolRegistry, restore_prices: None
) -> None:
    set_price(MODEL, input=1.0, output=2.0)
    ex = Executor(registry, approver=AutoApprove())
    with fake_openai([WRITE, "done"]) as server, capture(["openai-agents"]) as cap:
        await Runner.run(sdk_agent(server, ex, "kode_nb"), "go")
    assert_matches_server(cap.last, server)
    tin, tout = server.reported()
    assert tin is not None
    assert tout is not None
    assert cap.last.root.attributes["cost"] == pytest.approx((tin * 1.0 + tout * 2.0) / 1e6)


# --------------------------------------------------------------------------- pydantic-ai


@pytest.mark.parametrize("approved", [True, False])
async def test_pydantic_ai_deferred_decisions_are_recorded(
    registry: ToolRegistry, notes: dict[str, str], approved: bool
) -> None:
    ex = Executor(registry, approver=approver(approved))
    with fake_openai([WRITE, "done"]) as server, capture(["pydantic-ai"]) as cap:
        model = OpenAIChatModel(
            MODEL, provider=OpenAIProvider(base_url=server.base_url, api_key="test-key")
        )
        toolset = pydantic_ai_toolset(["write_note"], executor=ex, approval="deferred")
        agent = PydanticAgent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
        first = await agent.run("go")
        assert isinstance(first.output, DeferredToolRequests)
        answers = await answer_deferred(first.output, executor=ex)
        second = await agent.run(
            message_history=first.all_messages(), deferred_tool_results=answers
        )
    assert second.output == "done"
    assert len(cap) == 2  # two pydantic-ai runs
    calls = [c for t in cap.traces for c in model_calls(t)]
    assert len(calls) == len(server.requests) == 2
    for n, call in enumerate(calls):
        assert call.attributes["tools"] == server.tool_names(n)
    asked = cap.traces[0].root.find("tool_call")[0]  # the call the first run stopped to ask about
    assert asked.attributes["approval"]["decided_by"] == "tester"
    ran = cap.traces[1].root.find("tool_call")
    if approved:
        assert asked.status == "approval_requested"
        assert [r.status for r in ran] == ["ok"]
        assert notes == {"a": "x"}
    else:
        assert asked.status == "denied"
        assert asked.attributes["result"]["text"] == "not this"
        assert ran == []
        assert notes == {}


# --------------------------------------------------------------------------- LangChain


async def test_langchain_unknown_usage_stays_unknown(restore_prices: None) -> None:
    set_price("fake-chat-model", input=1.0, output=2.0)
    model = GenericFakeChatModel(messages=iter([AIMessage("one")]))
    with capture(["langchain"]) as cap:
        await model.ainvoke("first")
    (call,) = model_calls(cap.last)
    assert call.attributes["usage"] == {"input_tokens": None, "output_tokens": None}
    assert call.attributes["cost"] is None
