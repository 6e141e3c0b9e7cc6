"""Stepping through a run: pause before each model request and each tool execution.

A :class:`Stepper` given to a run (``await agent.run(prompt, step=stepper)``, or
``run = agent.start(prompt, step=True)``) makes the loop stop at every *pause point* and wait
for a decision. A pause point is a :class:`StepPoint`:

* ``kind == "model_request"``: the request about to go (``.request``: system prompt, every
  message, the tool schemas and settings; ``.body()``: the same as JSON, as the model_call span
  records it);
* ``kind == "tool_call"``: the call about to run (``.tool``, ``.call_id``, ``.arguments``:
  validated against the tool's schema; ``.invalid``: the validation error when they are not).

Decide with one of its methods (each ends the pause, except an edit that fails validation):

* :meth:`StepPoint.next` — go on;
* :meth:`StepPoint.edit` — change a message (``point.edit("new text", message=-1)``) or the
  tool arguments (``point.edit({"path": "b.txt"})``), then go on; arguments are re-validated
  and an invalid edit raises :class:`StepEditError` (the point stays paused, ``.error`` says
  why); the trace gets a ``step_edit`` span event with ``before`` and ``after``;
* :meth:`StepPoint.give_result` — answer a tool call by hand instead of running it (the model
  gets the text; the tool-call span says ``given_by_hand``);
* :meth:`StepPoint.run_to_end` — stop pausing, for this run and the runs it starts;
* :meth:`StepPoint.stop` — end the run now: status ``cancelled``, error ``stopped while
  stepping: <reason>``.

``Stepper(nested="all")`` (the default) also pauses inside subagent runs; ``nested="top"``
lets them run through. Time spent paused does not count against the run's ``time_limit``.

Driving a run from Python::

    run = agent.start("Summarise notes.txt", step=True)
    point = await run.paused()          # a StepPoint, or None once the run has ended
    point.next()
    point = await run.paused()          # the tool call the model asked for
    point.edit({"path": "notes.md"})
    result = await run                  # the AgentRunResult

Everything happens on the run's event loop; a waiting run blocks nothing else. The loop's
side (where a run pauses, :class:`~kode_nb.debug.StartedRun`) is in
:mod:`kode_nb.stepping._step_loop`. No Jupyter imports: the notebook's buttons
(kode_nb/ui/step_view.py) call these same methods.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from kode_nb.errors import ConfigurationError, KodeUsageError, ToolValidationError
from kode_nb.models.base import (
    AssistantMessage,
    Message,
    ModelRequest,
    UserMessage,
)
from kode_nb.types import ToolResult

if TYPE_CHECKING:
    from kode_nb.tools._model import Tool

__all__ = ["StepDecision", "StepEditError", "StepPoint", "SteppedRun", "Stepper", "message_text"]


class _Named(Protocol):
    @property
    def name(self) -> str: ...


class SteppedRun(Protocol):
    """What stepping reads of a run, and the one thing it changes (the loop's run state is
    one): the run's identity and depth, its messages, its tools, its loop, its stepper, and its
    deadline, which a pause pushes back by the time it waited. Stepping knows no more of the
    loop than this, so it sits below it."""

    deadline: float | None

    @property
    def run_id(self) -> str: ...

    @property
    def depth(self) -> int: ...

    @property
    def agent(self) -> _Named: ...

    @property
    def messages(self) -> list[Message]: ...

    @property
    def tools(self) -> dict[str, Tool]: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def stepper(self) -> Stepper | None: ...

    def stop(self, reason: str) -> None:
        """End the run now (``cancelled``, with ``reason``)."""


StepKind = Literal["model_request", "tool_call"]
Action = Literal["next", "edit", "give_result", "run_to_end", "stop", "cancelled"]


class StepEditError(KodeUsageError, ValueError):
    """An edit at a pause point was refused (bad arguments, a bad message index...)."""


@dataclass(frozen=True, slots=True)
class StepDecision:
    """What was decided at a pause point."""

    action: Action
    value: Any = None
    """The edited message text or arguments, the given result's text, or the stop reason."""
    message: int | None = None
    """The index of the edited message (a model-request edit)."""


def message_text(message: Message) -> str:
    """The editable text of a message: a user's content, an assistant's text, a tool result's
    text."""
    if isinstance(message, UserMessage):
        return message.content
    if isinstance(message, AssistantMessage):
        return message.text
    return ToolResult(content=message.content).text


