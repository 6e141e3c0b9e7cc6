"""Fork: a finished run continued from one of its steps with a changed message, tool result,
system prompt or model; the steps before the fork point are replayed with no model requests."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fork_helpers import Adder
from pydantic import BaseModel

import kode_nb
from kode_nb import ConfigurationError, ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import Turn, call

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    objective: str


async def original(model: Adder, prompt: str = "2 3 4") -> Any:
    run = await Agent(model=model, system_prompt="Use add.", tools=["add"]).run(prompt)
    assert run.output == "It is 9." if prompt == "2 3 4" else run.ok
    return run


def spans(run: Any, kind: str) -> list[Any]:
    return [s for t in run.trace.root.children for s in t.children if s.kind == kind]


async def test_fork_at_a_turn_replays_the_turns_before_it_without_requests(
    adds: list[tuple[int, int]],
) -> None:
    model = Adder()
    run = await original(model)
    assert len(model.requests) == 3
    assert adds == [(2, 3), (5, 4)]
    forked = await kode_nb.fork(run, at=2)
    assert len(model.requests) == 3 + 2  # turns 2 and 3 asked the model; turn 1 did not
    assert adds == [(2, 3), (5, 4), (5, 4)]  # turn 1's tool call was not run again
    assert forked.output == "It is 9."
    assert forked.turns == 3
    calls = spans(forked, "model_call")
    assert [c.attributes.get("replayed", False) for c in calls] == [True, False, False]
    assert [t.attributes.get("replayed", False) for t in spans(forked, "tool_call")] == [
        True,
        False,
    ]
    link = forked.trace.root.attributes["forked_from"]
    assert link["trace_id"] == run.trace.trace_id
    assert link["turn"] == 2
    assert link["span_id"] == run.trace.root.children[1].span_id
    assert link["replayed_requests"] == 1
    assert link["edited"] == []
    assert forked.trace.trace_id != run.trace.trace_id
    assert json.loads(forked.trace.to_json())["root"]["attributes"]["forked_from"] == link


async def test_an_edited_message_changes_the_answer(adds: list[tuple[int, int]]) -> None:
    model = Adder()
    run = await original(model)
    first = await kode_nb.fork(run, at=1, edit="1 1 1")
    assert first.output == "It is 3."
    assert len(model.requests) == 3 + 3
    assert first.trace.root.attributes["prompt"] == "1 1 1"
    later = await kode_nb.fork(run, at=2, edit={"message": "2 3 10"})
    # turn 1 is the recorded add(2, 3) = 5; turn 2 asks live with the new prompt: 5 + 10
    assert later.output == "It is 15."
    assert len(model.requests) == 6 + 2
    assert model.requests[-2].messages[0].content == "2 3 10"  # type: ignore[union-attr]
    assert adds[-1] == (5, 10)
    assert later.trace.root.attributes["forked_from"]["edited"] == ["message"]


async def test_fork_by_model_call_span_id(adds: list[tuple[int, int]]) -> None:
    model = Adder()
    run = await original(model)
    third = spans(run, "model_call")[2]
    forked = await kode_nb.fork(run, at=third.span_id, edit=None)
    assert len(model.requests) == 4  # only turn 3 was asked
    assert forked.output == "It is 9."
    assert len(adds) == 2
    assert forked.trace.root.attributes["forked_from"]["span_id"] == third.span_id
    turn_span = run.trace.root.children[2]
    again = await kode_nb.fork(run, at=turn_span.span_id)
    assert again.trace.root.attributes["forked_from"]["turn"] == 3
    assert len(model.requests) == 5
    root = await kode_nb.fork(run, at=run.trace.root.span_id)
    assert root.trace.root.attributes["forked_from"]["turn"] == 1
    assert len(model.requests) == 8


async def test_an_edited_tool_result_changes_the_answer(adds: list[tuple[int, int]]) -> None:
    model = Adder()
    run = await original(model)
    first_call = spans(run, "tool_call")[0]
    forked = await kode_nb.fork(run, at=first_call.span_id, edit={"result": "100"})
    assert forked.output == "It is 104."
    assert len(model.requests) == 3 + 2  # turn 1's model call was replayed
    assert adds == [(2, 3), (5, 4), (100, 4)]  # the edited call did not run
    edited = spans(forked, "tool_call")[0]
    assert edited.attributes["edited"] is True
    assert edited.attributes["result"]["text"] == "100"
    link = forked.trace.root.attributes["forked_from"]
    assert link["kind"] == "tool_call"
    assert link["call_id"] == first_call.attributes["call_id"]
    assert link["edited"] == ["result"]
    assert link["replayed_requests"] == 1
    short = await kode_nb.fork(run, at=first_call.span_id, edit="-5")
    assert short.output == "It is -1."


async def test_call_ids_the_loop_made_up_are_matched_in_the_fork(
    adds: list[tuple[int, int]],
) -> None:
    model = Adder(blank_ids=True)
    run = await original(model)
    recorded = [s.attributes["call_id"] for s in spans(run, "tool_call")]
    assert all(i.startswith(f"call_{run.run_id}_") for i in recorded)
    forked = await kode_nb.fork(run, at=3)
    assert forked.output == "It is 9."
    assert len(model.requests) == 4
    assert len(adds) == 2  # both recorded results were reused
    edited = await kode_nb.fork(run, at=spans(run, "tool_call")[1].span_id, edit="50")
    assert edited.output == "It is 50."
    assert spans(edited, "tool_call")[1].attributes["edited"] is True
    assert len(adds) == 2


async def test_a_tool_call_forked_without_an_edit_runs_again(
    adds: list[tuple[int, int]],
) -> None:
    model = Adder()
    run = await original(model)
    second = spans(run, "tool_call")[1]
    forked = await kode_nb.fork(run, at=second.span_id, edit=None)
    assert adds == [(2, 3), (5, 4), (5, 4)]  # executed again through the executor
    assert len(model.requests) == 4
    assert forked.output == "It is 9."


async def test_an_edited_error_result(adds: list[tuple[int, int]]) -> None:
    model = Adder()
    run = await original(model, "2 3")
    call_span = spans(run, "tool_call")[0]
    script = ScriptedModel(["The tool failed."])
    forked = await kode_nb.fork(
        run, at=call_span.span_id, edit={"result": "boom", "is_error": True}, model=script
    )
    assert forked.output == "The tool failed."
    sent = script.requests[0].messages[-1]
    assert getattr(sent, "is_error", None) is True


async def test_system_prompt_and_model_overrides(adds: list[tuple[int, int]]) -> None:
    model = Adder()
    run = await original(model)
    brief = await kode_nb.fork(run, at=3, system_prompt="!brief")
    assert brief.output == "[brief] It is 9."
    assert len(model.requests) == 4
    assert brief.trace.root.attributes["system_prompt"] == "!brief"
    assert brief.trace.root.attributes["forked_from"]["edited"] == ["system_prompt"]
    same = await kode_nb.fork(run, at=3, edit={"system_prompt": "!edit"})
    assert same.output == "[edit] It is 9."
    other = Adder("other", label="B: ")
    swapped = await kode_nb.fork(run, at=2, model=other)
    assert swapped.output == "B: It is 9."
    assert len(other.requests) == 2
    assert len(model.requests) == 5  # the original model was not asked
    calls = spans(swapped, "model_call")
    assert [c.attributes["model"] for c in calls] == ["adder", "other", "other"]
    assert swapped.trace.root.attributes["model"] == "other"
    assert swapped.trace.root.attributes["forked_from"]["edited"] == ["model"]


async def test_a_fork_of_a_trace_loaded_from_json_needs_a_model(
    adds: list[tuple[int, int]],
) -> None:
    run = await original(Adder())
    saved = json.loads(run.trace.to_json())
    saved["trace_id"] = "f" * 32  # a trace this process never ran
    with pytest.raises(ConfigurationError, match=r"pass model=.*'adder'.*does not have"):
        await kode_nb.fork(saved, at=2)
    live = Adder()
    forked = await kode_nb.fork(json.dumps(saved), at=2, model=live)
    assert forked.output == "It is 9."
    assert len(live.requests) == 2
    assert forked.trace.root.attributes["forked_from"]["trace_id"] == "f" * 32


async def test_a_fork_by_trace_id_and_a_fork_of_a_fork(adds: list[tuple[int, int]]) -> None:
    model = Adder()
    run = await original(model)
    forked = await kode_nb.fork(run.trace.trace_id, at=2, edit="2 3 5")
    assert forked.output == "It is 10."
    assert len(model.requests) == 5
    again = await kode_nb.fork(forked.trace.trace_id, at=3, system_prompt="!x")
    assert again.output == "[x] It is 10."
    assert len(model.requests) == 6
    assert again.trace.root.attributes["forked_from"]["trace_id"] == forked.trace.trace_id
    assert again.trace.root.attributes["prompt"] == "2 3 5"


async def test_a_run_with_a_subagent_forks_after_it_without_running_it(
    registry: ToolRegistry,
) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    helper_model = ScriptedModel([call("add", a=20, b=22), "forty-two"])
    register_subagent(AgentDefinition(
        name="helper", description="Adds.", system_prompt="Work on {objective}",
        input_model=Question, tools=["add"], model=helper_model,
    ))  # fmt: skip
    model = ScriptedModel([
        Turn(text="Asking.", calls=[call("helper", objective="20+22")]),
        call("add", a=42, b=1),
        "43.",
    ])  # fmt: skip
    run = await Agent(model=model, tools=["helper", "add"]).run("go")
    assert run.output == "43."
    assert len(helper_model.requests) == 2
    live = ScriptedModel(["Forty-three, then."])
    forked = await kode_nb.fork(run, at=3, model=live)
    assert forked.output == "Forty-three, then."
    assert len(helper_model.requests) == 2
    assert len(live.requests) == 1
    helper_call = spans(forked, "tool_call")[0]
    assert helper_call.attributes["replayed"] is True
    assert not [c for c in helper_call.children if c.kind == "run"]  # not run again
    assert (
        helper_call.attributes["result"]["text"]
        == spans(run, "tool_call")[0].attributes["result"]["text"]
    )
    # the subagent's result edited: the parent's turn 2 goes live with it
    live2 = ScriptedModel([call("add", a=7, b=1), "8."])
    edited = await kode_nb.fork(
        run, at=spans(run, "tool_call")[0].span_id, edit="the helper says 7", model=live2
    )
    assert edited.output == "8."
    assert len(live2.requests) == 2
    assert "the helper says 7" in str(live2.requests[0].messages[-1])
    # a span inside the subagent's run is refused, naming the run
    nested = [s for s in run.trace.root.walk() if s.kind == "model_call"][1]
    assert nested.attributes["model"] == "scripted"
    assert nested.span_id not in {s.span_id for s in spans(run, "model_call")}
    with pytest.raises(ConfigurationError, match="inside the subagent run 'helper'"):
        await kode_nb.fork(run, at=nested.span_id, model=live)


async def test_bad_input_is_refused_with_the_cause(adds: list[tuple[int, int]]) -> None:
    run = await original(Adder())
    call_span = spans(run, "tool_call")[0]
    cases: list[tuple[dict[str, Any], str]] = [
        ({"at": 4}, r"has 3 turn\(s\), so at=4 is outside it"),
        ({"at": 0}, r"at=0 is outside it"),
        ({"at": True}, r"at= takes a turn number \(1..3\)"),
        ({"at": 2.0}, r"at= takes a turn number"),
        ({"at": "0123456789abcdef"}, r"no span '0123456789abcdef' in trace"),
        ({"at": 2, "edit": {"result": "x"}}, r"'result' is not one of its keys"),
        ({"at": call_span.span_id, "edit": {"message": "x"}}, r"'message' is not one of its"),
        ({"at": 2, "edit": 42}, r"edit at a turn \(turn 2\) takes a string"),
        ({"at": 2, "edit": {"message": 3}}, r"edit\['message'\] must be a string"),
        ({"at": call_span.span_id, "edit": {"is_error": True}}, r"needs edit\['result'\]"),
        ({"at": 2, "edit": {"system_prompt": "a"}, "system_prompt": "b"}, "give the system"),
        ({"at": 2, "model": 3}, r"fork: model must be a model name .* got 3"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigurationError, match=message):
            await kode_nb.fork(run, **kwargs)
    with pytest.raises(ConfigurationError, match="no trace 'nosuchtraceid'"):
        await kode_nb.fork("nosuchtraceid", at=1)
    with pytest.raises(ConfigurationError, match="fork takes an AgentRunResult"):
        await kode_nb.fork(3, at=1)
    empty = json.loads(run.trace.to_json())
    empty["root"]["children"] = []
    with pytest.raises(ConfigurationError, match="records no model calls"):
        await kode_nb.fork(empty, at=1, model=Adder())
    bare = json.loads(run.trace.to_json())
    del bare["root"]["children"][0]["children"][0]["attributes"]["response"]
    with pytest.raises(ConfigurationError, match="turn 1's model call has no recorded"):
        await kode_nb.fork(bare, at=2, model=Adder())


async def test_a_subagent_call_forked_without_an_edit_runs_the_subagent_live(
    registry: ToolRegistry,
) -> None:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    made: list[ScriptedModel] = []

    def helper_model() -> ScriptedModel:
        made.append(ScriptedModel([call("add", a=20, b=len(made)), f"helper run {len(made)}"]))
        return made[-1]

    register_subagent(AgentDefinition(
        name="helper", description="Adds.", system_prompt="Work on {objective}",
        input_model=Question, tools=["add"], model=helper_model,
    ))  # fmt: skip
    model = ScriptedModel([
        call("helper", objective="sum"),
        lambda request: "Main saw: " + request.messages[-1].content[0].text,
    ])  # fmt: skip
    run = await Agent(model=model, tools=["helper"]).run("go")
    assert run.output == "Main saw: helper run 1"
    live = ScriptedModel([lambda request: "Fork saw: " + request.messages[-1].content[0].text])
    helper_call = spans(run, "tool_call")[0]
    forked = await kode_nb.fork(run, at=helper_call.span_id, edit=None, model=live)
    assert forked.output == "Fork saw: helper run 2"
    assert len(made) == 3  # one probed at registration, one per run of the subagent
    assert len(live.requests) == 1  # the parent's turn 1 was replayed
    again = spans(forked, "tool_call")[0]
    nested = [c for c in again.children if c.kind == "run"]
    assert [n.name for n in nested] == ["helper"]
    assert "replayed" not in again.attributes
    assert again.attributes["subtree_requests"] == 2


class Answer(BaseModel):
    value: int


async def test_structured_output_and_a_replay_s_trace(adds: list[tuple[int, int]]) -> None:
    model = ScriptedModel([call("add", a=2, b=3), '{"value": 5}'])
    run = await Agent(model=model, tools=["add"], output_model=Answer).run("2+3?")
    assert run.output == Answer(value=5)
    live = ScriptedModel(['{"value": 6}'])
    forked = await kode_nb.fork(run, at=2, model=live, output_model=Answer)
    assert forked.output == Answer(value=6)
    assert live.requests[0].system == model.requests[0].system  # same output instructions
    as_text = await kode_nb.fork(run, at=2, model=ScriptedModel(['{"value": 7}']))
    assert as_text.output == '{"value": 7}'
    replayed = await kode_nb.replay(run)
    with pytest.raises(ConfigurationError, match="the run was a replay"):
        await kode_nb.fork(replayed.result, at=1)


@pytest.mark.parametrize("tools", ["recorded", "execute"])
async def test_replay_of_a_model_that_sends_no_call_ids(
    adds: list[tuple[int, int]], tools: str
) -> None:
    """The loop makes up ids for calls without one (``call_<run id>_<turn>_<n>``): a replay
    makes its own the same way and maps them to the recorded ones, so answers and results match."""
    original = await Agent("blank", model=Adder(blank_ids=True), tools=["add"]).run("2 3 4")
    assert original.output == "It is 9."
    replayed = await kode_nb.replay(original, tools=tools)  # type: ignore[arg-type]
    assert replayed.matches
    assert replayed.output == "It is 9."
    ids = [s.attributes["call_id"] for s in replayed.result.trace.spans() if s.kind == "tool_call"]
    recorded = [s.attributes["call_id"] for s in original.trace.spans() if s.kind == "tool_call"]
    mine, theirs = f"call_{replayed.result.run_id}_", f"call_{original.run_id}_"
    assert ids == [i.replace(theirs, mine) for i in recorded]
    assert len(ids) == 2
    assert all(i.startswith(mine) for i in ids)


async def test_a_scripted_run_that_used_its_script_up_asks_for_model(
    adds: list[tuple[int, int]],
) -> None:
    run = await Agent(model=ScriptedModel([call("add", a=1, b=2), "three"]), tools=["add"]).run(
        "1 2"
    )
    first_call = spans(run, "tool_call")[0]
    with pytest.raises(ConfigurationError, match=r"pass model=.*ScriptedModel whose script"):
        await kode_nb.fork(run, at=first_call.span_id, edit={"result": "4"})
    forked = await kode_nb.fork(
        run, at=first_call.span_id, edit={"result": "4"}, model=ScriptedModel(["four"])
    )
    assert forked.output == "four"


async def test_a_scripted_model_run_out_of_turns_in_the_fork_says_to_pass_model(
    adds: list[tuple[int, int]],
) -> None:
    script = ScriptedModel([call("add", a=1, b=2), "three", call("add", a=2, b=2)])
    run = await Agent(model=script, tools=["add"]).run("1 2")  # one turn of the script left
    forked = await kode_nb.fork(run, at=1, edit="again")  # its call, then a turn it lacks
    assert forked.status == "error"
    assert forked.error is not None
    assert "ScriptedModel ran out of turns" in forked.error
    assert "pass model=" in forked.error
    assert forked.trace.root.error == forked.error


def _own_registry() -> tuple[ToolRegistry, list[str]]:
    own, seen = ToolRegistry(), []

    def mul(a: int, b: int) -> int:
        """Multiply two integers."""
        seen.append(f"{a}*{b}")
        return a * b

    define_tool(mul, inline=True, registry=own)
    return own, seen


async def test_a_fork_runs_on_the_runs_own_registry(registry: ToolRegistry) -> None:
    own, seen = _own_registry()
    assert registry.get("mul") is None  # not in the current (default) registry
    script = ScriptedModel([call("mul", a=2, b=3), "six"])
    run = await Agent(model=script, tools=["mul"], executor=kode_nb.Executor(own)).run("2*3")
    assert run.output == "six"
    live = ScriptedModel([call("mul", a=4, b=5), "twenty"])
    forked = await kode_nb.fork(run, at=1, edit="4*5", model=live)
    assert forked.output == "twenty"
    assert seen == ["2*3", "4*5"]  # the fork's call ran in the run's own registry
    again = await kode_nb.fork(
        forked, at=1, edit="1*1", model=ScriptedModel([call("mul", a=1, b=1), "one"])
    )
    assert again.output == "one"  # a fork of a fork too
    assert seen[-1] == "1*1"


async def test_a_fork_without_the_runs_executor_names_executor(registry: ToolRegistry) -> None:
    own, seen = _own_registry()
    script = ScriptedModel([call("mul", a=2, b=3), "six"])
    run = await Agent(model=script, tools=["mul"], executor=kode_nb.Executor(own)).run("2*3")
    saved = json.loads(run.trace.to_json())
    saved["trace_id"] = "e" * 32  # a trace this process never ran: its executor is unknown
    live = ScriptedModel([call("mul", a=4, b=5), "twenty"])
    with pytest.raises(
        ConfigurationError, match=r"'mul' is not in the current registry.*executor="
    ):
        await kode_nb.fork(saved, at=1, edit="4*5", model=live)
    forked = await kode_nb.fork(saved, at=1, edit="4*5", model=live, executor=kode_nb.Executor(own))
    assert forked.output == "twenty"
    assert seen == ["2*3", "4*5"]
