"""Every path by which a framework can run a kode_nb tool asks kode_nb's approver, or a policy
rule, exactly once per call, and records who decided. The frameworks run offline (scripted
models); each test counts the approver's calls and checks the tool's side effect."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agents import Agent, RunContextWrapper, Runner
from agents.tool_context import ToolContext
from langchain_core.messages import ToolMessage
from pydantic_ai import Agent as PydanticAgent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

import kode_nb
from kode_nb import Executor, Policy, ToolRegistry, deny
from kode_nb.interop import (
    ScriptedAgentsModel,
    answer_deferred,
    capture,
    langchain_tools,
    openai_agents_tools,
    pydantic_ai_toolset,
    run_with_approvals,
)

pytestmark = pytest.mark.anyio

ARGS = json.dumps({"title": "a", "text": "x"})


class Counting:
    """An approver that answers every request the same way and keeps them."""

    def __init__(self, approve: bool) -> None:
        self.approve = approve
        self.requests: list[Any] = []

    async def __call__(self, request: Any) -> Any:
        self.requests.append(request)
        if self.approve:
            return kode_nb.approve(by="counting")
        return deny("denied by the counting approver", by="counting")


def decided_by(ex: Executor) -> list[tuple[str, bool, str]]:
    """(call id, approved, decided_by) of each approval the executor resolved."""
    out: list[tuple[str, bool, str]] = []
    ex.bus.subscribe(
        lambda e: (
            out.append((e.call_id, e.approved, e.decided_by))
            if e.type == "approval_resolved"
            else None
        )
    )
    return out


# --------------------------------------------------------------------------- OpenAI Agents SDK


@pytest.mark.parametrize("approval", ["sdk", "kode_nb"])
async def test_an_sdk_tool_invoked_without_an_sdk_approval_asks_kode_nbs_approver(
    registry: ToolRegistry, notes: dict[str, str], approval: Any
) -> None:
    """The bypass: on_invoke_tool called with a context that records no SDK approval."""
    approver = Counting(approve=False)
    ex = Executor(registry, approver=approver)
    decisions = decided_by(ex)
    (t,) = openai_agents_tools(["write_note"], executor=ex, approval=approval)
    ctx = ToolContext(context=None, tool_name="write_note", tool_call_id="c1", tool_arguments=ARGS)
    out = await t.on_invoke_tool(ctx, ARGS)  # type: ignore[attr-defined]
    assert notes == {}, "the edit tool ran without approval"
    assert len(approver.requests) == 1
    assert "denied by the counting approver" in out
    assert decisions == [("c1", False, "counting")]


async def test_an_sdk_rejection_recorded_in_the_run_context_denies(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    """A call the SDK's run context records as rejected never runs, whatever the approver."""
    approver = Counting(approve=True)
    ex = Executor(registry, approver=approver)
    model = ScriptedAgentsModel([("write_note", {"title": "a", "text": "x"}), "end"])
    tools = openai_agents_tools(["write_note"], executor=ex, approval="sdk")
    agent = Agent(name="writer", model=model, tools=tools)
    first = await Runner.run(agent, "go")
    (item,) = first.interruptions
    state = first.to_state()
    state.reject(item, rejection_message="rejected in the SDK")
    result = await Runner.run(agent, state)
    assert result.final_output == "end"
    assert notes == {}
    assert approver.requests == []  # the SDK's own decision: kode_nb's approver is not asked
    # a rejection recorded in the context handed to the tool: still denied, the tool not run
    wrapper: RunContextWrapper[None] = RunContextWrapper(context=None)
    wrapper.reject_tool(item, rejection_message="no, in the SDK")
    ctx2 = ToolContext(
        context=None,
        tool_name="write_note",
        tool_call_id=str(item.raw_item.call_id),
        tool_arguments=ARGS,
        _approvals=wrapper._approvals,
    )
    out = await tools[0].on_invoke_tool(ctx2, ARGS)  # type: ignore[attr-defined]
    assert notes == {}
    assert approver.requests == []
    assert "no, in the SDK" in out


