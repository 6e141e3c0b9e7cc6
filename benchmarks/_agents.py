"""Target 7: one whole agent run with one tool call, on a scripted model, tracing on.

Every contender does the same work per run: the prompt goes to a scripted model whose turn 1
is one call of ``add(a=1, b=2)`` (arguments as the JSON text a model sends), the library
validates and runs the tool, sends the result back, and turn 2 is the final answer
:data:`FINAL`. The tool is the same ``async def add(a: int, b: int) -> int`` everywhere (a copy
per contender that counts its calls).

* kode_nb: ``Agent("bench", model=ScriptedModel([call("add", a=1, b=2), FINAL]),
  tools=["add"], executor=Executor(registry))``; ``model.reset()`` then
  ``await agent.run(PROMPT)`` per run (default executor: events on, default policy). kode_nb
  always records the run's :class:`~kode_nb.traces.Trace` (run, turn, model_call and
  tool_call spans); a second row also serializes it with ``result.trace.to_dict()``.
* openai-agents: ``await Runner.run(agent, PROMPT)`` with a scripted
  ``agents.models.interface.Model`` (shaped like the ``FakeModel`` of its own test suite:
  ``get_response`` returns pre-built output items -- a ``ResponseFunctionToolCall``, then a
  ``ResponseOutputMessage`` -- inside a ``generation_span``). Tracing is ON: its default
  exporter (a background thread that POSTs to api.openai.com) is replaced by a local
  processor that keeps the trace and its finished spans in memory (so the spans are real
  ``SpanImpl`` objects, as in production, and nothing touches the network); a second row also
  calls ``export()`` on the trace and every span (what its exporter serializes). The global
  "tracing disabled" flag set by the earlier sections is switched off for this section and
  restored afterwards.
* pydantic-ai: ``await Agent(FunctionModel(fn), tools=[add]).run(PROMPT)``; ``fn`` returns a
  ``ToolCallPart`` first and a ``TextPart`` once the tool's result is in the messages. Its
  record of a run is the message history (``result.all_messages()``); no OpenTelemetry
  instrumentation (only the OTel API is installed, so spans would be no-ops anyway).

Each contender is checked before timing (final text, the tool ran once, its result ``3`` went
back to the model) and after timing (the tool ran exactly once per timed run, every run gave
:data:`FINAL`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from _timing import Contender

__all__ = ["FINAL", "PROMPT", "AgentContender", "agent_contenders"]

SYSTEM = "You add numbers with the add tool."
PROMPT = "What is 1 + 2?"
FINAL = "The sum is 3."
ARGS = {"a": 1, "b": 2}
ARGS_TEXT = json.dumps(ARGS)


@dataclass
class Counter:
    """Runs and tool calls of one contender, to check one tool call per run."""

    runs: int = 0
    tool_calls: int = 0
    wrong: int = 0
    """Runs whose final output was not :data:`FINAL`."""
    last: Any = None


def counted_add(counter: Counter) -> Callable[..., Awaitable[int]]:
    """A fresh ``async def add(a: int, b: int) -> int`` that counts its calls."""

    async def add(a: int, b: int) -> int:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        counter.tool_calls += 1
        return a + b

    return add


@dataclass
class AgentContender:
    """A contender plus the post-timing check of its counters."""

    contender: Contender
    counter: Counter = field(default_factory=Counter)

    def check(self) -> str:
        """'' if every timed run called the tool once and answered FINAL, else what was wrong."""
        c = self.counter
        if self.contender.timing is None:
            return ""
        if c.tool_calls != c.runs:
            return f"{c.tool_calls} tool calls in {c.runs} runs"
        if c.wrong:
            return f"{c.wrong} of {c.runs} runs did not answer {FINAL!r}"
        return ""


# --------------------------------------------------------------------------- kode_nb


async def _kode(counter: Counter, *, to_dict: bool) -> tuple[Callable[[], Awaitable[Any]], Any]:
    from kode_nb import Agent, Executor, ToolRegistry, ToolResult, define_tool
    from kode_nb.models import ScriptedModel, ToolResultMessage, call

    registry = ToolRegistry()
    define_tool(counted_add(counter), registry=registry)
    model = ScriptedModel([call("add", **ARGS), FINAL])
    agent = Agent("bench", model=model, system_prompt=SYSTEM, tools=["add"],
                  executor=Executor(registry))  # fmt: skip
    reset, run = model.reset, agent.run

    async def op() -> Any:
        reset()
        result = await run(PROMPT)
        counter.runs += 1
        if result.output != FINAL:
            counter.wrong += 1
        if to_dict:
            counter.last = result.trace.to_dict()
        return result

    def verify(result: Any) -> str:
        tool_msgs = [m for m in result.messages if isinstance(m, ToolResultMessage)]
        texts = [ToolResult(content=m.content).text for m in tool_msgs]
        spans = [s.kind for s in result.trace.spans()]
        if texts != ["3"]:
            return f"tool results sent back {texts!r} (expected ['3'])"
        if spans.count("tool_call") != 1 or spans.count("model_call") != 2:
            return f"trace spans {spans!r}"
        return ""

    return op, verify


# --------------------------------------------------------------------------- openai-agents


def _oai_setup() -> tuple[Any, Callable[[], None]]:
    """Tracing on with an in-memory processor; returns (processor, restore)."""
    from agents import set_trace_processors, set_tracing_disabled
    from agents.tracing import TracingProcessor, get_trace_provider

    logging.getLogger("openai.agents").setLevel(logging.CRITICAL)

    class KeepInMemory(TracingProcessor):
        """Keeps the latest trace and its finished spans (what an exporter would receive)."""

        def __init__(self) -> None:
            self.trace: Any = None
            self.spans: list[Any] = []

        def on_trace_start(self, trace: Any) -> None:
            self.trace = trace
            self.spans = []

        def on_trace_end(self, trace: Any) -> None:
            pass

        def on_span_start(self, span: Any) -> None:
            pass

        def on_span_end(self, span: Any) -> None:
            self.spans.append(span)

        def shutdown(self) -> None:
            pass

        def force_flush(self) -> None:
            pass

    provider = get_trace_provider()
    was_disabled = bool(getattr(provider, "_disabled", False))
    keep = KeepInMemory()
    set_trace_processors([keep])
    set_tracing_disabled(False)

    def restore() -> None:
        set_tracing_disabled(was_disabled)

    return keep, restore


async def _oai(
    counter: Counter, keep: Any, *, export: bool
) -> tuple[Callable[[], Awaitable[Any]], Any]:
    from agents import Agent, Runner, function_tool
    from agents.items import ModelResponse, ToolCallOutputItem
    from agents.models.interface import Model
    from agents.tracing import generation_span
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    tool_call = ResponseFunctionToolCall(
        type="function_call", id="fc_1", call_id="call_1", name="add", arguments=ARGS_TEXT,
        status="completed",
    )  # fmt: skip
    message = ResponseOutputMessage(
        type="message", id="msg_1", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=FINAL, annotations=[])],
    )  # fmt: skip
    script = ([tool_call], [message])

    class ScriptedOAIModel(Model):
        """Plays turn 1 (the tool call) then turn 2 (the answer); reset() per run."""

        def __init__(self) -> None:
            self.turn = 0

        def reset(self) -> None:
            self.turn = 0

        async def get_response(self, system_instructions: Any, input: Any, model_settings: Any,
                               tools: Any, output_schema: Any, handoffs: Any, tracing: Any,
                               *, previous_response_id: Any = None, conversation_id: Any = None,
                               prompt: Any = None) -> Any:  # fmt: skip
            with generation_span(model="scripted", disabled=tracing.is_disabled()):
                output = script[self.turn]
                self.turn += 1
                return ModelResponse(output=list(output), usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("Runner.run does not stream")

    model = ScriptedOAIModel()
    agent = Agent(name="bench", instructions=SYSTEM, model=model,
                  tools=[function_tool(counted_add(counter), name_override="add")])  # fmt: skip
    reset, run = model.reset, Runner.run

    async def op() -> Any:
        reset()
        result = await run(agent, PROMPT)
        counter.runs += 1
        if result.final_output != FINAL:
            counter.wrong += 1
        if export:
            counter.last = (keep.trace.export(), [s.export() for s in keep.spans])
        return result

    def verify(result: Any) -> str:
        outs = [str(i.output) for i in result.new_items if isinstance(i, ToolCallOutputItem)]
        if outs != ["3"]:
            return f"tool outputs {outs!r} (expected ['3'])"
        kinds = [type(s.span_data).__name__ for s in keep.spans]
        if keep.trace is None or type(keep.trace).__name__ == "NoOpTrace" or not kinds:
            return "no trace recorded (tracing is off?)"
        if kinds.count("FunctionSpanData") != 1 or kinds.count("GenerationSpanData") != 2:
            return f"spans {kinds!r}"
        return ""

    return op, verify


# --------------------------------------------------------------------------- pydantic-ai


async def _pai(counter: Counter) -> tuple[Callable[[], Awaitable[Any]], Any]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def scripted(messages: list[Any], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts
        if any(isinstance(p, ToolReturnPart) for p in last):
            return ModelResponse(parts=[TextPart(FINAL)])
        return ModelResponse(parts=[ToolCallPart("add", ARGS_TEXT, tool_call_id="call_1")])

    agent = Agent(FunctionModel(scripted), instructions=SYSTEM, tools=[counted_add(counter)])
    run = agent.run

    async def op() -> Any:
        result = await run(PROMPT)
        counter.runs += 1
        if result.output != FINAL:
            counter.wrong += 1
        return result

    def verify(result: Any) -> str:
        returns = [
            p.model_response_str()
            for m in result.all_messages()
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        return "" if returns == ["3"] else f"tool returns {returns!r} (expected ['3'])"

    return op, verify


# --------------------------------------------------------------------------- building


async def _build(
    name: str,
    note: str,
    make: Callable[[Counter], Awaitable[tuple[Callable[[], Awaitable[Any]], Any]]],
    *,
    peer: bool,
) -> AgentContender:
    """Build, run once and verify; a broken contender is returned skipped (never raises)."""
    counter = Counter()
    try:
        op, verify = await make(counter)
        result = await op()
        problem = ""
        if counter.tool_calls != 1 or counter.runs != 1:
            problem = f"tool ran {counter.tool_calls} times in {counter.runs} run"
        elif counter.wrong:
            problem = "wrong final output"
        else:
            problem = verify(result)
        if problem:
            return AgentContender(Contender(name, None, note, peer=peer, skipped=problem), counter)
    except Exception as exc:
        return AgentContender(
            Contender(name, None, note, peer=peer, skipped=f"{type(exc).__name__}: {exc}"[:200]),
            counter,
        )
    return AgentContender(Contender(name, op, note, peer=peer), counter)


async def agent_contenders(*, with_kode: bool) -> tuple[list[AgentContender], Callable[[], None]]:
    """kode_nb's two rows, then the peers'; and a function restoring openai-agents' tracing."""
    rows: list[AgentContender] = []
    if with_kode:
        rows.append(await _build(
            "kode_nb: agent.run(p) (trace recorded)", "ScriptedModel, reset() per run",
            lambda c: _kode(c, to_dict=False), peer=False))  # fmt: skip
        rows.append(await _build(
            "kode_nb: agent.run(p) + result.trace.to_dict()", "trace serialized too",
            lambda c: _kode(c, to_dict=True), peer=False))  # fmt: skip
    restore: Callable[[], None] = lambda: None  # noqa: E731
    try:
        keep, restore = _oai_setup()
    except Exception as exc:
        for label in ("Runner.run(agent, p)", "Runner.run + export() of trace and spans"):
            rows.append(AgentContender(Contender(
                f"openai-agents: {label}", None, skipped=f"{type(exc).__name__}: {exc}"[:200])))  # fmt: skip
    else:
        rows.append(await _build(
            "openai-agents: Runner.run(agent, p)", "scripted Model; tracing on, in-memory processor",
            lambda c: _oai(c, keep, export=False), peer=True))  # fmt: skip
        rows.append(await _build(
            "openai-agents: Runner.run + export() of trace and spans", "trace serialized too",
            lambda c: _oai(c, keep, export=True), peer=True))  # fmt: skip
    rows.append(await _build(
        "pydantic-ai: Agent(FunctionModel(fn)).run(p)", "no OTel instrumentation",
        _pai, peer=True))  # fmt: skip
    return rows, restore
