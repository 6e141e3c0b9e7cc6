"""The IPython display formatters for kode_nb's core objects (``text/html`` and ``text/plain``).

The core never imports display code; ``%load_ext kode_nb`` registers these functions *by type
name* (:data:`FORMATTED_TYPES`), so neither the types nor this module are imported until an
object is first displayed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kode_nb.ui import html as H
from kode_nb.ui import tool_html as T

__all__ = ["FORMATTED_TYPES", "HTML", "TEXT"]

_EVENTS = (
    "ApprovalRequested", "ApprovalResolved", "CallCancelled", "CallCompleted", "CallFailed",
    "CallRequested", "CallStarted", "CallTimedOut", "CallUpdate", "InvalidArguments",
)  # fmt: skip

FORMATTED_TYPES: tuple[tuple[str, str, str], ...] = (
    ("kode_nb.types", "ToolResult", "result"),
    ("kode_nb.tools._model", "Tool", "tool"),
    ("kode_nb.tools._registry", "ToolRegistry", "registry"),
    ("kode_nb.builtins", "RegisteredTools", "registered"),
    ("kode_nb.policy._policy", "Policy", "policy"),
    ("kode_nb.policy._approval", "ApprovalRequest", "approval"),
    *(("kode_nb.events._events", name, "event") for name in _EVENTS),
)
"""``(module, class name, renderer key)`` of every type given a rich display."""

HTML: dict[str, Callable[[Any], str]] = {
    "result": H.result_html,
    "tool": T.tool_html,
    "registry": T.registry_html,
    "registered": lambda tools: T.registry_html(tools.registry, tools),
    "policy": H.policy_html,
    "approval": lambda r: f'<div style="{H.BOX}">{H.approval_html(r)}</div>',
    "event": H.event_html,
}
"""Renderer key -> ``obj -> HTML``."""

TEXT: dict[str, Callable[[Any], str]] = {
    "result": H.result_text,
    "tool": T.tool_text,
    "registry": T.registry_text,
    "registered": lambda tools: T.registry_text(tools.registry, tools),
    "policy": H.policy_text,
    "approval": H.approval_text,
    "event": H.event_text,
}
"""Renderer key -> ``obj -> text``."""

RECORD_TYPES: tuple[tuple[str, str, str], ...] = (
    ("kode_nb.agents.result", "AgentRunResult", "run"),
    ("kode_nb.agents.trace", "Trace", "trace"),
)
"""``(module, class name, record kind)`` of the types displayed as their static record (a MIME
bundle: the record JSON the extension draws, with its HTML and text fallbacks)."""


def record_bundle(key: str, obj: Any) -> dict[str, Any]:
    """The MIME bundle of ``obj``'s record: an :class:`~kode_nb.agents.AgentRunResult` as the
    run record (with its trace viewer), a :class:`~kode_nb.agents.Trace` as the trace viewer."""
    from kode_nb.ui.records import run_record, trace_record

    if key == "run":
        model = obj.trace.root.attributes.get("model") if obj.trace is not None else None
        record = run_record(agent=obj.agent, model=model, result=obj)
    else:
        record = trace_record(obj)
    bundle: dict[str, Any] = record.bundle()
    return bundle
