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

import contextlib
import itertools
import json
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal

from agents import FunctionTool, Model, ModelResponse, RunContextWrapper, Runner, Usage
from agents import Tool as SdkTool

from kode_nb.errors import ConfigurationError
from kode_nb.interop._bridge import KodeTools, outcome
from kode_nb.interop._recording import APPROVAL_REQUESTED as PENDING
from kode_nb.interop._recording import Node, neutral_request, usage_of

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


def sdk_decision(ctx: Any, name: str, call_id: str | None) -> bool | None:
    """What the SDK's run context records about this exact call: ``True`` approved, ``False``
    rejected, ``None`` nothing (or no run context to ask: a direct ``on_invoke_tool`` call)."""
    check = getattr(ctx, "is_tool_approved", None)
    if not call_id or not callable(check):
        return None
    try:
        status = check(name, call_id)
    except Exception:  # an ambiguous or malformed record is no approval
        return None
    return status if isinstance(status, bool) else None


def _rejected(kode: KodeTools, ctx: Any, name: str, arguments: str, call_id: str) -> str:
    """A call the SDK's run context records as rejected: not run; the rejection's message."""
    import time

    from kode_nb.interop._capture import ACTIVE
    from kode_nb.types import ToolResult

    message = None
    with contextlib.suppress(Exception):
        message = ctx.get_rejection_message(name, call_id)
    text = str(message or f"Tool '{name}' was not run: the call was rejected ({FRAMEWORK}).")
    cap = ACTIVE.get()
    if cap is not None:
        now = time.time()
        result = ToolResult.error(
            text,
            status="denied",
            tool=name,
            call_id=call_id,
            error_type="ToolPermissionError",
            started_at=now,
            ended_at=now,
        )
        cap.note_call(name, arguments, result, [])
        cap.note_decision(call_id, approved=False, decided_by=FRAMEWORK, reason=text)
    return text


