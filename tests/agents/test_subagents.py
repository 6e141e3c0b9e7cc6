"""Subagents as tools (seeds 000, 003): registration, the input contract, delegation, isolation,
permissions, approval, depth, unavailable folding, events and nested traces."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from agent_helpers import LaxModel, Recorder
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, Field, create_model

from kode_nb import (
    CallbackApprover,
    Executor,
    Policy,
    ToolCategory,
    ToolDefinitionError,
    ToolKind,
    ToolRegistry,
    ToolResult,
    define_tool,
    deny,
    use_registry,
)
from kode_nb.agents import (
    Agent,
    AgentDefinition,
    compress_context,
    register_subagent,
    subagent_tool,
)
from kode_nb.models import Message, ModelRequest, ScriptedModel, ToolResultMessage, UserMessage
from kode_nb.models.scripted import call
from kode_nb.policy import ApprovalRequest
from kode_nb.tools._raw_schema import input_config_schema

pytestmark = pytest.mark.anyio


class Investigate(BaseModel):
    objective: str = Field(description="What to find out")
    max_files: int = 5


@pytest.fixture
def math(registry: ToolRegistry) -> ToolRegistry:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def mul(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    define_tool(add, inline=True)
    define_tool(mul, inline=True)
    return registry


def researcher(model: Any, **changes: Any) -> AgentDefinition:
    options: dict[str, Any] = {
        "name": "researcher", "description": "Investigates a question with arithmetic.",
        "system_prompt": "Investigate: {objective} (at most {max_files} files)",
        "input_model": Investigate, "tools": ["add"], "model": model, **changes,
    }  # fmt: skip
    return AgentDefinition(**options)


def tool_texts(messages: Sequence[Message]) -> list[str]:
    return [
        ToolResult(content=m.content).text for m in messages if isinstance(m, ToolResultMessage)
    ]


# --------------------------------------------------------------------------- registration


def test_a_subagent_is_a_think_tool_whose_parameters_are_the_input_model(
    math: ToolRegistry,
) -> None:
    tool = register_subagent(researcher(ScriptedModel(["x"])))
    assert math.get("researcher") is tool
    assert tool.kind is ToolKind.THINK
    assert tool.category is ToolCategory.AGENT
    assert tool.is_output_markdown
    assert tool.can_update_output
    assert tool.description == "Investigates a question with arithmetic."
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "objective": {"description": "What to find out", "type": "string"},
            "max_files": {"default": 5, "type": "integer"},
        },
        "required": ["objective"],
        "additionalProperties": False,
    }
    again = register_subagent(researcher(ScriptedModel(["y"])))  # a re-run cell replaces it
    assert math.get("researcher") is again


def test_an_input_config_subagent_has_the_seed_000_schema(math: ToolRegistry) -> None:
    config = {"inputs": {"objective": {"description": "Investigation goal", "type": "string", "required": True},
                         "max_files": {"description": "Maximum files", "type": "integer", "required": False}}}  # fmt: skip
    tool = register_subagent(
        researcher(ScriptedModel(["x"]), input_model=None, input_config=config)
    )
    assert tool.parameters == input_config_schema(config)
    assert tool.parameters["required"] == ["objective"]


_TYPES = st.sampled_from([str, int, float, bool, list[str], dict[str, int]])
_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True).filter(
    lambda n: not n.startswith("model_") and n not in dir(BaseModel)  # pydantic warns on those
)


@given(fields=st.dictionaries(_NAMES, st.tuples(_TYPES, st.booleans()), min_size=0, max_size=6))
@settings(max_examples=60, deadline=None)
def test_the_tool_schema_has_exactly_the_input_models_fields(
    fields: dict[str, tuple[type[Any], bool]],
) -> None:
    spec: dict[str, Any] = {
        name: (kind, ... if required else None) for name, (kind, required) in fields.items()
    }
    model = create_model("Inputs", **spec)
    definition = AgentDefinition(
        name="probe", description="d", system_prompt="go", input_model=model,
        model=ScriptedModel(["x"]),
    )  # fmt: skip
    with use_registry(ToolRegistry()):
        tool = register_subagent(definition)
    schema = tool.parameters
    assert set(schema["properties"]) == set(model.model_fields)
    assert set(schema.get("required", [])) == {
        n for n, f in model.model_fields.items() if f.is_required()
    }
    assert schema.get("additionalProperties") is False


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"system_prompt": "Find {goal}"},
            r"system_prompt uses \{goal\}, but 'goal' is not an input; inputs: objective, max_files",
        ),
        ({"system_prompt": "Find {}"}, "positional placeholder"),
        ({"system_prompt": "Find {objective"}, "not a valid template"),
        ({"input_config": {"inputs": {}}}, "exactly one of input_model= .* or input_config="),
        ({"input_model": None}, "exactly one of"),
        ({"input_model": dict}, "input_model must be a pydantic BaseModel subclass"),
        ({"name": "bad name!"}, "invalid tool name"),
        ({"description": " "}, "needs a description"),
        ({"max_depth": 0}, "max_depth must be an int >= 1"),
        ({"time_limit": 0}, "time_limit must be a positive number"),
        ({"compress_context": "summary"}, "compress_context must be callable"),
    ],
)
def test_bad_definitions_are_rejected(
    math: ToolRegistry, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(ToolDefinitionError, match=message):
        researcher(ScriptedModel(["x"]), **changes)


def test_the_construction_probe_rejects_unresolvable_tools_and_models(math: ToolRegistry) -> None:
    with pytest.raises(
        ToolDefinitionError,
        match=r"cannot be constructed: subagent 'researcher': unknown tool 'ad'\. Did you mean: 'add'\?",
    ):
        register_subagent(researcher(ScriptedModel(["x"]), tools=["ad"]))
    with pytest.raises(
        ToolDefinitionError, match=r"cannot be constructed: .*unknown model 'gpt-9'"
    ):
        register_subagent(researcher("gpt-9"))
    with pytest.raises(ToolDefinitionError, match="model factory returned 42"):
        register_subagent(researcher(lambda: 42))

    def failing() -> Any:
        raise OSError("no GPU")

    with pytest.raises(ToolDefinitionError, match="model factory raised OSError: no GPU"):
        register_subagent(researcher(failing))
    with pytest.raises(ToolDefinitionError, match="model must be a model name"):
        register_subagent(researcher(3.5))
    assert "researcher" not in math
    unregistered = register_subagent(researcher(ScriptedModel(["x"])), registry=None)
    assert "researcher" not in math
    assert unregistered.name == "researcher"
    with pytest.raises(ToolDefinitionError, match="expected an AgentDefinition"):
        subagent_tool({"name": "x"})  # type: ignore[arg-type]


# --------------------------------------------------------------------------- delegation


async def test_a_call_runs_a_fresh_subagent_and_folds_its_answer(math: ToolRegistry) -> None:
    child = ScriptedModel([call("add", a=2, b=3), "The answer is 5."])
    register_subagent(researcher(child))
    parent = ScriptedModel([call("researcher", objective="two plus three"), "It is 5."])
    recorder = Recorder()
    result = await Agent(model=parent, tools=["researcher"]).run("What is 2+3?", on_event=recorder)
    assert result.status == "completed"
    assert result.output == "It is 5."
    folded = recorder.of("tool_call_finished")[-1].result
    assert folded.text == "The answer is 5."
    assert not folded.is_error
    details = folded.details
    assert details["subagent"] == "researcher"
    assert details["parent_call_id"] == "scripted-1-1"
    assert details["status"] == "completed"
    assert details["turns"] == 2
    assert details["depth"] == 1
    assert details["unavailable"] is False
    assert details["usage"]["requests"] == 2
    first = child.requests[0]
    assert first.system == "Investigate: two plus three (at most 5 files)"
    assert [s.name for s in first.tools] == ["add"]
    assert len(first.messages) == 1  # a fresh memory: only its own first message
    prompt = first.messages[0]
    assert isinstance(prompt, UserMessage)
    assert prompt.content.startswith("The user's request to the calling agent: What is 2+3?")
    assert '"objective": "two plus three"' in prompt.content
    assert "What is 2+3?" not in repr(child.requests[0].messages[1:])
    assert result.usage.requests == 2
    assert result.total_usage.requests == 4  # with the subagent's two model calls
    assert result.total_usage.tool_calls == 2
    assert recorder.of("run_started")[0].trace is result.trace
    types = recorder.types()
    assert types.index("subagent_started") < types.index("subagent_finished")
    child_events = [e for e in recorder.events if e.depth == 1]
    assert child_events[0].type == "subagent_started"
    assert child_events[-1].type == "subagent_finished"
    assert {e.parent_call_id for e in child_events} == {"scripted-1-1"}


async def test_a_subagent_cuts_long_results_like_its_parent(math: ToolRegistry) -> None:
    def spill(n: int) -> str:
        """Return n characters."""
        return "z" * n

    define_tool(spill)
    child = ScriptedModel([call("spill", n=5000), "Seen."])
    register_subagent(researcher(child, tools=["spill"]))
    parent = ScriptedModel([call("researcher", objective="spill"), "Done."])
    await Agent(model=parent, tools=["researcher"], max_result_chars=300).run("go")
    (text,) = tool_texts(child.requests[1].messages)
    assert text.startswith("z" * 300 + "\n[Output cut: the tool returned 5,000 characters")


async def test_the_compression_hook_gets_the_parent_messages_and_inputs(math: ToolRegistry) -> None:
    calls: list[tuple[list[Message], dict[str, Any]]] = []

    async def summarise(messages: Sequence[Message], inputs: Mapping[str, Any]) -> str:
        calls.append((list(messages), dict(inputs)))
        return "CONTEXT: parent is adding"

    child = ScriptedModel(["done"])
    register_subagent(researcher(child, compress_context=summarise))
    parent = ScriptedModel([call("researcher", objective="x", max_files=2), "ok"])
    await Agent(model=parent, tools=["researcher"]).run("please add")
    assert len(calls) == 1
    messages, inputs = calls[0]
    assert inputs == {"objective": "x", "max_files": 2}
    assert isinstance(messages[0], UserMessage)
    assert messages[0].content == "please add"
    assert child.requests[0].messages[0].content.startswith("CONTEXT: parent is adding\n\n")  # type: ignore[union-attr]


async def test_parallel_subagent_calls_are_isolated(math: ToolRegistry) -> None:
    gate = asyncio.Event()
    arrived: list[str] = []

    def make_child() -> ScriptedModel:  # each call gets its own model (and memory)
        def answer(request: ModelRequest) -> str:
            text = request.messages[0].content  # type: ignore[union-attr]
            return (
                "saw "
                + ("apples" if "apples" in text else "pears")
                + f" with {len(request.messages)} messages"
            )

        return ScriptedModel([call("add", a=1, b=1), answer])

    async def slow_add(a: int, b: int) -> int:
        """Add, once both children got here."""
        arrived.append(f"{a}+{b}")
        if len(arrived) == 2:
            gate.set()
        await asyncio.wait_for(gate.wait(), 2)
        return a + b

    define_tool(slow_add, name="add", replace=True)
    register_subagent(researcher(make_child))
    parent = ScriptedModel(
        [
            [
                call("researcher", objective="count apples"),
                call("researcher", objective="count pears"),
            ],
            "both done",
        ]
    )
    result = await Agent(model=parent, tools=["researcher"]).run("count fruit")
    assert result.status == "completed"
    assert len(arrived) == 2
    assert tool_texts(result.messages) == [
        "saw apples with 3 messages",
        "saw pears with 3 messages",
    ]
    runs = result.trace.root.find(kind="run")
    assert [r.name for r in runs] == ["main", "researcher", "researcher"]
    assert runs[1].attributes["run_id"] != runs[2].attributes["run_id"]
    assert "apples" in runs[1].attributes["system_prompt"]
    assert "pears" in runs[2].attributes["system_prompt"]


async def test_permissions_only_narrow_a_tool_denied_for_the_parent_is_denied_for_the_child(
    math: ToolRegistry,
) -> None:
    ran: list[str] = []

    def launch(target: str) -> str:
        """Launch something."""
        ran.append(target)
        return "launched"

    define_tool(launch)
    child = LaxModel([[("launch", {"target": "moon"})], "could not"])
    register_subagent(researcher(child, tools=["add", "launch"]))
    executor = Executor(policy=Policy(deny=["launch"]))
    parent = ScriptedModel([call("researcher", objective="go"), "ok"])
    result = await Agent(model=parent, tools=["researcher"], executor=executor).run("go")
    assert ran == []
    assert [s.name for s in child.requests[0].tools] == ["add"]  # not even offered
    denied = child.requests[1].messages[-1]
    assert isinstance(denied, ToolResultMessage)
    assert denied.is_error
    text = ToolResult(content=denied.content).text
    assert "denied for the parent agent (denied by 'launch')" in text
    assert result.status == "completed"


async def test_the_child_never_gets_tools_outside_its_allowlist(math: ToolRegistry) -> None:
    child = LaxModel([[("mul", {"a": 2, "b": 3}), ("researcher", {"objective": "again"})], "ok"])
    register_subagent(researcher(child, tools=["add"]))
    parent = ScriptedModel([call("researcher", objective="go"), "ok"])
    await Agent(model=parent, tools=["researcher", "mul", "add"]).run("go")
    assert [s.name for s in child.requests[0].tools] == ["add"]
    texts = tool_texts(child.requests[1].messages)
    assert all("Unknown tool" in t for t in texts)
    assert len(texts) == 2


@pytest.mark.parametrize("approved", [True, False])
async def test_approvals_inside_a_subagent_go_through_the_parents_approver(
    registry: ToolRegistry, approved: bool
) -> None:
    written: list[str] = []

    def write_note(text: str) -> str:
        """Write a note (an edit: asks first)."""
        written.append(text)
        return "written"

    define_tool(write_note, kind="edit")
    asked: list[ApprovalRequest] = []

    def decide(request: ApprovalRequest) -> Any:
        asked.append(request)
        return True if approved else deny("not today")

    child = ScriptedModel([call("write_note", text="hello"), "finished"])
    register_subagent(researcher(child, tools=["write_note"]))
    executor = Executor(approver=CallbackApprover(decide))
    recorder = Recorder()
    parent = ScriptedModel([call("researcher", objective="note"), "ok"])
    result = await Agent(model=parent, tools=["researcher"], executor=executor).run(
        "go", on_event=recorder
    )
    assert len(asked) == 1
    request = asked[0]
    assert request.tool == "write_note"
    assert request.kind == "edit"
    assert request.parent_call_id == "scripted-1-1"  # the subagent's call
    child_run = recorder.of("subagent_started")[0].run_id
    assert request.run_id == child_run
    answer = child.requests[1].messages[-1]
    assert isinstance(answer, ToolResultMessage)
    if approved:
        assert written == ["hello"]
        assert not answer.is_error
    else:
        assert written == []
        assert answer.is_error
        assert "not today" in ToolResult(content=answer.content).text
    assert result.status == "completed"
    span = result.trace.root.find(kind="tool_call", name="execute_tool write_note")[0]
    names = [e["name"] for e in span.events]
    assert "approval_requested" in names
    assert "approval_resolved" in names


# --------------------------------------------------------------------------- failures fold


async def test_invalid_inputs_fold_into_an_unavailable_result(math: ToolRegistry) -> None:
    child = ScriptedModel(["never"])
    register_subagent(researcher(child))
    parent = LaxModel([[("researcher", {"max_files": "many"})], "carried on"])
    recorder = Recorder()
    result = await Agent(model=parent, tools=["researcher"]).run("go", on_event=recorder)
    assert result.status == "completed"
    assert result.output == "carried on"
    folded = recorder.of("tool_call_finished")[0].result
    assert folded.is_error
    assert folded.status == "invalid_arguments"
    assert folded.error_type == "ToolValidationError"  # as any tool's invalid arguments
    assert folded.details["unavailable"] is True  # it did not run
    assert folded.text.startswith("Invalid arguments for subagent 'researcher' (it did not run):")
    assert '"objective": <string, required' in folded.text  # the shape of a valid call
    assert "`objective`: required field is missing" in folded.text
    assert "`max_files`" in folded.text
    assert child.requests == []


@pytest.mark.parametrize(
    ("child", "changes", "expected"),
    [
        (ScriptedModel([]), {}, "model error (ScriptExhausted)"),
        (ScriptedModel([call("add", a=1, b=1)] * 3), {"max_turns": 2}, "turn limit (max_turns=2)"),
    ],
)
async def test_child_failures_fold_and_the_parent_continues(
    math: ToolRegistry, child: Any, changes: dict[str, Any], expected: str
) -> None:
    register_subagent(researcher(child, **changes))
    parent = ScriptedModel([call("researcher", objective="go"), "parent finished"])
    result = await Agent(model=parent, tools=["researcher"]).run("go")
    assert result.status == "completed"
    assert result.output == "parent finished"
    (text,) = tool_texts(result.messages)
    assert text.startswith("Subagent 'researcher' unavailable: ")
    assert expected in text


async def test_a_child_time_limit_folds_into_unavailable(registry: ToolRegistry) -> None:
    async def stall() -> str:
        """Takes forever."""
        await asyncio.sleep(30)
        return "never"

    define_tool(stall)
    register_subagent(
        researcher(ScriptedModel([call("stall"), "x"]), tools=["stall"], time_limit=0.1)
    )
    parent = ScriptedModel([call("researcher", objective="go"), "done"])
    result = await Agent(model=parent, tools=["researcher"]).run("go")
    (text,) = tool_texts(result.messages)
    assert "time limit (0.1 s)" in text
    assert result.status == "completed"


async def test_subagents_may_call_subagents_up_to_the_depth_limit(math: ToolRegistry) -> None:
    def nested() -> ScriptedModel:  # every level calls itself again, then reports what it got
        def report(request: ModelRequest) -> str:
            last = request.messages[-1]
            assert isinstance(last, ToolResultMessage)
            return "level saw: " + ToolResult(content=last.content).text

        return ScriptedModel([call("researcher", objective="deeper"), report])

    register_subagent(researcher(nested, tools=["researcher"], max_depth=2))
    parent = ScriptedModel([call("researcher", objective="start"), "top"])
    result = await Agent(model=parent, tools=["researcher"]).run("go")
    (text,) = tool_texts(result.messages)
    assert text.startswith(
        "level saw: level saw: Subagent 'researcher' unavailable: the subagent depth limit"
    )
    assert "depth 3" in text
    assert "max_depth=2" in text
    depths = [r.attributes["depth"] for r in result.trace.root.find(kind="run")]
    assert depths == [0, 1, 2]


async def test_the_parents_model_is_inherited_when_the_definition_has_none(
    math: ToolRegistry,
) -> None:
    shared = ScriptedModel([call("researcher", objective="x"), "child answer", "parent answer"])
    register_subagent(researcher(None))
    result = await Agent(model=shared, tools=["researcher"]).run("go")
    assert result.output == "parent answer"
    assert tool_texts(result.messages) == ["child answer"]


async def test_a_direct_call_runs_outside_any_agent(math: ToolRegistry) -> None:
    executor = Executor()
    updates: list[Any] = []
    executor.bus.subscribe(lambda e: updates.append(e.data) if e.type == "update" else None)
    register_subagent(researcher(ScriptedModel(["Direct answer here."])), executor=executor)
    result = await executor.call("researcher", {"objective": "x"})
    assert result.status == "ok"
    assert result.text == "Direct answer here."
    assert result.details["depth"] == 1
    assert result.details["trace"].root.status == "completed"
    assert "".join(updates) == "Direct answer here."  # the child's text streams as updates
    register_subagent(researcher(None))
    orphan = await executor.call("researcher", {"objective": "x"})
    assert orphan.is_error
    assert "no calling agent to inherit one from" in orphan.text


async def test_the_parents_time_limit_cancels_a_running_subagent(registry: ToolRegistry) -> None:
    async def stall() -> str:
        """Takes forever."""
        await asyncio.sleep(30)
        return "never"

    define_tool(stall)
    register_subagent(researcher(ScriptedModel([call("stall"), "x"]), tools=["stall"]))
    parent = ScriptedModel([call("researcher", objective="go"), "unreached"])
    result = await Agent(model=parent, tools=["researcher"], time_limit=0.2).run("go")
    assert result.status == "time_limit"
    (text,) = tool_texts(result.messages)
    assert "Tool 'researcher' was cancelled" in text
    child = result.trace.root.find(kind="run", name="researcher")[0]
    assert child.status == "cancelled"
    assert child.find(kind="tool_call")[0].status == "cancelled"


async def test_a_nested_run_is_traced_under_the_parents_tool_call(math: ToolRegistry) -> None:
    register_subagent(researcher(ScriptedModel([call("add", a=1, b=2), "3"])))
    parent = ScriptedModel([call("researcher", objective="sum"), "3 it is"])
    result = await Agent(model=parent, tools=["researcher"]).run("go")
    tool_span = result.trace.root.find(kind="tool_call", name="execute_tool researcher")[0]
    (child_run,) = tool_span.children
    assert child_run.kind == "run"
    assert child_run.name == "researcher"
    assert child_run.status == "completed"
    assert child_run.attributes["parent_call_id"] == "scripted-1-1"
    assert child_run.find(kind="tool_call")[0].attributes["result"]["text"] == "3"
    otel = result.trace.to_otel()
    assert {s["trace_id"] for s in otel} == {result.trace.trace_id}
    by_id = {s["span_id"]: s for s in otel}
    inner = next(s for s in otel if s["name"] == "invoke_agent researcher")
    assert by_id[inner["parent_span_id"]]["name"] == "execute_tool researcher"


# --------------------------------------------------------------------------- the caller's policy


class Task(BaseModel):
    task: str


def _helper_registry(tmp_path: Any, registry: ToolRegistry) -> tuple[list[str], Any, Any]:
    """``parent_denied`` (records each run), the fs built-ins, a root and a secret file outside."""
    from kode_nb.builtins import register_builtins

    ran: list[str] = []

    def parent_denied(target: str) -> str:
        """Does something the caller's policy denies."""
        ran.append(target)
        return "ran"

    define_tool(parent_denied)
    register_builtins(registry, ["fs"])
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.txt").write_text("inside text")
    outside = tmp_path / "outside.txt"
    outside.write_text("OUTSIDE-SECRET-CONTENT")
    return ran, root, outside


