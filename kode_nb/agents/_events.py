"""Typed agent events, declared in one place, and how they are delivered.

**One mechanism: an ``on_event`` callback.** Give ``on_event=`` to :class:`~kode_nb.agents.Agent`
(every run) and/or to :meth:`Agent.run <kode_nb.agents.Agent.run>` (that run); each is called
with every event of the run, in order, on the event loop's thread. Subagent runs forward their
events to the same callbacks, so one callback sees the whole tree: tell the runs apart by
``run_id``, ``depth`` and ``parent_call_id`` (the subagent's tool call). A callback that raises
is logged and never breaks the run (nor the other callbacks); keep callbacks quick (render,
enqueue), they run between the agent's steps.

Tool-level detail (approval requests, streamed updates, each call's start and end) stays on the
executor's :class:`~kode_nb.EventBus` as before, with the same ``run_id`` and ``call_id``; a
live view subscribes to both and joins them on those ids.

A run's events::

    RunStarted
    (TurnStarted, TextDelta*, ModelResponded,
     [ToolCallsRequested, (SubagentStarted ... nested run's events ... SubagentFinished)?,
      ToolCallFinished*])*
    RunFinished                       always last, also after an error or cancellation

Event payloads hold the live objects (results, messages): a display must pass text it shows
through :func:`kode_nb._redact.redact_text`. The trace holds redacted copies.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, Union, get_args

from kode_nb.models.base import ToolCallRequest, UsageInfo
from kode_nb.types import ToolResult

if TYPE_CHECKING:
    from kode_nb.agents._result import AgentRunResult
    from kode_nb.traces._trace import Trace

__all__ = [
    "AGENT_EVENT_TYPES",
    "AgentEvent",
    "EventCallback",
    "ModelResponded",
    "RunFinished",
    "RunStarted",
    "SubagentFinished",
    "SubagentStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallsRequested",
    "TurnStarted",
]

log = logging.getLogger("kode_nb.agents")


@dataclass(frozen=True, kw_only=True, slots=True)
class _AgentEventBase:
    agent: str
    """The name of the agent whose run this is."""
    run_id: str
    """The run's id (its tool calls carry it too)."""
    depth: int = 0
    """0 for a top-level run, 1 for a subagent it called, and so on."""
    parent_call_id: str | None = None
    """For a subagent run: the parent's tool call that runs it."""
    timestamp: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the event was created."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RunStarted(_AgentEventBase):
    """A run began."""

    prompt: str = ""
    """The user prompt of the run."""
    model: str = ""
    """The model's name."""
    tools: tuple[str, ...] = ()
    """The tools offered to the model."""
    trace: Trace | None = None
    """The run's trace, filled in as the run goes (a live view may poll it)."""
    type: Literal["run_started"] = "run_started"


@dataclass(frozen=True, kw_only=True, slots=True)
class TurnStarted(_AgentEventBase):
    """A turn (one model call, then its tool calls) began."""

    turn: int = 0
    """1-based."""
    type: Literal["turn_started"] = "turn_started"


@dataclass(frozen=True, kw_only=True, slots=True)
class TextDelta(_AgentEventBase):
    """A piece of the model's answer text, as it streams."""

    turn: int = 0
    text: str = ""
    """The new text, to append."""
    type: Literal["text_delta"] = "text_delta"


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResponded(_AgentEventBase):
    """The model's turn is complete."""

    turn: int = 0
    text: str = ""
    """The whole answer text of the turn."""
    tool_calls: tuple[ToolCallRequest, ...] = ()
    usage: UsageInfo = field(default_factory=UsageInfo)
    stop_reason: str = ""
    latency: float = 0.0
    """Seconds the model call took."""
    type: Literal["model_responded"] = "model_responded"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallsRequested(_AgentEventBase):
    """The model asked for tool calls; they now run in parallel."""

    turn: int = 0
    calls: tuple[ToolCallRequest, ...] = ()
    type: Literal["tool_calls_requested"] = "tool_calls_requested"


@dataclass(frozen=True, kw_only=True, slots=True)
class ToolCallFinished(_AgentEventBase):
    """One tool call ended (events come in the order the calls were requested)."""

    turn: int = 0
    call: ToolCallRequest | None = None
    result: ToolResult | None = None
    """The full result: ``content`` went to the model, ``details`` did not."""
    type: Literal["tool_call_finished"] = "tool_call_finished"


@dataclass(frozen=True, kw_only=True, slots=True)
class SubagentStarted(_AgentEventBase):
    """A subagent call starts a nested run (``run_id``/``agent``/``depth`` are the child's)."""

    parent_run_id: str | None = None
    """The run that called the subagent."""
    inputs: Mapping[str, Any] | None = None
    """The validated inputs, JSON-shaped."""
    type: Literal["subagent_started"] = "subagent_started"


@dataclass(frozen=True, kw_only=True, slots=True)
class SubagentFinished(_AgentEventBase):
    """The nested run ended and was folded into the tool result."""

    parent_run_id: str | None = None
    status: str = ""
    """The child run's status."""
    result: ToolResult | None = None
    """The folded result the parent's model gets."""
    type: Literal["subagent_finished"] = "subagent_finished"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFinished(_AgentEventBase):
    """A run ended (completed, limits, cancelled or error); always the last event of a run."""

    status: str = ""
    result: AgentRunResult | None = None
    type: Literal["run_finished"] = "run_finished"


AgentEvent: TypeAlias = Union[
    RunStarted,
    TurnStarted,
    TextDelta,
    ModelResponded,
    ToolCallsRequested,
    ToolCallFinished,
    SubagentStarted,
    SubagentFinished,
    RunFinished,
]

AGENT_EVENT_TYPES: tuple[type[Any], ...] = get_args(AgentEvent)

EventCallback: TypeAlias = Callable[[Any], object]
"""``callback(event)``; the return value is ignored."""


class EventSink:
    """Fans an event out to callbacks, isolating failures (internal to the agent loop)."""

    __slots__ = ("callbacks",)

    def __init__(self, callbacks: Iterable[EventCallback | None] = ()) -> None:
        self.callbacks: tuple[EventCallback, ...] = tuple(
            dict.fromkeys(c for c in callbacks if c is not None)
        )

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def emit(self, event: Any) -> None:
        for callback in self.callbacks:
            try:
                callback(event)
            except Exception:
                log.exception("agent event callback %r failed on %s", callback, event.type)
