"""Where two runs first differ: ``kode_nb.diverge(a, b)`` (a run and its fork, typically).

Both runs are read from their traces (anything :func:`kode_nb.replay` accepts: a result, a
trace, its JSON, a trace id) into :class:`Branch` es, one :class:`Step` per turn of the
top-level run: the messages new to the model that turn, the model, its response, the tool
calls' results, tokens and cost. Turn by turn, the first difference is, in this order:

* ``message`` — a user message sent that turn (the prompt, a retry or re-ask message);
* ``model`` — another model answered;
* ``tool calls`` — the model asked for other tools or arguments (ids are not compared);
* ``answer`` — the response text differs;
* ``tool result`` — a tool call of that turn returned another text (or error state);
* ``end`` — one run has no such turn (it ended earlier).

When every turn matches, ``outcome`` (status or output differ) or ``system prompt`` are
reported with ``turn=None``; :attr:`Divergence.same` is true when nothing differs. The system
prompt is compared on its own (:attr:`Divergence.system_prompt_differs`): a fork with another
system prompt replays its first turns under it, so it first differs where a live answer does.

:meth:`Divergence.to_dict` is the ``kode_nb.divergence/v1`` record data (docs/RECORDS.md). In
a notebook (``%load_ext kode_nb``) the notebook layer displays it (kode_nb/ui/diverge_view.py)
as a side-by-side table (``text/html`` that survives sanitizers: a semantic ``<table>``, no
``style=``; and ``text/plain``), each branch's tokens and cost (``unknown`` when a price or a
token count is; replayed turns cost nothing new), and as the
``application/vnd.kode-nb.divergence+json`` record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from kode_nb.debug._replay import load_trace
from kode_nb.models._cost import rollup
from kode_nb.traces._trace import Span, Trace

__all__ = ["SCHEMA", "Branch", "Divergence", "Step", "diverge"]

SCHEMA = "kode_nb.divergence/v1"
TEXT_CHARS = 2_000
"""Characters of one message, answer or result kept in the record (the head)."""


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + f"… ({len(text):,} chars)"


def _arguments(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return str(value)
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


@dataclass(kw_only=True)
class Step:
    """One turn of one branch."""

    turn: int
    sent: list[dict[str, Any]]
    """The messages new to the model this turn: ``{"role": "user"|"tool", "name", "text"}``."""
    model: str
    text: str
    """The response's text."""
    calls: list[dict[str, Any]]
    """The tool calls asked for: ``{"name", "arguments"}`` (arguments as compact JSON)."""
    results: list[dict[str, Any]]
    """This turn's tool calls' results: ``{"tool", "text", "is_error", "status", "edited"}``."""
    usage: dict[str, Any]
    cost: float | None
    replayed: bool
    """Answered from the parent's recording (a fork's turns before the fork point)."""
    status: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn": self.turn,
            "sent": self.sent,
            "model": self.model,
            "text": self.text,
            "calls": self.calls,
            "results": self.results,
            "usage": self.usage,
            "cost": self.cost,
            "replayed": self.replayed,
            "status": self.status,
        }


@dataclass(kw_only=True)
class Branch:
    """One run, turn by turn."""

    label: str
    trace_id: str
    agent: str
    status: str
    output: Any
    system_prompt: str
    steps: list[Step]
    usage: dict[str, Any]
    """Tokens of every model call of the run (nested subagents too)."""
    cost: float | None
    """US dollars of them (``None``: unknown)."""
    new_usage: dict[str, Any]
    """Tokens of the calls actually requested by this run (replayed ones left out)."""
    new_cost: float | None
    requests: int
    new_requests: int
    forked_from: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "trace_id": self.trace_id,
            "agent": self.agent,
            "status": self.status,
            "output": self.output,
            "system_prompt": self.system_prompt,
            "usage": self.usage,
            "cost": self.cost,
            "new_usage": self.new_usage,
            "new_cost": self.new_cost,
            "requests": self.requests,
            "new_requests": self.new_requests,
            "forked_from": self.forked_from,
            "steps": [s.to_dict() for s in self.steps],
        }


