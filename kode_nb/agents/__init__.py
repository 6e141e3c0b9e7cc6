"""Agents: the model ↔ tools loop, subagents as tools, and run traces.

* :class:`Agent` / :class:`AgentRunResult` — the loop (:mod:`.loop`).
* :class:`AgentDefinition` / :func:`register_subagent` — subagents as ``think`` tools
  (:mod:`.subagent`), with a narrowed policy (:class:`NarrowedPolicy`) and a context
  compression hook (:func:`compress_context`).
* Events for live views (:mod:`.events`): pass ``on_event=`` to an agent or a run.
* :class:`Trace` — the recorded tree, as ``kode_nb.trace/v2`` JSON or OpenTelemetry spans
  (:mod:`.trace`); secrets are removed first (:func:`redact`).
* Cost: :data:`prices` (editable), :func:`set_price`, :func:`price_for`, and the request size
  estimate :func:`estimate_tokens` (:mod:`._cost`).
* :class:`Stepper` — step through a run: pause before each model request and tool call
  (:mod:`._step`); :meth:`Agent.start` returns a :class:`StartedRun` to drive it.
* :func:`replay` — re-run a recorded run offline with a :class:`~kode_nb.models.ReplayModel`,
  tools recorded or re-executed (:mod:`._replay`); returns a :class:`Replay`.
* :func:`fork` — continue a finished run from one of its steps with a changed message, tool
  result, system prompt or model, the steps before replayed with no model requests
  (:mod:`._fork`); :func:`diverge` — where two runs (a run and its fork) first differ, side by
  side (:mod:`._diverge`).
* :func:`expand_trace` — a recorded run as notebook cells that reproduce it (:mod:`._expand`).
* :func:`known_trace` / :func:`remember_trace` — the traces this process knows by id (every
  finished run's; :mod:`._known`).

Nothing here imports Jupyter.
"""

from __future__ import annotations

from kode_nb._redact import REDACTED, redact, redact_text
from kode_nb.agents._context import CompressContext, compress_context
from kode_nb.agents._events import (
    AGENT_EVENT_TYPES,
    AgentEvent,
    EventCallback,
    ModelResponded,
    RunFinished,
    RunStarted,
    SubagentFinished,
    SubagentStarted,
    TextDelta,
    ToolCallFinished,
    ToolCallsRequested,
    TurnStarted,
)
from kode_nb.agents._loop import Agent, AgentRunResult
from kode_nb.agents._result import RunStatus, RunUsage
from kode_nb.agents._subagent import AgentDefinition, ModelSpec, register_subagent, subagent_tool
from kode_nb.agents._toolset import NarrowedPolicy, resolve_tools
from kode_nb.models._cost import Price, estimate_tokens, price_for, prices, set_price
from kode_nb.stepping._step import StepDecision, StepEditError, Stepper, StepPoint
from kode_nb.stepping._step_loop import StartedRun
from kode_nb.traces._known import known_trace, remember_trace
from kode_nb.traces._trace import SCHEMA, Span, Trace

__all__ = [
    "AGENT_EVENT_TYPES",
    "REDACTED",
    "SCHEMA",
    "Agent",
    "AgentDefinition",
    "AgentEvent",
    "AgentRunResult",
    "CompressContext",
    "EventCallback",
    "ModelResponded",
    "ModelSpec",
    "NarrowedPolicy",
    "Price",
    "RunFinished",
    "RunStarted",
    "RunStatus",
    "RunUsage",
    "Span",
    "StartedRun",
    "StepDecision",
    "StepEditError",
    "StepPoint",
    "Stepper",
    "SubagentFinished",
    "SubagentStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallsRequested",
    "Trace",
    "TurnStarted",
    "compress_context",
    "known_trace",
    "estimate_tokens",
    "price_for",
    "prices",
    "redact",
    "redact_text",
    "register_subagent",
    "remember_trace",
    "resolve_tools",
    "set_price",
    "subagent_tool",
]