class StepPoint:
    """One pause: a model request or a tool call about to happen, waiting for a decision."""

    def __init__(
        self,
        stepper: Stepper,
        *,
        kind: StepKind,
        run_id: str,
        agent: str,
        depth: int,
        turn: int,
        request: ModelRequest | None = None,
        body: dict[str, Any] | None = None,
        tool: Tool | None = None,
        call_id: str = "",
        tool_name: str = "",
        arguments: Any = None,
        invalid: str | None = None,
    ) -> None:
        self.stepper = stepper
        self.kind: StepKind = kind
        """``model_request`` or ``tool_call``."""
        self.run_id, self.agent, self.depth, self.turn = run_id, agent, depth, turn
        self.request = request
        """(model request) The :class:`~kode_nb.models.ModelRequest` about to be sent."""
        self._body = body or {}
        self._tool = tool
        self.tool = tool_name
        """(tool call) The tool's name."""
        self.call_id = call_id
        """(tool call) The call's id."""
        self.arguments = arguments
        """(tool call) The arguments, validated and JSON-shaped (the raw text if they do not
        parse)."""
        self.invalid = invalid
        """(tool call) Why the model's arguments do not fit the schema (``None``: they do)."""
        self.error: str | None = None
        """Why the latest edit was refused (the point is still paused)."""
        self.decision: StepDecision | None = None
        """The decision, once made."""
        self.future: asyncio.Future[StepDecision] = asyncio.get_running_loop().create_future()

    def __repr__(self) -> str:
        what = (
            f"tool {self.tool} {json.dumps(self.arguments, default=str)[:80]}"
            if (self.kind == "tool_call")
            else f"{len(self.messages)} messages"
        )
        state = self.decision.action if self.decision else "paused"
        return f"<StepPoint {self.kind} {self.agent} turn {self.turn}: {what} ({state})>"

    @property
    def messages(self) -> tuple[Message, ...]:
        """(model request) The messages about to be sent, oldest first."""
        return self.request.messages if self.request is not None else ()

    def body(self) -> dict[str, Any]:
        """(model request) The request as JSON: ``system``, ``messages``, ``tools`` (their
        schemas), ``settings`` — what the model_call span records."""
        return self._body

    @property
    def done(self) -> bool:
        """True once decided (or cancelled)."""
        return self.future.done()

    # ------------------------------------------------------------------ decisions

    def _decide(self, decision: StepDecision) -> bool:
        if self.future.done():
            return False
        self.decision = decision
        self.error = None
        self.future.set_result(decision)
        self.stepper._decided(self)
        return True

    def next(self) -> bool:
        """Go on (False if the point was already decided)."""
        return self._decide(StepDecision("next"))

    def edit(self, value: Any, *, message: int = -1) -> bool:
        """Change what is about to go, then go on.

        A tool call: ``value`` is the new arguments (a dict, or JSON text), re-validated against
        the tool's schema. A model request: ``value`` is the new text of message ``message``
        (default the last one). Raises :class:`StepEditError` when the edit does not fit; the
        point then stays paused, with :attr:`error` set."""
        if self.future.done():
            return False
        try:
            decision = self._checked_edit(value, message)
        except StepEditError as exc:
            self.error = str(exc)
            self.stepper._changed(self)
            raise
        return self._decide(decision)

    def _checked_edit(self, value: Any, message: int) -> StepDecision:
        if self.kind == "model_request":
            if not isinstance(value, str):
                raise StepEditError(f"a message edit is text, got {type(value).__name__}")
            count = len(self.messages)
            if (
                isinstance(message, bool)
                or not isinstance(message, int)
                or not (-count <= message < count)
            ):
                raise StepEditError(
                    f"message must be an index into the {count} messages, got {message!r}"
                )
            return StepDecision("edit", value, message % count)
        raw = value
        if isinstance(value, str):
            try:
                raw = json.loads(value)
            except ValueError as exc:
                raise StepEditError(f"the arguments are not valid JSON: {exc}") from None
        if not isinstance(raw, Mapping):
            raise StepEditError(f"the arguments must be a JSON object, got {type(raw).__name__}")
        if self._tool is not None:
            try:
                validated = self._tool.validator.validate(dict(raw), tool=self.tool)
            except ToolValidationError as exc:
                raise StepEditError(str(exc)) from None
            raw = self._tool.validator.dump(validated)
        return StepDecision("edit", dict(raw))

    def give_result(self, text: str) -> bool:
        """(tool call) Answer the call with ``text`` instead of running it."""
        if self.kind != "tool_call":
            raise StepEditError("give_result answers a tool call; this pause is a model request")
        if not isinstance(text, str):
            raise StepEditError(f"the result is text, got {type(text).__name__}")
        return self._decide(StepDecision("give_result", text))

    def run_to_end(self) -> bool:
        """Go on, and stop pausing (this run and the runs it starts)."""
        self.stepper.active = False
        done = self._decide(StepDecision("run_to_end"))
        self.stepper._release()
        return done

    def stop(self, reason: str = "stopped by the user") -> bool:
        """End the run now: it finishes with status ``cancelled``."""
        return self._decide(StepDecision("stop", str(reason).strip() or "stopped by the user"))


