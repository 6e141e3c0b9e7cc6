"""The agent loop on the ScriptedModel, the TestModel and small doubles: turns, parallel tool
calls, result order, what reaches the model, limits, output models, model errors, events."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from agent_helpers import BrokenModel, LaxModel, Recorder, SlowModel
from pydantic import BaseModel

from kode_nb import (
    ConfigurationError,
    Executor,
    ImageBlock,
    JsonBlock,
    Policy,
    TextBlock,
    ToolContext,
    ToolRegistry,
    ToolResult,
    define_tool,
)
from kode_nb.agents import Agent, AgentRunResult
from kode_nb.models import (
    AssistantMessage,
    ModelError,
    ModelEvent,
    ModelRequest,
    ScriptedModel,
    TestModel,
    TextChunk,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from kode_nb.models.scripted import Turn, call, raw_call

pytestmark = pytest.mark.anyio


@pytest.fixture
def tools(registry: ToolRegistry) -> ToolRegistry:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def mul(a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b

    define_tool(add, inline=True)
    define_tool(mul, inline=True)
    return registry


async def test_a_final_answer_ends_the_run_in_one_turn(tools: ToolRegistry) -> None:
    model = ScriptedModel(["Hello there."])
    agent = Agent(model=model, system_prompt="Be brief.", tools=["add"])
    result = await agent.run("hi")
    assert result.status == "completed"
    assert result.ok
    assert result.output == "Hello there."
    assert result.turns == 1
    assert result.error is None
    assert result.messages == (UserMessage(content="hi"), AssistantMessage(text="Hello there."))
    assert result.usage.requests == 1
    assert result.usage.tool_calls == 0
    request = model.requests[0]
    assert request.system == "Be brief."
    assert [s.name for s in request.tools] == ["add"]
    assert agent.last_result is result


async def test_parallel_tool_calls_run_concurrently_and_results_keep_the_requested_order(
    registry: ToolRegistry,
) -> None:
    first_may_end = asyncio.Event()
    order: list[str] = []

    async def slow(name: str) -> str:
        """Finishes only after fast has finished."""
        await asyncio.wait_for(first_may_end.wait(), 2.0)  # deadlocks if run one after the other
        order.append("slow")
        return f"slow {name}"

    async def fast(name: str) -> str:
        """Finishes at once."""
        order.append("fast")
        first_may_end.set()
        return f"fast {name}"

    define_tool(slow)
    define_tool(fast)
    model = ScriptedModel([[call("slow", name="a"), call("fast", name="b")], "done"])
    result = await Agent(model=model, tools=["slow", "fast"]).run("go")
    assert result.status == "completed"
    assert order == ["fast", "slow"]
    answers = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert [(m.name, m.content) for m in answers] == [
        ("slow", (TextBlock(text="slow a"),)),
        ("fast", (TextBlock(text="fast b"),)),
    ]
    assert [m.call_id for m in answers] == ["scripted-1-1", "scripted-1-2"]
    assert result.usage.tool_calls == 2
    assert result.turns == 2


async def test_only_the_model_facing_content_goes_back_to_the_model(registry: ToolRegistry) -> None:
    def lookup(key: str) -> ToolResult:
        """Look something up."""
        return ToolResult(content=(TextBlock(text="visible"),), details={"hidden": "DETAILS-XYZ"})

    define_tool(lookup)
    model = ScriptedModel([call("lookup", key="k"), "ok"])
    await Agent(model=model, tools=["lookup"]).run("go")
    second = model.requests[1]
    tool_message = second.messages[-1]
    assert isinstance(tool_message, ToolResultMessage)
    assert tool_message.content == (TextBlock(text="visible"),)
    assert "DETAILS-XYZ" not in repr(second)


async def test_a_huge_result_reaches_the_model_cut_with_a_note(registry: ToolRegistry) -> None:
    def dump(n: int) -> ToolResult:
        """Return n characters, a JSON block and an image."""
        return ToolResult(content=(
            TextBlock(text="A" * n), JsonBlock(data={"k": "v"}),
            ImageBlock(data="iVBORw0KGgo=", mime_type="image/png"),
        ))  # fmt: skip

    define_tool(dump)
    model = ScriptedModel([call("dump", n=250_000), call("dump", n=10), "ok"])
    result = await Agent(model=model, tools=["dump"], max_result_chars=1000).run("go")
    cut = model.requests[1].messages[-1]
    assert isinstance(cut, ToolResultMessage)
    text, image = cut.content
    assert isinstance(text, TextBlock)
    assert text.text.startswith("A" * 1000 + "\n[Output cut: the tool returned 250,011 characters")
    assert "Ask for less" in text.text
    assert image == ImageBlock(data="iVBORw0KGgo=", mime_type="image/png")
    small = model.requests[2].messages[-1]
    assert isinstance(small, ToolResultMessage)
    assert len(small.content) == 3  # under the limit: sent as the tool returned it
    tool_result = result.messages[2]
    assert isinstance(tool_result, ToolResultMessage)
    assert len(tool_result.content) == 2  # the history holds what the model was sent
    assert result.trace.to_dict()  # the trace keeps the tool's own result


async def test_max_result_chars_none_sends_everything(registry: ToolRegistry) -> None:
    def dump(n: int) -> str:
        """Return n characters."""
        return "B" * n

    define_tool(dump)
    model = ScriptedModel([call("dump", n=150_000), "ok"])
    await Agent(model=model, tools=["dump"], max_result_chars=None).run("go")
    message = model.requests[1].messages[-1]
    assert isinstance(message, ToolResultMessage)
    assert message.content == (TextBlock(text="B" * 150_000),)


async def test_invalid_arguments_go_back_to_the_model_which_can_fix_them(
    tools: ToolRegistry,
) -> None:
    model = ScriptedModel([raw_call("add", '{"a": "x"}'), call("add", a=1, b=2), "3"])
    result = await Agent(model=model, tools=["add"]).run("go")
    assert result.status == "completed"
    assert result.turns == 3
    bad = model.requests[1].messages[-1]
    assert isinstance(bad, ToolResultMessage)
    assert bad.is_error
    assert "`a`" in ToolResult(content=bad.content).text
    assert "`b`" in ToolResult(content=bad.content).text
    good = model.requests[2].messages[-1]
    assert isinstance(good, ToolResultMessage)
    assert not good.is_error


async def test_missing_or_repeated_call_ids_are_made_unique(tools: ToolRegistry) -> None:
    class SameIds:
        name = "same-ids"

        def __init__(self) -> None:
            self.turn = 0

        async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
            self.turn += 1
            if self.turn <= 2:
                yield ToolCallPart(id="call_0", name="add", arguments='{"a": 1, "b": 2}')
                yield ToolCallPart(id="", name="mul", arguments='{"a": 2, "b": 3}')
            else:
                yield TextChunk(text="done")

    result = await Agent(model=SameIds(), tools=["add", "mul"]).run("go")
    asked = [c.id for m in result.messages if isinstance(m, AssistantMessage) for c in m.tool_calls]
    answered = [m.call_id for m in result.messages if isinstance(m, ToolResultMessage)]
    assert asked == answered
    assert len(set(asked)) == 4
    assert asked[0] == "call_0"
    texts = [
        ToolResult(content=m.content).text
        for m in result.messages
        if isinstance(m, ToolResultMessage)
    ]
    assert texts == ["3", "6", "3", "6"]


async def test_max_turns_ends_a_run_that_keeps_calling_tools(tools: ToolRegistry) -> None:
    model = ScriptedModel([call("add", a=i, b=1) for i in range(5)])
    result = await Agent(model=model, tools=["add"], max_turns=3).run("loop")
    assert result.status == "max_turns"
    assert result.turns == 3
    assert result.output is None
    assert "max_turns=3" in (result.error or "")
    assert isinstance(result.messages[-1], ToolResultMessage)  # every call was answered


async def test_the_same_call_repeated_ends_the_run_naming_the_cause(tools: ToolRegistry) -> None:
    model = ScriptedModel([call("add", a=1, b=1), call("add", b=1, a=1), call("add", a=1, b=1),
                           "unreached"])  # fmt: skip
    result = await Agent(model=model, tools=["add"], max_turns=10).run("loop")
    assert result.status == "error"
    assert result.turns == 3
    assert "called add with the same arguments 3 times" in (result.error or "")
    assert "Agent(max_repeated_calls=...)" in (result.error or "")
    ran = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert len(ran) == 2  # the third identical call was not run
    events = [e for s in result.trace.spans() for e in s.events if e["name"] == "repeated_call"]
    assert len(events) == 1


async def test_a_failing_call_repeated_unchanged_is_named_as_such(tools: ToolRegistry) -> None:
    model = ScriptedModel([raw_call("add", '{"a": 1, "B": 2}')] * 3 + ["unreached"])
    result = await Agent(model=model, tools=["add"], max_turns=10).run("loop")
    assert result.status == "error"
    error = result.error or ""
    assert "each time the call failed (Invalid arguments for tool 'add'" in error, error
    assert "sent it again unchanged instead of correcting it" in error
    assert "templates" not in error  # the result was shown; the model did not act on it


async def test_a_repeated_call_that_ran_is_not_blamed_on_another_calls_failure(
    tools: ToolRegistry,
) -> None:
    """Between the repeats, the same tool failed with other arguments: the repeated call
    itself ran each time, so the cause named is the model not using its result."""
    bad = raw_call("add", '{"a": 1, "B": 2}')
    model = ScriptedModel([call("add", a=1, b=1), bad, call("add", a=1, b=1), bad,
                           call("add", a=1, b=1), "unreached"])  # fmt: skip
    result = await Agent(model=model, tools=["add"], max_turns=10).run("loop")
    error = result.error or ""
    assert "called add with the same arguments 3 times" in error, error
    assert "each time the call failed" not in error
    assert "it is not using the result" in error


async def test_max_repeated_calls_none_allows_repeats(tools: ToolRegistry) -> None:
    model = ScriptedModel([call("add", a=1, b=1)] * 3 + ["done"])
    result = await Agent(model=model, tools=["add"], max_repeated_calls=None).run("loop")
    assert result.status == "completed"
    assert result.output == "done"


async def test_a_slow_tool_is_cancelled_when_the_time_limit_passes(registry: ToolRegistry) -> None:
    seen: list[ToolContext] = []

    async def wait_forever(ctx: ToolContext) -> str:
        """Never returns by itself."""
        seen.append(ctx)
        await asyncio.sleep(30)
        return "never"

    define_tool(wait_forever)
    model = ScriptedModel([call("wait_forever"), "unreached"])
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    result = await Agent(model=model, tools=["wait_forever"], time_limit=0.2).run("go")
    assert loop.time() - t0 < 2.0
    assert result.status == "time_limit"
    assert "time limit of 0.2 s" in (result.error or "")
    answer = result.messages[-1]
    assert isinstance(answer, ToolResultMessage)
    assert answer.is_error
    assert "time limit" in ToolResult(content=answer.content).text
    assert seen
    assert seen[0].cancelled
    assert model.turns_played == 1


async def test_a_slow_model_is_stopped_by_the_time_limit(registry: ToolRegistry) -> None:
    model = SlowModel(30)
    result = await Agent(model=model, time_limit=0.1).run("go")
    assert result.status == "time_limit"
    assert model.cancelled
    assert result.trace.root.find(kind="model_call")[0].status == "cancelled"


async def test_cancelling_the_task_cancels_its_tool_calls_and_re_raises(
    registry: ToolRegistry,
) -> None:
    started = asyncio.Event()
    tokens: list[ToolContext] = []

    async def block(ctx: ToolContext) -> str:
        """Blocks until cancelled."""
        tokens.append(ctx)
        started.set()
        await asyncio.sleep(30)
        return "never"

    define_tool(block)
    executor = Executor()
    bus_events: list[Any] = []
    executor.bus.subscribe(bus_events.append)
    recorder = Recorder()
    agent = Agent(model=ScriptedModel([call("block"), "x"]), tools=["block"], executor=executor)
    task = asyncio.ensure_future(agent.run("go", on_event=recorder))
    await asyncio.wait_for(started.wait(), 2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    result = agent.last_result
    assert isinstance(result, AgentRunResult)
    assert result.status == "cancelled"
    assert result.trace.root.status == "cancelled"
    assert tokens[0].cancelled
    assert any(e.type == "cancelled" and e.tool == "block" for e in bus_events)
    assert recorder.types()[-1] == "run_finished"
    assert recorder.of("run_finished")[0].result is result
    assert isinstance(result.messages[-1], ToolResultMessage)
    assert agent.running() == []


async def test_agent_cancel_ends_the_run_without_raising(registry: ToolRegistry) -> None:
    model = SlowModel(30)
    agent = Agent(model=model)
    task = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(model.started.wait(), 2)
    assert len(agent.running()) == 1
    assert await asyncio.to_thread(agent.cancel, reason="stop button") == 1  # e.g. a widget thread
    result = await task
    assert result.status == "cancelled"
    assert result.error == "stop button"
    assert model.cancelled
    assert agent.cancel() == 0


async def test_agent_cancel_during_tool_calls_cancels_them(registry: ToolRegistry) -> None:
    started = asyncio.Event()

    async def block(ctx: ToolContext) -> str:
        """Blocks until cancelled."""
        started.set()
        await asyncio.sleep(30)
        return "never"

    define_tool(block)
    agent = Agent(model=ScriptedModel([call("block"), "x"]), tools=["block"])
    task = asyncio.ensure_future(agent.run("go"))
    await asyncio.wait_for(started.wait(), 2)
    agent.cancel()
    result = await task
    assert result.status == "cancelled"
    answer = result.messages[-1]
    assert isinstance(answer, ToolResultMessage)
    assert answer.is_error
    assert result.trace.root.find(kind="tool_call")[0].status == "cancelled"


class Answer(BaseModel):
    value: int
    unit: str


async def test_an_invalid_structured_answer_gets_a_retry_turn(registry: ToolRegistry) -> None:
    model = ScriptedModel(['{"value": "three"}', '```json\n{"value": 3, "unit": "m"}\n```'])
    result = await Agent(model=model, output_model=Answer).run("how far?")
    assert result.status == "completed"
    assert result.output == Answer(value=3, unit="m")
    assert "JSON Schema" in model.requests[0].system
    assert '"unit"' in model.requests[0].system
    retry = model.requests[1].messages[-1]
    assert isinstance(retry, UserMessage)
    assert "value: Input should be a valid integer" in retry.content
    assert "unit: Field required" in retry.content
    turn = result.trace.root.children[0]
    assert turn.events[0]["name"] == "output_invalid"


async def test_a_structured_answer_that_stays_invalid_ends_with_an_error(
    registry: ToolRegistry,
) -> None:
    model = ScriptedModel(["no json here", "still none"])
    result = await Agent(model=model, output_model=Answer, output_retries=1).run("?")
    assert result.status == "error"
    assert result.output is None
    assert "did not match Answer after 1 retry" in (result.error or "")
    assert "not JSON" in (result.error or "")


async def test_model_errors_end_the_run_with_status_error(tools: ToolRegistry) -> None:
    exhausted = await Agent(model=ScriptedModel([call("add", a=1, b=2)]), tools=["add"]).run("go")
    assert exhausted.status == "error"
    assert "ScriptExhausted" in (exhausted.error or "")
    assert "ran out of turns" in (exhausted.error or "")
    assert exhausted.turns == 2
    mismatch = await Agent(model=ScriptedModel([call("mul", a=1, b=2)]), tools=["add"]).run("go")
    assert mismatch.status == "error"
    assert "ScriptMismatch" in (mismatch.error or "")
    broken = await Agent(model=BrokenModel(RuntimeError("boom"))).run("go")
    assert broken.status == "error"
    assert broken.error == "model error (RuntimeError) from broken: boom"
    http = await Agent(model=BrokenModel(ModelError("HTTP 500"))).run("go")
    assert http.status == "error"
    assert "HTTP 500" in (http.error or "")
    assert http.trace.root.find(kind="model_call")[0].status == "error"


async def test_usage_errors_from_the_model_are_raised(registry: ToolRegistry) -> None:
    agent = Agent(model=BrokenModel(ConfigurationError("OPENAI_API_KEY is not set")))
    with pytest.raises(ConfigurationError, match="OPENAI_API_KEY"):
        await agent.run("go")
    assert agent.last_result is not None
    assert agent.last_result.status == "error"


async def test_a_call_to_a_tool_outside_the_allowlist_is_not_found(tools: ToolRegistry) -> None:
    ran: list[int] = []

    def secret_op() -> str:
        """Not for this agent."""
        ran.append(1)
        return "ran"

    define_tool(secret_op)
    model = LaxModel([[("secret_op", {}), ("ad", {"a": 1, "b": 2})], "ok"])
    executor = Executor()
    bus: list[Any] = []
    executor.bus.subscribe(bus.append)
    result = await Agent(model=model, tools=["add"], executor=executor).run("go")
    assert ran == []
    first, second = (m for m in result.messages if isinstance(m, ToolResultMessage))
    assert first.is_error
    assert "Unknown tool 'secret_op'" in ToolResult(content=first.content).text
    assert "Did you mean: 'add'?" in ToolResult(content=second.content).text
    assert [e.type for e in bus if e.call_id == "lax-1-1"] == ["requested", "failed"]


async def test_policy_denied_tools_are_not_offered_and_calls_to_them_are_denied(
    tools: ToolRegistry,
) -> None:
    executor = Executor(policy=Policy(deny=["mul"]))
    model = LaxModel([[("mul", {"a": 2, "b": 3})], "ok"])
    agent = Agent(model=model, tools=["add", "mul"], executor=executor)
    assert [s.name for s in agent.tool_specs()] == ["add"]
    result = await agent.run("go")
    assert [s.name for s in model.requests[0].tools] == ["add"]
    denied = result.messages[2]
    assert isinstance(denied, ToolResultMessage)
    assert denied.is_error
    assert "not allowed by the policy" in ToolResult(content=denied.content).text


async def test_selectors_resolve_against_the_registry(tools: ToolRegistry) -> None:
    tools.define_group("math", ["add", "mul"])
    assert [s.name for s in Agent(model=TestModel(), tools=["group:math"]).tool_specs()] == [
        "add",
        "mul",
    ]
    assert len(Agent(model=TestModel(), tools=["*"]).tool_specs()) == 2
    with pytest.raises(
        ConfigurationError, match=r"Agent 'main': unknown tool 'ad'\. Did you mean: 'add'\?"
    ):
        Agent(model=TestModel(), tools=["ad"])
    with pytest.raises(ConfigurationError, match="group 'nothing' has no tools"):
        Agent(model=TestModel(), tools=["group:nothing"])
    with pytest.raises(ConfigurationError, match="unknown kind"):
        Agent(model=TestModel(), tools=["kind:bogus"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_turns": 0}, "max_turns must be an int >= 1"),
        ({"time_limit": -1}, "time_limit must be a positive number"),
        ({"output_model": dict}, "output_model must be a pydantic BaseModel subclass"),
        ({"executor": object()}, "executor must be an Executor"),
        ({"model": 42}, "model must be a model name"),
        ({"model": "nonsense:x"}, "unknown model 'nonsense:x'"),
        ({"tools": [1]}, "tools entries must be strings"),
        ({"on_event": "print"}, "on_event must be callable"),
        ({"max_result_chars": 10}, "max_result_chars must be an int >= 100"),
        ({"max_result_chars": 1e6}, "max_result_chars must be an int"),
    ],
)
def test_bad_agent_options_are_configuration_errors(
    registry: ToolRegistry, kwargs: dict[str, Any], message: str
) -> None:
    options: dict[str, Any] = {"model": TestModel(), **kwargs}
    with pytest.raises(ConfigurationError, match=message):
        Agent("main", **options)


async def test_bad_run_inputs_are_configuration_errors(registry: ToolRegistry) -> None:
    agent = Agent(model=TestModel())
    with pytest.raises(ConfigurationError, match="the prompt must be a string"):
        await agent.run(123)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match=r"message_history\[0\] is not a message"):
        await agent.run("x", message_history=["hello"])  # type: ignore[list-item]


async def test_message_history_continues_a_conversation(tools: ToolRegistry) -> None:
    agent = Agent(model=ScriptedModel(["first", "second"]))
    one = await agent.run("a")
    two = await agent.run("b", message_history=one.messages)
    assert [type(m).__name__ for m in two.messages] == [
        "UserMessage",
        "AssistantMessage",
        "UserMessage",
        "AssistantMessage",
    ]
    assert two.new_messages() == (UserMessage(content="b"), AssistantMessage(text="second"))


async def test_deps_reach_the_tools_through_the_context(registry: ToolRegistry) -> None:
    def whoami(ctx: ToolContext) -> str:
        """Report the injected deps."""
        return str(ctx.deps)

    define_tool(whoami)
    agent = Agent(model=ScriptedModel([call("whoami"), "ok"]), tools=["whoami"])
    result = await agent.run("go", deps={"db": "handle"})
    (answer,) = [m for m in result.messages if isinstance(m, ToolResultMessage)]
    assert ToolResult(content=answer.content).text == "{'db': 'handle'}"
    assert agent.executor.deps is None  # the agent's own executor is left alone


async def test_events_arrive_in_order_and_a_failing_callback_breaks_nothing(
    tools: ToolRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    recorder = Recorder()

    def broken(event: Any) -> None:
        raise ValueError("subscriber bug")

    model = ScriptedModel([call("add", a=1, b=2), Turn(text="The sum is 3.")])
    agent = Agent(model=model, tools=["add"], on_event=broken)
    result = await agent.run("go", on_event=recorder)
    assert result.status == "completed"
    types = recorder.types()
    assert types[:5] == [
        "run_started",
        "turn_started",
        "model_responded",
        "tool_calls_requested",
        "tool_call_finished",
    ]
    assert types[5] == "turn_started"
    assert types[-2:] == ["model_responded", "run_finished"]
    deltas = recorder.of("text_delta")
    assert len(deltas) > 1
    assert "".join(d.text for d in deltas) == "The sum is 3."
    finished = recorder.of("tool_call_finished")[0]
    assert finished.result.text == "3"
    assert finished.call.name == "add"
    assert {e.run_id for e in recorder.events} == {result.run_id}
    assert "subscriber bug" in caplog.text


async def test_the_test_model_exercises_every_offered_tool(tools: ToolRegistry) -> None:
    result = await Agent(model=TestModel(seed=1), tools=["add", "mul"]).run("try them")
    assert result.status == "completed"
    assert result.usage.tool_calls == 2
    assert "Called 2 tool call(s)" in result.output
