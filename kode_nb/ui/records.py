"""Static records: what a kode_nb view becomes once it is final.

A live view (widgets) is replaced in place (``update_display_data`` on its display id) by a
:class:`Record`: a MIME bundle with no widget MIME type, made of

* ``application/vnd.kode-nb.<kind>+json``: the record's data (``kode_nb.<kind>/v1``), drawn by
  the kode_nb JupyterLab extension when it is installed;
* ``text/html``: a fallback that reads the same after a sanitizer has stripped ``style=``
  (untrusted notebooks, GitHub, nbviewer): semantic tags only (:mod:`kode_nb.ui.record_html`),
  bounded in size;
* ``text/plain``: a short summary.

The builders here turn a finished call, run, trace, tool or listing into a record:
:func:`call_record`, :func:`approval_record`, :func:`run_record`, :func:`trace_record`, :func:`card_record`,
:func:`table_record`, :func:`divergence_record`. No widget imports: the records are saved in notebooks, reopened with no
kernel, and read by nbconvert.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from kode_nb._format import format_duration, shorten
from kode_nb._redact import redact
from kode_nb.traces._compact import compact as compact_trace
from kode_nb.ui import record_html as RH

if TYPE_CHECKING:
    from kode_nb.agents import AgentRunResult
    from kode_nb.debug import Divergence
    from kode_nb.tools import Tool, ToolRegistry
    from kode_nb.traces import Trace
    from kode_nb.types import ToolResult

__all__ = [
    "LIVE_MIME",
    "MIME_PREFIX",
    "WIDGET_MIME",
    "Record",
    "approval_of",
    "approval_record",
    "call_record",
    "call_status",
    "card_record",
    "divergence_record",
    "finished_call_record",
    "live_marker",
    "registry_record",
    "run_record",
    "table_record",
    "trace_record",
]

MIME_PREFIX = "application/vnd.kode-nb."
"""Every record's JSON MIME type is ``MIME_PREFIX + kind + "+json"``."""
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
"""The MIME type a record never carries."""
LIVE_MIME = "application/vnd.kode-nb.live+json"
"""The marker a live view's widget bundle carries (``{"schema": "kode_nb.live/v1", "kind": ...}``),
so a front end can tell it from other widgets when its kernel stops before the final record."""
_EDIT_CHARS = 160
"""Characters of a value edited or given by hand while stepping, in a run's list of changes."""
RESULT_CHARS = 20_000
"""Characters of a result or stream kept in a record (a result its head, a stream its tail)."""


def live_marker(kind: str) -> dict[str, str]:
    """The :data:`LIVE_MIME` entry of a live view's bundle (``kind``: run, call, approval, many)."""
    return {"schema": "kode_nb.live/v1", "kind": kind}


NOT_FINISHED = (
    "Not finished when this output was saved: this is its first state; it went on in the kernel."
)
"""What a live view's snapshot says under its first line: a notebook saved (or executed headless)
before the work ended keeps the snapshot, and its reader must not take it for the outcome."""


def mark_live(data: dict[str, Any], kind: str) -> dict[str, Any]:
    """Finish a live view's bundle ``data`` (its widget, ``text/html`` and ``text/plain``
    snapshots): the :data:`LIVE_MIME` marker, and :data:`NOT_FINISHED` after the snapshots (the
    ``text/plain`` first line keeps its fixed form, which the extension reads)."""
    from html import escape

    data[LIVE_MIME] = live_marker(kind)
    if "text/plain" in data:
        data["text/plain"] = f"{data['text/plain']}\n⧗ {NOT_FINISHED}"
    if "text/html" in data:
        data["text/html"] = f"{data['text/html']}<p><i>⧗ {escape(NOT_FINISHED)}</i></p>"
    return data


_CALL_STATUS = {
    "ok": "ok",
    "error": "error",
    "invalid_arguments": "invalid",
    "not_found": "not_found",
    "denied": "denied",
    "timed_out": "timeout",
    "cancelled": "cancelled",
}


