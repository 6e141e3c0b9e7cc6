"""kode_nb tools as OpenAI Agents SDK function tools (imports ``agents``; loaded only when used).

:func:`openai_agents_tools` returns one ``FunctionTool`` per kode_nb tool; its
``on_invoke_tool`` runs the call through kode_nb's executor and returns text. As the SDK
expects of a tool that fails in a way the model can fix, every failure is a string the model
reads — the validation message for invalid arguments (so the model retries with fixed ones), the
reason for a denial, a timeout or a cancellation — never an exception that ends the run. The
schema is kode_nb's, offered non-strict (kode_nb validates).

Approvals. By default kode_nb asks during the call (Approve/Deny buttons in the notebook). With
``approval="sdk"`` a call kode_nb's policy would ask for uses the SDK's own ``needs_approval``:
the run stops with ``result.interruptions``; :func:`answer_interruptions` asks kode_nb's
approver about each (any tool's, kode_nb's or not) and returns the ``RunState`` to resume with
(``Runner.run(agent, state)``), and :func:`run_with_approvals` does the whole loop. A call
approved that way runs without a second prompt; a rejection's reason reaches the model.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from agents import FunctionTool, Model, ModelResponse, RunContextWrapper, Runner, Usage
from agents import Tool as SdkTool

from kode_nb.errors import ConfigurationError
from kode_nb.interop._bridge import KodeTools, outcome
from kode_nb.interop._recording import Node, neutral_request

if TYPE_CHECKING:
    from agents.tool_context import ToolContext

    from kode_nb.execution._executor import Executor

__all__ = [
    "ScriptedAgentsModel",
    "answer_interruptions",
    "openai_agents_tools",
    "run_with_approvals",
    "start_recording",
]

FRAMEWORK = "openai-agents"


def _function_tool(kode: KodeTools, name: str, approval: str) -> FunctionTool:
    tool = kode.get(name)
    native = approval == "sdk"

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        call_id = getattr(ctx, "tool_call_id", None)
        approved = native and kode.needs_approval(name, arguments or "{}")
        result = await kode.call(
            name,
            arguments or "{}",
            call_id=call_id,
            approved_by=FRAMEWORK if approved else None,
        )
        return outcome(result).text

    async def needs(_ctx: RunContextWrapper[Any], params: dict[str, Any], _call_id: str) -> bool:
        return kode.needs_approval(name, params)

    return FunctionTool(
        name=tool.name,
        description=tool.description or tool.name,
        params_json_schema=tool.parameters,
        on_invoke_tool=invoke,
        strict_json_schema=False,
        needs_approval=needs if native else False,
    )


def openai_agents_tools(
    tools: str | Sequence[str] = "*",
    *,
    executor: Executor | None = None,
    approval: Literal["kode_nb", "sdk"] = "kode_nb",
) -> list[SdkTool]:
    """Registered kode_nb tools (an allowlist: names, ``group:``, ``kind:``, ``profile:``...)
    as OpenAI Agents SDK function tools: ``Agent(name=..., tools=openai_agents_tools([...]))``.
    See :mod:`kode_nb.interop` for ``executor`` and the module docstring for ``approval``."""
    if approval not in ("kode_nb", "sdk"):
        raise ConfigurationError(
            f"openai_agents_tools(approval=...) must be 'kode_nb' or 'sdk', got {approval!r}"
        )
    kode = KodeTools(tools, executor=executor, where="openai_agents_tools")
    return [_function_tool(kode, t.name, approval) for t in kode.tools]


def _call_id(item: Any) -> str | None:
    raw = getattr(item, "raw_item", None)
    found = raw.get("call_id") if isinstance(raw, dict) else getattr(raw, "call_id", None)
    return str(found) if found else None


def _arguments(item: Any) -> dict[str, Any]:
    text = getattr(item, "arguments", None)
    try:
        parsed = json.loads(text) if text else {}
    except (TypeError, ValueError):
        return {"arguments": text}
    return parsed if isinstance(parsed, dict) else {"arguments": parsed}


async def answer_interruptions(result: Any, *, executor: Executor | None = None) -> Any:
    """Ask kode_nb's approver about each of ``result.interruptions`` (a ``RunResult`` that
    stopped for approval) and return its ``RunState`` with every item approved or rejected."""
    from kode_nb.interop._approvals import ask

    state = result.to_state()
    for item in result.interruptions:
        decision = await ask(
            str(item.name or item.tool_name or "tool"),
            _arguments(item),
            call_id=_call_id(item),
            executor=executor,
            framework=FRAMEWORK,
        )
        if decision.approved:
            state.approve(item)
        else:
            state.reject(item, rejection_message=decision.reason or "The user denied this call.")
    return state


async def run_with_approvals(
    agent: Any, input: Any, *, executor: Executor | None = None, max_rounds: int = 20, **kwargs: Any
) -> Any:
    """``Runner.run(agent, input, **kwargs)``, resumed after each approval interruption once
    kode_nb's approver has answered it (:func:`answer_interruptions`); the final ``RunResult``.
    More than ``max_rounds`` interruptions in one run raise ``RuntimeError``."""
    result = await Runner.run(agent, input, **kwargs)
    rounds = 0
    while getattr(result, "interruptions", None):
        rounds += 1
        if rounds > max_rounds:
            raise RuntimeError(f"run_with_approvals: more than {max_rounds} approval rounds")
        state = await answer_interruptions(result, executor=executor)
        result = await Runner.run(agent, state, **kwargs)
    return result


# --------------------------------------------------------------------------- capture


def _time(value: Any) -> float | None:
    if not value:
        return None
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


def _dump(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json", exclude_none=True)
    if isinstance(value, (list, tuple)):
        return [_dump(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _dump(v) for k, v in value.items()}
    return value


def _json_or_text(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def _usage(raw: Any) -> dict[str, Any]:
    raw = _dump(raw) or {}
    if not isinstance(raw, dict):
        return {"input_tokens": None, "output_tokens": None}
    tin = raw.get("input_tokens", raw.get("prompt_tokens"))
    tout = raw.get("output_tokens", raw.get("completion_tokens"))
    return {
        "input_tokens": tin if isinstance(tin, int) else None,
        "output_tokens": tout if isinstance(tout, int) else None,
    }


def _chat_response(output: Any) -> dict[str, Any]:
    """``{text, tool_calls}`` from chat-completions style output messages."""
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for m in _dump(output) or []:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, str) and content:
            text.append(content)
        for c in m.get("tool_calls") or []:
            fn = c.get("function") or {}
            calls.append(
                {
                    "id": c.get("id"),
                    "name": fn.get("name"),
                    "arguments": _json_or_text(fn.get("arguments")),
                }
            )
    return {"text": "\n".join(text), "tool_calls": calls}


def _responses_response(output: Any) -> dict[str, Any]:
    """``{text, tool_calls}`` from Responses API output items."""
    text: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in _dump(output) or []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict) and part.get("text"):
                    text.append(str(part["text"]))
        elif item.get("type") == "function_call":
            calls.append(
                {
                    "id": item.get("call_id"),
                    "name": item.get("name"),
                    "arguments": _json_or_text(item.get("arguments")),
                }
            )
    return {"text": "\n".join(text), "tool_calls": calls}


def _messages(items: Any) -> list[Any]:
    if isinstance(items, str):
        return [{"role": "user", "content": items}]
    return list(_dump(items) or [])


def _node(span: Any, order: int, tools: dict[str, list[str]]) -> Node:
    """A kode_nb node for one SDK span (an ``agents.tracing`` span)."""
    data = span.span_data
    kind = getattr(data, "type", "")
    err = span.error
    node = Node(
        id=span.span_id,
        parent=span.parent_id,
        kind="other",
        name=str(kind),
        start=_time(span.started_at) or 0.0,
        end=_time(span.ended_at),
        status="error" if err else "ok",
        order=order,
        error=(err.get("message") if isinstance(err, dict) else str(err)) if err else None,
    )
    if kind == "agent":
        node.kind, node.name = "run", str(data.name)
        node.attributes = {
            "agent": data.name,
            "tools": list(data.tools or []),
            "handoffs": list(data.handoffs or []),
            "output_type": data.output_type,
        }
        tools[span.span_id] = list(data.tools or [])
    elif kind == "generation":
        model = str(data.model or "unknown")
        messages = _messages(data.input)
        node.kind = "model_call"
        node.attributes = {
            "model": model,
            "messages": messages,
            "message_count": len(messages),
            "request": neutral_request(
                FRAMEWORK,
                model,
                messages,
                tools.get(span.parent_id, []),
                settings=_dump(data.model_config),
            ),
            "response": _chat_response(data.output),
            "usage": _usage(data.usage),
            "tools": tools.get(span.parent_id, []),
        }
    elif kind == "response":
        response = data.response
        model = str(getattr(response, "model", None) or "unknown")
        messages = _messages(data.input)
        node.kind = "model_call"
        node.attributes = {
            "model": model,
            "messages": messages,
            "message_count": len(messages),
            "request": neutral_request(FRAMEWORK, model, messages, tools.get(span.parent_id, [])),
            "response": _responses_response(getattr(response, "output", None)),
            "usage": _usage(data.usage or getattr(response, "usage", None)),
            "tools": tools.get(span.parent_id, []),
        }
    elif kind == "function":
        node.kind, node.name = "tool_call", str(data.name)
        text = "" if data.output is None else str(data.output)
        node.attributes = {
            "tool": data.name,
            "arguments": _json_or_text(data.input),
            "result": {
                "status": "error" if err else "ok",
                "is_error": bool(err),
                "text": text,
                "error_type": None,
                "duration": None,
                "details": None,
            },
        }
    elif kind == "handoff":
        node.attributes = {"from_agent": data.from_agent, "to_agent": data.to_agent}
    return node


class _Processor:
    """An SDK ``TracingProcessor``: keeps the spans of traces started inside a capture block."""

    def __init__(self) -> None:
        self.captures: dict[str, Any] = {}
        self.spans: dict[str, list[Any]] = {}

    def on_trace_start(self, trace: Any) -> None:
        from kode_nb.interop._capture import ACTIVE

        cap = ACTIVE.get()
        if cap is not None and not cap.closed:
            self.captures[trace.trace_id] = cap
            self.spans[trace.trace_id] = []

    def on_trace_end(self, trace: Any) -> None:
        cap = self.captures.pop(trace.trace_id, None)
        spans = self.spans.pop(trace.trace_id, [])
        if cap is None:
            return
        tools: dict[str, list[str]] = {}
        nodes = [_node(s, i, tools) for i, s in enumerate(spans)]
        by_id = {n.id: n for n in nodes}

        def top_level(n: Node) -> bool:  # no run above it (SDK task/turn spans do not count)
            parent = by_id.get(n.parent) if n.parent else None
            while parent is not None and parent.kind == "other":
                parent = by_id.get(parent.parent) if parent.parent else None
            return parent is None

        roots = sorted(
            (n for n in nodes if n.kind == "run" and top_level(n)), key=lambda n: (n.start, n.order)
        )
        for before, after in itertools.pairwise(roots):  # a handoff: the next agent nests
            after.parent = before.id
        cap.add(nodes, framework=FRAMEWORK)

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        spans = self.spans.get(span.trace_id)
        if spans is not None:
            spans.append(span)

    def shutdown(self) -> None:
        pass

    def force_flush(self) -> None:
        pass


_PROCESSOR: _Processor | None = None


def start_recording(capture: Any) -> None:
    """Add kode_nb's processor to the SDK's trace provider (once per process)."""
    global _PROCESSOR
    if _PROCESSOR is None:
        from agents.tracing import add_trace_processor

        _PROCESSOR = _Processor()
        add_trace_processor(_PROCESSOR)  # type: ignore[arg-type]
    return None


# --------------------------------------------------------------------------- an offline model


class ScriptedAgentsModel(Model):
    """An OpenAI Agents SDK ``Model`` that plays a script, offline: each item is the answer to
    one model request — a string (the final text) or a ``(tool_name, arguments)`` pair, or a
    list of such pairs (parallel tool calls). ``script`` may also be a function of the input
    (the conversation so far) returning that answer: one model for any number of runs. Like the SDK's own models it records a
    ``generation`` span with the exact input it was handed, so :func:`kode_nb.capture` shows
    what the model saw. For teaching and tests; ``requests`` keeps every input received."""

    def __init__(
        self, script: Sequence[Any] | Callable[[Any], Any], *, name: str = "scripted"
    ) -> None:
        self.answer = script if callable(script) else None
        self.script = [] if callable(script) else list(script)
        self.name = name
        self.requests: list[Any] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: Any,
        output_schema: Any,
        handoffs: Any,
        tracing: Any,
        *,
        previous_response_id: Any = None,
        conversation_id: Any = None,
        prompt: Any = None,
    ) -> ModelResponse:
        from agents.tracing import generation_span
        from openai.types.responses import (
            ResponseFunctionToolCall,
            ResponseOutputMessage,
            ResponseOutputText,
        )

        self.requests.append(input)
        if self.answer is None and not self.script:
            raise RuntimeError(
                f"ScriptedAgentsModel {self.name!r}: the script has no answer for request "
                f"{len(self.requests)}"
            )
        answer = self.answer(input) if self.answer is not None else self.script.pop(0)
        sent = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        if system_instructions:
            sent = [{"role": "system", "content": system_instructions}, *sent]
        items: list[Any] = []
        if isinstance(answer, str):
            items.append(
                ResponseOutputMessage(
                    id=f"msg_{len(self.requests)}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=answer, annotations=[])],
                )
            )
        else:
            calls = [answer] if isinstance(answer, tuple) else list(answer)
            for i, (tool, args) in enumerate(calls):
                items.append(
                    ResponseFunctionToolCall(
                        type="function_call",
                        call_id=f"call_{len(self.requests)}_{i}",
                        name=tool,
                        arguments=json.dumps(args),
                    )
                )
        tin = sum(len(json.dumps(m, default=str)) for m in _dump(sent)) // 4
        tout = sum(len(json.dumps(_dump(i), default=str)) for i in items) // 4
        with generation_span(
            model=self.name, input=_dump(sent), disabled=tracing.is_disabled()
        ) as span:
            span.span_data.output = [_chat_item(i) for i in items]
            span.span_data.usage = {"input_tokens": tin, "output_tokens": tout}
        usage = Usage(requests=1, input_tokens=tin, output_tokens=tout, total_tokens=tin + tout)
        return ModelResponse(output=items, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ScriptedAgentsModel does not stream: use Runner.run")


def _chat_item(item: Any) -> dict[str, Any]:
    """A Responses output item as a chat-completions message (the generation span's form)."""
    data = _dump(item)
    if data.get("type") == "function_call":
        return {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": data.get("call_id"),
                    "type": "function",
                    "function": {"name": data.get("name"), "arguments": data.get("arguments")},
                }
            ],
        }
    text = "".join(str(p.get("text", "")) for p in data.get("content") or [])
    return {"role": "assistant", "content": text}


class ReplayingAgentsModel(ScriptedAgentsModel):
    """An SDK ``Model`` answering with recorded responses in order, then asking ``then``."""

    def __init__(self, answers: list[dict[str, Any]], then: Any = None) -> None:
        script: list[Any] = []
        for a in answers:
            calls = [
                (str(c.get("name")), c.get("arguments") or {}) for c in a.get("tool_calls") or []
            ]
            script.append(calls if calls else str(a.get("text") or ""))
        super().__init__(script, name="replay")
        self.then = then

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        if not self.script and self.then is not None:
            response: ModelResponse = await self.then.get_response(*args, **kwargs)
            return response
        return await super().get_response(*args, **kwargs)