def _function_tool(kode: KodeTools, name: str, approval: str) -> FunctionTool:
    tool = kode.get(name)
    native = approval == "sdk"
    _SCHEMAS[tool.name] = {
        "name": tool.name,
        "description": tool.description or tool.name,
        "parameters": tool.parameters,
    }

    async def invoke(ctx: ToolContext[Any], arguments: str) -> str:
        call_id = getattr(ctx, "tool_call_id", None)
        # Only the SDK's own record of this call (its name and call id, in the run context the
        # SDK hands the tool) counts as the SDK's approval; with none, kode_nb's approver (or a
        # policy rule) decides during the call, as for approval="kode_nb".
        decided = sdk_decision(ctx, name, call_id)
        if decided is False and call_id:
            return _rejected(kode, ctx, name, arguments or "{}", call_id)
        result = await kode.call(
            name,
            arguments or "{}",
            call_id=call_id,
            approved_by=FRAMEWORK if native and decided else None,
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
    from kode_nb.interop._capture import ACTIVE

    state = result.to_state()
    for item in result.interruptions:
        call_id = _call_id(item)
        decision = await ask(
            str(item.name or item.tool_name or "tool"),
            _arguments(item),
            call_id=call_id,
            executor=executor,
            framework=FRAMEWORK,
        )
        reason = None if decision.approved else decision.reason or "The user denied this call."
        cap = ACTIVE.get()
        if cap is not None and call_id:
            cap.note_decision(
                call_id,
                approved=decision.approved,
                decided_by=decision.decided_by or "kode_nb",
                reason=reason,
            )
        if decision.approved:
            state.approve(item)
        else:
            state.reject(item, rejection_message=reason)
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
    """Input and output tokens of one model call, ``None`` where unknown (:func:`usage_of`)."""
    raw = _dump(raw) or {}
    if not isinstance(raw, dict):
        return usage_of(None, None)
    return usage_of(
        raw.get("input_tokens", raw.get("prompt_tokens")),
        raw.get("output_tokens", raw.get("completion_tokens")),
    )


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


_SCHEMAS: dict[str, dict[str, Any]] = {}
"""The schemas of the kode_nb tools offered as SDK function tools, by name: what a model call
of a captured run was offered (the SDK's spans name the tools but hold no schema)."""


def _offered(agent: Any) -> list[dict[str, Any]]:
    """The tools an SDK agent span says its model was offered: its tools (a kode_nb tool's
    schema where known) and a tool per handoff (the SDK's ``transfer_to_...``)."""
    from agents.util._transforms import transform_string_function_style

    out = [dict(_SCHEMAS.get(str(n)) or {"name": str(n)}) for n in agent.tools or []]
    for target in agent.handoffs or []:
        name = transform_string_function_style(f"transfer_to_{target}", warn_on_whitespace=False)
        out.append({"name": name})
    return out


def _response_tools(response: Any) -> list[dict[str, Any]] | None:
    """The tools a Responses API call was offered, as the response echoes them back."""
    tools = _dump(getattr(response, "tools", None))
    if not isinstance(tools, list) or not tools:
        return None
    out = []
    for t in tools:
        if isinstance(t, dict) and t.get("name"):
            out.append(
                {k: t[k] for k in ("name", "description", "parameters") if t.get(k) is not None}
            )
        elif isinstance(t, dict):
            out.append({"name": str(t.get("type") or "tool")})
    return out


def _node(span: Any, order: int, agents: dict[str, Any], parents: dict[str, str | None]) -> Node:
    """A kode_nb node for one SDK span (an ``agents.tracing`` span). ``agents``: the agent span
    data by span id; ``parents``: every span's parent (a model call's tools are those of the
    nearest agent span above it, through the SDK's task and turn spans)."""
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
    above = span.parent_id
    while above is not None and above not in agents:
        above = parents.get(above)
    offered = _offered(agents[above]) if above is not None else []
    if kind == "agent":
        node.kind, node.name = "run", str(data.name)
        node.attributes = {
            "agent": data.name,
            "tools": list(data.tools or []),
            "handoffs": list(data.handoffs or []),
            "output_type": data.output_type,
        }
    elif kind == "generation":
        model = str(data.model or "unknown")
        messages = _messages(data.input)
        node.kind = "model_call"
        node.attributes = {
            "model": model,
            "messages": messages,
            "message_count": len(messages),
            "request": neutral_request(
                FRAMEWORK, model, messages, offered, settings=_dump(data.model_config)
            ),
            "response": _chat_response(data.output),
            "usage": _usage(data.usage),
            "tools": [t["name"] for t in offered],
        }
    elif kind == "response":
        response = data.response
        model = str(getattr(response, "model", None) or "unknown")
        messages = _messages(data.input)
        sent = _response_tools(response)
        offered = offered if sent is None else sent
        node.kind = "model_call"
        node.attributes = {
            "model": model,
            "messages": messages,
            "message_count": len(messages),
            "request": neutral_request(FRAMEWORK, model, messages, offered),
            "response": _responses_response(getattr(response, "output", None)),
            "usage": _usage(data.usage or getattr(response, "usage", None)),
            "tools": [t["name"] for t in offered],
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
                "text": err_text if err and (err_text := node.error) and not text else text,
                "error_type": None,
                "duration": None,
                "details": None,
            },
        }
        if err and "rejected" in str(node.error or "").lower():
            node.status = node.attributes["result"]["status"] = "denied"
        elif data.output is None and not err:
            # the SDK ends a call's span with no output when the run stops for its approval
            node.status = node.attributes["result"]["status"] = PENDING
    elif kind == "handoff":
        node.attributes = {"from_agent": data.from_agent, "to_agent": data.to_agent}
    return node


