"""Fork a finished run at one of its steps: ``await kode_nb.fork(run, at=..., edit=...)``.

The fork is a new run of the same agent (rebuilt from the trace as :func:`kode_nb.replay` does)
that follows the recording up to the fork point, with **no model requests** for it, and from
there goes on live with something changed. ``at`` names the point:

* a turn number ``N`` (1-based), or the ``span_id`` of turn ``N``'s ``turn`` or ``model_call``
  span (the run span itself means turn 1). Turns before ``N`` are replayed from the recording
  (their recorded responses, their recorded tool results); turn ``N``'s request goes to the
  live model. ``edit`` is ``None`` (ask again, unchanged), a string (the new user message), or
  ``{"message": str, "system_prompt": str}`` (either key). The message replaces the run's
  prompt, the last user message before turn ``N``; turns before ``N`` keep their recorded
  responses, so the fork's conversation reads as if the prompt had been the new one.
* the ``span_id`` of a ``tool_call`` span of turn ``N``: model calls up to ``N`` are replayed,
  and that call's result is replaced by ``edit``: a string (the new result text) or
  ``{"result": str, "is_error": bool, "system_prompt": str}``; ``edit=None`` executes the call
  again, live. The turn's other calls keep their recorded results; the run goes on live from
  model call ``N + 1``.

``system_prompt=`` (or the edit's ``system_prompt``) changes the system prompt for the whole
fork (the replayed turns are shown with it); ``model=`` is the live model, by default the
original run's model object when this process still has it (``kode_nb/traces/_known.py``;
else ``model=`` is required and the error says so). Tool calls before the fork point always
answer with their recorded results (a subagent call with its folded result: the subagent does
not run); from the fork point on they run through ``executor``: by default the executor the
run itself used when this process still has it (its registry, policy and approvals: an agent
whose tools live in a registry of their own forks with them), else a new
:class:`~kode_nb.Executor` (in a notebook with kode_nb loaded, the session's), which must have
the run's tools (else the error says to pass ``executor=``).

The fork's trace is a ``kode_nb.trace/v3`` trace of its own. Its run span has ``forked_from``
(``trace_id``, ``span_id``, ``turn``, ``kind``, ``call_id``, ``edited``, ``replayed_requests``);
replayed ``model_call`` and ``tool_call`` spans have ``replayed: true`` (and keep the recorded
model name and cost), an edited tool call ``edited: true``. :func:`kode_nb.diverge` compares
the fork with its parent. Only the top-level run can be forked: a span inside a subagent's run
is refused (fork the run at the subagent's tool call instead).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping
from typing import Any

from pydantic import BaseModel

from kode_nb._redact import redact
from kode_nb.agents._loop import Agent
from kode_nb.agents._result import AgentRunResult
from kode_nb.agents._toolset import resolve_model
from kode_nb.debug._fork_point import Edit, ForkPoint, fork_edit, fork_point, turn_spans
from kode_nb.debug._recorded import recorded_content
from kode_nb.debug._replay import CallIds, _model_calls, load_trace, recorded_agent
from kode_nb.errors import ConfigurationError
from kode_nb.execution._executor import Executor
from kode_nb.execution._session_defaults import refresh_run
from kode_nb.models._cost import rollup
from kode_nb.models._replay import ReplayModel
from kode_nb.models.base import Model, ModelEvent, ModelRequest
from kode_nb.models.errors import ReplayDivergedError
from kode_nb.traces._known import known_executor, known_model, remember_trace
from kode_nb.traces._trace import Span, Trace
from kode_nb.types import TextBlock, ToolResult

__all__ = ["ForkPoint", "fork"]


class _ForkModel:
    """Answers the first ``replayed`` requests from the recording, then asks the live model."""

    def __init__(self, replay: ReplayModel, live: Model, replayed: int) -> None:
        self.replay = replay
        self.live = live
        self.replayed = replayed
        self.requests = 0

    @property
    def name(self) -> str:
        return self.live.name

    def describe(self) -> Mapping[str, Any]:
        describe = getattr(self.live, "describe", None)
        return describe() if callable(describe) else {}

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests += 1
        if self.requests <= self.replayed:
            return self.replay.stream(request)
        return self.live.stream(request)


class _ForkExecutor(Executor):
    """An executor that answers the recorded calls before the fork point by call id, and runs
    every other call as ``base`` would."""

    def __init__(self, base: Executor, answers: dict[str, ToolResult]) -> None:
        super().__init__(
            base.registry,
            policy=base.policy,
            approver=base.approver,
            bus=base.bus,
            max_concurrency=base.max_concurrency,
            group_limits=base.group_limits,
            default_timeout=base.default_timeout,
            network_timeout=base.network_timeout,
            deps=base.deps,
            user=base.user,
            max_stuck_threads=base.max_stuck_threads,
        )
        self.answers = answers

    async def call(
        self, name: str, arguments: Any = None, *, call_id: str | None = None, **options: Any
    ) -> ToolResult:
        answer = self.answers.pop(call_id, None) if call_id else None
        if answer is not None:
            return dataclasses.replace(answer, call_id=str(call_id))
        return await super().call(name, arguments, call_id=call_id, **options)


def _recorded(
    span: Span, text: str | None = None, is_error: bool = False, *, run: Span
) -> ToolResult:
    a = span.attributes
    if text is not None:
        return ToolResult(
            content=(TextBlock(text=text),),
            is_error=is_error,
            status="error" if is_error else "ok",
            tool=str(a.get("tool", "")),
            call_id=str(a.get("call_id", "")),
            error_type="EditedResult" if is_error else None,
        )
    found = a.get("result")
    r: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    return ToolResult(
        content=recorded_content(run, span),  # a long result: what the model got
        is_error=bool(r.get("is_error")),
        status=r.get("status", "ok"),
        error_type=r.get("error_type"),
        details=r.get("details"),
        tool=str(a.get("tool", "")),
        call_id=str(a.get("call_id", "")),
    )


def _live_model(trace: Trace, model: Any) -> Model:
    if model is not None:
        return resolve_model(model, where="fork")
    known = known_model(trace.trace_id)
    if isinstance(known, _ForkModel):
        known = known.live
    recorded = trace.root.attributes.get("model", "?")
    if known is None or isinstance(known, ReplayModel):
        why = (
            "the run was a replay"
            if known is not None
            else "this process does not have its model object (a trace loaded from JSON, or "
            "recorded in another kernel)"
        )
        raise ConfigurationError(
            f"fork: pass model= (a Model or a model string): the run's model {recorded!r} cannot "
            f"continue it, {why}"
        )
    left = getattr(known, "remaining", None)
    if type(known).__name__ == "ScriptedModel" and isinstance(left, int) and left <= 0:
        raise ConfigurationError(
            f"fork: pass model= (a Model or a model string): the run's model {recorded!r} is a "
            "ScriptedModel whose script the run used up, so it has no turn left to continue "
            "from the fork point (e.g. model=ScriptedModel([...]) with the turns after it)"
        )
    return known  # type: ignore[no-any-return]


def _base_executor(trace: Trace, executor: Executor | None, config: Mapping[str, Any]) -> Executor:
    """What runs the fork's calls from the fork point on: ``executor=``, else the run's own
    executor when this process still has it (its registry, policy and approvals), else a new
    :class:`~kode_nb.Executor` (in a notebook with kode_nb loaded: the session's), which must
    have the run's tools."""
    if executor is not None:
        return executor
    known = known_executor(trace.trace_id)
    if isinstance(known, Executor):
        return known
    fresh = Executor()
    tools = [str(t) for t in config.get("tools") or ()]
    missing = [t for t in tools if fresh.registry.get(t) is None]
    if missing:
        fresh.close()
        names = ", ".join(repr(t) for t in missing)
        raise ConfigurationError(
            f"fork: the run's tool{'s' if len(missing) > 1 else ''} {names} "
            f"{'are' if len(missing) > 1 else 'is'} not in the current registry, and this "
            "process does not have the executor the run used (a trace loaded from JSON, "
            "recorded in another kernel, or dropped from the known traces): pass "
            "executor=kode_nb.Executor(registry) with a registry that has them"
        )
    return fresh


async def fork(
    trace_or_run: Any,
    *,
    at: int | str,
    edit: str | Mapping[str, Any] | None = None,
    model: Any = None,
    system_prompt: str | None = None,
    executor: Executor | None = None,
    output_model: type[BaseModel] | None = None,
) -> AgentRunResult:
    """Continue a finished run from ``at`` with something changed (see the module docstring).

    ``trace_or_run``: an :class:`AgentRunResult`, a :class:`Trace`, its JSON (dict or text), or
    the ``trace_id`` of a trace this process knows. Returns the fork's :class:`AgentRunResult`;
    bad input raises :class:`~kode_nb.errors.ConfigurationError` naming the cause."""
    trace = load_trace(trace_or_run, what="fork")
    run = trace.root
    config, history, _ = recorded_agent(trace, output_model, what="fork")
    point = fork_point(trace, at)
    change = fork_edit(edit, point, system_prompt)
    live = _live_model(trace, model)
    replayed = point.turn if point.kind == "tool_call" else point.turn - 1
    calls = [dict(c) for c in _model_calls(run)[:replayed]]
    for i, c in enumerate(calls, 1):
        if "messages" not in c or not isinstance(c.get("response"), Mapping):
            raise ConfigurationError(
                f"fork: turn {i}'s model call has no recorded request and response to replay"
            )
    prompt = str(run.attributes["prompt"])
    if change.message is not None:
        _check_prompt_is_last(run, point, len(history))
        prompt = change.message
        if calls and len(calls[0]["messages"]) > len(history):
            first = [dict(m) for m in calls[0]["messages"]]
            first[len(history)] = {"role": "user", "content": redact(prompt)}
            calls[0]["messages"] = first
    if change.system_prompt is not None:
        config["system_prompt"] = change.system_prompt
    system = run.attributes.get("system_prompt")
    check = system if isinstance(system, str) and change.system_prompt is None else None
    ids = CallIds(str(run.attributes.get("run_id") or ""))
    log: list[ReplayDivergedError] = []
    replay = ReplayModel(
        calls,
        name=f"replay:{run.attributes.get('model', 'model')}",
        run=run.name,
        system=check,
        normalize=ids.normalize,
        log=log,
    )
    answers: dict[str, ToolResult] = {}
    for n, turn in enumerate(turn_spans(run), 1):
        for span in turn.children:
            if span.kind != "tool_call" or n > replayed:
                continue
            call_id = str(span.attributes.get("call_id", ""))
            if call_id != point.call_id:
                answers[ids.forward(call_id)] = _recorded(span, run=run)
            elif change.result is not None:
                answers[ids.forward(call_id)] = _recorded(
                    span, change.result, change.is_error, run=run
                )
    forked = _ForkModel(replay, live, replayed)
    run_executor = _ForkExecutor(_base_executor(trace, executor, config), answers)
    try:
        agent = Agent(model=forked, executor=run_executor, **config)  # type: ignore[arg-type]
        result = await agent.run(prompt, message_history=history, run_id=ids.run_id)
    finally:
        run_executor.close()
    if log:
        raise log[0]
    return _mark(_hint_model(result), trace, point, replayed, change, live, ids)


def _hint_model(result: AgentRunResult) -> AgentRunResult:
    """A fork that ran the run's own ScriptedModel out of turns says how to go on: ``model=``."""
    error = result.error or ""
    if result.status != "error" or "ScriptedModel ran out of turns" not in error:
        return result
    error += (
        " The fork continued with the run's own ScriptedModel, whose script has no turn left "
        "for it: pass model= (e.g. model=ScriptedModel([...]) with the turns after the fork "
        "point, or a real model)."
    )
    result.trace.root.error = error
    return dataclasses.replace(result, error=error)


def _check_prompt_is_last(run: Span, point: ForkPoint, history_length: int) -> None:
    """An edited message replaces the prompt: refuse when the loop added a user message (a
    retry or re-ask) after it, before the fork point."""
    sent: list[Any] = []
    for c in _model_calls(run)[: point.turn]:
        sent.extend(c.get("messages") or [])
    later = [i for i, m in enumerate(sent) if m.get("role") == "user" and i > history_length]
    if later:
        raise ConfigurationError(
            f"fork: the last user message before turn {point.turn} was added by the run itself "
            "(a retry or re-ask), not the prompt; fork at an earlier turn to change the prompt"
        )


def _mark(
    result: AgentRunResult,
    parent: Trace,
    point: ForkPoint,
    replayed: int,
    change: Edit,
    live: Model,
    ids: CallIds,
) -> AgentRunResult:
    """Mark the replayed spans, link the parent, and total the cost again."""
    root = result.trace.root
    recorded = [s for t in turn_spans(parent.root) for s in t.children if s.kind == "model_call"]
    for n, turn in enumerate(turn_spans(root), 1):
        for span in turn.children:
            if span.kind == "model_call" and n <= replayed and n <= len(recorded):
                orig = recorded[n - 1]
                span.name = orig.name
                span.set(
                    replayed=True,
                    recorded_span_id=orig.span_id,
                    model=orig.attributes.get("model"),
                    cost=orig.attributes.get("cost"),
                )
            elif span.kind == "tool_call" and n <= replayed:
                if ids.back(str(span.attributes.get("call_id", ""))) == point.call_id:
                    span.set(edited=change.result is not None)
                else:
                    span.set(replayed=True)
    edited = change.names() + (
        ["model"] if live.name != parent.root.attributes.get("model") else []
    )
    totals = rollup(s.attributes for s in root.walk() if s.kind == "model_call")
    root.set(
        forked_from={
            "trace_id": parent.trace_id,
            "span_id": point.span_id,
            "turn": point.turn,
            "kind": point.kind,
            "call_id": point.call_id,
            "edited": edited,
            "replayed_requests": replayed,
        },
        total_usage=totals["usage"],
        total_requests=totals["requests"],
        cost=totals["cost"],
    )
    remember_trace(result.trace, model=live)
    marked = dataclasses.replace(result, cost=totals["cost"])
    refresh_run(marked)  # in a notebook: the fork's live view, ended, shows its marks too
    return marked