class Record:
    """One static record: ``kind``, its JSON ``data``, and the HTML and text fallbacks."""

    def __init__(self, kind: str, data: dict[str, Any], html: str, text: str) -> None:
        self.kind = kind
        """``trace``, ``run``, ``call``, ``approval``, ``card``, ``table`` or ``divergence``."""
        self.data = data
        """The JSON object (its ``schema`` key names the kind and version)."""
        self.html = html
        """The sanitizer-safe HTML fallback."""
        self.text = text
        """The ``text/plain`` summary."""

    @property
    def mime(self) -> str:
        return f"{MIME_PREFIX}{self.kind}+json"

    def bundle(self) -> dict[str, Any]:
        """The MIME bundle (JSON data, HTML, text)."""
        return {self.mime: self.data, "text/html": self.html, "text/plain": self.text}

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        return self.bundle()

    def __repr__(self) -> str:
        return self.text


def _jsonable(value: Any) -> Any:
    """``value`` as plain JSON (tuples to lists, unknown objects to strings)."""
    return json.loads(json.dumps(value, ensure_ascii=False, default=str))


def _saved_trace(plain: dict[str, Any]) -> dict[str, Any]:
    """The compact saved form of a trace's JSON (:mod:`kode_nb.traces._compact`). It is written
    straight from ``Trace.to_dict()``; a value that is not JSON is first made JSON as the plain
    form always was (100,000 spans: 2.6 s saved by not copying the JSON when it is)."""
    try:
        return compact_trace(plain)
    except TypeError:
        return compact_trace(_jsonable(plain))


def _bounded(text: str, limit: int, *, tail: bool) -> tuple[str, bool]:
    if len(text) <= limit:
        return text, False
    return (text[-limit:] if tail else text[:limit]), True


# --------------------------------------------------------------------------- calls


def call_status(result: ToolResult) -> str:
    """The record status of a result: ``interrupted`` for a call a kernel interrupt stopped."""
    status = _CALL_STATUS.get(result.status, result.status)
    if status == "cancelled" and "interrupt" in result.text.lower():
        return "interrupted"
    return status


def approval_of(event: Any) -> dict[str, Any] | None:
    """The record's ``approval`` from an ``approval_resolved`` event (or an ApprovalDecision)."""
    if event is None:
        return None
    approved = bool(getattr(event, "approved", False))
    by = str(getattr(event, "decided_by", "") or "")
    reason = getattr(event, "reason", None)
    if approved and getattr(event, "always", False):
        decision = "always_allowed"
    elif approved:
        decision = "auto" if by.startswith("auto") else "approved"
    else:
        decision = "denied"
    return {"decision": decision, "reason": reason if not approved else None}


def call_record(
    *,
    tool: str,
    call_id: str,
    kind: str,
    arguments: Any,
    result: ToolResult,
    approval: dict[str, Any] | None = None,
    stream: str = "",
    updates: int = 0,
) -> Record:
    """The record of a finished call (``stream``: the text its ``on_update`` streamed)."""
    text, truncated = _bounded(result.text, RESULT_CHARS, tail=False)
    streamed = None
    if updates or stream:
        tail, cut = _bounded(stream, RESULT_CHARS, tail=True)
        streamed = {"text": tail, "count": updates, "truncated": cut}
    data: dict[str, Any] = {
        "schema": "kode_nb.call/v1",
        "tool": tool,
        "call_id": call_id,
        "kind": kind or "other",
        "status": call_status(result),
        "arguments": _jsonable(arguments),
        "approval": approval,
        "updates": streamed,
        "result": {
            "text": text,
            "truncated": truncated,
            "total_chars": len(result.text),
            "is_error": result.is_error,
            "error_type": result.error_type,
            "details": _jsonable(result.details),
        },
        "started_at": result.started_at or None,
        "duration": result.duration if result.duration > 0 else None,
    }
    data = redact(data)  # arguments, streamed text, results: never a secret in a saved notebook
    return Record("call", data, RH.call_html(data), RH.call_text(data))


def finished_call_record(view: Any) -> Record:
    """The record of a call view (the widget one or the static one) once its call finished."""
    if view.result is None:
        raise RuntimeError(f"the call {view.call_id} has not finished")
    return call_record(
        tool=view.tool,
        kind=view.kind,
        call_id=view.call_id,
        arguments=view.arguments,
        result=view.result,
        approval=view.approval,
        stream=view.text,
        updates=view.updates,
    )