def _helper(child: Any) -> AgentDefinition:
    return AgentDefinition(
        name="helper", description="Helps.", system_prompt="Help.", input_model=Task,
        tools=["parent_denied", "read_file"], model=child,
    )  # fmt: skip


async def test_a_subagent_called_through_an_executor_keeps_its_policy(
    registry: ToolRegistry, tmp_path: Any
) -> None:
    ran, root, outside = _helper_registry(tmp_path, registry)
    child = LaxModel(
        [[("parent_denied", {"target": "x"}), ("read_file", {"path": str(outside)}),
          ("read_file", {"path": "inside.txt"})], "done"]
    )  # fmt: skip
    register_subagent(_helper(child))
    executor = Executor(policy=Policy(deny=["parent_denied"], allowed_paths=[root]))
    result = await executor.call("helper", {"task": "go"})
    assert result.status == "ok", result.text
    assert ran == []
    assert [s.name for s in child.requests[0].tools] == ["read_file"]
    denied, escaped, inside = tool_texts(child.requests[1].messages)
    assert "denied for the parent agent (denied by 'parent_denied')" in denied
    assert "outside the allowed paths" in escaped
    assert "OUTSIDE-SECRET-CONTENT" not in "".join(tool_texts(child.requests[1].messages))
    assert "inside text" in inside


