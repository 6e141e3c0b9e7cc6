"""Framework spans → kode_nb traces: the shared half of :func:`kode_nb.capture`.

Each framework's recorder (pydantic-ai's OpenTelemetry spans, the OpenAI Agents SDK's tracing
processor, LangChain's callbacks) turns what it sees into framework-neutral :class:`Node`\\ s —
an agent run, a model call, a tool call, or something else (a chain, a guardrail) — with a
parent. :func:`build_traces` makes one :class:`~kode_nb.traces.Trace` per top-level run,
shaped exactly like a kode_nb run's::

    run <agent>                     (framework, model, prompt, output, usage, cost)
    └── turn N                      one per model call, with the tool calls that follow it
        ├── model_call "chat <model>"   messages, request (what it added), response, usage, cost
        └── tool_call "execute_tool <tool>"  arguments, result
            └── run <agent>         an agent used as a tool: its run nests here

A handoff's run nests in the turn that handed off. Nodes of other kinds are folded away (their
children move up). All values pass through :func:`kode_nb._redact.redact` (``Span.set``).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from kode_nb.models._cost import cost_of, estimate_tokens, price_for, rollup
from kode_nb.traces import Span, Trace
from kode_nb.traces._requests import RequestChain
from kode_nb.traces._results import bounded_result
from kode_nb.traces._trace import new_span_id, new_trace_id

__all__ = ["APPROVAL_REQUESTED", "Node", "build_traces", "message", "neutral_request", "usage_of"]

NodeKind = Literal["run", "model_call", "tool_call", "other"]

APPROVAL_REQUESTED = "approval_requested"
"""The status of a tool call a framework stopped its run to ask about (pydantic-ai's deferred
tools, the OpenAI Agents SDK's interruptions): it did not run. The answer, once given through
kode_nb, is recorded on the span (``approval``); a denial makes it ``denied``."""


@dataclass(kw_only=True, eq=False)
class Node:
    """One span of a framework, in kode_nb's terms (attributes as in :mod:`kode_nb.traces`)."""

    id: str
    parent: str | None
    kind: NodeKind
    name: str
    start: float = field(default_factory=time.time)
    end: float | None = None
    status: str = "running"
    error: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    order: int = 0
    """Tie-break for nodes that started at the same time (their arrival order)."""


def message(role: str, **fields: Any) -> dict[str, Any]:
    """A message in kode_nb's trace form (``{"role": "user", "content"}``...)."""
    return {"role": role, **{k: v for k, v in fields.items() if v is not None}}


def neutral_request(
    framework: str, model: str, messages: list[Any], tools: list[Any], **extra: Any
) -> dict[str, Any]:
    """The ``request`` attribute of a model call: what the framework handed its model."""
    body: dict[str, Any] = {"messages": messages, "tools": tools, **extra}
    return {"provider": framework, "path": "", "model": model, "body": body}


def usage_of(input_tokens: Any, output_tokens: Any) -> dict[str, int | None]:
    """A model call's ``usage`` attribute from what a framework reported; ``None`` where
    unknown, never a made-up ``0``. Frameworks report ``0`` for counts they never got (a stream
    that asked for no usage): a model call that read no input tokens did not happen, so a zero
    input count is unknown, and so is a zero output count that comes with it."""

    def count(value: Any) -> int | None:
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        return value if ok else None

    tin, tout = count(input_tokens), count(output_tokens)
    if tin == 0:
        tin = None
    if tin is None and tout == 0:
        tout = None
    return {"input_tokens": tin, "output_tokens": tout}


def _children(nodes: Iterable[Node]) -> dict[str | None, list[Node]]:
    ids = {n.id for n in nodes}
    out: dict[str | None, list[Node]] = {}
    for n in nodes:
        parent = n.parent if n.parent in ids else None
        out.setdefault(parent, []).append(n)
    for kids in out.values():
        kids.sort(key=lambda n: (n.start, n.order))
    return out


def _lifted(node: Node, kids: dict[str | None, list[Node]]) -> list[Node]:
    """``node``'s children with ``other`` nodes replaced by their own children."""
    out: list[Node] = []
    for c in kids.get(node.id, []):
        out.extend(_lifted(c, kids) if c.kind == "other" else [c])
    out.sort(key=lambda n: (n.start, n.order))
    return out


def _span(node: Node, kind: Any, name: str) -> Span:
    span = Span(kind=kind, name=name, span_id=new_span_id(), started_at=node.start)
    events = node.attributes.pop("kode_nb_events", None) or []
    span.set(**node.attributes)
    for e in events:
        span.event(e["name"], at=e["time"], **e["attributes"])
    end = node.end if node.end is not None else None
    if end is not None:
        span.ended_at, span.duration = end, max(0.0, end - node.start)
        span.status = node.status if node.status != "running" else "ok"
        span.error = node.error
    return span


def _model_span(node: Node, turn: int) -> Span:
    a = node.attributes
    model = str(a.get("model") or "unknown")
    if "cost" not in a:
        a["cost"] = cost_of(price_for(model), a.get("usage"))
    if "request" in a and "request_tokens_estimate" not in a:
        a["request_tokens_estimate"] = estimate_tokens(a["request"].get("body", a["request"]))
    a["turn"] = turn
    return _span(node, "model_call", f"chat {model}")


def _tool_span(node: Node, kids: dict[str | None, list[Node]], depth: int) -> Span:
    a = node.attributes
    if isinstance(a.get("result"), Mapping):
        a["result"] = bounded_result(a["result"])  # a preview and the size, as a run's
    span = _span(node, "tool_call", f"execute_tool {a.get('tool', node.name)}")
    if span.status == "running" and node.end is not None:
        span.status = "ok"
    for child in _lifted(node, kids):
        if child.kind == "run":
            span.children.append(_run_span(child, kids, depth + 1))
    below = [s.attributes for c in span.children for s in c.walk() if s.kind == "model_call"]
    if below:
        totals = rollup(below)
        span.set(
            subtree_usage=totals["usage"],
            subtree_requests=totals["requests"],
            subtree_cost=totals["cost"],
        )
    return span


def _run_span(node: Node, kids: dict[str | None, list[Node]], depth: int = 0) -> Span:
    a = node.attributes
    a.setdefault("agent", node.name)
    a["depth"] = depth
    run = _span(node, "run", node.name)
    if node.end is not None:
        run.status = "completed" if node.status in ("ok", "completed", "running") else node.status
    turn: Span | None = None
    turns = 0
    seen: list[Any] | None = None
    chain = RequestChain()  # each model call keeps what it added to the previous one
    for child in _lifted(node, kids):
        if child.kind == "model_call":
            seen = _only_new(child.attributes, seen)
        if child.kind == "model_call" or turn is None:
            turns += 1
            turn = run.child("turn", f"turn {turns}", turn=turns)
            turn.started_at = child.start
        if child.kind == "model_call":
            turn.children.append(_model_span(child, turns))
            chain.store(turn.children[-1])
        elif child.kind == "tool_call":
            turn.children.append(_tool_span(child, kids, depth))
        elif child.kind == "run":
            turn.children.append(_run_span(child, kids, depth + 1))
        end = turn.children[-1].ended_at if turn.children else None
        turn.ended_at = end
        turn.duration = None if end is None else max(0.0, end - turn.started_at)
        turn.status = "ok" if end is not None else "running"
    own = [s.attributes for t in run.children for s in t.children if s.kind == "model_call"]
    every = [s.attributes for s in run.walk() if s.kind == "model_call"]
    own_totals, all_totals = rollup(own), rollup(every)
    tool_calls = sum(1 for t in run.children for s in t.children if s.kind == "tool_call")
    run.set(
        turns=turns,
        usage={**own_totals["usage"], "requests": own_totals["requests"], "tool_calls": tool_calls},
        total_usage=all_totals["usage"],
        total_requests=all_totals["requests"],
        cost=all_totals["cost"],
    )
    if not run.attributes.get("model") and own:
        run.set(model=own[0].get("model"))
    if not run.attributes.get("tools"):
        offered = next((m.get("tools") for m in own if m.get("tools")), None)
        if offered:
            run.set(tools=list(offered))
    if run.attributes.get("prompt") is None:
        run.set(prompt=_first_user_text(own))
    if run.attributes.get("output") is None and own and node.end is not None:
        last = own[-1].get("response") or {}
        if isinstance(last, Mapping) and last.get("text") and not last.get("tool_calls"):
            run.set(output=last["text"])
    return run


def _only_new(attrs: dict[str, Any], seen: list[Any] | None) -> list[Any] | None:
    """Keep in ``messages`` only what was added since the previous model call (as a kode_nb
    trace does; the whole history stays in ``request``); returns the whole history."""
    whole = attrs.get("messages")
    if not isinstance(whole, list):
        return seen
    attrs.setdefault("message_count", len(whole))
    if seen is not None:
        # the previous call's history, then its reply, then what is new
        cut = len(seen) + 1
        if len(whole) >= cut and whole[: len(seen)] == seen:
            attrs["messages"] = whole[cut:]
    return whole


def _first_user_text(model_calls: Sequence[Mapping[str, Any]]) -> str | None:
    for attrs in model_calls:
        for m in attrs.get("messages") or ():
            if isinstance(m, Mapping) and m.get("role") == "user":
                content = m.get("content")
                return content if isinstance(content, str) else str(content)
    return None


def build_traces(nodes: Iterable[Node], *, framework: str) -> list[Trace]:
    """One trace per top-level run among ``nodes`` (a run nested in a tool call or a handoff
    belongs to its parent's trace); a model or tool call outside any run gets a run of its own,
    named after the framework."""
    nodes = list(nodes)
    kids = _children(nodes)
    top: list[Node] = []
    todo = list(kids.get(None, []))
    while todo:
        n = todo.pop(0)
        if n.kind == "other":
            todo[:0] = kids.get(n.id, [])
        else:
            top.append(n)
    traces: list[Trace] = []
    loose: list[Node] = []
    for n in top:
        if n.kind == "run":
            n.attributes.setdefault("framework", framework)
            traces.append(Trace(root=_run_span(n, kids), trace_id=new_trace_id()))
        else:
            loose.append(n)
    if loose:
        holder = Node(
            id=f"loose-{new_span_id()}",
            parent=None,
            kind="run",
            name=framework,
            start=loose[0].start,
            end=max((n.end or n.start) for n in loose),
            status="completed",
            attributes={"framework": framework},
        )
        for n in loose:
            n.parent = holder.id
        traces.append(
            Trace(root=_run_span(holder, _children([holder, *loose, *_below(loose, kids)])))
        )
    return traces


def _below(nodes: list[Node], kids: dict[str | None, list[Node]]) -> list[Node]:
    out: list[Node] = []
    todo = list(nodes)
    while todo:
        n = todo.pop()
        for c in kids.get(n.id, []):
            out.append(c)
            todo.append(c)
    return out
