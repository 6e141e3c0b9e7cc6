"""One turn's tool calls: allowlist check, parallel execution, time limit, trace (internal).

Calls to tools outside the agent's allowlist never reach the executor: they get a
``not_found`` result at once (and the executor's bus still sees ``requested`` and ``failed``
events, so audit logs stay complete). The others run together through
:meth:`Executor.call_many <kode_nb.Executor.call_many>`; results come back in the order the
model asked. When the run's time limit passes, its calls are cancelled through
:meth:`Executor.cancel <kode_nb.Executor.cancel>` and return ``cancelled`` results.
"""

from __future__ import annotations

import asyncio
import contextlib
import difflib
import json
import time
from collections.abc import Sequence

from kode_nb.agents._events import ToolCallFinished, ToolCallsRequested
from kode_nb.agents._run import RunState, result_dict, whole_length
from kode_nb.errors import ToolNotFoundError
from kode_nb.events._events import CallFailed, CallRequested
from kode_nb.execution._executor import ToolCall
from kode_nb.models._content import content_text
from kode_nb.models._cost import rollup
from kode_nb.models.base import AssistantMessage, ToolCallRequest, ToolResultMessage
from kode_nb.stepping._step_loop import given_result, pause_tool_call
from kode_nb.traces._trace import Span, parse_arguments
from kode_nb.types import ContentBlock, ImageBlock, TextBlock, ToolResult, normalize_name

__all__ = ["cut_note", "for_model", "run_tool_calls", "subtree", "unique_call_ids"]


def subtree(span: Span) -> None:
    """On a tool call that ran agents (a subagent): ``subtree_usage``, ``subtree_cost`` and
    ``subtree_requests``, the totals of every model call below it."""
    if not any(c.kind == "run" for c in span.children):
        return
    calls = [s.attributes for c in span.children for s in c.walk() if s.kind == "model_call"]
    totals = rollup(calls)
    span.set(
        subtree_usage=totals["usage"],
        subtree_cost=totals["cost"],
        subtree_requests=totals["requests"],
    )


def unique_call_ids(
    st: RunState, calls: tuple[ToolCallRequest, ...]
) -> tuple[ToolCallRequest, ...]:
    """The calls, with an id made up for any that has none or repeats one of this run's (some
    local models send ``""`` or ``"call_0"`` every time; results must answer the right call)."""
    fixed: list[ToolCallRequest] = []
    for i, call in enumerate(calls, 1):
        if not call.id or call.id in st.call_ids:
            call = ToolCallRequest(
                id=f"call_{st.run_id}_{st.turns}_{i}", name=call.name, arguments=call.arguments
            )
        st.call_ids.add(call.id)
        fixed.append(call)
    return tuple(fixed)


def _not_allowed(st: RunState, call: ToolCallRequest) -> ToolResult:
    names = [t.name for t in st.tools.values()]
    close = difflib.get_close_matches(call.name, names, n=3, cutoff=0.6)
    message = ToolNotFoundError(call.name, close_matches=close, available=len(names)).message
    if not close and names:
        message += " Your tools: " + ", ".join(names) + "."
    now = time.time()
    result = ToolResult(
        content=(TextBlock(text=message),),
        is_error=True,
        status="not_found",
        tool=call.name,
        call_id=call.id,
        error_type="ToolNotFoundError",
        started_at=now,
        ended_at=now,
    )
    bus = st.executor.bus
    if bus.active:
        bus.emit(
            CallRequested(
                tool=call.name,
                call_id=call.id,
                run_id=st.run_id,
                parent_call_id=st.parent_call_id,
                arguments=call.arguments,
            )
        )
        bus.emit(
            CallFailed(
                tool=call.name,
                call_id=call.id,
                run_id=st.run_id,
                parent_call_id=st.parent_call_id,
                result=result,
                error_type="ToolNotFoundError",
                message=message,
            )
        )
    return result


def cut_note(length: int, limit: int) -> str:
    """What follows a tool result's text cut to ``limit`` of its ``length`` characters."""
    return (
        f"\n[Output cut: the tool returned {length:,} characters; these are the first "
        f"{limit:,}. Ask for less (a smaller range, a filter, a summary) to see the rest.]"
    )


def for_model(result: ToolResult, limit: int | None) -> tuple[ContentBlock, ...]:
    """The content the model is sent: the result's own, or, when its text (JSON included) is
    longer than ``limit``, the start of that text with a note the model can act on; images are
    kept as they are."""
    content = result.content
    if limit is None:
        return content
    texts = [b for b in content if not isinstance(b, ImageBlock)]
    text = content_text(texts)
    length = whole_length(content, text)  # a recorded result's start counts as whole
    if length <= limit:
        return content
    note = cut_note(length, limit)
    images = tuple(b for b in content if isinstance(b, ImageBlock))
    return (TextBlock(text=text[:limit] + note), *images)