def _call_ids(nodes: list[Node]) -> None:
    """Give each tool-call node the id of the model's call it answers (the SDK's function span
    has none): the first unclaimed call of the same tool and arguments the run's model made."""
    calls: list[tuple[str, str, Any]] = []
    for n in sorted(nodes, key=lambda n: (n.start, n.order)):
        if n.kind == "model_call":
            for c in (n.attributes.get("response") or {}).get("tool_calls") or []:
                calls.append((str(c.get("id")), str(c.get("name")), c.get("arguments")))
        elif n.kind == "tool_call" and not n.attributes.get("call_id"):
            found = next(
                (c for c in calls if (c[1], c[2]) == (n.name, n.attributes.get("arguments"))), None
            )
            if found is not None:
                calls.remove(found)
                n.attributes["call_id"] = found[0]


def _merge_resumed(nodes: list[Node], parts: dict[str, int]) -> list[Node]:
    """One run out of a run and its resumptions (each resumed ``Runner.run`` of the same trace
    is a new agent span): the agent span of a later part that continues a run of an earlier
    one (same agent) gives its children to it; a call that stopped for approval and ran once
    resumed keeps the run's record of the call only."""
    by_id = {n.id: n for n in nodes}

    def top_run(n: Node) -> bool:
        parent = by_id.get(n.parent) if n.parent else None
        while parent is not None and parent.kind == "other":
            parent = by_id.get(parent.parent) if parent.parent else None
        return n.kind == "run" and parent is None

    runs = sorted((n for n in nodes if top_run(n)), key=lambda n: (n.start, n.order))
    dropped: set[str] = set()
    for later in runs:
        part = parts.get(later.id, 0)
        if part == 0:
            continue
        earlier = [r for r in runs if parts.get(r.id, 0) < part and r.id not in dropped]
        same = [r for r in earlier if r.name == later.name]
        if not same:
            continue
        keep = same[-1]
        for n in nodes:
            if n.parent == later.id:
                n.parent = keep.id
        keep.end = max(keep.end or 0.0, later.end or 0.0) or None
        keep.status = later.status
        dropped.add(later.id)
    kept = [n for n in nodes if n.id not in dropped]
    last = max(parts.values(), default=0)
    for n in kept:
        if n.kind != "tool_call" or n.status != PENDING:
            continue
        key = (n.name, n.attributes.get("arguments"))
        again = [
            r
            for r in kept
            if r.kind == "tool_call"
            and r.id not in dropped
            and parts.get(r.id, 0) > parts.get(n.id, 0)
            and (r.name, r.attributes.get("arguments")) == key
        ]
        if again:  # asked again or run once resumed: the later span records the call
            again[0].start = min(again[0].start, n.start)
            dropped.add(n.id)
        elif parts.get(n.id, 0) < last:  # resumed without running it: the SDK rejected it
            n.status = "denied"
            n.error = f"rejected through the {FRAMEWORK} SDK's approval"
            n.attributes["result"] = {
                **n.attributes["result"],
                "status": "denied",
                "is_error": True,
                "text": n.error,
            }
    return [n for n in kept if n.id not in dropped]


