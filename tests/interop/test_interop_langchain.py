"""kode_nb tools in LangChain (its fake chat model, offline): calls go through kode_nb's
executor; errors come back to the model as an error ToolMessage (ToolException handled);
capture records chains, model calls and tool calls through LangChain callbacks."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda

from kode_nb import AutoApprove, CallbackApprover, Executor, KodeUsageError, ToolRegistry, deny
from kode_nb.interop import capture, langchain_tools

pytestmark = pytest.mark.anyio


def call(name: str, args: dict[str, Any], call_id: str) -> dict[str, Any]:
    return {"name": name, "args": args, "id": call_id, "type": "tool_call"}


def agent_loop(model: Any, tools: list[Any]) -> RunnableLambda[Any, Any]:
    """The smallest tool-calling agent: a chain that asks the model and runs its tool calls."""
    by_name = {t.name: t for t in tools}

    async def run(prompt: str) -> str:
        messages: list[BaseMessage] = [HumanMessage(prompt)]
        while True:
            reply = await model.ainvoke(messages)
            messages.append(reply)
            if not reply.tool_calls:
                return str(reply.content)
            for tc in reply.tool_calls:
                messages.append(await by_name[tc["name"]].ainvoke(tc))

    return RunnableLambda(run, name="note_agent")


async def test_errors_come_back_as_error_tool_messages(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    ex = Executor(registry, approver=CallbackApprover(lambda r: deny("not now", by="test")))
    (tool,) = langchain_tools(["write_note"], executor=ex)
    assert tool.args_schema == registry.get("write_note").parameters  # type: ignore[union-attr]
    invalid = await tool.ainvoke(call("write_note", {"title": "a"}, "c1"))
    assert isinstance(invalid, ToolMessage)
    assert invalid.status == "error"
    assert "`text`: required field is missing" in str(invalid.content)
    denied = await tool.ainvoke(call("write_note", {"title": "a", "text": "x"}, "c2"))
    assert denied.status == "error"
    assert "not now" in str(denied.content)
    assert notes == {}


async def test_an_approved_call_runs(registry: ToolRegistry, notes: dict[str, str]) -> None:
    (tool,) = langchain_tools(["write_note"], executor=Executor(registry, approver=AutoApprove()))
    out = await tool.ainvoke(call("write_note", {"title": "a", "text": "x"}, "c1"))
    assert out.content == "saved a"
    assert out.status == "success"
    assert notes == {"a": "x"}


async def test_a_sync_invoke_inside_a_running_loop_says_what_to_do(registry: ToolRegistry) -> None:
    (tool,) = langchain_tools(["read_note"], executor=Executor(registry))
    with pytest.raises(KodeUsageError, match="ainvoke"):
        tool.invoke({"title": "a"})


def test_a_sync_invoke_without_a_loop_runs(registry: ToolRegistry, notes: dict[str, str]) -> None:
    notes["a"] = "hello"
    (tool,) = langchain_tools(["read_note"], executor=Executor(registry))
    assert tool.invoke({"title": "a"}) == "hello"


async def test_capture_records_the_chain_its_model_calls_and_tool_calls(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    ex = Executor(registry, approver=AutoApprove())
    model = GenericFakeChatModel(messages=iter([
        AIMessage("", tool_calls=[call("write_note", {"title": "a"}, "c1")]),
        AIMessage("", tool_calls=[call("write_note", {"title": "a", "text": "x"}, "c2")]),
        AIMessage("all written"),
    ]))  # fmt: skip
    agent = agent_loop(model, langchain_tools(["write_note"], executor=ex))
    with capture() as cap:
        assert await agent.ainvoke("write note a") == "all written"
    assert "langchain" in cap.recording
    root = cap.last.root
    assert (root.name, root.status, root.attributes["framework"]) == (
        "note_agent",
        "completed",
        "langchain",
    )
    assert root.attributes["output"] == "all written"
    assert root.attributes["prompt"] == "write note a"
    models, tools = root.find("model_call"), root.find("tool_call")
    assert len(models) == 3
    assert len(tools) == 2
    assert models[0].attributes["messages"] == [{"role": "user", "content": "write note a"}]
    assert models[1].attributes["messages"][0]["role"] == "tool"  # new this turn: the result
    assert [t.status for t in tools] == ["invalid_arguments", "ok"]
    assert [t.attributes["call_id"] for t in tools] == ["c1", "c2"]
    assert [e["name"] for e in tools[1].events][:3] == [
        "requested",
        "approval_requested",
        "approval_resolved",
    ]
    assert notes == {"a": "x"}


async def test_model_calls_outside_a_chain_make_one_trace_when_the_block_ends() -> None:
    model = GenericFakeChatModel(messages=iter([AIMessage("one"), AIMessage("two")]))
    with capture(["langchain"]) as cap:
        await model.ainvoke("first")
        await model.ainvoke("second")
        assert len(cap) == 0
    assert len(cap) == 1
    assert [m.attributes["response"]["text"] for m in cap.last.root.find("model_call")] == [
        "one",
        "two",
    ]
