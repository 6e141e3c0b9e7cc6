"""The cell "Fork from here" inserts (kode_nb/debug/_fork_cell.py): it holds the trace as the
notebook saved it (compact), names its model, and runs as written, also where the kernel knows
nothing of the run (after a restart)."""

from __future__ import annotations

import ast
import json
from collections import OrderedDict
from typing import Any

import pytest
from fork_helpers import Adder

import kode_nb
from kode_nb import ConfigurationError, ToolRegistry, define_tool
from kode_nb.agents import Agent
from kode_nb.debug import _fork_cell
from kode_nb.debug._fork_cell import fork_cell
from kode_nb.models import OpenAIChatModel, ScriptedModel, TestModel, resolve_model
from kode_nb.models.scripted import Turn, call, raw_call
from kode_nb.traces import _known
from kode_nb.traces._compact import compact

pytestmark = pytest.mark.anyio


def saved(run: Any) -> dict[str, Any]:
    """The run's trace as a notebook saves it (the run record's compact form, through JSON)."""
    data: dict[str, Any] = json.loads(json.dumps(compact(run.trace.to_dict())))
    return data


def spans(run: Any, kind: str) -> list[Any]:
    return [s for t in run.trace.root.children for s in t.children if s.kind == kind]


def restart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forget every run this process knows, as a restarted kernel would."""
    monkeypatch.setattr(_known, "_TRACES", OrderedDict())
    monkeypatch.setattr(_known, "_HOT", OrderedDict())
    monkeypatch.setattr(_known, "_total", 0)
    for name in ("_SIZES", "_MODELS", "_EXECUTORS"):
        monkeypatch.setattr(_known, name, {})


async def run_cell(source: str, **names: Any) -> Any:
    """Run a cell's code (top-level await) and return its ``forked``."""
    tree = ast.parse(source)
    body = "\n".join("    " + line for line in source.splitlines())
    code = f"async def _cell():\n{body}\n    return forked\n"
    assert isinstance(tree.body[-1], ast.Expr)  # the cell shows `forked`
    scope: dict[str, Any] = dict(names)
    exec(compile(code, "<fork cell>", "exec"), scope)
    return await scope["_cell"]()


def code_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if not line.startswith("#")]