def _cancelled(call: ToolCallRequest, why: str) -> ToolResult:
    return ToolResult(
        content=(TextBlock(text=f"Tool '{call.name}' was cancelled ({why})."),),
        is_error=True,
        status="cancelled",
        tool=call.name,
        call_id=call.id,
        error_type="ToolCancelledError",
    )


async def run_tool_calls(
    st: RunState, calls: Sequence[ToolCallRequest], turn_no: int, turn: Span
) -> list[ToolResult]:
    """Run one turn's calls; results in the order of ``calls``, appended to the messages
    (also when the run is cancelled meanwhile: every call gets an answer in the history)."""
    st.emit(ToolCallsRequested, turn=turn_no, calls=tuple(calls))
    spans: list[Span] = []
    for call in calls:
        span = turn.child(
            "tool_call",
            f"execute_tool {call.name}",
            tool=call.name,
            call_id=call.id,
            arguments=parse_arguments(call.arguments),
        )
        st.tool_spans[call.id] = span
        spans.append(span)
    results: list[ToolResult | None] = [None] * len(calls)
    allowed: list[int] = []
    for i, call in enumerate(calls):
        if normalize_name(call.name) in st.tools:
            allowed.append(i)
        else:
            results[i] = _not_allowed(st, call)
    try:
        if st.stepper is not None:  # stepping: pause before each call, in order
            calls, allowed = await _step_calls(st, calls, allowed, results, spans, turn_no)
        if allowed:
            done = await _call_many(st, [calls[i] for i in allowed])
            for i, result in zip(allowed, done, strict=True):
                results[i] = result
    finally:
        why = st.error or st.cancel_reason or "the run ended"
        final = [
            r if r is not None else _cancelled(c, why) for r, c in zip(results, calls, strict=True)
        ]
        for call, span, result in zip(calls, spans, final, strict=True):
            sent = for_model(result, st.agent.max_result_chars)
            st.messages.append(
                ToolResultMessage(
                    call_id=call.id, name=call.name, content=sent, is_error=result.is_error
                )
            )
            span.set(result=result_dict(result))
            if sent is not result.content:  # cut: record exactly what the model got back
                span.set(
                    model_text=content_text([b for b in sent if isinstance(b, TextBlock)]),
                    cut_chars=whole_length(result.content) - (st.agent.max_result_chars or 0),
                )
            subtree(span)
            span.finish(result.status, result.text if result.is_error else None)
            st.emit(ToolCallFinished, turn=turn_no, call=call, result=result)
    return final


async def _step_calls(
    st: RunState,
    calls: Sequence[ToolCallRequest],
    allowed: list[int],
    results: list[ToolResult | None],
    spans: list[Span],
    turn_no: int,
) -> tuple[list[ToolCallRequest], list[int]]:
    """Pause before each allowed call: edited arguments replace the model's, a result given
    by hand answers the call (it does not run). Returns the calls and the ones still to run."""
    calls, run = list(calls), []
    for i in allowed:
        call = calls[i]
        decision = await pause_tool_call(st, spans[i], call.id, call.name, call.arguments, turn_no)
        if decision is None or decision.action in ("next", "run_to_end"):
            run.append(i)
        elif decision.action == "edit":
            arguments = json.dumps(decision.value, ensure_ascii=False)
            calls[i] = ToolCallRequest(id=call.id, name=call.name, arguments=arguments)
            _rewrite_history(st, calls[i])
            run.append(i)
        elif decision.action == "give_result":
            results[i] = given_result(call.name, call.id, str(decision.value))
        else:  # stop: the run's task is being cancelled
            raise asyncio.CancelledError
    return calls, run


def _rewrite_history(st: RunState, call: ToolCallRequest) -> None:
    """The assistant message of this turn, with the call's edited arguments (the model then
    sees the call that ran; the model_call span keeps what it sent)."""
    for i in range(len(st.messages) - 1, -1, -1):
        message = st.messages[i]
        if isinstance(message, AssistantMessage):
            st.messages[i] = AssistantMessage(
                text=message.text,
                tool_calls=tuple(call if c.id == call.id else c for c in message.tool_calls),
            )
            return


async def _call_many(st: RunState, calls: Sequence[ToolCallRequest]) -> list[ToolResult]:
    executor = st.executor
    items = [ToolCall(name=c.name, arguments=c.arguments, call_id=c.id) for c in calls]
    task = asyncio.ensure_future(
        executor.call_many(items, run_id=st.run_id, parent_call_id=st.parent_call_id)
    )
    try:
        remaining = st.remaining()
        if remaining is None:
            return await task
        await asyncio.wait({task}, timeout=max(remaining, 0.0))
        while not task.done():  # time is up: cancel this run's calls until they have returned
            st.time_limited = True
            reason = f"the agent's time limit of {st.agent.time_limit:g} s was reached"
            st.error = reason
            executor.cancel(run_id=st.run_id, reason=reason)
            await asyncio.wait({task}, timeout=0.05)
        return task.result()
    except BaseException:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait({task}, timeout=1.0)
        raise
