"""Every rich display of kode_nb's core objects, in one place.

The core never imports display code and its objects carry no HTML. ``%load_ext kode_nb``
(kode_nb/_extension.py) registers the renderers below with IPython's display formatters *by
type name* (:data:`FORMATTED_TYPES`), so neither the core types nor the renderers are imported
until an object is first displayed; ``%unload_ext`` removes them. A renderer key may have

* :data:`HTML` / :data:`TEXT` — ``text/html`` and ``text/plain`` (tools, results, policies,
  events...);
* :data:`BUNDLE` — a whole MIME bundle: a record's JSON (``application/vnd.kode-nb.*+json``,
  drawn by the JupyterLab extension) with its sanitizer-safe HTML and text (runs, traces,
  divergences, an approval inbox);
* :data:`LIVE` — a live view the object displays itself as (a running batch of many runs), or
  refreshes (a run's result in the cell showing its live view); a renderer raising
  ``NotImplementedError`` declines, and the object displays through the tables above.

:func:`show_started` is what the core calls (through :mod:`kode_nb._live`) to show work it
started and returned at once (``kode_nb.run_many``'s batch).

The notebook layer's own display objects (widgets, :class:`~kode_nb.ui.records.Record`,
handles) carry their bundles themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kode_nb.ui import html as H
from kode_nb.ui import tool_html as T

__all__ = [
    "BUNDLE",
    "FORMATTED_TYPES",
    "HTML",
    "LIVE",
    "STARTED",
    "TEXT",
    "renderer_tables",
    "show_started",
]

_EVENTS = (
    "ApprovalRequested",
    "ApprovalResolved",
    "CallCancelled",
    "CallCompleted",
    "CallFailed",
    "CallRequested",
    "CallStarted",
    "CallTimedOut",
    "CallUpdate",
    "InvalidArguments",
)

FORMATTED_TYPES: tuple[tuple[str, str, str], ...] = (
    ("kode_nb.types", "ToolResult", "result"),
    ("kode_nb.tools._model", "Tool", "tool"),
    ("kode_nb.tools._registry", "ToolRegistry", "registry"),
    ("kode_nb.builtins", "RegisteredTools", "registered"),
    ("kode_nb.policy._policy", "Policy", "policy"),
    ("kode_nb.policy._approval", "ApprovalRequest", "approval"),
    *(("kode_nb.events._events", name, "event") for name in _EVENTS),
    ("kode_nb.agents._result", "AgentRunResult", "run"),
    ("kode_nb.traces._trace", "Trace", "trace"),
    ("kode_nb.debug._diverge", "Divergence", "divergence"),
    ("kode_nb.many.inbox", "Inbox", "inbox"),
    ("kode_nb.many.core", "ManyRun", "many"),
    ("kode_nb.many.compare", "Comparison", "comparison"),
    ("kode_nb.interop._run", "FrameworkRun", "framework_run"),
    ("kode_nb.evals._report", "EvalReport", "eval"),
    ("kode_nb.evals._regress", "Regression", "eval_comparison"),
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


def _run_bundle(result: Any) -> dict[str, Any]:
    from kode_nb.ui.records import run_record

    model = result.trace.root.attributes.get("model")
    return run_record(agent=result.agent, model=model, result=result).bundle()


def _trace_bundle(trace: Any) -> dict[str, Any]:
    from kode_nb.ui.trace_html import trace_bundle

    return trace_bundle(trace)


def _divergence_bundle(divergence: Any) -> dict[str, Any]:
    from kode_nb.ui.diverge_view import divergence_bundle

    return divergence_bundle(divergence)


def _inbox_bundle(inbox: Any) -> dict[str, Any]:
    from kode_nb.ui.many_view import inbox_bundle

    return inbox_bundle(inbox)


def _framework_run_bundle(run: Any) -> dict[str, Any]:
    from kode_nb.ui.records import framework_run_bundle

    return framework_run_bundle(run)


def _eval_bundle(report: Any) -> dict[str, Any]:
    from kode_nb.ui._eval_view import eval_bundle

    return eval_bundle(report)


def _eval_comparison_bundle(regression: Any) -> dict[str, Any]:
    from kode_nb.ui._eval_view import regression_bundle

    return regression_bundle(regression)


BUNDLE: dict[str, Callable[[Any], dict[str, Any]]] = {
    "run": _run_bundle,
    "framework_run": _framework_run_bundle,
    "trace": _trace_bundle,
    "divergence": _divergence_bundle,
    "inbox": _inbox_bundle,
    "eval": _eval_bundle,
    "eval_comparison": _eval_comparison_bundle,
}
"""Renderer key -> ``obj -> MIME bundle``."""


def _show_batch(batch: Any) -> None:
    from kode_nb.ui.many_view import show

    show(batch)


def _show_comparison(comparison: Any) -> None:
    for batch in comparison.batches.values():
        _show_batch(batch)


def _show_run(result: Any) -> None:
    """A run's result displayed in the cell that shows the run's live view (a run from Python
    on the session's executor): that view is refreshed with it, nothing more is drawn.
    Anywhere else this declines (``NotImplementedError``: IPython's formatters then go on to
    :data:`BUNDLE`, the run record)."""
    from kode_nb.ui._run_views import show_result

    if not show_result(result):
        raise NotImplementedError("not shown live in this cell: displayed as its run record")


def _show_framework_run(run: Any) -> None:
    """A framework run displayed as a cell's value while it runs: nothing in the cell that
    already shows it (``kode_nb.interop.start`` did), its live display in another cell (replaced
    by its run record when it ends), never a status line that stays "running" once saved. An
    ended run declines (``NotImplementedError``: its run record, from :data:`BUNDLE`)."""
    from IPython import get_ipython

    from kode_nb.interop._host import current_host

    if run.done():
        raise NotImplementedError("ended: displayed as its run record")
    if run.shown_in is not None and run.shown_in == getattr(get_ipython(), "execution_count", None):
        return
    show = getattr(current_host(), "show_run", None)
    if not callable(show):
        raise NotImplementedError("no notebook session to show it live")
    show(run)


LIVE: dict[str, Callable[[Any], None]] = {
    "many": _show_batch,
    "comparison": _show_comparison,
    "run": _show_run,
    "framework_run": _show_framework_run,
}
"""Renderer key -> ``obj -> None``: displays ``obj`` itself (a live view)."""


def renderer_tables(key: str) -> tuple[str, ...]:
    """The tables (``HTML``, ``TEXT``, ``BUNDLE``, ``LIVE``) that have a renderer for ``key``."""
    tables: dict[str, Mapping[str, object]] = {
        "HTML": HTML,
        "TEXT": TEXT,
        "BUNDLE": BUNDLE,
        "LIVE": LIVE,
    }
    return tuple(name for name, table in tables.items() if key in table)


def _in_kernel() -> bool:
    import sys

    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    return getattr(get_ipython(), "kernel", None) is not None


STARTED: dict[str, Callable[[Any], None]] = {
    "many": _show_batch,
}
"""Renderer key -> ``obj -> None``: shows work the core has just started (:func:`show_started`);
:data:`LIVE` is for the same object displayed again later, as a cell's value."""


def show_started(obj: Any, wanted: bool | None) -> bool:
    """Show work the core started (:mod:`kode_nb._live`): ``wanted`` True always, None only in
    a kernel; whether it was shown (an object with nothing in :data:`STARTED` is not)."""
    kind = (type(obj).__module__, type(obj).__name__)
    key = next((k for m, n, k in FORMATTED_TYPES if k in STARTED and (m, n) == kind), None)
    if key is None or (wanted is None and not _in_kernel()):
        return False
    STARTED[key](obj)
    return True
