"""Cached rows re-checked against the inbox's current policy.

A cached row's trace records every approval its run asked for (the ``approval_requested`` and
``approval_resolved`` events of its tool calls). Before the row is served from the cache,
:func:`decisions_hold` asks the inbox's current ``policy`` about each of those calls: when the
policy now gives a definite answer (approve or deny) that differs from the one recorded, the
row is run again. A policy that answers ``None`` (ask a person) leaves the recorded decision
standing. The executor's own policy (allow/deny rules, approval modes) is part of the cache key
(:meth:`~kode_nb.many.target.Target.key`), so changing it starts from an empty folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from kode_nb.many.rows import RowResult

__all__ = ["decisions_hold"]


def decisions_hold(result: RowResult, policy: Callable[..., Any] | None, row: int) -> bool:
    """Whether ``policy`` agrees with every approval decision recorded in ``result``."""
    if policy is None:
        return True
    from kode_nb.policy import ApprovalDecision, ApprovalRequest

    trace = result.trace_dict()
    if not isinstance(trace, Mapping):
        return True
    for span, requested, resolved in _approvals(trace.get("root")):
        attrs = span.get("attributes") or {}
        arguments = attrs.get("arguments")
        request = ApprovalRequest(
            tool=str(attrs.get("tool") or ""),
            kind=str(requested.get("kind") or ""),
            arguments=arguments if isinstance(arguments, Mapping) else {},
            call_id=str(attrs.get("call_id") or ""),
            reason=str(requested.get("reason") or ""),
        )
        try:
            answer = policy(request, row)
        except Exception:
            return False  # a policy that fails on it now: run the row again
        if answer is None:
            continue
        approved = answer.approved if isinstance(answer, ApprovalDecision) else answer is True
        if approved != bool(resolved.get("approved")):
            return False
    return True


def _approvals(
    span: Any,
) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any], Mapping[str, Any]]]:
    if not isinstance(span, Mapping):
        return
    requested: Mapping[str, Any] = {}
    for event in span.get("events") or ():
        if not isinstance(event, Mapping):
            continue
        attrs = event.get("attributes") or {}
        if event.get("name") == "approval_requested":
            requested = attrs
        elif event.get("name") == "approval_resolved" and isinstance(attrs, Mapping):
            yield span, requested, attrs
    for child in span.get("children") or ():
        yield from _approvals(child)
