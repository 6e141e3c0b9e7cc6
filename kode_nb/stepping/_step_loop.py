"""The loop's side of stepping (internal): the pauses before a model request and before a tool
call, a result given by hand, and :class:`StartedRun` (what :meth:`Agent.start
<kode_nb.agents.Agent.start>` returns). The decisions themselves are in
:mod:`kode_nb.stepping._step`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kode_nb.errors import ToolValidationError
from kode_nb.models.base import (
    AssistantMessage,
    Message,
    ModelRequest,
    ToolResultMessage,
    UserMessage,
)
from kode_nb.stepping._step import (
    StepDecision,
    StepEditError,
    SteppedRun,
    Stepper,
    StepPoint,
    message_text,
)
from kode_nb.traces._trace import parse_arguments
from kode_nb.types import TextBlock, ToolResult, normalize_name

if TYPE_CHECKING:
    from kode_nb.traces._trace import Span

ResultT = TypeVar("ResultT")
"""What a started run gives when awaited (the loop's ``AgentRunResult``)."""

__all__ = ["StartedRun", "given_result", "pause_model_request", "pause_tool_call"]


async def _pause(stepper: Stepper, st: SteppedRun, point: StepPoint, span: Span) -> StepDecision:
    """Wait for the decision at ``point``; the span gets a ``step`` event (what was decided,
    seconds waited), and the wait does not count against the run's time limit."""
    stepper.points.append(point)
    if stepper.on_pause is not None:  # soon, not now: a decision never comes from inside
        st.loop.call_soon(stepper.on_pause, point)  # the run's own task
    stepper._wake(point)
    t0 = time.monotonic()
    try:
        return await asyncio.shield(point.future)
    except asyncio.CancelledError:
        if not point.future.done():
            point.decision = StepDecision("cancelled")
            point.future.cancel()
            stepper._changed(point)
        raise
    finally:
        waited = time.monotonic() - t0
        if st.deadline is not None:
            st.deadline += waited
        action = point.decision.action if point.decision is not None else "cancelled"
        span.event("step", action=action, waited=round(waited, 3))


async def pause_model_request(
    st: SteppedRun, span: Span, request: ModelRequest, body: dict[str, Any], turn: int
) -> ModelRequest | None:
    """Pause before a model request; the request to send (edited or not), ``None``: stop."""
    stepper = st.stepper
    if stepper is None or not stepper.steps(st):
        return request
    point = StepPoint(
        stepper,
        kind="model_request",
        run_id=st.run_id,
        agent=st.agent.name,
        depth=st.depth,
        turn=turn,
        request=request,
        body=body,
    )
    decision = await _pause(stepper, st, point, span)
    if decision.action == "stop":
        return None
    if decision.action != "edit" or decision.message is None:
        return request
    i = decision.message
    before = message_text(st.messages[i])
    st.messages[i] = _with_text(st.messages[i], decision.value)
    span.event(
        "step_edit", message=i, role=_role(st.messages[i]), before=before, after=decision.value
    )
    return ModelRequest(
        system=request.system,
        messages=tuple(st.messages),
        tools=request.tools,
        settings=request.settings,
    )


def _role(message: Message) -> str:
    if isinstance(message, UserMessage):
        return "user"
    return "assistant" if isinstance(message, AssistantMessage) else "tool"


async def pause_tool_call(
    st: SteppedRun, span: Span, call_id: str, name: str, raw: str, turn: int
) -> StepDecision | None:
    """Pause before a tool call runs; ``None`` when not stepping. An ``edit`` decision's value
    is the validated arguments (JSON-shaped)."""
    stepper = st.stepper
    if stepper is None or not stepper.steps(st):
        return None
    tool = st.tools.get(normalize_name(name))
    arguments, invalid = parse_arguments(raw), None
    if tool is not None:
        try:
            arguments = tool.validator.dump(tool.validator.validate(raw, tool=name))
        except ToolValidationError as exc:
            invalid = str(exc)
        except Exception as exc:  # a custom validator's bug: show it, let the executor decide
            invalid = f"{type(exc).__name__}: {exc}"
    point = StepPoint(
        stepper,
        kind="tool_call",
        run_id=st.run_id,
        agent=st.agent.name,
        depth=st.depth,
        turn=turn,
        tool=tool,
        call_id=call_id,
        tool_name=name,
        arguments=arguments,
        invalid=invalid,
    )
    decision = await _pause(stepper, st, point, span)
    if decision.action == "edit":
        span.event("step_edit", before=arguments, after=decision.value)
        span.set(arguments=decision.value, edited_by_hand=True)
    elif decision.action == "give_result":
        span.event("step_given", text=decision.value)
        span.set(given_by_hand=True)
    return decision


def given_result(name: str, call_id: str, text: str) -> ToolResult:
    """The result of a call answered by hand."""
    now = time.time()
    return ToolResult(
        content=(TextBlock(text=text),),
        status="ok",
        tool=name,
        call_id=call_id,
        details={"given_by_hand": True},
        started_at=now,
        ended_at=now,
    )


class StartedRun(Generic[ResultT]):
    """A run started with :meth:`Agent.start <kode_nb.agents.Agent.start>`: a task on the
    running loop, with its :class:`Stepper` (``None`` when not stepping).

    ``await run`` gives the :class:`~kode_nb.agents.AgentRunResult`; ``await run.paused()``
    the next pause point (``None`` once the run has ended)."""

    def __init__(self, task: asyncio.Task[ResultT], stepper: Stepper | None, run_id: str) -> None:
        self.task = task
        self.stepper = stepper
        self.run_id = run_id

    def __repr__(self) -> str:
        state = "done" if self.task.done() else "running"
        return f"<StartedRun {self.run_id} {state}{' stepping' if self.stepper else ''}>"

    async def paused(self, timeout: float | None = None) -> StepPoint | None:
        """The next pause point, ``None`` once the run has ended (or when not stepping)."""
        if self.stepper is None:
            return None
        waiter = asyncio.ensure_future(self.stepper.paused())
        await asyncio.wait(
            {waiter, self.task}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED
        )
        if waiter.done():
            return waiter.result()
        waiter.cancel()
        if self.task.done():
            return None
        raise TimeoutError(f"no pause within {timeout:g} s")

    def done(self) -> bool:
        return self.task.done()

    def __await__(self) -> Any:
        return self.task.__await__()

    def __aiter__(self) -> AsyncIterator[StepPoint]:
        """``async for point in run``: each pause point in order, as pydantic-ai's
        ``async for node in agent_run`` gives each step. Decide in the loop's body (``edit``,
        ``give_result``, ``stop``...); a point left undecided goes on with ``next()`` when the
        loop asks for the one after it. The iteration ends with the run (then ``await run``)."""
        return self._points()

    async def _points(self) -> AsyncIterator[StepPoint]:
        if self.stepper is None:
            raise StepEditError(
                f"run {self.run_id} does not step: start it with step=True to iterate its steps"
            )
        while (point := await self.paused()) is not None:
            yield point
            if point.decision is None:
                point.next()


def _with_text(message: Message, text: str) -> Message:
    if isinstance(message, UserMessage):
        return UserMessage(content=text)
    if isinstance(message, AssistantMessage):
        return AssistantMessage(text=text, tool_calls=message.tool_calls)
    assert isinstance(message, ToolResultMessage)
    return ToolResultMessage(
        call_id=message.call_id,
        name=message.name,
        content=(TextBlock(text=text),),
        is_error=message.is_error,
    )
