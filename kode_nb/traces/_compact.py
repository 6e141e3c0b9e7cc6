"""The compact saved form of a trace: what a notebook stores for ``Trace.to_dict()``.

A trace of 100,000 spans is 61 MB as the ``kode_nb.trace`` JSON in a ``.ipynb`` (nbformat
writes it one value per line, indented); this form is the same data in a few MB, read back
exactly (:func:`expand` of :func:`compact` of a JSON value ``d`` equals ``d``)::

    {"schema": "kode_nb.trace/v3",     # the trace's own schema (Trace.schema), unchanged
     "format": "kode_nb.compact/1",    # this form and its version
     "trace_id": "<32 hex>",
     "spans": 100000,                  # how many spans
     "data": "<JSON text>"}            # one string: the tables below

    data = {"values": [V, ...],        # every distinct value once (strings, numbers, ...)
            "time": {"base": float, "q": int, "dq": int},
            "columns": {"depth": [...], "kind": [...], ...}}   # one entry per span

The tables sit in one JSON string, so nbformat writes them on one line and JupyterLab, the
server and nbformat hold one string instead of millions of objects.

*values*: an entry is a string, a number, ``true``, ``false`` or ``null`` (that value), or a
node: ``[0, r, ...]`` is an array of the values ``r, ...``, and ``[1 + k, r, ...]`` an object
whose keys are the strings of the array node ``k``, in order, and whose values are ``r, ...``
(every ``r`` and ``k`` is an index into ``values``). Equal values are stored once, so a
message list or a tool spec repeated in every model call costs its index after the first.

*columns*, one entry per span in depth-first order (the root first): ``depth`` (0 for the
root; a span's parent is the nearest span before it one level up), and the indexes into
``values`` of its ``kind``, ``name``, ``span_id``, ``status``, ``error``, ``attributes``,
``events`` and, when any span has keys beyond these (``dropped_events``, a future key),
``extra`` (an object of those keys; ``{}`` for none). ``start``, ``end`` and ``duration`` are
the times: an integer is a count of ticks (below), a string is the value's own JSON text, and
``null`` is null. A time is ``base + k * 2**-q``: ``start`` holds ``k`` minus the previous
integer ``start``'s ``k`` (0 for the first), ``end`` holds ``k`` minus the span's own start
``k``; ``duration`` is ``k * 2**-dq``. Unix times and monotonic durations are multiples of
their float spacing, so the ticks are exact integers below 2**53 and decode to the very same
floats (in Python and in JavaScript alike); a value that is not (an ``int``, a tiny or odd
float) is written as its JSON text.

:meth:`kode_nb.traces.Trace.from_dict` reads this form as well as the plain one; the kode_nb
JupyterLab extension (``labextension/src/core/compact.ts``) reads it lazily (a span's attributes
are decoded when it is drawn, selected or searched).
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = ["FORMAT", "compact", "expand", "is_compact"]

FORMAT = "kode_nb.compact/1"
"""The ``format`` key of the compact form this version writes."""
READABLE_FORMATS = (FORMAT,)
"""The ``format`` values :func:`expand` reads."""

_SPAN_KEYS = (
    "kind",
    "name",
    "span_id",
    "started_at",
    "ended_at",
    "duration",
    "status",
    "error",
    "attributes",
    "events",
    "children",
)
_REF_COLUMNS = ("kind", "name", "span_id", "status", "error", "attributes", "events")
_LIMIT = 2**53
"""Ticks at or above this are not exact in a JavaScript number: written as JSON text."""


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector paused: building a 100,000-span trace's millions of dicts
    and lists (none in a cycle) set it off again and again. Measured on 100,000 spans (2
    cores, Python 3.11): reading 3.7 s → 1.7 s, writing 5.1 s → 1.8 s."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def is_compact(data: Any) -> bool:
    """Whether ``data`` is a trace in a compact form (it has a ``format`` key)."""
    return isinstance(data, Mapping) and "format" in data


# --------------------------------------------------------------------------- writing


class _Values:
    """The value table: each distinct JSON value once (by type and content)."""

    def __init__(self) -> None:
        self.entries: list[Any] = []
        self._index: dict[Any, int] = {}

    def _add(self, key: Any, entry: Any) -> int:
        ref = self._index.get(key)
        if ref is None:
            ref = self._index[key] = len(self.entries)
            self.entries.append(entry)
        return ref

    def ref(self, value: Any) -> int:
        """The index of ``value`` (added when new). A string is its own key; every other key
        is a tuple, so ``1``, ``1.0``, ``True`` and ``"1"`` stay apart."""
        if type(value) is str:
            ref = self._index.get(value)
            if ref is None:
                ref = self._index[value] = len(self.entries)
                self.entries.append(value)
            return ref
        if isinstance(value, Mapping):
            keys = tuple(value)
            shape = self._index.get(("k", keys))
            if shape is None:
                if not all(type(k) is str for k in keys):
                    raise TypeError(f"a trace object key is not a string: {keys!r:.200}")
                shape = self._index[("k", keys)] = self.ref(keys)
            refs = tuple(map(self.ref, value.values()))
            return self._add(("o", shape, refs), [1 + shape, *refs])
        if isinstance(value, list | tuple):
            refs = tuple(map(self.ref, value))
            return self._add(("a", refs), [0, *refs])
        if isinstance(value, str):  # a str subclass (a StrEnum member): its text, as json writes
            return self.ref(str.__str__(value))
        if value is None or isinstance(value, bool):
            return self._add(("b", value), value)
        if isinstance(value, int):
            return self._add(("i", value), value)
        if isinstance(value, float):
            return self._add(("f", value.hex()), value)
        raise TypeError(f"not a JSON value in a trace: {type(value).__name__}")


def _bits(value: float) -> int:
    """The fractional binary digits ``value`` needs: it is ``n / 2**bits`` for an integer n."""
    return _ratio(value)[1].bit_length() - 1


def _ratio(value: float) -> tuple[int, int]:
    return value.as_integer_ratio()


def _ticks(value: Any, base: tuple[int, int], q: int) -> int | None:
    """``k`` with ``value == base + k * 2**-q`` exactly, or None."""
    if type(value) is not float or value - value != 0 or (value == 0 and str(value)[0] == "-"):
        return None  # not a float, not finite, or -0.0 (its sign is lost in ticks)
    n, d = _ratio(value)
    if d > 1 << q:
        return None
    k = (n * ((1 << q) // d)) - base[0] * ((1 << q) // base[1])
    return k if -_LIMIT < k < _LIMIT else None


def _raw(value: Any) -> str:
    """The JSON text of a time that is not written in ticks."""
    if type(value) is float and value - value == 0:  # finite: its repr is its JSON
        return repr(value)
    return json.dumps(value, ensure_ascii=False)


def _shorter(code: int, value: Any) -> int | str:
    raw = _raw(value)
    return code if len(str(code)) <= len(raw) + 2 else raw


def _mode_bits(values: list[Any]) -> int:
    counts = Counter(_bits(v) for v in values if type(v) is float and v - v == 0)
    return max(counts, key=lambda b: (counts[b], b)) if counts else 0


def _walk(root: Mapping[str, Any]) -> Iterator[tuple[Mapping[str, Any], int]]:
    """Spans depth first with their depth, iteratively (a deep tree cannot overflow)."""
    todo: list[tuple[Mapping[str, Any], int]] = [(root, 0)]
    while todo:
        span, depth = todo.pop()
        if not isinstance(span, Mapping):
            raise TypeError(f"a trace span is not an object: {type(span).__name__}")
        yield span, depth
        children = span.get("children") or []
        if not isinstance(children, list):
            raise TypeError("a trace span's children are not a list")
        todo.extend((c, depth + 1) for c in reversed(children))


def compact(trace: Mapping[str, Any]) -> dict[str, Any]:
    """The compact form of ``trace``, a ``Trace.to_dict()`` made plain JSON (string keys; a
    tuple is written as a list, a str or int subclass as its value). A span key left out is
    written as null (``{}`` for attributes, ``[]`` for events); a value that is not JSON raises
    ``TypeError``."""
    with _no_gc():
        return _compact(trace)


def _compact(trace: Mapping[str, Any]) -> dict[str, Any]:
    spans = list(_walk(trace["root"]))
    values = _Values()
    cols: dict[str, list[Any]] = {name: [] for name in ("depth", *_REF_COLUMNS)}
    extras: list[int] = []
    any_extra = False
    empty = values.ref({})
    for span, depth in spans:
        cols["depth"].append(depth)
        for name in _REF_COLUMNS:
            default: Any = {} if name == "attributes" else [] if name == "events" else None
            cols[name].append(values.ref(span.get(name, default)))
        extra = {k: v for k, v in span.items() if k not in _SPAN_KEYS}
        any_extra = any_extra or bool(extra)
        extras.append(values.ref(extra) if extra else empty)
    if any_extra:
        cols["extra"] = extras
    starts = [s.get("started_at") for s, _ in spans]
    ends = [s.get("ended_at") for s, _ in spans]
    durations = [s.get("duration") for s, _ in spans]
    q = _mode_bits(starts + ends)
    base = next(
        (t for t in starts if type(t) is float and _ticks(t, _ratio(t), q) is not None), 0.0
    )
    b = _ratio(base)
    col_start: list[Any] = []
    col_end: list[Any] = []
    previous = 0
    for start, end in zip(starts, ends, strict=True):
        k = _ticks(start, b, q)
        if k is None:
            col_start.append(None if start is None else _raw(start))
        else:
            code = _shorter(k - previous, start)
            col_start.append(code)
            if isinstance(code, int):
                previous = k
        k_end = _ticks(end, b, q)
        own = k if isinstance(col_start[-1], int) else None
        if own is not None and k_end is not None:
            col_end.append(_shorter(k_end - own, end))
        else:
            col_end.append(None if end is None else _raw(end))
    dq = _mode_bits(durations)
    col_duration: list[Any] = []
    for duration in durations:
        k = _ticks(duration, (0, 1), dq)
        if k is None:
            col_duration.append(None if duration is None else _raw(duration))
        else:
            col_duration.append(_shorter(k, duration))
    cols.update(start=col_start, end=col_end, duration=col_duration)
    tables = {"values": values.entries, "time": {"base": base, "q": q, "dq": dq}, "columns": cols}
    return {
        "schema": trace.get("schema"),
        "format": FORMAT,
        "trace_id": trace.get("trace_id"),
        "spans": len(spans),
        "data": json.dumps(tables, ensure_ascii=False, separators=(",", ":")),
    }


# --------------------------------------------------------------------------- reading


class _Reader:
    def __init__(self, entries: list[Any]) -> None:
        self.entries = entries
        self._keys: dict[int, list[str]] = {}

    def keys(self, ref: int) -> list[str]:
        keys = self._keys.get(ref)
        if keys is None:
            keys = self.value(ref)
            if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                raise ValueError(f"compact trace: value {ref} is not a list of keys")
            self._keys[ref] = keys
        return keys

    def value(self, ref: Any) -> Any:
        """The value ``ref`` stands for, built afresh (no two spans share a dict or list)."""
        if type(ref) is not int or not 0 <= ref < len(self.entries):
            raise ValueError(f"compact trace: {ref!r} is not an index into its values")
        entry = self.entries[ref]
        if not isinstance(entry, list):
            return entry
        if not entry or type(entry[0]) is not int or entry[0] < 0:
            raise ValueError(f"compact trace: value {ref} is not a node")
        if entry[0] == 0:
            return [self.value(r) for r in entry[1:]]
        keys = self.keys(entry[0] - 1)
        if len(keys) != len(entry) - 1:
            raise ValueError(
                f"compact trace: value {ref} has {len(entry) - 1} values for {len(keys)} keys"
            )
        return {k: self.value(r) for k, r in zip(keys, entry[1:], strict=True)}


def _time(code: Any, base: float, scale: float, k: int) -> Any:
    if code is None:
        return None
    if isinstance(code, str):
        return json.loads(code)
    return base + k * scale


def _duration(code: Any, scale: float) -> Any:
    return code * scale if type(code) is int else _time(code, 0.0, scale, 0)


def expand(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Trace.to_dict()`` JSON of a compact trace; ``ValueError`` saying what is wrong for
    a form or version it does not read, or tables that do not fit together."""
    with _no_gc():
        try:
            return _expand(data)
        except RecursionError:
            raise ValueError("compact trace: a value is nested too deep to read") from None