class Stepper:
    """Pauses a run before each model request and tool execution (see the module docstring).

    ``nested``: ``"all"`` — subagent runs pause too; ``"top"`` — they run through.
    ``on_pause``: called with each :class:`StepPoint` as it pauses (a notebook shows buttons).
    """

    def __init__(
        self,
        *,
        nested: Literal["all", "top"] = "all",
        on_pause: Callable[[StepPoint], object] | None = None,
    ) -> None:
        if nested not in ("all", "top"):
            raise ConfigurationError(f"Stepper: nested must be 'all' or 'top', got {nested!r}")
        if on_pause is not None and not callable(on_pause):
            raise ConfigurationError(f"Stepper: on_pause must be callable, got {on_pause!r}")
        self.nested = nested
        self.on_pause = on_pause
        self.active = True
        """False after Run to end: pause points are skipped."""
        self.points: list[StepPoint] = []
        """Every pause so far, in order."""
        self.watchers: list[Callable[[StepPoint], object]] = []
        """Called (loop thread) when a point is decided or an edit is refused."""
        self._top: SteppedRun | None = None
        self._waiters: list[asyncio.Future[StepPoint | None]] = []
        self.ended = False
        """True once the run it steps has ended."""

    def __repr__(self) -> str:
        state = "ended" if self.ended else "stepping" if self.active else "running to the end"
        return f"<Stepper nested={self.nested!r} {state}, {len(self.points)} pauses>"

    @classmethod
    def of(cls, step: Stepper | bool | str | None, where: str) -> Stepper | None:
        """``step=`` as given to a run: a Stepper, True (= ``"all"``), ``"all"``, ``"top"``,
        or False/None (no stepping)."""
        if step is None or step is False:
            return None
        if isinstance(step, Stepper):
            return step
        if step is True:
            return cls()
        if step == "all":
            return cls(nested="all")
        if step == "top":
            return cls(nested="top")
        raise ConfigurationError(
            f"{where}: step must be True, 'all', 'top', a Stepper or None, got {step!r}"
        )

    # ------------------------------------------------------------------ waiting

    def pending(self) -> list[StepPoint]:
        """The points waiting for a decision (more than one only with parallel subagents)."""
        return [p for p in self.points if not p.done]

    @property
    def current(self) -> StepPoint | None:
        """The first point waiting for a decision."""
        waiting = self.pending()
        return waiting[0] if waiting else None

    async def paused(self, timeout: float | None = None) -> StepPoint | None:
        """The next point waiting for a decision; ``None`` once the run has ended (or runs to
        its end). ``timeout`` seconds: ``TimeoutError``."""
        point = self.current
        if point is not None or self.ended or not self.active:
            return point
        future: asyncio.Future[StepPoint | None] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return await asyncio.wait_for(future, timeout)

    def _wake(self, value: StepPoint | None) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(value)

    # --------------------------------------------------- decisions on the current point

    def _now(self) -> StepPoint:
        point = self.current
        if point is None:
            raise StepEditError("nothing is paused: `await stepper.paused()` first")
        return point

    def next(self) -> bool:
        """:meth:`StepPoint.next` on the current point."""
        return self._now().next()

    def edit(self, value: Any, *, message: int = -1) -> bool:
        """:meth:`StepPoint.edit` on the current point."""
        return self._now().edit(value, message=message)

    def give_result(self, text: str) -> bool:
        """:meth:`StepPoint.give_result` on the current point."""
        return self._now().give_result(text)

    def run_to_end(self) -> bool:
        """Stop pausing; the current point (if any) goes on."""
        point = self.current
        if point is not None:
            return point.run_to_end()
        self.active = False
        self._release()
        return True

    def stop(self, reason: str = "stopped by the user") -> bool:
        """End the run now (status ``cancelled``)."""
        point = self.current
        if point is not None:
            return point.stop(reason)
        if self._top is None or self.ended:
            return False
        self._stop_run(reason)
        return True

    # ------------------------------------------------------------------ internal

    def _decided(self, point: StepPoint) -> None:
        if point.decision is not None and point.decision.action == "stop":
            self._stop_run(str(point.decision.value))
        self._changed(point)

    def _changed(self, point: StepPoint) -> None:
        for watcher in list(self.watchers):
            watcher(point)

    def _release(self) -> None:
        for point in self.pending():
            point._decide(StepDecision("run_to_end"))
        self._wake(None)

    def _stop_run(self, reason: str) -> None:
        top = self._top
        if top is not None:
            top.stop(f"stopped while stepping: {reason}")

    def _bind(self, st: SteppedRun) -> None:
        """Called by a top-level run that steps with this stepper."""
        if self._top is not None and not self.ended:
            raise ConfigurationError(
                f"this Stepper already steps run {self._top.run_id}; use one Stepper per run"
            )
        self._top, self.ended = st, False

    def _end(self, st: SteppedRun) -> None:
        if st is not self._top:
            return
        self.ended = True
        for point in self.pending():
            point.future.cancel()
        self._wake(None)

    def steps(self, st: SteppedRun) -> bool:
        """Whether run ``st`` pauses now."""
        return self.active and not self.ended and (st.depth == 0 or self.nested == "all")
