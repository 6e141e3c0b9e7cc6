"""The traces this process knows by id: every finished run's, and any a front end handed over.

A trace viewer in the browser names a run by its ``trace_id`` (its record holds the whole
``kode_nb.trace`` JSON). Cells inserted from the viewer ("Expand into cells", "Fork from
here") refer to that id; :func:`known_trace` resolves it here. The table is bounded (the newest
:data:`LIMIT` traces, least recently used dropped first) so a long session does not grow without
end; a trace that fell out is handed over again by the front end, or loaded from its JSON.
"""

from __future__ import annotations

import marshal
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from kode_nb.errors import ConfigurationError
from kode_nb.traces._trace import Trace

__all__ = [
    "LIMIT",
    "MAX_BYTES",
    "known_executor",
    "known_model",
    "known_trace",
    "remember_trace",
]

LIMIT = 256
"""How many traces are kept (least recently used dropped first)."""
MAX_BYTES = 200_000_000
"""About how many bytes of trace data are kept (the strings and numbers of their spans)."""
HOT = 16
"""How many of the newest (or most recently asked for) traces are kept as the objects
themselves; the rest are kept frozen (see :func:`remember_trace`)."""

_TRACES: OrderedDict[str, Trace | bytes] = OrderedDict()
"""Every kept trace by id, least recently used first: frozen (its JSON form as :mod:`marshal`
bytes), or the :class:`Trace` itself when marshal refused its data."""
_HOT: OrderedDict[str, Trace] = OrderedDict()
"""The objects of the :data:`HOT` newest kept traces (each also in :data:`_TRACES`)."""
_SIZES: dict[str, int] = {}
_total = 0
"""``sum(_SIZES.values())``, kept as they change."""
_MODELS: dict[str, Any] = {}
_EXECUTORS: dict[str, Any] = {}
_LOCK = threading.Lock()


def remember_trace(
    trace: Trace | Mapping[str, Any], *, model: Any = None, executor: Any = None
) -> Trace:
    """Keep ``trace`` (a :class:`Trace` or its JSON dict) under its ``trace_id``; returns it.

    ``model``: the model object the run called, and ``executor``: the executor that ran its
    tool calls (its registry, policy, approver): what :func:`kode_nb.fork` continues with when
    given no ``model=`` / ``executor=``; each kept as long as the trace is (given again, the
    newer wins; not given, the kept one stays). JSON handed over for a trace this process
    already keeps (a front end's copy of a run of this kernel) leaves the kept one.

    A trace is kept frozen: its JSON form as it is now, written by :mod:`marshal` (one bytes
    object, sized exactly). The :data:`HOT` newest are also kept as the objects themselves, so
    :func:`known_trace` gives a recent run's own ``result.trace``; an older one is read back
    from its frozen form when asked for. Thousands of spans' objects held for the table would
    otherwise stay in memory until their run falls out: freeing one then, out of the CPU's
    caches, cost an agent run with one tool call 6 % of its time (``benchmarks/compare.py``).
    """
    global _total
    if not isinstance(trace, Trace):
        with _LOCK:
            key = str(trace.get("trace_id", "")) if isinstance(trace, Mapping) else ""
            if key in _TRACES:
                _TRACES.move_to_end(key)
                return _thaw(key)
        try:
            trace = Trace.from_dict(trace)
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigurationError(f"not a usable kode_nb trace: {exc}") from None
    frozen: Trace | bytes
    try:
        frozen = marshal.dumps(trace.to_dict())
        size = len(frozen)
    except ValueError:  # data marshal cannot write (an object, nesting deeper than it goes)
        frozen, size = trace, approximate_size(trace)
    key = trace.trace_id
    with _LOCK:
        _TRACES[key] = frozen
        _TRACES.move_to_end(key)
        _keep_hot(key, trace)
        _total += size - _SIZES.get(key, 0)
        _SIZES[key] = size
        if model is not None:
            _MODELS[key] = model
        if executor is not None:
            _EXECUTORS[key] = executor
        while len(_TRACES) > 1 and (len(_TRACES) > LIMIT or _total > MAX_BYTES):
            dropped = _TRACES.popitem(last=False)[0]
            _HOT.pop(dropped, None)
            _MODELS.pop(dropped, None)
            _EXECUTORS.pop(dropped, None)
            _total -= _SIZES.pop(dropped, 0)
    return trace


