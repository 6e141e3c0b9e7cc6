"""Replay and fork a captured framework run: :func:`replay_model` swaps in a model that answers
as the recorded run's model did.

Where a framework lets its model be swapped, a captured run (:func:`kode_nb.capture`) can be
re-run offline: pydantic-ai through a ``FunctionModel``, the OpenAI Agents SDK through a custom
``Model``. The model answers each request with the recorded response (text and tool calls) of
the run's own model calls, in order; the tools run for real (use a kode_nb executor with an
approver, or the notebook's buttons). ``until=N`` answers only the first N requests as
recorded and ``then=`` (a model of that framework) answers the rest: a fork at turn N+1. Nested
agents (an agent used as a tool, a handoff's agent) have models of their own: replay them with
their own traces' spans. LangChain has no model to swap in this way, so a LangChain run cannot be
replayed or forked; kode_nb.replay and kode_nb.fork re-run kode_nb agents only and refuse a
captured trace with a message pointing here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.traces import Trace

__all__ = ["recorded_answers", "replay_model"]


def recorded_answers(trace: Trace) -> list[dict[str, Any]]:
    """The responses (``{"text", "tool_calls"}``) of the run's own model calls, in order."""
    out = []
    for turn in trace.root.children:
        for span in turn.children:
            if span.kind == "model_call":
                response = span.attributes.get("response")
                out.append(dict(response) if isinstance(response, Mapping) else {"text": ""})
    return out


def replay_model(
    trace: Trace | Mapping[str, Any], *, until: int | None = None, then: Any = None
) -> Any:
    """A model of the captured run's framework that answers as recorded (see the module
    docstring): a pydantic-ai ``FunctionModel`` or an OpenAI Agents SDK ``Model``."""
    if not isinstance(trace, Trace):
        trace = Trace.from_dict(trace)
    framework = trace.root.attributes.get("framework")
    answers = recorded_answers(trace)
    if until is not None:
        if not isinstance(until, int) or isinstance(until, bool) or not 0 <= until <= len(answers):
            raise ConfigurationError(
                f"replay_model(until=...) must be an int from 0 to {len(answers)} (the recorded "
                f"model calls), got {until!r}"
            )
        if then is None:
            raise ConfigurationError("replay_model(until=...) needs then=: the model for the rest")
        answers = answers[:until]
    if framework == "pydantic-ai":
        from kode_nb.interop._pydantic_ai import replaying_model

        return replaying_model(answers, then)
    if framework == "openai-agents":
        from kode_nb.interop._openai_agents import ReplayingAgentsModel

        return ReplayingAgentsModel(answers, then)
    if framework == "langchain":
        raise ConfigurationError(
            "replay_model: a LangChain run cannot be replayed: LangChain has no model interface "
            "kode_nb can swap in for a recorded one (pass a fake chat model built from "
            "kode_nb.interop.recorded_answers(trace) yourself)"
        )
    raise ConfigurationError(
        "replay_model needs a trace captured from pydantic-ai or the OpenAI Agents SDK "
        f"(kode_nb.capture); this one's framework is {framework!r} (a kode_nb run: use kode_nb.replay)"
    )