def approval_record(request: Any, decision: Any, *, note: str | None = None) -> Record:
    """The record of a question put to a person with no call view around it (another
    framework's own approval request, :func:`kode_nb.interop.ask`): what was asked and the
    decision (``decision`` None: none was made; ``note`` says why, e.g. cancelled)."""
    approval = approval_of(decision) if decision is not None else None
    if approval is None:
        approval = {"decision": "cancelled", "reason": note}
    data: dict[str, Any] = {
        "schema": "kode_nb.approval/v1",
        "tool": request.tool,
        "call_id": request.call_id,
        "kind": request.kind or "other",
        "arguments": _jsonable(dict(request.arguments)),
        "asked": request.reason or None,
        "approval": approval,
    }
    data = redact(data)
    return Record("approval", data, RH.approval_html(data), RH.approval_text(data))


# --------------------------------------------------------------------------- runs


def run_record(
    *,
    agent: str,
    model: str | None,
    result: AgentRunResult | None,
    error: str | None = None,
    prompt: str | None = None,
    trace: Trace | None = None,
    turns: int = 0,
    tokens: tuple[int | None, int | None] = (None, None),
    warnings: Sequence[str] = (),
) -> Record:
    """The record of a finished run (``result``), or of one that never produced a result
    (``error``: the exception's message, or the reason it was interrupted)."""
    interrupted = None
    if result is not None:
        status: str = result.status
        message = result.error
        turns, trace = result.turns, result.trace
        tokens = (result.usage.input_tokens, result.usage.output_tokens)
        duration: float | None = result.duration
        output = _output_text(result.output) if result.ok else None
    else:
        status, message, duration, output = "error", error, None, None
    if status in ("cancelled", "error") and "interrupt" in (message or "").lower():
        status = "interrupted"
        interrupted = {"turn": turns, "reason": message or "interrupted"}
    if prompt is None and trace is not None:
        prompt = trace.root.attributes.get("prompt")
    data: dict[str, Any] = {
        "schema": "kode_nb.run/v1",
        "agent": agent,
        "model": model or None,
        "status": status,
        "turns": turns,
        "usage": {"input_tokens": tokens[0], "output_tokens": tokens[1]},
        "total_usage": _total_usage(trace),
        "duration": duration,
        "prompt": prompt,
        "output": output,
        "error": message if status != "completed" else None,
        "interrupted": interrupted,
        "warnings": list(warnings),
        "cost": result.cost if result is not None else None,
        "trace": trace.to_dict() if trace is not None else None,
    }
    if data["trace"] is not None:
        steps = steps_of(data["trace"]["root"])
        if steps is not None:
            data["steps"] = steps
    data = redact(data)
    return _run(data)


def _run(data: dict[str, Any]) -> Record:
    """The run record of ``data`` (its trace plain JSON): the fallbacks drawn from the plain
    trace, the trace saved in its compact form."""
    html, text = RH.run_html(data), RH.run_text(data)
    if data["trace"] is not None:
        data["trace"] = _saved_trace(data["trace"])
    return Record("run", data, html, text)


def _total_usage(trace: Trace | None) -> dict[str, Any] | None:
    """The run's tokens with its subagents' (the run span's ``total_usage``), if recorded."""
    total = trace.root.attributes.get("total_usage") if trace is not None else None
    return _token_counts(total) if isinstance(total, Mapping) else None


def _token_counts(usage: Mapping[str, Any]) -> dict[str, Any]:
    """The input and output tokens of a span's ``usage``-shaped attribute."""
    return {"input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens")}


