"""The step buttons without a kernel (ipywidgets' dummy comm): what a pause shows, the boxes'
values becoming decisions, refused edits, decisions made from Python collapsing the prompt,
where the live run view puts each pause, and the run record's summary of what was changed by hand.

Clicks arriving as comm messages are in tests/kernel/test_kernel_step.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.debug import Stepper, StepPoint
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import call
from kode_nb.ui.agent_static import StaticRunView
from kode_nb.ui.agent_view import RunView
from kode_nb.ui.records import run_record
from kode_nb.ui.step_view import StepPrompt

pytestmark = pytest.mark.anyio


@pytest.fixture
def add(registry: ToolRegistry) -> ToolRegistry:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    return registry


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def _started(model: ScriptedModel, **options: Any) -> tuple[Any, list[StepPrompt]]:
    prompts: list[StepPrompt] = []
    stepper = Stepper(on_pause=lambda p: prompts.append(StepPrompt(p)), **options)
    run = Agent(model=model, tools=["add"], system_prompt="Use add.").start("Add 1 and 2.",
                                                                           step=stepper)  # fmt: skip
    return run, prompts


async def _next_prompt(run: Any, prompts: list[StepPrompt]) -> StepPrompt:
    point = await run.paused(timeout=5)
    assert point is not None
    await _settle()
    assert prompts[-1].point is point
    return prompts[-1]


async def test_a_model_request_pause_shows_the_request_and_edits_the_picked_message(
    add: ToolRegistry,
) -> None:
    model = ScriptedModel(["Three."])
    run, prompts = _started(model)
    prompt = await _next_prompt(run, prompts)
    html = prompt.html()
    assert "Paused</b></span> before model request" in html
    assert "Add 1 and 2." in html
    assert "tools: add" in html
    assert "system prompt" in html
    assert prompt.text() == "paused before model request — agent main, turn 1, 1 messages"
    assert prompt.give_button not in prompt.children[1].children  # no result for a request
    assert prompt.editor.value == "Add 1 and 2."
    assert prompt.message.options == (("[0] user", 0),)
    prompt.editor.value = "Add 40 and 2."
    assert prompt.decide("edit") is True
    assert prompt.decide("next") is False  # decided already
    result = await run
    assert model.requests[0].messages[0].content == "Add 40 and 2."  # type: ignore[union-attr]
    assert prompt.children == (prompt.status,)
    assert "message [0] edited" in prompt.status.value
    assert prompt.next_button.disabled
    assert "message [0] edited" in prompt.html()
    record = run_record(agent="main", model="scripted", result=result)
    assert record.data["steps"]["pauses"] == 1
    assert record.data["steps"]["changes"] == [
        "main, turn 1: message [0] (user) edited by hand: Add 40 and 2."
    ]
    assert "stepped: 1 pause, 1 change by hand" in record.text
    assert "message [0] (user) edited by hand: Add 40 and 2." in record.html


async def test_a_tool_pause_refuses_a_bad_edit_in_place_then_takes_a_good_one(
    add: ToolRegistry,
) -> None:
    run, prompts = _started(ScriptedModel([call("add", a=1, b=2), "Done."]))
    (await _next_prompt(run, prompts)).decide("next")
    prompt = await _next_prompt(run, prompts)
    assert "before running tool <b>add</b>" in prompt.html()
    assert prompt.editor.value == '{\n  "a": 1,\n  "b": 2\n}'
    prompt.editor.value = '{"a": "x"}'
    assert prompt.decide("edit") is False
    assert "Edit refused" in prompt.status.value
    assert "Invalid arguments for tool &#x27;add&#x27;" in prompt.status.value
    assert not prompt.point.done
    assert prompt.next_button in prompt.children[1].children  # still paused, buttons there
    prompt.editor.value = '{"a": 5, "b": 5}'
    assert prompt.decide("edit") is True
    assert (
        "arguments edited</b> → <code>{&quot;a&quot;: 5, &quot;b&quot;: 5}" in prompt.status.value
    )
    (await _next_prompt(run, prompts)).decide("next")
    result = await run
    assert result.output == "Done."
    text = run_record(agent="main", model="scripted", result=result).text
    assert 'main, turn 1: add arguments edited by hand: {"a": 1, "b": 2} → {"a": 5, "b": 5}' in text


async def test_give_result_stop_and_decisions_from_python(add: ToolRegistry) -> None:
    model = ScriptedModel([call("add", a=1, b=2), call("add", a=3, b=4), "Done."])
    run, prompts = _started(model)
    first = await _next_prompt(run, prompts)
    run.stepper.next()  # from Python, as h.step.next() does: the prompt collapses too
    assert first.children == (first.status,)
    assert "model request: Next" in first.status.value
    prompt = await _next_prompt(run, prompts)
    prompt.result.value = "three"
    prompt.decide("give_result")
    assert "result given by hand" in prompt.status.value
    (await _next_prompt(run, prompts)).decide("next")
    prompt = await _next_prompt(run, prompts)
    prompt.reason.value = "  "
    prompt.decide("stop")
    result = await run
    assert result.status == "cancelled"
    assert result.error == "stopped while stepping: stopped from the notebook"
    assert "Stopped</b>: stopped from the notebook" in prompt.status.value
    record = run_record(agent="main", model="scripted", result=result)
    assert record.data["steps"]["changes"] == [
        "main, turn 1: add result given by hand (not run): three"
    ]
    assert record.data["steps"]["pauses"] == 4


async def test_run_to_end_and_cancel_collapse_the_prompt(add: ToolRegistry) -> None:
    run, prompts = _started(ScriptedModel([call("add", a=1, b=2), "Done."]))
    (await _next_prompt(run, prompts)).decide("run_to_end")
    assert (await run).output == "Done."
    assert len(prompts) == 1
    assert "Run to end" in prompts[0].status.value
    run, prompts = _started(ScriptedModel(["x"]))
    prompt = await _next_prompt(run, prompts)
    run.task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert prompt.children == (prompt.status,)
    assert "cancelled while paused" in prompt.status.value


async def test_the_live_view_puts_each_pause_where_it_happens(add: ToolRegistry) -> None:
    view = RunView(agent="main", run_id="run_step_view")
    stepper = Stepper(on_pause=view.on_step)
    run = Agent(model=ScriptedModel([call("add", a=1, b=2), "Done."]), tools=["add"]).start(
        "Add.", step=stepper, run_id="run_step_view", on_event=view.on_event
    )
    await run.paused(timeout=5)
    await _settle()
    steps = [p for k, p in view._parts if k == "step"]
    assert len(steps) == 1
    assert steps[0] in view.body.children
    assert "before model request" in view.html()
    stepper.next()
    await run.paused(timeout=5)
    await _settle()
    row = next(iter(view.rows.values()))
    assert row.step is not None
    assert row.step in row.children
    assert row.state == "paused"
    assert "before running tool <b>add</b>" in view.html()
    assert row.arguments == {"a": 1, "b": 2}
    stepper.edit({"a": 1, "b": 41})
    await run.paused(timeout=5)
    assert row.state != "paused"
    assert row.arguments == {"a": 1, "b": 41}  # the row shows what ran
    assert "41" in row.args.value
    assert row.result is not None
    assert row.result.text == "42"
    stepper.next()
    result = await run
    view.finish(result)
    assert "stepped: 3 pauses, 1 change by hand" in view.record().text


async def test_without_widgets_a_pause_says_how_to_decide(add: ToolRegistry) -> None:
    static = StaticRunView(agent="main", run_id="run_static_step", style="html")
    points: list[StepPoint] = []

    def on_pause(point: StepPoint) -> None:
        points.append(point)
        static.on_step(point)

    run = Agent(model=ScriptedModel([call("add", a=1, b=2), "Done."]), tools=["add"]).start(
        "Add.", step=Stepper(on_pause=on_pause)
    )
    while (point := await run.paused(timeout=5)) is not None:
        await _settle()
        point.next()
    await run
    assert static.lines[0] == (
        "  ❚❚ paused before model request (1 messages): h.step.next() / .edit(...) / "
        ".run_to_end() / .stop(reason)"
    )
    assert static.lines[1].startswith('  ❚❚ paused before tool add {"a": 1, "b": 2}: h.step.next()')
    assert ".give_result(text)" in static.lines[1]


async def test_the_delegation_tree_says_which_run_is_paused(add: ToolRegistry) -> None:
    from kode_nb.agents import AgentDefinition, register_subagent

    register_subagent(
        AgentDefinition(
            name="helper", description="Adds.", system_prompt="Add: {task}", tools=["add"],
            input_config={"inputs": {"task": {"type": "string", "description": "What.", "required": True}}},
            model=lambda: ScriptedModel([call("add", a=2, b=3), "Five."]),
        )
    )  # fmt: skip
    view = RunView(agent="main", run_id="run_tree_step")
    stepper = Stepper(on_pause=view.on_step)
    model = ScriptedModel([call("helper", task="2+3"), "Done."])
    run = Agent(model=model, tools=["helper"]).start(
        "Go.", step=stepper, run_id="run_tree_step", on_event=view.on_event
    )
    for _ in range(3):  # main's request, main's helper call, helper's request
        await run.paused(timeout=5)
        await _settle()
        if len(stepper.points) < 3:
            stepper.next()
    assert view.tree is not None
    lines = [line.text() for line in view.tree.lines.values()]
    assert "❚❚ paused before model request" in lines[1]
    assert "paused" not in lines[0]
    stepper.run_to_end()
    assert (await run).output == "Done."
