"""kode_nb tools in the OpenAI Agents SDK (a scripted SDK ``Model``, offline): calls go through
kode_nb's executor; every failure is the string the SDK sends to the model; the SDK's own
``needs_approval`` interruptions are answered by kode_nb's approver; capture records runs,
agents used as tools and handoffs through the SDK's tracing processor interface."""

from __future__ import annotations

from typing import Any

import pytest
from agents import Agent, Runner, handoff

import kode_nb
from kode_nb import AutoApprove, CallbackApprover, Executor, ToolRegistry, deny
from kode_nb.interop import (
    ScriptedAgentsModel,
    capture,
    openai_agents_tools,
    run_with_approvals,
)
from kode_nb.ui.records import framework_run_record

pytestmark = pytest.mark.anyio


def tool_outputs(model: ScriptedAgentsModel) -> list[str]:
    """What each tool call returned to the model, in order (the last request holds them all)."""
    last = model.requests[-1] if model.requests else []
    return [
        item["output"]
        for item in (last if isinstance(last, list) else [])
        if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


async def test_validation_errors_and_denials_are_strings_the_model_reads(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    model = ScriptedAgentsModel([
        ("write_note", {"title": "a"}),
        ("write_note", {"title": "a", "text": "x"}),
        "gave up",
    ])  # fmt: skip
    ex = Executor(registry, approver=CallbackApprover(lambda r: deny("not now", by="test")))
    agent = Agent(
        name="writer", model=model, tools=openai_agents_tools(["write_note"], executor=ex)
    )
    result = await Runner.run(agent, "write a note")
    assert result.final_output == "gave up"
    invalid, denied = tool_outputs(model)
    assert "`text`: required field is missing" in invalid
    assert "not now" in denied
    assert notes == {}


async def test_an_approved_call_runs(registry: ToolRegistry, notes: dict[str, str]) -> None:
    model = ScriptedAgentsModel([("write_note", {"title": "a", "text": "x"}), "done"])
    ex = Executor(registry, approver=AutoApprove())
    agent = Agent(
        name="writer", model=model, tools=openai_agents_tools(["write_note"], executor=ex)
    )
    assert (await Runner.run(agent, "go")).final_output == "done"
    assert tool_outputs(model) == ["saved a"]
    assert notes == {"a": "x"}


@pytest.mark.parametrize("approved", [True, False])
async def test_sdk_interruptions_are_answered_by_kode_nbs_approver(
    registry: ToolRegistry, notes: dict[str, str], approved: bool
) -> None:
    asked: list[Any] = []

    def decide(request: Any) -> Any:
        asked.append(request)
        return kode_nb.approve(by="test") if approved else deny("no writing", by="test")

    ex = Executor(registry, approver=CallbackApprover(decide))
    model = ScriptedAgentsModel([("write_note", {"title": "a", "text": "x"}), "end"])
    tools = openai_agents_tools(["write_note", "read_note"], executor=ex, approval="sdk")
    agent = Agent(name="writer", model=model, tools=tools)
    first = await Runner.run(agent, "go")
    assert [i.name for i in first.interruptions] == ["write_note"]  # the SDK stopped to ask
    model.script.insert(0, ("write_note", {"title": "a", "text": "x"}))
    model.requests.clear()
    result = await run_with_approvals(agent, "go", executor=ex)
    assert result.final_output == "end"
    assert len(asked) == 1
    assert asked[0].tool == "write_note"
    assert asked[0].kind == "edit"
    if approved:
        assert notes == {"a": "x"}
        assert tool_outputs(model) == ["saved a"]
    else:
        assert notes == {}
        assert "no writing" in tool_outputs(model)[0]


async def test_capture_records_runs_agents_as_tools_and_handoffs(
    registry: ToolRegistry, notes: dict[str, str]
) -> None:
    ex = Executor(registry, approver=AutoApprove())
    helper = Agent(
        name="scribe", instructions="You write notes.",
        model=ScriptedAgentsModel([("write_note", {"title": "t", "text": "x"}), "noted"]),
        tools=openai_agents_tools(["write_note"], executor=ex),
    )  # fmt: skip
    closer = Agent(name="closer", model=ScriptedAgentsModel(["bye"]))
    main = Agent(
        name="main", instructions="You delegate.",
        model=ScriptedAgentsModel([("ask_scribe", {"input": "note t"}), ("transfer_to_closer", {})]),
        tools=[helper.as_tool(tool_name="ask_scribe", tool_description="Ask the scribe.")],
        handoffs=[handoff(closer)],
    )  # fmt: skip
    with capture() as cap:
        result = await Runner.run(main, "write t then close")
    assert result.final_output == "bye"
    assert "openai-agents" in cap.recording
    root = cap.last.root
    assert (root.name, root.status, root.attributes["framework"]) == (
        "main",
        "completed",
        "openai-agents",
    )
    assert root.attributes["prompt"] == "write t then close"
    runs = [s for s in root.walk() if s.kind == "run"]
    assert [r.name for r in runs] == ["main", "scribe", "closer"]
    ask = next(s for s in root.find("tool_call") if s.attributes["tool"] == "ask_scribe")
    assert [c.name for c in ask.children] == ["scribe"]  # the agent used as a tool nests here
    scribe = ask.children[0]
    write = scribe.find("tool_call")[0]
    assert write.status == "ok"
    assert write.attributes["result"]["text"] == "saved t"
    assert [e["name"] for e in write.events][:3] == [
        "requested",
        "approval_requested",
        "approval_resolved",
    ]
    first = scribe.find("model_call")[0]
    assert first.attributes["messages"][0] == {"role": "system", "content": "You write notes."}
    assert isinstance(first.attributes["usage"]["input_tokens"], int)
    assert root.attributes["total_usage"]["input_tokens"] > root.attributes["usage"]["input_tokens"]
    # its run record tells the run's own tokens from those with its subagents
    record = framework_run_record(name="main", status="completed", trace=cap.last)
    own, total = root.attributes["usage"], root.attributes["total_usage"]
    tokens = (
        f"this run: {own['input_tokens']} in / {own['output_tokens']} out tokens; "
        f"with subagents: {total['input_tokens']} in / {total['output_tokens']} out tokens"
    )
    assert tokens in record.bundle()["text/html"]
    assert runs[2].attributes["depth"] == 1  # the handoff's run nests in the turn that handed off
    assert notes == {"t": "x"}


async def test_runs_outside_a_capture_block_are_not_recorded(registry: ToolRegistry) -> None:
    with capture(["openai-agents"]) as cap:
        pass
    await Runner.run(Agent(name="x", model=ScriptedAgentsModel(["hi"])), "hello")
    assert len(cap) == 0
    with pytest.raises(LookupError, match="no run was captured"):
        _ = cap.last