@pytest.mark.parametrize("approved", [True, False])
async def test_sdk_interruptions_ask_once_per_call_and_record_who_decided(
    registry: ToolRegistry, notes: dict[str, str], approved: bool
) -> None:
    approver = Counting(approve=approved)
    ex = Executor(registry, approver=approver)
    decisions = decided_by(ex)
    model = ScriptedAgentsModel([
        [("write_note", {"title": "a", "text": "x"}), ("write_note", {"title": "b", "text": "y"})],
        ("read_note", {"title": "a"}),
        "end",
    ])  # fmt: skip
    tools = openai_agents_tools(["write_note", "read_note"], executor=ex, approval="sdk")
    with capture(["openai-agents"]) as cap:
        agent = Agent(name="w", model=model, tools=tools)
        result = await run_with_approvals(agent, "go", executor=ex)
    assert result.final_output == "end"
    assert [r.arguments["title"] for r in approver.requests] == ["a", "b"]  # once per call
    writes = [s for s in cap.last.root.find("tool_call") if s.attributes["tool"] == "write_note"]
    assert [s.attributes["approval"]["decided_by"] for s in writes] == ["counting"] * 2
    assert [s.status for s in writes] == ["ok" if approved else "denied"] * 2
    if approved:
        assert notes == {"a": "x", "b": "y"}
        # the executor ran each approved call once, without asking again
        assert [d[1] for d in decisions] == [True, True]
    else:
        assert notes == {}
        assert decisions == []  # rejected calls never reach the executor


