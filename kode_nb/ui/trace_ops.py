"""The trace viewer's requests over the ``kode_nb.notebook`` comm (ops ``expand`` and ``fork``,
kode_nb/ui/notebook_comm.py; protocol in docs/RECORDS.md): "Expand into cells" gets the cells
that reproduce a run (:func:`kode_nb.expand_trace`), "Fork from here" the source of a cell that
forks it (:func:`kode_nb.fork`). Both remember the trace they were handed by its id; the cells
hold the trace itself (as the notebook saved it), so they also run after a restart.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.traces._trace import READABLE_SCHEMAS

__all__ = ["FORKABLE", "expand_request", "fork_request"]

FORKABLE = ("turn", "model_call", "tool_call")
"""The span kinds a run can be forked at."""


MAX_DEPTH = 200
"""JSON nesting a trace sent by the front end may have (a span and its attribute objects are a
few levels each: a run nested this deep is not a real run)."""
MAX_ITEMS = 5_000_000
"""JSON values (objects, arrays, strings, numbers) a trace sent by the front end may hold."""


def _check_shape(value: Any) -> None:
    """Refuse, with a clear answer, JSON too deep or too large to expand or fork (walked without
    recursion, stopping at the first limit passed)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    items = 0
    while stack:
        node, depth = stack.pop()
        items += 1
        if depth > MAX_DEPTH:
            raise ConfigurationError(
                f"the trace is nested more than {MAX_DEPTH} levels deep: too deep to expand or "
                "fork (a recorded run is a few levels per span)"
            )
        if items > MAX_ITEMS:
            raise ConfigurationError(
                f"the trace holds more than {MAX_ITEMS:,} JSON values: too large to expand or "
                "fork here; load its JSON in the kernel (kode_nb.traces.Trace.from_dict) and work on "
                "it in code"
            )
        if isinstance(node, Mapping):
            stack.extend((v, depth + 1) for v in node.values())
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node)


def _trace_json(data: Mapping[str, Any]) -> Mapping[str, Any]:
    trace = data.get("trace")
    if not isinstance(trace, Mapping):
        raise ConfigurationError(
            f"the request has no trace: expected the trace record's JSON object under 'trace', "
            f"got {type(trace).__name__}"
        )
    if "format" in trace:  # the compact saved form: the limits hold for the trace it stands for
        from kode_nb.traces._compact import expand

        try:
            trace = expand(trace)
        except ValueError as exc:
            raise ConfigurationError(f"not a usable kode_nb trace: {exc}") from None
    _check_shape(trace)
    schema = trace.get("schema")
    if not (isinstance(schema, str) and schema.startswith("kode_nb.trace/")):
        raise ConfigurationError(
            f"not a kode_nb trace: its schema is {schema!r}, expected kode_nb.trace/v1, /v2 or /v3"
        )
    return trace


def expand_request(data: Mapping[str, Any], registered: set[str]) -> dict[str, Any]:
    """The ``expand`` op: remember the trace (so cells and forks can name it by id) and expand it;
    ``{"trace_id", "cells", "notes"}``. A newer trace format is expanded from the fields this
    version knows, with a note, but not remembered."""
    from kode_nb.debug import expand_trace
    from kode_nb.traces import remember_trace

    trace = _trace_json(data)
    notes: list[str] = []
    try:
        trace_id = remember_trace(trace).trace_id
    except ConfigurationError as exc:
        if trace.get("schema") in READABLE_SCHEMAS:
            raise
        trace_id = str(trace.get("trace_id", ""))
        notes.append(f"kode_nb.known_trace({trace_id[:8]!r}) will not find it: {exc}")
    expansion = expand_trace(trace, registered=registered)
    return {"trace_id": trace_id, "cells": expansion.cells, "notes": expansion.notes + notes}


def fork_request(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``fork`` op: the source of a cell that forks the run at span ``span_id`` (a turn, model
    call or tool call): ``{"trace_id", "span_id", "source", "notes"}``. The cell holds the trace as
    the notebook saved it and names its model (kode_nb/debug/_fork_cell.py), so it runs as written
    after a restart too; the trace is also remembered by id."""
    from kode_nb.debug._fork_cell import fork_cell
    from kode_nb.traces import remember_trace
    from kode_nb.traces._known import known_model

    saved = data.get("trace")
    checked = _trace_json(data)
    span_id = data.get("span_id")
    if not isinstance(span_id, str) or not span_id:
        raise ConfigurationError(f"the request names no span to fork at (span_id), got {span_id!r}")
    trace = remember_trace(checked)
    span = next((s for s in trace.spans() if s.span_id == span_id), None)
    if span is None:
        raise ConfigurationError(f"the trace has no span {span_id!r} to fork at")
    if span.kind not in FORKABLE:
        raise ConfigurationError(
            f"a run forks at a turn, model call or tool call; {span.name!r} is a {span.kind} span"
        )
    model = known_model(trace.trace_id)
    cell = fork_cell(
        saved if isinstance(saved, Mapping) else checked,
        span_id,
        known_model=model,
        model_variable=_variable_holding(model),
    )
    return {
        "trace_id": cell.trace_id,
        "span_id": cell.span_id,
        "source": cell.source,
        "notes": cell.notes,
    }


def _variable_holding(value: Any) -> str | None:
    """The name of a notebook variable bound to ``value`` (the first defined), if any."""
    if value is None:
        return None
    from IPython import get_ipython

    shell = get_ipython()
    names = getattr(shell, "user_ns", None) or {}
    hidden = getattr(shell, "user_ns_hidden", None) or {}
    for name, bound in list(names.items()):
        if (
            bound is value
            and name.isidentifier()
            and not name.startswith("_")
            and name not in hidden
        ):
            return str(name)
    return None