def _sent(messages: list[Any]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") == "assistant":
            continue
        if m.get("role") == "tool":
            out.append(
                {
                    "role": "tool",
                    "name": str(m.get("name", "")),
                    "text": _clip(str(m.get("content", ""))),
                    "is_error": bool(m.get("is_error")),
                }
            )
        else:
            out.append({"role": "user", "name": "", "text": _clip(str(m.get("content", "")))})
    return out


def _step(n: int, turn: Span) -> Step:
    call = next((s for s in turn.children if s.kind == "model_call"), None)
    a: dict[str, Any] = call.attributes if call is not None else {}
    found = a.get("response")
    response: dict[str, Any] = found if isinstance(found, dict) else {}
    results = []
    for span in turn.children:
        if span.kind != "tool_call":
            continue
        got = span.attributes.get("result")
        r: dict[str, Any] = got if isinstance(got, dict) else {}
        results.append(
            {
                "tool": str(span.attributes.get("tool", "")),
                "text": _clip(str(r.get("text", ""))),
                "is_error": bool(r.get("is_error")),
                "status": str(r.get("status", span.status)),
                "edited": bool(span.attributes.get("edited")),
            }
        )
    return Step(
        turn=n,
        sent=_sent(list(a.get("messages") or [])),
        model=str(a.get("model", "")),
        text=_clip(str(response.get("text") or "")),
        calls=[
            {"name": str(c.get("name", "")), "arguments": _arguments(c.get("arguments", ""))}
            for c in response.get("tool_calls") or []
        ],
        results=results,
        usage=dict(a.get("usage") or {}),
        cost=a.get("cost"),
        replayed=bool(a.get("replayed")),
        status=call.status if call is not None else turn.status,
    )


def branch(trace: Trace, label: str) -> Branch:
    """The :class:`Branch` of a trace's top-level run."""
    root = trace.root
    a = root.attributes
    turns = [s for s in root.children if s.kind == "turn"]
    calls = [s.attributes for s in root.walk() if s.kind == "model_call"]
    every = rollup(calls)
    new = rollup(c for c in calls if not c.get("replayed"))
    link = a.get("forked_from")
    return Branch(
        label=label,
        trace_id=trace.trace_id,
        agent=str(a.get("agent") or root.name),
        status=root.status,
        output=a.get("output"),
        system_prompt=str(a.get("system_prompt") or ""),
        steps=[_step(n, t) for n, t in enumerate(turns, 1)],
        usage=every["usage"],
        cost=every["cost"],
        new_usage=new["usage"],
        new_cost=new["cost"],
        requests=every["requests"],
        new_requests=new["requests"],
        forked_from=dict(link) if isinstance(link, dict) else None,
    )


def _first_difference(a: Step | None, b: Step | None) -> tuple[str, str] | None:
    if a is None or b is None:
        return "end", "one run has no such turn"
    users = (
        [m["text"] for m in a.sent if m["role"] == "user"],
        [m["text"] for m in b.sent if m["role"] == "user"],
    )
    if users[0] != users[1]:
        return "message", "a user message differs"
    if a.model != b.model:
        return "model", f"{a.model} answered one, {b.model} the other"
    if a.calls != b.calls:
        return "tool calls", "the model asked for other tool calls"
    if a.text != b.text:
        return "answer", "the response text differs"
    for x, y in zip(a.results, b.results, strict=False):
        if (x["text"], x["is_error"]) != (y["text"], y["is_error"]):
            return "tool result", f"the result of {x['tool']} differs"
    return None


@dataclass(kw_only=True)
class Divergence:
    """Where two runs first differ (see the module docstring)."""

    a: Branch
    b: Branch
    turn: int | None
    """The first turn that differs (``None``: the turns match)."""
    what: str | None
    """``message``, ``model``, ``tool calls``, ``answer``, ``tool result``, ``end``,
    ``outcome``, ``system prompt``, or ``None`` when the runs are the same."""
    detail: str = ""
    """A sentence saying what differs."""
    system_prompt_differs: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def same(self) -> bool:
        return self.what is None

    def to_dict(self) -> dict[str, Any]:
        """The ``kode_nb.divergence/v1`` record data (docs/RECORDS.md)."""
        return {
            "schema": SCHEMA,
            "turn": self.turn,
            "what": self.what,
            "detail": self.detail,
            "system_prompt_differs": self.system_prompt_differs,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
        }

    def summary(self) -> str:
        if self.what is None:
            return f"{self.a.label} and {self.b.label} do not differ"
        where = f"turn {self.turn}" if self.turn is not None else "the end"
        return f"{self.a.label} and {self.b.label} first differ at {where}: {self.what} ({self.detail})"

    def __repr__(self) -> str:
        return f"<Divergence: {self.summary()}>"


def _labels(a: Branch, b: Branch) -> tuple[str, str]:
    if b.forked_from and b.forked_from.get("trace_id") == a.trace_id:
        return "parent", "fork"
    if a.forked_from and a.forked_from.get("trace_id") == b.trace_id:
        return "fork", "parent"
    return "A", "B"


def diverge(a: Any, b: Any, *, labels: tuple[str, str] | None = None) -> Divergence:
    """Where runs ``a`` and ``b`` first differ, with both side by side (module docstring).

    ``a``/``b``: an :class:`AgentRunResult`, a :class:`Trace`, its JSON, or a known trace id.
    ``labels``: the two columns' names (default ``parent``/``fork`` for a run and its fork,
    else ``A``/``B``)."""
    from kode_nb.errors import ConfigurationError

    if labels is not None and (
        not isinstance(labels, tuple)
        or len(labels) != 2
        or not all(isinstance(x, str) for x in labels)
    ):
        raise ConfigurationError(f"diverge: labels must be a pair of strings, got {labels!r}")
    first, second = (
        branch(load_trace(a, what="diverge"), "A"),
        branch(load_trace(b, what="diverge"), "B"),
    )
    first.label, second.label = labels or _labels(first, second)
    turn: int | None = None
    what: str | None = None
    detail = ""
    for n in range(1, max(len(first.steps), len(second.steps)) + 1):
        x = first.steps[n - 1] if n <= len(first.steps) else None
        y = second.steps[n - 1] if n <= len(second.steps) else None
        found = _first_difference(x, y)
        if found is not None:
            turn, (what, detail) = n, found
            if what == "end":
                ended = first if x is None else second
                detail = f"{ended.label} ended after turn {n - 1} ({ended.status})"
            break
    system = first.system_prompt != second.system_prompt
    if what is None and (first.status, first.output) != (second.status, second.output):
        what, detail = "outcome", "the runs ended differently"
    elif what is None and system:
        what, detail = "system prompt", "the system prompts differ"
    return Divergence(
        a=first, b=second, turn=turn, what=what, detail=detail, system_prompt_differs=system
    )