def _keep_hot(key: str, trace: Trace) -> None:
    """(Under the lock.) ``trace`` is the newest of the objects kept."""
    _HOT[key] = trace
    _HOT.move_to_end(key)
    while len(_HOT) > HOT:
        _HOT.popitem(last=False)


def _thaw(key: str) -> Trace:
    """(Under the lock.) The kept trace ``key``: its object, or one read from its frozen form."""
    trace = _HOT.get(key)
    if trace is not None:
        _HOT.move_to_end(key)
        return trace
    frozen = _TRACES[key]
    if isinstance(frozen, Trace):
        trace = frozen
    else:
        try:
            trace = Trace.from_dict(marshal.loads(frozen))
        except (EOFError, KeyError, TypeError, ValueError) as exc:  # its own JSON: not expected
            raise ConfigurationError(f"the kept trace {key!r} could not be read: {exc}") from None
    _keep_hot(key, trace)
    return trace


def approximate_size(trace: Trace) -> int:
    """About how many bytes ``trace``'s data takes: 200 a span, plus its spans' attributes and
    events as one :mod:`marshal` text writes them (data held twice, such as the messages each
    model call resends, counts once); when marshal refuses the data (an object, nesting deeper
    than it goes), each span's is written, or walked, apart. Every finished run is sized, and
    marshal does it in C: a 6-span run's trace in ~9 µs, where a walk took ~58 µs. (A trace
    that :func:`remember_trace` keeps is sized by its frozen form; this sizes one kept as is.)"""
    spans = list(trace.root.walk())
    total = sum(200 + len(str(span.name)) for span in spans)
    try:
        return total + len(marshal.dumps([(span.attributes, span.events) for span in spans]))
    except ValueError:
        pass
    for span in spans:
        for data in (span.attributes, span.events):
            try:
                total += len(marshal.dumps(data))
            except ValueError:
                total += _walked_size(data)
    return total


def _walked_size(data: Any) -> int:
    """About how many bytes ``data`` takes as JSON: its strings' lengths, 8 per other value
    (walked without recursion; no serialization)."""
    total = 0
    stack: list[Any] = [data]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            total += len(node) + 2
        elif isinstance(node, Mapping):
            total += 2 + 4 * len(node)
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            total += 2 + len(node)
            stack.extend(node)
        else:
            total += 8
    return total


def known_model(trace_id: str) -> Any:
    """The model object the run of trace ``trace_id`` called, if this process still has it
    (``None`` otherwise: a trace loaded from JSON, or recorded in another kernel)."""
    with _LOCK:
        return _MODELS.get(trace_id)


def known_executor(trace_id: str) -> Any:
    """The executor that ran the tool calls of trace ``trace_id``'s run, if this process still
    has it (``None`` otherwise: a trace loaded from JSON, recorded in another kernel, or
    dropped from the table)."""
    with _LOCK:
        return _EXECUTORS.get(trace_id)


def known_trace(trace_id: str) -> Trace:
    """The trace kept under ``trace_id`` (a unique prefix of at least 8 characters also works)."""
    with _LOCK:
        key: str | None = trace_id if trace_id in _TRACES else None
        if key is None and len(trace_id) >= 8:
            hits = [k for k in _TRACES if k.startswith(trace_id)]
            key = hits[0] if len(hits) == 1 else None
        if key is not None:
            _TRACES.move_to_end(key)
            return _thaw(key)
    raise ConfigurationError(
        f"no trace {trace_id!r} in this kernel: it was recorded in another kernel or "
        f"dropped (the newest {LIMIT}, about {MAX_BYTES // 1_000_000} MB, are kept); load it "
        "from its JSON instead (kode_nb.traces.Trace.from_dict, or pass the saved JSON itself)"
    )
