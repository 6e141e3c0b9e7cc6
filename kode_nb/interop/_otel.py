"""OpenTelemetry spans with the GenAI semantic conventions → kode_nb trace nodes.

Reads what pydantic-ai's instrumentation writes (and any instrumentation that follows the
conventions): ``invoke_agent`` spans are runs, ``chat`` spans model calls
(``gen_ai.input.messages``, ``gen_ai.output.messages``, ``gen_ai.system_instructions``,
``gen_ai.usage.*``, ``gen_ai.request.model``), ``execute_tool`` spans tool calls
(``gen_ai.tool.name``, ``gen_ai.tool.call.id``, ``gen_ai.tool.call.arguments`` /
``gen_ai.tool.call.result``, or pydantic-ai's older ``tool_arguments`` / ``tool_response``).
Spans of other operations are folded away.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from kode_nb.interop._recording import (
    APPROVAL_REQUESTED,
    Node,
    message,
    neutral_request,
    usage_of,
)

__all__ = ["node_of", "semconv_messages"]


def _load(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _text(parts: list[Any]) -> str:
    return "\n".join(
        str(p.get("content", ""))
        for p in parts
        if isinstance(p, Mapping) and p.get("type") == "text"
    )


def semconv_messages(value: Any) -> list[dict[str, Any]]:
    """GenAI semconv messages (``[{"role", "parts": [...]}]``) in kode_nb's trace form."""
    out: list[dict[str, Any]] = []
    for m in _load(value) or []:
        if not isinstance(m, Mapping):
            continue
        role = str(m.get("role", "user"))
        parts = [p for p in m.get("parts") or [] if isinstance(p, Mapping)]
        if role == "assistant":
            calls = [
                {"id": p.get("id"), "name": p.get("name"), "arguments": _load(p.get("arguments"))}
                for p in parts
                if p.get("type") == "tool_call"
            ]
            out.append(message("assistant", text=_text(parts), tool_calls=calls or None))
            continue
        for p in parts:
            if p.get("type") == "tool_call_response":
                result = p.get("result", p.get("response"))
                out.append(
                    message(
                        "tool",
                        call_id=p.get("id"),
                        name=p.get("name"),
                        content=result
                        if isinstance(result, str)
                        else json.dumps(result, default=str),
                    )
                )
        text = _text(parts)
        if text or not parts:
            out.append(message(role, content=text))
    return out


def _usage(a: Mapping[str, Any]) -> dict[str, Any]:
    return usage_of(a.get("gen_ai.usage.input_tokens"), a.get("gen_ai.usage.output_tokens"))


def _tool_names(params: Any) -> list[dict[str, Any]]:
    params = _load(params)
    if not isinstance(params, Mapping):
        return []
    tools = [*(params.get("function_tools") or []), *(params.get("output_tools") or [])]
    return [
        {
            "name": t.get("name"),
            "description": t.get("description"),
            "parameters": t.get("parameters_json_schema"),
        }
        for t in tools
        if isinstance(t, Mapping)
    ]


def node_of(
    *,
    span_id: str,
    parent: str | None,
    name: str,
    start: float,
    end: float | None,
    attributes: Mapping[str, Any],
    error: str | None,
    order: int,
    framework: str,
) -> Node:
    """The node of one finished span."""
    a = attributes
    op = str(a.get("gen_ai.operation.name") or name.split(" ", 1)[0])
    node = Node(
        id=span_id,
        parent=parent,
        kind="other",
        name=name,
        start=start,
        end=end,
        status="error" if error else "ok",
        error=error,
        order=order,
    )
    if op == "invoke_agent" or name == "agent run" or "agent_name" in a:
        agent = str(
            a.get("gen_ai.agent.name")
            or a.get("agent_name")
            or name.removeprefix("invoke_agent ").strip()
            or "agent"
        )
        node.kind, node.name = "run", agent
        node.attributes = {
            "agent": agent,
            "model": a.get("model_name") or a.get("gen_ai.request.model"),
        }
        final = a.get("final_result")
        if final is not None:
            node.attributes["output"] = _load(final)
    elif op == "chat":
        model = str(a.get("gen_ai.request.model") or a.get("gen_ai.response.model") or "unknown")
        system = _load(a.get("gen_ai.system_instructions"))
        sent = semconv_messages(a.get("gen_ai.input.messages"))
        if system:
            text = _text(system) if isinstance(system, list) else str(system)
            sent = [message("system", content=text), *sent]
        reply = semconv_messages(a.get("gen_ai.output.messages"))
        last = reply[-1] if reply else {}
        tools = _tool_names(a.get("model_request_parameters"))
        node.kind = "model_call"
        node.attributes = {
            "model": model,
            "messages": sent,
            "message_count": len(sent),
            "tools": [t["name"] for t in tools],
            "request": neutral_request(framework, model, sent, tools),
            "response": {"text": last.get("text", ""), "tool_calls": last.get("tool_calls") or []},
            "usage": _usage(a),
        }
        reasons = a.get("gen_ai.response.finish_reasons")
        if reasons:
            node.attributes["stop_reason"] = (
                reasons[0] if isinstance(reasons, (list, tuple)) else reasons
            )
    elif op == "execute_tool" or name == "running tool":
        tool = str(a.get("gen_ai.tool.name") or name.removeprefix("execute_tool ").strip())
        result = a.get("gen_ai.tool.call.result", a.get("tool_response"))
        text = result if isinstance(result, str) else json.dumps(_load(result), default=str)
        node.kind, node.name = "tool_call", tool
        node.attributes = {
            "tool": tool,
            "call_id": a.get("gen_ai.tool.call.id"),
            "arguments": _load(a.get("gen_ai.tool.call.arguments", a.get("tool_arguments"))),
            "result": {
                "status": "error" if error else "ok",
                "is_error": bool(error),
                "text": error if error and result is None else text,
                "error_type": None,
                "duration": None,
                "details": None,
            },
        }
        deferral = a.get("pydantic_ai.tool.deferral.name")
        if deferral == "ApprovalRequired" and not error:  # the run stopped to ask: not run
            node.status = node.attributes["result"]["status"] = APPROVAL_REQUESTED
            node.attributes["result"]["text"] = "waiting for approval: the run stopped to ask"
    return node
