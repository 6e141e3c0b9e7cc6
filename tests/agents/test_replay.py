"""Replay: a recorded run re-run offline by a ReplayModel, with recorded or re-executed tools,
nested subagent runs, divergence errors, and traces saved as kode_nb.trace v1 or v2 JSON."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

import kode_nb
from kode_nb import ConfigurationError, Executor, ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ReplayDivergedError, ReplayModel, ScriptedModel
from kode_nb.models.scripted import call

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    objective: str


@pytest.fixture
def math(registry: ToolRegistry) -> dict[str, int]:
    calls = {"add": 0}

    def add(a: int, b: int) -> int:
        """Add two integers."""
        calls["add"] += 1
        return a + b

    define_tool(add, inline=True)
    return calls


async def record(prompt: str = "what is 2+3, then +4?") -> Any:
    model = ScriptedModel([call("add", a=2, b=3), call("add", a=5, b=4), "It is 9."])
    return await Agent(model=model, system_prompt="Use add.", tools=["add"]).run(prompt)


async def test_recorded_tools_replay_without_running_anything(math: dict[str, int]) -> None:
    original = await record()
    assert math["add"] == 2
    saved = json.loads(original.trace.to_json())  # what a notebook keeps
    replayed = await kode_nb.replay(saved)
    assert math["add"] == 2  # the tool was not run again
    assert replayed.result.status == "completed"
    assert replayed.output == "It is 9."
    assert replayed.matches
    assert replayed.model.requests == 3
    assert replayed.notes == []
    calls = [s.attributes["result"]["text"] for s in replayed.result.trace.root.find("tool_call")]
    assert calls == ["5", "9"]


async def test_executed_tools_run_again_through_the_executor(math: dict[str, int]) -> None:
    original = await record()
    seen: list[str] = []
    executor = Executor()
    executor.bus.subscribe(lambda e: seen.append(e.type))
    replayed = await kode_nb.replay(original, tools="execute", executor=executor)
    assert math["add"] == 4  # both calls ran again
    assert replayed.matches
    assert seen.count("completed") == 2


async def test_a_tool_that_now_answers_differently_diverges_naming_the_turn(
    registry: ToolRegistry, math: dict[str, int]
) -> None:
    original = await record()

    def add(a: int, b: int) -> int:
        """Add two integers (now off by one)."""
        return a + b + 1

    define_tool(add, inline=True, replace=True)
    with pytest.raises(ReplayDivergedError) as info:
        await kode_nb.replay(original, tools="execute")
    error = info.value
    assert error.run == "main"
    assert error.turn == 2
    text = str(error)
    assert text.startswith("replay of run 'main' diverged at turn 2: new message 2 (tool for call")
    assert '\n- "content": "5",\n+ "content": "6",' in text
    lax = await kode_nb.replay(original, tools="execute", strict=False)
    assert not lax.matches
    assert [d.turn for d in lax.divergences] == [2, 3]
    assert lax.model.requests == 3  # still offline: it answered from the recording


async def test_a_different_prompt_or_system_prompt_diverges_at_turn_1(
    math: dict[str, int],
) -> None:
    data = (await record()).trace.to_dict()
    data["root"]["attributes"]["prompt"] = "something else"
    with pytest.raises(ReplayDivergedError, match=r"turn 1: new message 1 \(user\) differs"):
        await kode_nb.replay(data)
    model = ReplayModel([], run="x", system="a")
    assert model.nested("call_9").run == "x > call_9"


async def test_nested_subagent_runs_replay_with_their_own_recordings(
    math: dict[str, int],
) -> None:
    sub = ScriptedModel([call("add", a=1, b=1), "two"])
    register_subagent(AgentDefinition(
        name="helper", description="Adds.", system_prompt="Work on {objective}",
        input_model=Question, tools=["add"], model=sub,
    ))  # fmt: skip
    main = ScriptedModel([call("helper", objective="1+1"), "helper said two"])
    original = await Agent(model=main, tools=["helper"]).run("ask the helper")
    assert original.status == "completed"
    assert math["add"] == 1
    replayed = await kode_nb.replay(original, tools="execute")
    assert math["add"] == 2  # the subagent ran again, and its tool through the executor
    assert replayed.matches
    nested = replayed.model.nested_models
    assert next(iter(nested.values())).requests == 2  # the subagent's model was the replay
    assert sub.turns_played == 2  # the recorded subagent model was not asked again
    runs = [s for s in replayed.result.trace.spans() if s.kind == "run"]
    assert [r.name for r in runs] == ["main", "helper"]
    recorded = await kode_nb.replay(original)  # the subagent's folded result reused
    assert math["add"] == 2
    assert recorded.matches


async def test_a_nested_divergence_names_the_subagent_run(
    registry: ToolRegistry, math: dict[str, int]
) -> None:
    register_subagent(AgentDefinition(
        name="helper", description="Adds.", system_prompt="Work on {objective}",
        input_model=Question, tools=["add"], model=ScriptedModel([call("add", a=1, b=1), "two"]),
    ))  # fmt: skip
    main = ScriptedModel([call("helper", objective="1+1"), "done"])
    original = await Agent(model=main, tools=["helper"]).run("ask")

    def add(a: int, b: int) -> int:
        """Add two integers (changed)."""
        return 0

    define_tool(add, inline=True, replace=True)
    with pytest.raises(ReplayDivergedError, match=r"run 'main > helper' diverged at turn 2"):
        await kode_nb.replay(original, tools="execute")


async def test_a_v1_trace_replays_with_defaults_and_says_so(math: dict[str, int]) -> None:
    data = (await record()).trace.to_dict()
    data["schema"] = "kode_nb.trace/v1"
    for key in ("tool_specs", "max_result_chars", "output_model", "output_retries", "reask",
                "history_length", "settings"):  # fmt: skip
        data["root"]["attributes"].pop(key)
    replayed = await kode_nb.replay(data)
    assert replayed.matches
    assert replayed.recorded.schema == "kode_nb.trace/v1"
    assert replayed.recorded.to_dict()["schema"] == "kode_nb.trace/v1"
    assert "kode_nb.trace/v1 has no tool_specs: using the default" in replayed.notes


async def test_bad_input_gets_a_clear_message(math: dict[str, int]) -> None:
    data = (await record()).trace.to_dict()
    data["schema"] = "kode_nb.trace/v9"
    with pytest.raises(ConfigurationError, match=r"a newer kode_nb wrote it: update kode_nb"):
        await kode_nb.replay(data)
    with pytest.raises(ConfigurationError, match="replay takes an AgentRunResult"):
        await kode_nb.replay(42)
    with pytest.raises(ConfigurationError, match="tools must be 'recorded' or 'execute'"):
        await kode_nb.replay(data, tools="all")  # type: ignore[arg-type]


async def test_replay_with_message_history_and_a_recorded_failure(math: dict[str, int]) -> None:
    from kode_nb.models import UserMessage
    from kode_nb.models.errors import ModelError

    def broken(_request: Any) -> str:
        raise ModelError("provider down")

    model = ScriptedModel([call("add", a=1, b=2), broken])
    history = [UserMessage(content="earlier question")]
    original = await Agent(model=model, tools=["add"]).run("go", message_history=history)
    assert original.status == "error"
    replayed = await kode_nb.replay(original)
    assert replayed.result.status == "error"
    assert "replayed failure of main turn 2: model error (ModelError)" in (
        replayed.result.error or ""
    )
    first = replayed.result.trace.root.find("model_call")[0].attributes["messages"]
    assert first[0] == {"role": "user", "content": "earlier question"}
    v1 = original.trace.to_dict()
    v1["schema"] = "kode_nb.trace/v1"
    del v1["root"]["attributes"]["history_length"]
    again = await kode_nb.replay(v1)  # the history is inferred from the first request
    assert again.result.status == "error"
    assert not again.divergences


class Sum(BaseModel):
    total: int


async def test_a_structured_answer_replays_into_its_output_model(math: dict[str, int]) -> None:
    model = ScriptedModel([call("add", a=2, b=3), '{"total": 5}'])
    agent = Agent(model=model, system_prompt="Add.", tools=["add"], output_model=Sum)
    original = await agent.run("2+3")
    assert original.output == Sum(total=5)
    replayed = await kode_nb.replay(original, output_model=Sum)
    assert replayed.output == Sum(total=5)
    assert replayed.matches
    as_text = await kode_nb.replay(original)
    assert as_text.output == '{"total": 5}'
    assert "the run had output_model Sum: pass output_model= to validate" in as_text.notes[0]

    class Other(BaseModel):
        n: int

    with pytest.raises(ConfigurationError, match="output_model=Other is not the one"):
        await kode_nb.replay(original, output_model=Other)
