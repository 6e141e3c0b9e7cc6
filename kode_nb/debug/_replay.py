"""Replay a recorded run offline: ``await kode_nb.replay(trace_or_run)``.

The agent is rebuilt from the trace's run span (name, system prompt, the tools offered, limits,
model settings; ``kode_nb.trace/v1`` records lack some of these and get defaults, listed in
:attr:`Replay.notes`) and driven by a :class:`~kode_nb.models.ReplayModel` that answers with
the recorded responses: zero model requests. Tools either

* ``tools="recorded"`` (default): answer with their recorded results (nothing is executed; a
  subagent's folded result is reused), or
* ``tools="execute"``: run again through an executor (``executor=``, else a new one on the
  current registry), so policy and approval apply; a subagent call runs the subagent again,
  its model replaced by the replay of its recorded nested run.

When a request differs from the recording (a tool now answers differently, say) the replay
raises :class:`~kode_nb.models.ReplayDivergedError` naming the run, the turn and the message
(``strict=False`` finishes the run and lists the differences in :attr:`Replay.divergences`).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from kode_nb._redact import redact
from kode_nb.agents._loop import Agent
from kode_nb.agents._output import output_instructions
from kode_nb.agents._result import AgentRunResult
from kode_nb.debug._recorded import recorded_content
from kode_nb.errors import ConfigurationError
from kode_nb.execution._executor import Executor
from kode_nb.models._replay import ReplayModel
from kode_nb.models.base import (
    AssistantMessage,
    Message,
    ModelSettings,
    ToolCallRequest,
    ToolResultMessage,
    UserMessage,
)
from kode_nb.models.errors import ReplayDivergedError
from kode_nb.tools._model import Tool
from kode_nb.tools._registry import ToolRegistry
from kode_nb.traces._trace import Span, Trace
from kode_nb.types import TextBlock, ToolKind, ToolResult

__all__ = ["CallIds", "Replay", "load_trace", "replay", "replay_model"]

ToolMode = Literal["recorded", "execute"]


@dataclass(kw_only=True, eq=False)
class Replay:
    """What a replay produced: the new run's result, and how it compared with the recording."""

    result: AgentRunResult
    """The replayed run (its own trace, status and output)."""
    recorded: Trace
    """The trace that was replayed."""
    model: ReplayModel
    """The root run's model (``model.requests``: requests answered offline)."""
    divergences: list[ReplayDivergedError] = field(default_factory=list)
    """Differences from the recording (only with ``strict=False``; a strict replay raises)."""
    notes: list[str] = field(default_factory=list)
    """What the trace lacked and was defaulted (a ``kode_nb.trace/v1`` record)."""

    @property
    def output(self) -> Any:
        return self.result.output

    @property
    def matches(self) -> bool:
        """The replay followed the recording and ended as it did."""
        recorded = self.recorded.root
        return not self.divergences and (
            self.result.status == recorded.status
            and redact(_jsonable(self.result.output)) == recorded.attributes.get("output")
        )

    def __repr__(self) -> str:
        state = "matches" if self.matches else f"{len(self.divergences)} divergence(s)"
        return f"Replay({self.result.status!r}, {state}, requests={self.model.requests})"


def _jsonable(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if callable(dump) else value


def load_trace(trace_or_run: Any, *, what: str = "replay") -> Trace:
    """A :class:`Trace` from a trace, its JSON dict or text, a result that has ``.trace``, or the
    ``trace_id`` of a trace this process knows (``kode_nb/traces/_known.py``)."""
    if isinstance(trace_or_run, Trace):
        return trace_or_run
    if isinstance(getattr(trace_or_run, "trace", None), Trace):
        return trace_or_run.trace  # type: ignore[no-any-return]
    if isinstance(trace_or_run, str) and not trace_or_run.lstrip().startswith("{"):
        from kode_nb.traces._known import known_trace

        return known_trace(trace_or_run.strip())
    if isinstance(trace_or_run, str):
        try:
            trace_or_run = json.loads(trace_or_run)
        except ValueError as exc:
            raise ConfigurationError(f"{what}: the text is not trace JSON ({exc})") from None
    if isinstance(trace_or_run, Mapping):
        try:
            return Trace.from_dict(trace_or_run)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"{what}: not a usable trace: {exc}") from None
    raise ConfigurationError(
        f"{what} takes an AgentRunResult, a Trace, its kode_nb.trace JSON (dict or text) or "
        f"a trace id, got {type(trace_or_run).__name__}"
    )


def _model_calls(run: Span) -> list[dict[str, Any]]:
    calls = []
    for turn in run.children:
        for span in turn.children:
            if span.kind == "model_call":
                call = dict(span.attributes)
                if span.status == "error":
                    call.pop("response", None)
                    call["error"] = span.error
                calls.append(call)
    return calls


def _tool_spans(run: Span) -> list[Span]:
    return [s for t in run.children for s in t.children if s.kind == "tool_call"]


