"""The state of one agent run, and the helpers that record it (internal to kode_nb.agents).

:class:`RunState` is what a run carries from turn to turn; the current one is in
:data:`CURRENT_RUN` (a context variable), which is how a subagent's tool call finds the run that
called it: its messages (for context compression), depth, executor, event callbacks and the
tool-call span its own trace nests under.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kode_nb.agents._events import EventSink
from kode_nb.agents._request_parts import RequestParts
from kode_nb.agents._result import RunStatus, RunUsage
from kode_nb.execution._executor import Executor
from kode_nb.models._content import content_text
from kode_nb.models.base import (
    Message,
    Model,
    ToolSpec,
)
from kode_nb.tools._model import Tool
from kode_nb.traces._requests import RequestChain
from kode_nb.traces._results import bounded_result
from kode_nb.traces._trace import Span, Trace
from kode_nb.types import ContentBlock, ImageBlock, TextBlock, ToolResult

if TYPE_CHECKING:
    from kode_nb.agents._loop import Agent
    from kode_nb.stepping._step import Stepper

__all__ = ["CURRENT_RUN", "RunState", "TextStart", "result_dict", "whole_length"]


CURRENT_RUN: ContextVar[RunState | None] = ContextVar("kode_nb.agents.current_run", default=None)
"""The run whose code is executing (tool calls run in tasks that inherit it)."""


@dataclass(kw_only=True, eq=False)
class RunState:
    """Everything one run carries (internal)."""

    agent: Agent
    run_id: str
    depth: int
    parent_call_id: str | None
    parent_run_id: str | None
    executor: Executor
    owns_executor: bool
    model: Model
    system: str
    tools: dict[str, Tool]
    specs: tuple[ToolSpec, ...]
    messages: list[Message]
    history_length: int
    sink: EventSink
    trace: Trace
    loop: asyncio.AbstractEventLoop
    task: asyncio.Task[Any] | None
    deadline: float | None
    on_text: Callable[[str], object] | None = None
    stepper: Stepper | None = None
    """Pauses the run before each model request and tool call (:mod:`kode_nb.stepping._step`)."""
    usage: RunUsage = field(default_factory=RunUsage)
    turns: int = 0
    status: RunStatus = "completed"
    error: str | None = None
    output: Any = None
    output_retries: int = 0
    reasked: bool = False
    repeats: dict[tuple[str, str], int] = field(default_factory=dict)
    """How many times each (tool, canonical arguments) call was made in this run."""
    warnings: list[str] = field(default_factory=list)
    """Doubts about the answer, in order (see :mod:`kode_nb.agents._answers`)."""
    cancel_requested: bool = False
    cancel_reason: str = ""
    time_limited: bool = False
    tool_spans: dict[str, Span] = field(default_factory=dict)
    call_ids: set[str] = field(default_factory=set)
    """Tool-call ids used so far in this run."""
    sent: int = 0
    """How many messages earlier model calls already recorded in the trace."""
    requests: RequestChain = field(default_factory=RequestChain)
    """Stores each model call's request as what it added to the previous call's."""
    parts: RequestParts = field(default_factory=RequestParts)
    """The messages and tool schemas every model call resends, redacted once."""
    t0: float = field(default_factory=time.perf_counter)

    @property
    def span(self) -> Span:
        return self.trace.root

    def emit(self, cls: type[Any], **fields: Any) -> None:
        """Build and deliver an agent event, if anyone listens."""
        if self.sink:
            self.sink.emit(
                cls(
                    agent=self.agent.name,
                    run_id=self.run_id,
                    depth=self.depth,
                    parent_call_id=self.parent_call_id,
                    **fields,
                )
            )

    def stop(self, reason: str) -> None:
        """End the run now (``cancelled``, with ``reason``): a stepped run stopped at a pause."""
        self.agent._cancel_now(self, reason)

    def remaining(self) -> float | None:
        """Seconds left before the time limit (``None``: no limit)."""
        if self.deadline is None:
            return None
        return self.deadline - self.loop.time()

    def record_bus_event(self, event: Any) -> None:
        """Executor-bus subscriber: file this run's tool-call events under their spans."""
        if getattr(event, "run_id", None) != self.run_id:
            return
        span = self.tool_spans.get(getattr(event, "call_id", ""))
        if span is None:
            return
        at = time.time() - (time.monotonic() - event.timestamp)
        span.event(event.type, at=at, **_event_fields(event))


def _event_fields(event: Any) -> dict[str, Any]:
    kind = event.type
    if kind == "update":
        data = event.data
        text = data if isinstance(data, str) else repr(data)
        return {"sequence": event.sequence, "data": text[:2000]}
    if kind == "approval_requested":
        return {"reason": event.reason, "kind": event.kind}
    if kind == "approval_resolved":
        return {
            "approved": event.approved,
            "reason": event.reason,
            "edited": event.edited,
            "always": event.always,
            "decided_by": event.decided_by,
        }
    if kind == "invalid_arguments":
        return {"message": event.message}
    if kind == "failed":
        return {"error_type": event.error_type, "message": event.message}
    if kind == "cancelled":
        return {"reason": event.reason}
    if kind == "timed_out":
        return {"timeout": event.timeout}
    return {}


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return _jsonable(dump(mode="json"))
    text = repr(value)
    return text if len(text) <= 2000 else text[:1997] + "..."


@dataclass(frozen=True, kw_only=True, slots=True)
class TextStart(TextBlock):
    """The start of a longer text of ``chars`` characters: a recorded tool result a trace kept
    only the start of (:mod:`kode_nb.traces._results`), given back by a replay or a fork. The
    loop cuts it for the model as it cut the whole text (``max_result_chars``), so the model
    gets the same text it got when the run was recorded."""

    chars: int
    """The whole text's length."""


def whole_length(content: Sequence[ContentBlock], text: str | None = None) -> int:
    """The length of the text of ``content`` (images left out; ``text``: that text, when the
    caller has it) were every :class:`TextStart` whole."""
    texts = [b for b in content if not isinstance(b, ImageBlock)]
    extra = sum(max(0, b.chars - len(b.text)) for b in texts if isinstance(b, TextStart))
    return len(content_text(texts) if text is None else text) + extra


def result_dict(result: ToolResult) -> dict[str, Any]:
    """A tool result in the trace's JSON form, bounded (``text``: its first characters, with
    ``text_chars`` when cut; see :mod:`kode_nb.traces._results`)."""
    data: dict[str, Any] = {
        "status": result.status,
        "is_error": result.is_error,
        "text": result.text,
        "error_type": result.error_type,
        "duration": result.duration,
    }
    if result.details is not None:
        data["details"] = _jsonable(result.details)
    starts = any(isinstance(b, TextStart) for b in result.content)
    return bounded_result(data, chars=whole_length(result.content) if starts else None)