def framework_run_record(
    *, name: str, status: str, trace: Trace | None, output: Any = None, error: str | None = None
) -> Record:
    """The run record of another framework's run (:func:`kode_nb.interop.start`), from its
    captured trace: the same ``kode_nb.run/v1`` record and trace viewer as a kode_nb run."""
    root = trace.root if trace is not None else None
    a = root.attributes if root is not None else {}
    own, total = a.get("usage") or {}, a.get("total_usage") or {}
    if output is None:
        output = a.get("output")
    data: dict[str, Any] = {
        "schema": "kode_nb.run/v1",
        "agent": name,
        "model": a.get("model") or None,
        "status": status,
        "turns": a.get("turns", 0),
        "usage": _token_counts(own),
        "total_usage": _token_counts(total),
        "duration": root.duration if root is not None else None,
        "prompt": a.get("prompt"),
        "output": _output_text(output) if status == "completed" and output is not None else None,
        "error": error if status != "completed" else None,
        "interrupted": None,
        "warnings": [],
        "cost": a.get("cost"),
        "trace": trace.to_dict() if trace is not None else None,
    }
    data = redact(data)
    return _run(data)


def framework_run_bundle(run: Any) -> dict[str, Any]:
    """A framework run (:class:`kode_nb.interop.FrameworkRun`): its status line, marked live,
    while it runs; its run record once it ended."""
    if not run.done():
        import html

        text = f"{run.name}: {run.status}"
        return {
            "text/plain": text,
            "text/html": f"<div>{html.escape(text)}</div>",
            LIVE_MIME: live_marker("run"),
        }
    error = f"{type(run.exception).__name__}: {run.exception}" if run.exception else None
    output = run._result if run.exception is None else None
    output = getattr(output, "output", getattr(output, "final_output", output))
    record = framework_run_record(
        name=run.name, status=run.status, trace=run.trace, output=output, error=error
    )
    return record.bundle()


def steps_of(root: Mapping[str, Any]) -> dict[str, Any] | None:
    """What a stepped run's pauses decided, from its trace's ``step*`` span events:
    ``{"pauses": n, "changes": [line, ...]}`` (edits and results given by hand, in order);
    ``None`` when the run did not step."""
    pauses, changes = 0, []
    todo: list[tuple[Mapping[str, Any], str, Any]] = [(root, str(root.get("name", "")), None)]
    while todo:
        span, agent, turn = todo.pop()
        kind = span.get("kind")
        attrs = span.get("attributes") or {}
        agent = str(span.get("name", agent)) if kind == "run" else agent
        turn = attrs.get("turn", turn) if kind == "turn" else turn
        where = f"{agent}, turn {turn}"
        for event in span.get("events") or ():
            name, ev = event.get("name"), event.get("attributes") or {}
            if name == "step":
                pauses += 1
            elif name == "step_edit" and kind == "tool_call":
                changes.append(
                    f"{where}: {attrs.get('tool')} arguments edited by hand: "
                    f"{shorten(ev.get('before'), _EDIT_CHARS)} → "
                    f"{shorten(ev.get('after'), _EDIT_CHARS)}"
                )
            elif name == "step_edit":
                changes.append(
                    f"{where}: message [{ev.get('message')}] ({ev.get('role')}) "
                    f"edited by hand: {shorten(ev.get('after'), _EDIT_CHARS)}"
                )
            elif name == "step_given":
                changes.append(
                    f"{where}: {attrs.get('tool')} result given by hand (not run): "
                    f"{shorten(ev.get('text'), _EDIT_CHARS)}"
                )
        todo.extend((c, agent, turn) for c in reversed(span.get("children") or ()))
    return {"pauses": pauses, "changes": changes} if pauses else None


def _output_text(output: Any) -> str:
    if hasattr(output, "model_dump_json"):
        return str(output.model_dump_json(indent=2))
    return output if isinstance(output, str) else json.dumps(_jsonable(output), indent=2)


# --------------------------------------------------------------------------- traces


def trace_record(trace: Trace) -> Record:
    """The record of a trace: its ``kode_nb.trace/v3`` JSON in the compact saved form
    (:mod:`kode_nb.traces._compact`; :meth:`Trace.from_dict` reads it back)."""
    plain = trace.to_dict()
    return Record("trace", _saved_trace(plain), RH.trace_html(plain), RH.trace_text(plain))