class _Processor:
    """An SDK ``TracingProcessor``: keeps the spans of traces started inside a capture block.

    A run resumed from its ``RunState`` (after an approval interruption) reattaches to its
    trace without telling processors: its spans arrive after the trace ended, and the part
    ends with its top span. Each part republishes the whole run (earlier parts merged, see
    :func:`_merge_resumed`), replacing the trace recorded before."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.captures: dict[str, Any] = {}
        self.spans: dict[str, list[tuple[int, Any]]] = {}
        self.live: set[str] = set()
        self.parts: dict[str, int] = {}
        self.recorded: dict[str, list[Any]] = {}

    def on_trace_start(self, trace: Any) -> None:
        from kode_nb.interop._capture import ACTIVE

        cap = ACTIVE.get()
        with self.lock:
            if trace.trace_id in self.captures:  # the same trace started again: a resumption
                self.live.add(trace.trace_id)
                return
            if cap is not None and not cap.closed:
                self.captures[trace.trace_id] = cap
                self.spans[trace.trace_id] = []
                self.parts[trace.trace_id] = 0
                self.live.add(trace.trace_id)

    def on_trace_end(self, trace: Any) -> None:
        with self.lock:
            if trace.trace_id not in self.captures:
                return
            self.live.discard(trace.trace_id)
        self._publish(trace.trace_id)

    def on_span_start(self, span: Any) -> None:
        pass

    def on_span_end(self, span: Any) -> None:
        tid = span.trace_id
        with self.lock:
            spans = self.spans.get(tid)
            if spans is None:
                return
            spans.append((self.parts[tid], span))
            resumed_part_ended = tid not in self.live and span.parent_id is None
        if resumed_part_ended:
            self._publish(tid)

    def _publish(self, tid: str) -> None:
        with self.lock:
            cap = self.captures.get(tid)
            spans = list(self.spans.get(tid, []))
            before = self.recorded.get(tid)
            self.parts[tid] = self.parts.get(tid, 0) + 1
            if cap is None or cap.closed:  # a block that ended keeps what it had
                for table in (self.captures, self.spans, self.parts, self.recorded):
                    table.pop(tid, None)
                self.live.discard(tid)
                if cap is None:
                    return
        agents = {s.span_id: s.span_data for _, s in spans if s.span_data.type == "agent"}
        parents = {s.span_id: s.parent_id for _, s in spans}
        nodes = [_node(s, i, agents, parents) for i, (_, s) in enumerate(spans)]
        parts = {s.span_id: p for p, s in spans}
        nodes = _merge_resumed(nodes, parts)
        _call_ids(nodes)
        by_id = {n.id: n for n in nodes}

        def top_level(n: Node) -> bool:  # no run above it (SDK task/turn spans do not count)
            parent = by_id.get(n.parent) if n.parent else None
            while parent is not None and parent.kind == "other":
                parent = by_id.get(parent.parent) if parent.parent else None
            return parent is None

        roots = sorted(
            (n for n in nodes if n.kind == "run" and top_level(n)), key=lambda n: (n.start, n.order)
        )
        for before_, after in itertools.pairwise(roots):  # a handoff: the next agent nests
            after.parent = before_.id
        traces = cap.add(nodes, framework=FRAMEWORK, replace=before)
        with self.lock:
            if tid in self.captures:
                self.recorded[tid] = traces

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
        n = len(self.requests)
        if isinstance(answer, str):
            items = response_items(answer, [], message_id=f"msg_{n}")
        else:
            calls = [answer] if isinstance(answer, tuple) else list(answer)
            made = [
                (f"call_{n}_{i}", tool, json.dumps(args)) for i, (tool, args) in enumerate(calls)
            ]
            items = response_items(None, made, message_id=f"msg_{n}")
        tin = sum(len(json.dumps(m, default=str)) for m in _dump(sent)) // 4
        tout = sum(len(json.dumps(_dump(i), default=str)) for i in items) // 4
        with generation_span(
            model=self.name, input=_dump(sent), disabled=tracing.is_disabled()
        ) as span:
            span.span_data.output = [chat_item(i) for i in items]
            span.span_data.usage = {"input_tokens": tin, "output_tokens": tout}
        usage = Usage(requests=1, input_tokens=tin, output_tokens=tout, total_tokens=tin + tout)
        return ModelResponse(output=items, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("ScriptedAgentsModel does not stream: use Runner.run")


def response_items(
    text: str | None, calls: Sequence[tuple[str, str, str]], *, message_id: str
) -> list[Any]:
    """One model answer as the SDK's Responses output items: a message holding ``text`` (unless
    it is ``None``), then a function call per ``(call_id, name, arguments JSON)``."""
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    items: list[Any] = []
    if text is not None:
        written = ResponseOutputText(type="output_text", text=text, annotations=[])
        items.append(
            ResponseOutputMessage(
                id=message_id,
                type="message",
                role="assistant",
                status="completed",
                content=[written],
            )
        )
    for call_id, name, arguments in calls:
        items.append(
            ResponseFunctionToolCall(
                type="function_call", call_id=call_id, name=name, arguments=arguments
            )
        )
    return items


def chat_item(item: Any) -> dict[str, Any]:
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
