"""Where a fork leaves its parent run (:class:`ForkPoint`, from ``at=``) and what it changes
(the ``edit=`` shapes); the rules are in kode_nb/debug/_fork.py's docstring."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.traces._trace import Span, Trace

__all__ = ["Edit", "ForkPoint", "fork_edit", "fork_point", "turn_spans"]

_TURN_KEYS = ("message", "system_prompt")
_TOOL_KEYS = ("result", "is_error", "system_prompt")


@dataclass(frozen=True, kw_only=True)
class ForkPoint:
    """Where a fork leaves its parent run."""

    turn: int
    """The turn (1-based) whose model call (``kind="turn"``) or tool call is changed."""
    kind: str
    """``turn`` (a turn or model call: the request goes live) or ``tool_call``."""
    span_id: str
    """The span named by ``at`` (turn ``N``'s span for a number)."""
    call_id: str | None = None
    """The tool call's id, for ``kind="tool_call"``."""


def turn_spans(run: Span) -> list[Span]:
    return [s for s in run.children if s.kind == "turn"]


def _parents(root: Span) -> dict[str, Span]:
    parents: dict[str, Span] = {}
    for span in root.walk():
        for child in span.children:
            parents[child.span_id] = span
    return parents


def fork_point(trace: Trace, at: Any) -> ForkPoint:
    """The :class:`ForkPoint` ``at`` names in ``trace`` (see the module docstring)."""
    run = trace.root
    turns = turn_spans(run)
    calls = [s for t in turns for s in t.children if s.kind == "model_call"]
    if not calls:
        raise ConfigurationError(
            f"fork: trace {trace.trace_id} records no model calls: there is nothing to fork"
        )
    where = f"at= takes a turn number (1..{len(turns)}) or the span_id of a turn, model_call or tool_call span of the run"
    if isinstance(at, bool) or not isinstance(at, (int, str)):
        raise ConfigurationError(f"fork: {where}; got {at!r}")
    if isinstance(at, int):
        if not 1 <= at <= len(turns):
            raise ConfigurationError(
                f"fork: the run has {len(turns)} turn(s), so at={at} is outside it; {where}"
            )
        return ForkPoint(turn=at, kind="turn", span_id=turns[at - 1].span_id)
    span_id = at.strip()
    if span_id == run.span_id:
        return ForkPoint(turn=1, kind="turn", span_id=span_id)
    parents = _parents(run)
    span = next((s for s in run.walk() if s.span_id == span_id), None)
    if span is None:
        raise ConfigurationError(f"fork: no span {span_id!r} in trace {trace.trace_id}; {where}")
    up = parents[span.span_id]
    while up.kind != "run":
        up = parents[up.span_id]
    if up is not run:
        raise ConfigurationError(
            f"fork: span {span_id!r} ({span.kind} {span.name!r}) is inside the subagent run "
            f"{up.name!r}; only the top-level run can be forked: fork it at the tool call "
            f"that ran {up.name!r}"
        )
    turn = span if span.kind == "turn" else parents[span.span_id]
    n = next(i for i, t in enumerate(turns, 1) if t is turn)
    if span.kind == "tool_call":
        call_id = str(span.attributes.get("call_id", ""))
        return ForkPoint(turn=n, kind="tool_call", span_id=span_id, call_id=call_id)
    return ForkPoint(turn=n, kind="turn", span_id=span_id)


@dataclass(frozen=True, kw_only=True)
class Edit:
    message: str | None = None
    result: str | None = None
    is_error: bool = False
    system_prompt: str | None = None

    def names(self) -> list[str]:
        return [k for k in ("message", "result", "system_prompt") if getattr(self, k) is not None]


def fork_edit(edit: Any, point: ForkPoint, system_prompt: str | None) -> Edit:
    allowed = _TOOL_KEYS if point.kind == "tool_call" else _TURN_KEYS
    shape = (
        "a string (the new tool result) or {'result': str, 'is_error': bool, 'system_prompt': str}"
        if point.kind == "tool_call"
        else "a string (the new user message) or {'message': str, 'system_prompt': str}"
    )
    at = f"at a {point.kind} (turn {point.turn})"
    if edit is None:
        fields: dict[str, Any] = {}
    elif isinstance(edit, str):
        fields = {"result" if point.kind == "tool_call" else "message": edit}
    elif isinstance(edit, Mapping):
        fields = dict(edit)
        wrong = [k for k in fields if k not in allowed]
        if wrong:
            hint = (
                " ('message' changes a turn: fork at its turn or model_call span)"
                if "message" in wrong
                else " ('result' changes a tool call: fork at its tool_call span)"
                if "result" in wrong
                else ""
            )
            raise ConfigurationError(
                f"fork: edit {at} takes {shape}; {', '.join(map(repr, wrong))} is not one of its "
                f"keys{hint}"
            )
    else:
        raise ConfigurationError(f"fork: edit {at} takes {shape}, got {type(edit).__name__}")
    for key in ("message", "result", "system_prompt"):
        if key in fields and not isinstance(fields[key], str):
            raise ConfigurationError(
                f"fork: edit[{key!r}] must be a string, got {type(fields[key]).__name__}"
            )
    if "is_error" in fields and not isinstance(fields["is_error"], bool):
        raise ConfigurationError(
            f"fork: edit['is_error'] must be True or False, got {fields['is_error']!r}"
        )
    if "is_error" in fields and "result" not in fields:
        raise ConfigurationError(
            "fork: edit['is_error'] needs edit['result'] (the new result text)"
        )
    if system_prompt is not None:
        if "system_prompt" in fields:
            raise ConfigurationError(
                "fork: give the system prompt once: system_prompt= or edit['system_prompt']"
            )
        if not isinstance(system_prompt, str):
            raise ConfigurationError(
                f"fork: system_prompt must be a string, got {type(system_prompt).__name__}"
            )
        fields["system_prompt"] = system_prompt
    return Edit(**fields)
