"""The traces this process knows by id: every finished run's, and any a front end handed over.

A trace viewer in the browser names a run by its ``trace_id`` (its record holds the whole
``kode_nb.trace/v2`` JSON). Cells inserted from the viewer ("Expand into cells", "Fork from
here") refer to that id; :func:`known_trace` resolves it here. The table is bounded (the newest
:data:`LIMIT` traces, least recently used dropped first) so a long session does not grow without
end; a trace that fell out is handed over again by the front end, or loaded from its JSON.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.traces._trace import Trace

__all__ = ["LIMIT", "known_model", "known_trace", "remember_trace"]

LIMIT = 256
"""How many traces are kept (least recently used dropped first)."""

_TRACES: OrderedDict[str, Trace] = OrderedDict()
_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


def remember_trace(trace: Trace | Mapping[str, Any], *, model: Any = None) -> Trace:
    """Keep ``trace`` (a :class:`Trace` or its JSON dict) under its ``trace_id``; returns it.

    ``model``: the model object the run called (what :func:`kode_nb.fork` continues with when
    given no ``model=``); kept as long as the trace is. JSON handed over for a trace this
    process already keeps (a front end's copy of a run of this kernel) leaves the kept one."""
    if not isinstance(trace, Trace):
        with _LOCK:
            kept = (
                _TRACES.get(str(trace.get("trace_id", ""))) if isinstance(trace, Mapping) else None
            )
            if kept is not None:
                _TRACES.move_to_end(kept.trace_id)
                return kept
        try:
            trace = Trace.from_dict(trace)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"not a usable kode_nb trace: {exc}") from None
    with _LOCK:
        _TRACES[trace.trace_id] = trace
        _TRACES.move_to_end(trace.trace_id)
        if model is not None:
            _MODELS[trace.trace_id] = model
        while len(_TRACES) > LIMIT:
            _MODELS.pop(_TRACES.popitem(last=False)[0], None)
    return trace


def known_model(trace_id: str) -> Any:
    """The model object the run of trace ``trace_id`` called, if this process still has it
    (``None`` otherwise: a trace loaded from JSON, or recorded in another kernel)."""
    with _LOCK:
        return _MODELS.get(trace_id)


def known_trace(trace_id: str) -> Trace:
    """The trace kept under ``trace_id`` (a unique prefix of at least 8 characters also works)."""
    with _LOCK:
        trace = _TRACES.get(trace_id)
        if trace is None and len(trace_id) >= 8:
            hits = [t for key, t in _TRACES.items() if key.startswith(trace_id)]
            trace = hits[0] if len(hits) == 1 else None
        if trace is not None:
            _TRACES.move_to_end(trace.trace_id)
            return trace
    raise ConfigurationError(
        f"no trace {trace_id!r} in this kernel: it was recorded in another kernel or "
        f"dropped (the newest {LIMIT} are kept); load it from its JSON instead "
        "(kode_nb.traces.Trace.from_dict, or pass the saved JSON itself)"
    )