def _expand(data: Mapping[str, Any]) -> dict[str, Any]:
    fmt = data.get("format")
    if fmt not in READABLE_FORMATS:
        newer = isinstance(fmt, str) and fmt.startswith("kode_nb.compact/")
        hint = " (a newer kode_nb wrote it: update kode_nb)" if newer else ""
        raise ValueError(
            f"not a compact trace this version reads: format is {fmt!r}{hint}; "
            f"it reads {', '.join(READABLE_FORMATS)}"
        )
    try:
        tables = json.loads(data["data"])
        entries, time, cols = tables["values"], tables["time"], tables["columns"]
        n = len(cols["depth"])
        base, scale, dscale = float(time["base"]), 2.0 ** -int(time["q"]), 2.0 ** -int(time["dq"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"compact trace: its data is not readable ({exc!r})") from None
    names = ("depth", *_REF_COLUMNS, "start", "end", "duration")
    if any(len(cols.get(c) or ()) != n for c in names) or n == 0:
        raise ValueError("compact trace: its columns are missing or of different lengths")
    extra = cols.get("extra")
    if extra is not None and len(extra) != n:
        raise ValueError("compact trace: its extra column is of another length")
    reader = _Reader(entries)
    value = reader.value
    stack: list[dict[str, Any]] = []
    root: dict[str, Any] | None = None
    k_start = 0
    for i in range(n):
        depth = cols["depth"][i]
        if type(depth) is not int or not 0 <= depth <= len(stack) or (depth == 0) != (i == 0):
            raise ValueError(f"compact trace: span {i} has depth {depth!r} after {len(stack) - 1}")
        code = cols["start"][i]
        if type(code) is int:
            k_start += code
        started = _time(code, base, scale, k_start)
        end = cols["end"][i]
        span: dict[str, Any] = {
            "kind": value(cols["kind"][i]),
            "name": value(cols["name"][i]),
            "span_id": value(cols["span_id"][i]),
            "started_at": started,
            "ended_at": _time(end, base, scale, k_start + end if type(end) is int else 0),
            "duration": _duration(cols["duration"][i], dscale),
            "status": value(cols["status"][i]),
            "error": value(cols["error"][i]),
            "attributes": value(cols["attributes"][i]),
            "events": value(cols["events"][i]),
            "children": [],
        }
        if type(end) is int and type(code) is not int:
            raise ValueError(f"compact trace: span {i} has an end in ticks but no start in ticks")
        if extra is not None:
            more = value(extra[i])
            if not isinstance(more, dict):
                raise ValueError(f"compact trace: span {i}'s extra keys are not an object")
            span.update(more)
        del stack[depth:]
        if stack:
            stack[-1]["children"].append(span)
        else:
            root = span
        stack.append(span)
    return {"schema": data.get("schema"), "trace_id": data.get("trace_id"), "root": root}
