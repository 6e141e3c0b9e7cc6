"""Agents: the model ↔ tools loop and subagents as tools.

* :class:`Agent` / :class:`AgentRunResult` — the loop: ``await agent.run(prompt)``, or
  ``agent.start(prompt, step=True)`` to step through it (the pause points are
  :mod:`kode_nb.stepping`'s); :class:`RunUsage` / :data:`RunStatus` describe a result.
* :class:`AgentDefinition` / :func:`register_subagent` / :func:`subagent_tool` — subagents as
  ``think`` tools, with a narrowed policy (:class:`NarrowedPolicy`) and a context compression
  hook (:func:`compress_context`, :data:`CompressContext`).
* Events for live views: pass ``on_event=`` (an :data:`EventCallback`) to an agent or a run;
  :data:`AgentEvent` is any of the event classes, :data:`AGENT_EVENT_TYPES` their ``type``
  strings.

Each run records a :class:`~kode_nb.traces.Trace` (:mod:`kode_nb.traces`); costs come from
:mod:`kode_nb.models`' price table; replay, fork, diverge and expand-to-cells are in
:mod:`kode_nb.debug`, which builds on this package.

May import: ``stepping``, ``traces``, ``execution``, ``models``, ``tools``, ``policy``,
``events``, ``types``, ``errors``, ``_redact``, ``_threads``. Nothing here imports Jupyter.
"""

from __future__ import annotations

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
from kode_nb.agents._loop import Agent
from kode_nb.agents._result import AgentRunResult, RunStatus, RunUsage
from kode_nb.agents._subagent import AgentDefinition, register_subagent, subagent_tool
from kode_nb.agents._toolset import NarrowedPolicy

# Still importable from here (their packages are their homes): the stepping names an
# ``Agent.start`` caller uses, and the trace types a run's result holds.
from kode_nb.stepping import StartedRun as StartedRun
from kode_nb.stepping import StepDecision as StepDecision
from kode_nb.stepping import StepEditError as StepEditError
from kode_nb.stepping import Stepper as Stepper
from kode_nb.stepping import StepPoint as StepPoint
from kode_nb.traces import Span as Span
from kode_nb.traces import Trace as Trace

__all__ = [
    "AGENT_EVENT_TYPES",
    "Agent",
    "AgentDefinition",
    "AgentEvent",
    "AgentRunResult",
    "CompressContext",
    "EventCallback",
    "ModelResponded",
    "NarrowedPolicy",
    "RunFinished",
    "RunStarted",
    "RunStatus",
    "RunUsage",
    "SubagentFinished",
    "SubagentStarted",
    "TextDelta",
    "ToolCallFinished",
    "ToolCallsRequested",
    "TurnStarted",
    "compress_context",
    "register_subagent",
    "subagent_tool",
]