async def test_an_sdk_approval_answers_only_its_own_call(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    """An approval recorded for one call id does not let another call of the tool run."""
    approver = Counting(approve=False)
    ex = Executor(registry, approver=approver)
    model = ScriptedAgentsModel([("write_note", {"title": "a", "text": "x"}), "end"])
    (t,) = openai_agents_tools(["write_note"], executor=ex, approval="sdk")
    first = await Runner.run(Agent(name="w", model=model, tools=[t]), "go")
    (item,) = first.interruptions
    state = first.to_state()
    state.approve(item)
    approvals = state._context._approvals
    other = ToolContext(
        context=None,
        tool_name="write_note",
        tool_call_id="another_call",
        tool_arguments=ARGS,
        _approvals=approvals,
    )
    out = await t.on_invoke_tool(other, ARGS)  # type: ignore[attr-defined]
    assert notes == {}
    assert len(approver.requests) == 1
    assert "denied by the counting approver" in out
    same = ToolContext(
        context=None,
        tool_name="write_note",
        tool_call_id=str(item.raw_item.call_id),
        tool_arguments=ARGS,
        _approvals=approvals,
    )
    assert await t.on_invoke_tool(same, ARGS) == "saved a"  # type: ignore[attr-defined]
    assert len(approver.requests) == 1  # approved by the SDK: not asked again


async def test_a_call_the_policy_allows_runs_without_asking_through_the_sdk(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    approver = Counting(approve=False)
    ex = Executor(registry, approver=approver)
    notes["a"] = "hello"
    model = ScriptedAgentsModel([("read_note", {"title": "a"}), "end"])
    tools = openai_agents_tools(["read_note"], executor=ex, approval="sdk")
    result = await run_with_approvals(Agent(name="r", model=model, tools=tools), "go", executor=ex)
    assert result.final_output == "end"
    assert approver.requests == []  # a read: the policy's rule decides


# --------------------------------------------------------------------------- pydantic-ai


def scripted(*answers: Any) -> FunctionModel:
    it = iter(answers)

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        answer = next(it)
        if isinstance(answer, str):
            return ModelResponse(parts=[TextPart(answer)])
        return ModelResponse(
            parts=[ToolCallPart(n, a, tool_call_id=f"p{i}") for i, (n, a) in enumerate(answer)]
        )

    return FunctionModel(fn)


@pytest.mark.parametrize("approved", [True, False])
async def test_pydantic_ai_kode_nb_approval_asks_once_per_call(
    registry: ToolRegistry, notes: dict[str, str], approved: bool
) -> None:
    approver = Counting(approve=approved)
    ex = Executor(registry, approver=approver)
    decisions = decided_by(ex)
    model = scripted(
        [("write_note", {"title": "a", "text": "x"}), ("write_note", {"title": "b", "text": "y"})],
        "end",
    )
    agent = PydanticAgent(model, toolsets=[pydantic_ai_toolset(["write_note"], executor=ex)])
    assert (await agent.run("go")).output == "end"
    assert [r.arguments["title"] for r in approver.requests] == ["a", "b"]
    assert sorted(d[1:] for d in decisions) == [(approved, "counting")] * 2
    assert notes == ({"a": "x", "b": "y"} if approved else {})


@pytest.mark.parametrize("approved", [True, False])
async def test_pydantic_ai_deferred_approvals_ask_once_per_call(
    registry: ToolRegistry, notes: dict[str, str], approved: bool
) -> None:
    approver = Counting(approve=approved)
    ex = Executor(registry, approver=approver)
    decisions = decided_by(ex)
    model = scripted([("write_note", {"title": "a", "text": "x"})], "end")
    toolset = pydantic_ai_toolset(["write_note"], executor=ex, approval="deferred")
    agent = PydanticAgent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = await agent.run("go")
    assert isinstance(first.output, DeferredToolRequests)
    assert approver.requests == []  # stopped to ask: nothing ran yet
    assert notes == {}
    answers = await answer_deferred(first.output, executor=ex)
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=answers)
    assert second.output == "end"
    assert len(approver.requests) == 1  # asked by answer_deferred, not again when it ran
    if approved:
        assert notes == {"a": "x"}
        assert [d[1] for d in decisions] == [True]
    else:
        assert notes == {}
        assert decisions == []


async def test_pydantic_ai_approval_required_wrapper_asks_once(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    """pydantic-ai's own ``approval_required()`` around kode_nb's toolset: answered through
    kode_nb's approver once, then run without a second prompt."""
    approver = Counting(approve=True)
    ex = Executor(registry, approver=approver)
    model = scripted([("write_note", {"title": "a", "text": "x"})], "end")
    toolset = pydantic_ai_toolset(["write_note"], executor=ex).approval_required()
    agent = PydanticAgent(model, toolsets=[toolset], output_type=[str, DeferredToolRequests])
    first = await agent.run("go")
    assert isinstance(first.output, DeferredToolRequests)
    answers = await answer_deferred(first.output, executor=ex)
    second = await agent.run(message_history=first.all_messages(), deferred_tool_results=answers)
    assert second.output == "end"
    assert len(approver.requests) == 1
    assert notes == {"a": "x"}


# --------------------------------------------------------------------------- LangChain


@pytest.mark.parametrize("approved", [True, False])
async def test_langchain_tools_ask_once_per_call(
    registry: ToolRegistry, notes: dict[str, str], approved: bool
) -> None:
    approver = Counting(approve=approved)
    ex = Executor(registry, approver=approver)
    decisions = decided_by(ex)
    (t,) = langchain_tools(["write_note"], executor=ex)
    out = await t.ainvoke(
        {"name": "write_note", "args": {"title": "a", "text": "x"}, "id": "l1", "type": "tool_call"}
    )
    assert isinstance(out, ToolMessage)
    assert len(approver.requests) == 1
    assert [d[1:] for d in decisions] == [(approved, "counting")]
    assert notes == ({"a": "x"} if approved else {})
    assert out.status == ("success" if approved else "error")


def test_langchain_sync_invoke_asks_once(registry: ToolRegistry, notes: dict[str, str]) -> None:
    approver = Counting(approve=False)
    (t,) = langchain_tools(["write_note"], executor=Executor(registry, approver=approver))
    assert "denied by the counting approver" in t.invoke({"title": "a", "text": "x"})
    assert len(approver.requests) == 1
    assert notes == {}


async def test_a_policy_rule_decides_without_the_approver(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    """A rule that allows edits decides for every adapter: the approver is asked 0 times."""
    approver = Counting(approve=False)
    ex = Executor(registry, policy=Policy(approval_mode="auto"), approver=approver)
    (lc,) = langchain_tools(["write_note"], executor=ex)
    (sdk,) = openai_agents_tools(["write_note"], executor=ex, approval="sdk")
    await lc.ainvoke({"title": "a", "text": "x"})
    ctx = ToolContext(context=None, tool_name="write_note", tool_call_id="c1", tool_arguments=ARGS)
    await sdk.on_invoke_tool(ctx, ARGS)  # type: ignore[attr-defined]
    assert approver.requests == []
    assert notes == {"a": "x"}
