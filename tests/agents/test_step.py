"""Stepping through a run (kode_nb/stepping/_step.py): pause order, edits (re-validated), results
given by hand, run to end, stop, nested subagent runs, the trace, and cancellation while paused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kode_nb import ToolRegistry, ToolResult, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.debug import StepEditError, Stepper, StepPoint
from kode_nb.errors import ConfigurationError
from kode_nb.models import ScriptedModel, ToolResultMessage, UserMessage
from kode_nb.models.scripted import call

pytestmark = pytest.mark.anyio

RAN: list[tuple[int, int]] = []


@pytest.fixture
def math(registry: ToolRegistry) -> ToolRegistry:
    RAN.clear()

    def add(a: int, b: int) -> int:
        """Add two integers."""
        RAN.append((a, b))
        return a + b

    define_tool(add, inline=True)
    return registry


def two_turns() -> ScriptedModel:
    return ScriptedModel(
        [
            [call("add", a=1, b=2), call("add", a=3, b=4)],
            call("add", a=5, b=6),
            "Done.",
        ]
    )


async def pause(run: Any) -> StepPoint:
    point = await run.paused(timeout=5)
    assert point is not None, "the run ended instead of pausing"
    return point


async def test_a_run_pauses_before_each_model_request_and_each_tool_call(
    math: ToolRegistry,
) -> None:
    model = two_turns()
    run = Agent(model=model, tools=["add"]).start("Add things.", step=True)
    seen = []
    while (point := await run.paused(timeout=5)) is not None:
        seen.append((point.kind, point.turn, point.tool, point.arguments, len(RAN)))
        point.next()
    result = await run
    assert result.status == "completed"
    assert result.output == "Done."
    # the last column: calls run so far (one turn's calls run together, after their pauses)
    assert seen == [
        ("model_request", 1, "", None, 0),
        ("tool_call", 1, "add", {"a": 1, "b": 2}, 0),
        ("tool_call", 1, "add", {"a": 3, "b": 4}, 0),
        ("model_request", 2, "", None, 2),
        ("tool_call", 2, "add", {"a": 5, "b": 6}, 2),
        ("model_request", 3, "", None, 3),
    ]
    assert RAN == [(1, 2), (3, 4), (5, 6)]
    steps = [e for s in result.trace.root.walk() for e in s.events if e["name"] == "step"]
    assert [e["attributes"]["action"] for e in steps] == ["next"] * 6


async def test_async_for_walks_every_pause_and_a_decision_in_the_body_holds(
    math: ToolRegistry,
) -> None:
    """``async for point in run`` as pydantic-ai's ``async for node in agent_run``: every pause
    in order; undecided points go on with next(), a decision made in the body is kept."""
    run = Agent(model=two_turns(), tools=["add"]).start("Add things.", step=True)
    seen = []

    async def walk() -> None:
        async for point in run:
            seen.append((point.kind, point.turn, point.tool))
            if point.tool == "add" and point.arguments == {"a": 5, "b": 6}:
                point.give_result("eleven")  # answered by hand: the tool does not run

    await asyncio.wait_for(walk(), 60)  # a point left waiting would hang the run: fail instead
    result = await run
    assert result.output == "Done."
    assert seen == [
        ("model_request", 1, ""),
        ("tool_call", 1, "add"),
        ("tool_call", 1, "add"),
        ("model_request", 2, ""),
        ("tool_call", 2, "add"),
        ("model_request", 3, ""),
    ]
    assert RAN == [(1, 2), (3, 4)]
    steps = [e for s in result.trace.root.walk() for e in s.events if e["name"] == "step"]
    assert [e["attributes"]["action"] for e in steps] == ["next"] * 4 + ["give_result", "next"]


async def test_iterating_a_run_that_does_not_step_says_how_to_step_it(math: ToolRegistry) -> None:
    run = Agent(model=two_turns(), tools=["add"]).start("Add things.")
    with pytest.raises(StepEditError, match="step=True"):
        async for _point in run:
            pass
    assert (await run).status == "completed"


async def test_the_model_request_pause_shows_the_request_as_the_span_records_it(
    math: ToolRegistry,
) -> None:
    run = Agent(model=two_turns(), tools=["add"], system_prompt="Be exact.").start(
        "Add things.", step="top"
    )
    point = await pause(run)
    assert point.kind == "model_request"
    assert point.request is not None
    assert point.request.system == "Be exact."
    assert [type(m) for m in point.messages] == [UserMessage]
    body = point.body()
    assert body["system"] == "Be exact."
    assert body["messages"] == [{"role": "user", "content": "Add things."}]
    assert [t["name"] for t in body["tools"]] == ["add"]
    assert body["tools"][0]["parameters"]["required"] == ["a", "b"]
    run.stepper.run_to_end()
    result = await run
    span = next(s for s in result.trace.root.walk() if s.kind == "model_call")
    assert span.attributes["request"]["body"] == body


async def test_editing_a_message_changes_what_the_model_gets_and_is_traced(
    math: ToolRegistry,
) -> None:
    model = ScriptedModel(["Hello."])
    run = Agent(model=model).start("Say hi.", step=True)
    point = await pause(run)
    with pytest.raises(StepEditError, match="index into the 1 messages"):
        point.edit("x", message=3)
    assert not point.done
    assert point.error is not None
    assert "index" in point.error
    point.edit("Say hello.")
    result = await run
    assert result.status == "completed"
    sent = model.requests[0].messages[0]
    assert isinstance(sent, UserMessage)
    assert sent.content == "Say hello."
    assert result.messages[0] == UserMessage(content="Say hello.")
    span = next(s for s in result.trace.root.walk() if s.kind == "model_call")
    edit = next(e for e in span.events if e["name"] == "step_edit")
    assert edit["attributes"] == {
        "message": 0, "role": "user", "before": "Say hi.", "after": "Say hello.",
    }  # fmt: skip
    assert span.attributes["messages"] == [{"role": "user", "content": "Say hello."}]
    assert span.attributes["request"]["body"]["messages"][0]["content"] == "Say hello."


async def test_an_invalid_argument_edit_is_refused_and_the_run_stays_paused(
    math: ToolRegistry,
) -> None:
    model = ScriptedModel([call("add", a=1, b=2), "Done."])
    run = Agent(model=model, tools=["add"]).start("Add.", step=True)
    (await pause(run)).next()
    point = await pause(run)
    assert point.kind == "tool_call"
    assert point.invalid is None
    with pytest.raises(StepEditError, match=r"Invalid arguments for tool 'add'") as info:
        point.edit({"a": "many", "b": 2})
    assert "a" in str(info.value)
    with pytest.raises(StepEditError, match="not valid JSON"):
        point.edit('{"a": 1,')
    with pytest.raises(StepEditError, match="must be a JSON object"):
        point.edit("[1, 2]")
    assert not point.done
    assert point.error is not None
    assert run.stepper.current is point
    await asyncio.sleep(0.05)
    assert RAN == []  # still paused
    point.edit('{"a": 10, "b": "20"}')  # lax: "20" validates to 20
    (await pause(run)).next()
    result = await run
    assert result.status == "completed"
    assert RAN == [(10, 20)]
    span = next(s for s in result.trace.root.walk() if s.kind == "tool_call")
    edit = next(e for e in span.events if e["name"] == "step_edit")
    assert edit["attributes"] == {"before": {"a": 1, "b": 2}, "after": {"a": 10, "b": 20}}
    assert span.attributes["arguments"] == {"a": 10, "b": 20}
    assert span.attributes["edited_by_hand"] is True
    assert span.attributes["result"]["text"] == "30"
    # the model's next request shows the call as it ran, and its result
    assistant = model.requests[1].messages[1]
    assert assistant.tool_calls[0].arguments == '{"a": 10, "b": 20}'


async def test_a_result_given_by_hand_answers_the_call_without_running_it(
    math: ToolRegistry,
) -> None:
    model = ScriptedModel([call("add", a=1, b=2), "Done."])
    run = Agent(model=model, tools=["add"]).start("Add.", step=True)
    point = await pause(run)
    with pytest.raises(StepEditError, match="answers a tool call"):
        point.give_result("no")
    point.next()
    (await pause(run)).give_result("42, trust me")
    (await pause(run)).next()
    result = await run
    assert RAN == []
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolResultMessage)
    assert ToolResult(content=answer.content).text == "42, trust me"
    span = next(s for s in result.trace.root.walk() if s.kind == "tool_call")
    assert span.attributes["given_by_hand"] is True
    assert span.attributes["result"]["text"] == "42, trust me"
    assert [e["attributes"]["text"] for e in span.events if e["name"] == "step_given"] == [
        "42, trust me"
    ]


async def test_run_to_end_stops_pausing(math: ToolRegistry) -> None:
    run = Agent(model=two_turns(), tools=["add"]).start("Add.", step=True)
    (await pause(run)).next()
    (await pause(run)).run_to_end()
    assert await run.paused(timeout=5) is None
    result = await run
    assert result.status == "completed"
    assert RAN == [(1, 2), (3, 4), (5, 6)]
    assert len(run.stepper.points) == 2


async def test_stop_mid_run_ends_it_cancelled_with_the_reason(math: ToolRegistry) -> None:
    run = Agent(model=two_turns(), tools=["add"]).start("Add.", step=True)
    for _ in range(4):  # turn 1's request and two calls, turn 2's request
        (await pause(run)).next()
    point = await pause(run)
    assert point.arguments == {"a": 5, "b": 6}
    point.stop("enough for today")
    result = await run
    assert result.status == "cancelled"
    assert result.error == "stopped while stepping: enough for today"
    assert RAN == [(1, 2), (3, 4)]
    assert result.trace.root.status == "cancelled"
    assert result.trace.root.error == "stopped while stepping: enough for today"
    tool_spans = [s for s in result.trace.root.walk() if s.kind == "tool_call"]
    assert [s.status for s in tool_spans] == ["ok", "ok", "cancelled"]
    stop = [e for s in tool_spans for e in s.events if e["name"] == "step"]
    assert [e["attributes"]["action"] for e in stop] == ["next", "next", "stop"]
    assert await run.paused(timeout=1) is None


def nested(registry: ToolRegistry) -> tuple[ScriptedModel, Any]:
    child_models: list[ScriptedModel] = []

    def child() -> ScriptedModel:
        model = ScriptedModel([call("add", a=2, b=3), "Five."])
        child_models.append(model)
        return model

    register_subagent(
        AgentDefinition(
            name="helper",
            description="Adds.",
            system_prompt="Add: {task}",
            input_config={
                "inputs": {
                    "task": {"type": "string", "description": "What to add.", "required": True}
                }
            },
            tools=["add"],
            model=child,
        )
    )
    parent = ScriptedModel([call("helper", task="2+3"), "It is five."])
    return parent, child_models


async def test_nested_runs_step_with_all_and_run_through_with_top(math: ToolRegistry) -> None:
    parent, _ = nested(math)
    run = Agent(model=parent, tools=["helper"]).start("Go.", step="all")
    seen = []
    while (point := await run.paused(timeout=5)) is not None:
        seen.append((point.agent, point.depth, point.kind, point.tool))
        point.next()
    assert (await run).status == "completed"
    assert seen == [
        ("main", 0, "model_request", ""),
        ("main", 0, "tool_call", "helper"),
        ("helper", 1, "model_request", ""),
        ("helper", 1, "tool_call", "add"),
        ("helper", 1, "model_request", ""),
        ("main", 0, "model_request", ""),
    ]
    parent, _ = nested(math)
    run = Agent(model=parent, tools=["helper"]).start("Go.", step="top")
    seen = []
    while (point := await run.paused(timeout=5)) is not None:
        seen.append((point.agent, point.kind))
        point.next()
    assert (await run).output == "It is five."
    assert seen == [("main", "model_request"), ("main", "tool_call"), ("main", "model_request")]


async def test_a_nested_edit_and_stop_inside_a_subagent(math: ToolRegistry) -> None:
    parent, _ = nested(math)
    run = Agent(model=parent, tools=["helper"]).start("Go.", step=True)
    for _ in range(3):
        (await pause(run)).next()
    point = await pause(run)
    assert (point.agent, point.tool) == ("helper", "add")
    point.edit({"a": 20, "b": 3})
    point = await pause(run)
    assert point.agent == "helper"
    assert point.kind == "model_request"
    assert "23" in point.body()["messages"][-1]["content"]
    point.stop("seen enough")
    result = await run
    assert result.status == "cancelled"
    assert result.error == "stopped while stepping: seen enough"
    assert RAN == [(20, 3)]
    edits = [e for s in result.trace.root.walk() for e in s.events if e["name"] == "step_edit"]
    assert [e["attributes"]["after"] for e in edits] == [{"a": 20, "b": 3}]


async def test_cancelling_a_paused_run_does_not_deadlock(math: ToolRegistry) -> None:
    agent = Agent(model=two_turns(), tools=["add"])
    run = agent.start("Add.", step=True)
    point = await pause(run)
    waiter = asyncio.ensure_future(run.stepper.paused())
    await asyncio.sleep(0)
    assert agent.cancel(run.run_id, reason="changed my mind") == 1
    result = await asyncio.wait_for(asyncio.shield(run.task), 5)
    assert result.status == "cancelled"
    assert result.error == "changed my mind"
    assert point.done
    assert point.future.cancelled()
    assert point.next() is False
    assert await asyncio.wait_for(waiter, 5) is point
    assert await run.paused(timeout=1) is None
    # interrupting the task itself (a kernel interrupt) also ends the wait
    run = Agent(model=two_turns(), tools=["add"]).start("Add.", step=True)
    await pause(run)
    run.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert run.stepper.ended
    assert run.stepper.pending() == []


async def test_a_paused_run_does_not_count_pauses_against_its_time_limit(
    math: ToolRegistry,
) -> None:
    run = Agent(model=two_turns(), tools=["add"], time_limit=0.3).start("Add.", step=True)
    for _ in range(3):
        point = await pause(run)
        await asyncio.sleep(0.2)
        point.next()
    run.stepper.run_to_end()
    assert (await run).status == "completed"


async def test_a_stepper_from_python_and_its_errors(math: ToolRegistry) -> None:
    pauses: list[StepPoint] = []
    stepper = Stepper(on_pause=pauses.append)
    task = asyncio.ensure_future(Agent(model=ScriptedModel(["Hi."])).run("Hello", step=stepper))
    point = await stepper.paused(timeout=5)
    assert point is not None
    await asyncio.sleep(0)
    assert pauses == [point]
    assert "model_request" in repr(point)
    assert "paused" in repr(point)
    stepper.next()
    assert (await task).output == "Hi."
    assert stepper.ended
    assert await stepper.paused() is None
    with pytest.raises(StepEditError, match="nothing is paused"):
        stepper.next()
    with pytest.raises(ConfigurationError, match="step must be True, 'all', 'top'"):
        await Agent(model=ScriptedModel(["x"])).run("x", step="sometimes")
    with pytest.raises(ConfigurationError, match="nested must be 'all' or 'top'"):
        Stepper(nested="some")  # type: ignore[arg-type]
    busy = Stepper()
    first = Agent(model=ScriptedModel(["a"])).start("a", step=busy)
    await busy.paused(timeout=5)
    with pytest.raises(ConfigurationError, match="already steps run"):
        await Agent(model=ScriptedModel(["b"])).run("b", step=busy)
    busy.run_to_end()
    assert (await first).output == "a"


async def test_stepping_works_with_any_model_testmodel_too(math: ToolRegistry) -> None:
    run = Agent(model="test", tools=["add"]).start("Add 2 and 3.", step=True)
    kinds = []
    while (point := await run.paused(timeout=5)) is not None:
        kinds.append(point.kind)
        if point.kind == "tool_call":
            assert set(point.arguments) == {"a", "b"}
            point.give_result("5")
        else:
            point.next()
    result = await run
    assert result.status == "completed"
    assert kinds[:2] == ["model_request", "tool_call"]
    assert RAN == []  # every call was answered by hand


def test_start_without_a_running_loop_says_what_to_do(math: ToolRegistry) -> None:
    with pytest.raises(ConfigurationError, match=r"start\(\) needs a running event loop"):
        Agent(model=ScriptedModel(["x"])).start("x", step=True)