def replay_model(
    run: Span,
    *,
    strict: bool = True,
    log: list[ReplayDivergedError] | None = None,
    path: str = "",
    normalize: Any = redact,
) -> ReplayModel:
    """The :class:`ReplayModel` of a recorded run span, with its nested subagent runs."""
    log = [] if log is None else log
    a = run.attributes
    label = f"{path} > {run.name}" if path else run.name
    nested = {
        str(s.attributes.get("call_id", "")): replay_model(
            child, strict=strict, log=log, path=label
        )
        for s in _tool_spans(run)
        for child in s.children
        if child.kind == "run"
    }
    system = a.get("system_prompt")
    return ReplayModel(
        _model_calls(run),
        name=f"replay:{a.get('model', 'model')}",
        run=label,
        system=system if isinstance(system, str) else None,
        strict=strict,
        normalize=normalize,
        nested=nested,
        log=log,
    )


class CallIds:
    """A re-run's run id, and the mapping between the call ids the loop makes up (for a model
    that sends none or repeats one: ``call_<run_id>_<turn>_<n>``) in the recorded run and the
    re-run (a replay or a fork), so recorded answers and results match their calls."""

    def __init__(self, parent_run_id: str) -> None:
        self.run_id = f"run_{secrets.token_hex(6)}"
        self._parent = f"call_{parent_run_id}_" if parent_run_id else None
        self._fork = f"call_{self.run_id}_"

    def forward(self, call_id: str) -> str:
        if self._parent and call_id.startswith(self._parent):
            return self._fork + call_id[len(self._parent) :]
        return call_id

    def back(self, call_id: str) -> str:
        if self._parent and call_id.startswith(self._fork):
            return self._parent + call_id[len(self._fork) :]
        return call_id

    def normalize(self, value: Any) -> Any:
        """A request message as the parent's recording has it (redacted, ids mapped back)."""
        value = redact(value)
        if not isinstance(value, dict):
            return value
        if isinstance(value.get("call_id"), str):
            value = {**value, "call_id": self.back(value["call_id"])}
        if isinstance(value.get("tool_calls"), list):
            value = {
                **value,
                "tool_calls": [
                    {**c, "id": self.back(str(c.get("id", "")))} if isinstance(c, dict) else c
                    for c in value["tool_calls"]
                ],
            }
        return value


def _message(data: Mapping[str, Any]) -> Message:
    role = data.get("role")
    if role == "user":
        return UserMessage(content=str(data.get("content", "")))
    if role == "assistant":
        calls = tuple(
            ToolCallRequest(
                id=str(c.get("id", "")),
                name=str(c.get("name", "")),
                arguments=str(c.get("arguments", "")),
            )
            for c in data.get("tool_calls") or []
        )
        return AssistantMessage(text=str(data.get("text", "")), tool_calls=calls)
    return ToolResultMessage(
        call_id=str(data.get("call_id", "")),
        name=str(data.get("name", "")),
        content=(TextBlock(text=str(data.get("content", ""))),),
        is_error=bool(data.get("is_error")),
    )


class _AnyArguments:
    """Accepts whatever was recorded (the stand-in answers by call id, not by arguments)."""

    def __init__(self, schema: Any) -> None:
        self.schema: dict[str, Any] = (
            dict(schema) if isinstance(schema, Mapping) else {"type": "object"}
        )

    def validate(self, raw: str | bytes | Mapping[str, Any] | None, *, tool: str) -> dict[str, Any]:
        if isinstance(raw, Mapping):
            return dict(raw)
        try:
            parsed = json.loads(raw) if raw else {}
        except ValueError:
            return {
                "raw": raw if isinstance(raw, str) else bytes(raw or b"").decode(errors="replace")
            }
        return dict(parsed) if isinstance(parsed, Mapping) else {"raw": parsed}

    def dump(self, validated: Mapping[str, Any]) -> dict[str, Any]:
        return dict(validated)


def _recorded_tools(run: Span, offered: list[str], specs: list[Any], ids: CallIds) -> ToolRegistry:
    """Stand-in tools answering each call id with its recorded result."""
    results: dict[str, tuple[Mapping[str, Any], Span]] = {}
    for span in _tool_spans(run):
        result = span.attributes.get("result")
        if isinstance(result, Mapping):
            results[ids.forward(str(span.attributes.get("call_id", "")))] = (result, span)
    by_name = {str(s.get("name")): s for s in specs if isinstance(s, Mapping)}
    registry = ToolRegistry(name="replay")
    for name in offered:
        spec = by_name.get(name, {})

        async def answer(args: dict[str, Any], ctx: Any, _name: str = name) -> ToolResult:
            found = results.get(ctx.call_id)
            if found is None:
                return ToolResult.error(
                    f"replay: no recorded result for call {ctx.call_id} of '{_name}'",
                    status="error",
                    error_type="ReplayMissingResult",
                )
            recorded, span = found
            return ToolResult(
                content=recorded_content(run, span),  # a long result: what the model got
                is_error=bool(recorded.get("is_error")),
                status=recorded.get("status", "ok"),
                error_type=recorded.get("error_type"),
            )

        stand_in = Tool(
            name=name,
            description=str(spec.get("description") or f"recorded {name}"),
            function=answer,
            validator=_AnyArguments(spec.get("parameters")),
            kind=ToolKind.READ,
            approval="auto",
            mode="async",
            context_param="ctx",
            arguments_param="args",
            source=f"replay.{name}",
        )
        registry.register(stand_in)
    return registry