async def test_a_subagent_inherits_the_calls_approver_and_headless_ask_is_deny(
    registry: ToolRegistry,
) -> None:
    written: list[str] = []

    def write_note(text: str) -> str:
        """Write a note (an edit: asks first)."""
        written.append(text)
        return "written"

    define_tool(write_note, kind="edit")
    child = ScriptedModel([call("write_note", text="a"), "done"])
    register_subagent(
        AgentDefinition(name="helper", description="Helps.", system_prompt="Help.",
                        input_model=Task, tools=["write_note"], model=child)
    )  # fmt: skip
    headless = Executor(policy=Policy())
    result = await headless.call("helper", {"task": "go"})
    assert written == []
    assert result.status == "ok"
    asked: list[str] = []

    def approve(request: ApprovalRequest) -> bool:
        asked.append(request.tool)
        return True

    child2 = ScriptedModel([call("write_note", text="c"), "done"])
    register_subagent(
        AgentDefinition(name="helper", description="Helps.", system_prompt="Help.",
                        input_model=Task, tools=["write_note"], model=child2), replace=True,
    )  # fmt: skip
    await headless.call("helper", {"task": "go"}, approver=CallbackApprover(approve))
    assert asked == ["write_note"]
    assert written == ["c"]


async def test_a_subagent_with_no_calling_executor_fails_closed(registry: ToolRegistry) -> None:
    from kode_nb.types import ToolContext

    child = ScriptedModel(["never"])
    tool = subagent_tool(
        AgentDefinition(name="helper", description="Helps.", system_prompt="Help.",
                        input_model=Task, model=child)
    )  # fmt: skip
    result = await tool.function(
        {"inputs": Task(task="x")}, ToolContext(tool="helper", call_id="c1")
    )
    assert result.is_error
    assert result.details["unavailable"] is True
    assert "no calling executor's policy is known" in result.text
    assert child.requests == []


_PREFIX = "The user's request to the calling agent: "


@settings(max_examples=300, deadline=None)
@given(
    requests=st.lists(st.text(), max_size=4),
    limit=st.integers(min_value=1, max_value=120),
)
def test_the_default_context_never_exceeds_its_limit(requests: list[str], limit: int) -> None:
    """compress_context clips the parent's latest request to at most ``limit`` characters, on
    one line, whatever the text (whitespace runs, newlines, exactly ``limit`` long...)."""
    messages = [UserMessage(content=text) for text in requests]
    context = compress_context(messages, {}, limit=limit)
    latest = next((t for t in reversed(requests) if t.strip()), None)
    if latest is None:
        assert context == ""
        return
    assert context.startswith(_PREFIX)
    clipped = context[len(_PREFIX) :]
    assert 0 < len(clipped) <= limit
    assert "\n" not in clipped
    one_line = " ".join(latest.split())
    assert clipped == one_line if len(one_line) <= limit else clipped.endswith("…")