async def test_a_scripted_run_forks_with_its_recorded_answers_after_a_restart(
    adds: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([
        Turn(text="Adding.", calls=[call("add", a=2, b=3)]),
        [call("add", a=5, b=4), call("add", a=1, b=1)],
        "It is 9.",
    ])  # fmt: skip
    run = await Agent(model=model, tools=["add"]).run("2 3 4")
    assert model.remaining == 0  # the run used the whole script
    turn_2 = [s for s in run.trace.root.children if s.kind == "turn"][1]
    cell = fork_cell(saved(run), turn_2.span_id, known_model=model)
    restart(monkeypatch)
    assert run.trace.trace_id not in "\n".join(code_lines(cell.source)[5:])  # no id: the trace
    assert code_lines(cell.source)[-6:] == [
        "    model=ScriptedModel([",
        '        [call("add", a=5, b=4), call("add", a=1, b=1)],',
        '        "It is 9.",',
        "    ]),",
        ")",
        "forked",
    ]
    assert cell.model.startswith("ScriptedModel([")
    assert "recorded" in cell.source.split("import kode_nb")[0]  # the comment says what it is
    before = list(adds)
    forked = await run_cell(cell.source)
    assert (forked.status, forked.output) == ("completed", "It is 9.")
    assert adds == [*before, (5, 4), (1, 1)]  # turn 1 replayed; turn 2's calls ran again
    assert str(kode_nb.diverge(run, forked)).endswith("parent and fork do not differ>")
    assert forked.trace.root.attributes["forked_from"]["trace_id"] == run.trace.trace_id


async def test_a_fork_at_a_tool_call_takes_the_answers_after_its_turn(
    adds: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([call("add", a=2, b=3), call("add", a=5, b=4), "It is 9."])
    run = await Agent(model=model, tools=["add"]).run("2 3 4")
    first_call = spans(run, "tool_call")[0]
    cell = fork_cell(saved(run), first_call.span_id, known_model=model)
    assert 'edit: "text"' in cell.source
    restart(monkeypatch)
    edited = cell.source.replace("edit=None", 'edit="50"')
    forked = await run_cell(edited)
    assert forked.output == "It is 9."  # a script answers as written, whatever the result
    difference = kode_nb.diverge(run, forked)
    assert (difference.turn, difference.what) == (1, "tool result")
    assert adds[-1] == (5, 4)  # turn 2's call, scripted: its arguments are the recorded ones


async def test_a_model_a_notebook_variable_holds_is_named_by_it(
    adds: list[tuple[int, int]],
) -> None:
    adder = Adder()
    run = await Agent(model=adder, tools=["add"]).run("2 3 4")
    at = spans(run, "model_call")[0].span_id
    cell = fork_cell(saved(run), at, known_model=adder, model_variable="adder")
    assert cell.model == "adder"
    assert "from kode_nb.models import ScriptedModel" not in cell.source
    edited = cell.source.replace("edit=None", 'edit="10 20"')
    forked = await run_cell(edited, adder=Adder())  # a new kernel's own object, same name
    assert forked.output == "It is 30."  # the live model read the new prompt


async def test_a_model_no_variable_holds_gets_its_recorded_answers_and_a_comment(
    adds: list[tuple[int, int]],
) -> None:
    run = await Agent(model=Adder(), tools=["add"]).run("2 3 4")
    at = spans(run, "model_call")[1].span_id
    cell = fork_cell(saved(run), at, known_model=Adder())
    assert "model: the run's model 'adder' is held by no variable" in cell.source
    assert "Put the model to ask here" in cell.source
    forked = await run_cell(cell.source)
    assert forked.output == "It is 9."


async def test_a_test_model_run_names_a_test_model_with_its_settings(
    adds: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = TestModel(seed=3, text="Done.")
    run = await Agent(model=model, tools=["add"]).run("Add 2 and 3.")
    at = spans(run, "model_call")[0].span_id
    cell = fork_cell(saved(run), at, known_model=model)
    assert cell.model == 'TestModel(seed=3, text="Done.")'
    restart(monkeypatch)
    forked = await run_cell(cell.source)
    assert (forked.status, forked.output) == ("completed", "Done.")
    assert str(kode_nb.diverge(run, forked)).endswith("parent and fork do not differ>")
    unknown = fork_cell(saved(run), at)  # no model object: the default TestModel
    assert unknown.model == "TestModel()"


def test_a_server_model_is_named_by_the_model_string_that_rebuilds_it() -> None:
    choose = _fork_cell._model_string
    local = resolve_model("openai-compatible:http://127.0.0.1:9/v1#llama3.2")
    assert choose(local, local.name) == "openai-compatible:http://127.0.0.1:9/v1#llama3.2"
    hosted = resolve_model("openai:gpt-4.1-mini")
    assert choose(hosted, "openai:gpt-4.1-mini") == "openai:gpt-4.1-mini"
    made = OpenAIChatModel("qwen", base_url="http://127.0.0.1:9/v1", api_key_env=None)
    assert made.name == "openai:qwen"  # its name alone would send it to api.openai.com
    assert choose(made, made.name) == "openai-compatible:http://127.0.0.1:9/v1#qwen"
    keyed = OpenAIChatModel("qwen", base_url="http://127.0.0.1:9/v1", api_key_env="MY_KEY")
    assert choose(keyed, keyed.name) is None  # the string form would lose its key's variable
    unstreamed = resolve_model("openai:gpt-4.1-mini", stream=False)
    assert choose(unstreamed, unstreamed.name) is None  # a setting the string does not carry
    assert choose(None, "anthropic:claude-sonnet-4-5") == "anthropic:claude-sonnet-4-5"
    assert choose(None, "my-model") is None


async def test_a_huge_trace_is_named_by_its_id_with_a_note(
    adds: list[tuple[int, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    model = ScriptedModel([call("add", a=2, b=3), "It is 5."])
    run = await Agent(model=model, tools=["add"]).run("2 3")
    monkeypatch.setattr(_fork_cell, "MAX_EMBED", 100)
    cell = fork_cell(saved(run), spans(run, "model_call")[1].span_id)
    assert f'TRACE = "{run.trace.trace_id}"' in cell.source
    assert len(cell.notes) == 1
    assert "names it by its id" in cell.notes[0]
    forked = await run_cell(cell.source)  # this process knows the run
    assert forked.output == "It is 5."


async def test_recorded_calls_are_written_back_as_the_model_sent_them(
    registry: ToolRegistry,
) -> None:
    def note(args: dict[str, Any]) -> str:
        """Keep a note."""
        return str(args["text"])

    schema = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
    define_tool(note, parameters=schema, inline=True)
    model = ScriptedModel([
        raw_call("note", '{"text": 5'),
        call("note", **{"text": "x", "class": 1, "a-b": None, "ok": True}),
        "Noted.",
    ])  # fmt: skip
    run = await Agent(model=model, tools=["note"]).run("go")
    assert run.status == "completed", run.error
    cell = fork_cell(saved(run), spans(run, "model_call")[0].span_id, known_model=model)
    lines = code_lines(cell.source)
    assert "from kode_nb.models.scripted import call, raw_call" in lines
    assert '        raw_call("note", "{\\"text\\": 5"),' in lines  # sent unchecked, as it was
    assert "        call(\"note\", **{'text': 'x', 'class': 1, 'a-b': None, 'ok': True})," in lines
    forked = await run_cell(cell.source)
    assert (forked.status, forked.output) == ("completed", "Noted.")
    assert str(kode_nb.diverge(run, forked)).endswith("parent and fork do not differ>")


async def test_what_cannot_be_forked_is_refused_before_a_cell_is_made(
    adds: list[tuple[int, int]],
) -> None:
    run = await Agent(model=ScriptedModel([call("add", a=1, b=2), "3"]), tools=["add"]).run("x")
    data = saved(run)
    with pytest.raises(ConfigurationError, match="no span 'nope'"):
        fork_cell(data, "nope")
    framework = run.trace.to_dict()
    framework["root"]["attributes"]["framework"] = "pydantic-ai"
    with pytest.raises(ConfigurationError, match="captured from a pydantic-ai run"):
        fork_cell(framework, spans(run, "model_call")[0].span_id)