def recorded_agent(
    trace: Trace, output_model: type[BaseModel] | None, *, what: str
) -> tuple[dict[str, Any], list[Message], list[str]]:
    """The :class:`Agent` keyword arguments (all but ``model`` and ``executor``) of a recorded
    run, the message history it was given, and notes on what the trace lacked."""
    run = trace.root
    a = run.attributes
    framework = a.get("framework")
    if framework:
        raise ConfigurationError(
            f"{what}: this trace was captured from a {framework} run (kode_nb.capture); "
            f"kode_nb.{what} re-runs kode_nb agents only. Replay it in {framework} itself with "
            "kode_nb.interop.replay_model(trace), which swaps in a model that answers as recorded "
            "(pydantic-ai and the OpenAI Agents SDK; LangChain runs cannot be replayed)"
        )
    if run.kind != "run" or "prompt" not in a:
        raise ConfigurationError(f"{what}: the trace's root is not a recorded agent run")
    notes = [
        f"{trace.schema} has no {key}: using the default"
        for key in ("tool_specs", "max_result_chars", "settings", "history_length")
        if key not in a
    ]
    system = str(a.get("system_prompt") or "")
    recorded_output = a.get("output_model")
    if output_model is not None:
        suffix = output_instructions(output_model)
        if not system.endswith(suffix):
            raise ConfigurationError(
                f"{what}: output_model={output_model.__name__} is not the one the run was "
                f"recorded with ({recorded_output or 'none'}): its instructions differ"
            )
        system = system[: -len(suffix)].removesuffix("\n\n")
    elif recorded_output:
        notes.append(
            f"the run had output_model {recorded_output}: pass output_model= to validate the "
            "answer into it (it is replayed as text)"
        )
    history: list[Message] = []
    calls = _model_calls(run)
    first = list(calls[0].get("messages") or []) if calls else []
    length = a.get("history_length")
    if length is None and first and first[-1] == {"role": "user", "content": a["prompt"]}:
        length = len(first) - 1  # a v1 trace: the history is what came before the prompt
    if isinstance(length, int) and length > 0:
        history = [_message(m) for m in first[:length]]
    recorded_settings = a.get("settings")
    settings = recorded_settings if isinstance(recorded_settings, Mapping) else {}
    known = {k: settings[k] for k in ("temperature", "max_tokens", "tool_choice") if k in settings}
    limit = a.get("max_result_chars", 100_000)
    config: dict[str, Any] = dict(
        name=str(a.get("agent") or run.name),
        system_prompt=system,
        tools=[str(n) for n in a.get("tools") or []],
        output_model=output_model,
        max_turns=int(a.get("max_turns") or 10),
        time_limit=a.get("time_limit"),
        settings=ModelSettings(**known),
        max_result_chars=limit if isinstance(limit, int) else None,
        reask=bool(a.get("reask", False)),
    )
    return config, history, notes


async def replay(
    trace_or_run: Any,
    *,
    tools: ToolMode = "recorded",
    executor: Executor | None = None,
    strict: bool = True,
    output_model: type[BaseModel] | None = None,
) -> Replay:
    """Re-run a recorded run offline (see the module docstring); returns a :class:`Replay`.

    ``output_model``: the pydantic model of a run recorded with one (the trace keeps only its
    name), so the replayed answer is validated into it as the original was."""
    if tools not in ("recorded", "execute"):
        raise ConfigurationError(f"replay: tools must be 'recorded' or 'execute', got {tools!r}")
    if executor is not None and tools == "recorded":
        raise ConfigurationError("replay: executor= is used with tools='execute' only")
    trace = load_trace(trace_or_run)
    run = trace.root
    a = run.attributes
    config, history, notes = recorded_agent(trace, output_model, what="replay")
    log: list[ReplayDivergedError] = []
    ids = CallIds(str(a.get("run_id") or ""))
    model = replay_model(run, strict=strict, log=log, normalize=ids.normalize)
    offered = list(config["tools"])
    if tools == "recorded":
        specs = list(a.get("tool_specs") or [])
        run_executor = Executor(_recorded_tools(run, offered, specs, ids))
    else:
        run_executor = executor if executor is not None else Executor()
    try:
        agent = Agent(model=model, executor=run_executor, **config)
        result = await agent.run(str(a["prompt"]), message_history=history, run_id=ids.run_id)
    finally:
        if executor is None:
            run_executor.close()
    if strict and log:
        raise log[0]
    return Replay(result=result, recorded=trace, model=model, divergences=log, notes=notes)