def divergence_record(divergence: Divergence) -> Record:
    """The record of :func:`kode_nb.diverge`'s answer (``kode_nb.divergence/v1``): where two
    runs first differ, both side by side; the HTML and text are the divergence's own."""
    from kode_nb.ui.diverge_view import divergence_bundle

    bundle = divergence_bundle(divergence)
    data = _jsonable(bundle[f"{MIME_PREFIX}divergence+json"])
    return Record("divergence", data, bundle["text/html"], bundle["text/plain"])


# --------------------------------------------------------------------------- tools


def card_record(tool: Tool) -> Record:
    """The record of a tool's card: metadata, parameters and each provider's exact schema."""
    from kode_nb.ui.tool_html import FORMATS, export_tool, parameter_rows, tool_text

    params = tool.parameters
    properties: Mapping[str, Any] = params.get("properties") or {}
    rows = []
    for row in parameter_rows(params):
        spec = properties.get(row.name)
        rows.append(
            {
                "name": row.name,
                "type": row.type,
                "required": row.required,
                "default": _jsonable(spec.get("default")) if isinstance(spec, Mapping) else None,
                "description": row.description or None,
            }
        )
    approval = tool.approval
    data: dict[str, Any] = {
        "schema": "kode_nb.card/v1",
        "name": tool.name,
        "label": tool.label or tool.name,
        "description": tool.description,
        "kind": tool.kind.value,
        "category": tool.category.value,
        "groups": list(tool.groups),
        "timeout": tool.timeout,
        "approval": approval if isinstance(approval, str) else "policy",
        "source": tool.source or None,
        "parameters": rows,
        "schemas": {fmt: _jsonable(export_tool(tool, fmt)) for fmt in FORMATS},
    }
    return Record("card", data, RH.card_html(data), tool_text(tool))


# --------------------------------------------------------------------------- tables


def table_record(
    title: str,
    columns: Sequence[Sequence[str]],
    rows: Sequence[Mapping[str, Any]],
    *,
    empty: str = "Nothing to show.",
    note: str | None = None,
) -> Record:
    """A listing: ``columns`` are ``(key, label)`` or ``(key, label, "right")``."""
    data: dict[str, Any] = {
        "schema": "kode_nb.table/v1",
        "title": title,
        "columns": [
            {"key": c[0], "label": c[1], "align": c[2] if len(c) > 2 else "left"} for c in columns
        ],
        "rows": [_jsonable(dict(r)) for r in rows],
        "empty": empty,
        "note": note,
    }
    data = redact(data)
    return Record("table", data, RH.table_html(data), RH.table_text(data))


def registry_record(
    registry: ToolRegistry,
    tools: Iterable[Tool] | None = None,
    stuck: Mapping[str, int] | None = None,
) -> Record:
    """The ``%tools`` table as a static record: calls, failures, denials (apart), mean, p95;
    ``stuck`` (``Executor.stuck()``) adds a "threads" column when any thread is stuck."""
    stuck = stuck or None
    rows = []
    for t in registry.list() if tools is None else tools:
        s = registry.stats(t.name)
        ran = s.calls - s.denials
        rows.append(
            {
                "name": t.name,
                "kind": t.kind.value,
                "category": t.category.value,
                "groups": ", ".join(t.groups),
                "calls": s.calls,
                "failures": s.failures,
                "denials": s.denials,
                "mean": format_duration(s.mean) if ran else None,
                "p95": format_duration(s.p95) if ran else None,
            }
        )
        if stuck is not None:
            n = stuck.get(t.name, 0)
            rows[-1]["threads"] = f"{n} stuck" if n else ""
    title = f"{len(rows)} tool{'s' if len(rows) != 1 else ''}"
    if registry.name:
        title = f"registry {registry.name}: {title}"
    columns = [
        ("name", "name"),
        ("kind", "kind"),
        ("category", "category"),
        ("groups", "groups"),
        ("calls", "calls", "right"),
        ("failures", "failures", "right"),
        ("denials", "denials", "right"),
        ("mean", "mean", "right"),
        ("p95", "p95", "right"),
    ]
    if stuck is not None:
        columns.append(("threads", "threads"))
    return table_record(title, columns, rows, empty="No tools.")
