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

Reading is bounded while it reads, since a notebook anyone hands you can hold this form: the
table is measured before anything is built (each node once, memoised, without recursion: what
each array and object would take in memory), and a trace that would expand past
:data:`MIN_BUDGET` bytes or :data:`BUDGET_PER_BYTE` per character of its ``data`` (a recorded
trace takes 10 to 25), or holds a value nested deeper than :data:`MAX_VALUE_DEPTH`, a node that
contains itself, an index out of range, a ``q`` outside 0..1100 or ticks past 2**62, is refused
with a ``ValueError`` naming the span and the field. Spans nest to any depth.

:meth:`kode_nb.traces.Trace.from_dict` reads this form as well as the plain one; the kode_nb
JupyterLab extension (``labextension/src/core/compact.ts``) reads it lazily (a span's attributes
are decoded when it is drawn, selected or searched).
"""

from __future__ import annotations

import gc
import json
import math
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

MAX_VALUE_DEPTH = 200
"""How deeply a value of the table may nest (arrays and objects, one in another: 200 is
``[[...[]...]]`` with 200 ``[``). A recorded value is at most some 50 levels
(:func:`kode_nb._redact.redact` stops there)."""
MIN_BUDGET = 32_000_000
"""The memory, in bytes, any compact trace may expand to (as counted before it is built: each
array and object at about what CPython allocates for it, each span at :data:`SPAN_COST`)."""
BUDGET_PER_BYTE = 40
"""... and more for a longer one: this many bytes per character of its ``data``. A recorded
trace expands to some 10 to 25 per character (the writer shares equal values, and a span of
a few dozen characters costs :data:`SPAN_COST`); a table whose nodes refer to each other over
and over (a "bomb": 400 characters can stand for 16 million values) expands to far more, and
is refused before any of it is built."""
SPAN_COST = 1_200
"""The bytes one span counts for: its dict, its times and the :class:`~kode_nb.traces.Span`
made from it."""
_MAX_TICKS = 2**62
"""Ticks beyond this (the writer writes them below 2**53) are refused: no time is that far."""
_MAX_Q = 1100
"""The largest ``q``/``dq``: 2**-1074 is the smallest float."""


def _own(node: list[Any]) -> int:
    """The bytes CPython takes for the array or object of ``node`` itself (not what is in it),
    rounded up: a list comprehension of n items takes up to 88 + 10 n, a dict of n keys up to
    160 + 24 n (3.11)."""
    return 160 + 24 * len(node) if node[0] else 88 + 10 * len(node)


def _refuse(message: str) -> ValueError:
    return ValueError(f"compact trace: {message}")


class _Reader:
    """The value table, checked and measured before anything is built from it.

    :meth:`size` counts the bytes a reference expands to, each node once (memoised, without
    recursion), checking on the way that every index is in range, every node well formed, no
    node contains itself and none nests deeper than :data:`MAX_VALUE_DEPTH`; :meth:`value` then
    builds what was measured."""

    def __init__(self, entries: list[Any], budget: int) -> None:
        self.entries = entries
        self.cap = budget + 1
        self.sizes: dict[int, int] = {}
        self._height: dict[int, int] = {}
        self._keys: dict[int, list[str]] = {}
        self._presize()

    def _presize(self) -> None:
        """Measure, in one pass, every value whose references all point back (what the writer
        writes: a node after the values in it); the rest is left to :meth:`size`."""
        sizes, heights, cap = self.sizes, self._height, self.cap
        for i, entry in enumerate(self.entries):
            if type(entry) is not list:
                if type(entry) is not dict:
                    sizes[i], heights[i] = 0, 0
                continue
            head = entry[0] if entry else None
            under = entry[1:]
            if type(head) is not int or not 0 <= head <= i:
                continue
            if head:
                keys = self._keys.get(head - 1) or self._try_keys(head - 1)
                if keys is None or len(keys) != len(under):
                    continue
            if not under:
                sizes[i], heights[i] = _own(entry), 1
            elif set(map(type, under)) == {int} and min(under) >= 0 and max(under) < i:
                try:  # a KeyError: a value in it is not measured (the error is for size to say)
                    height = 1 + max(map(heights.__getitem__, under))
                    if height <= MAX_VALUE_DEPTH:
                        sizes[i] = min(cap, _own(entry) + sum(map(sizes.__getitem__, under)))
                        heights[i] = height
                except KeyError:
                    pass

    def _try_keys(self, ref: int) -> list[str] | None:
        try:
            return self.keys(ref, "")
        except ValueError:  # said by size, naming where, if the node is used
            return None

    def _ref(self, ref: Any, where: str) -> int:
        if type(ref) is not int or not 0 <= ref < len(self.entries):
            raise _refuse(f"{where}: {ref!r:.40} is not an index into its values")
        return ref

    def keys(self, ref: int, where: str) -> list[str]:
        keys = self._keys.get(ref)
        if keys is None:
            entry = self.entries[ref]
            if (
                not isinstance(entry, list)
                or not entry
                or entry[0] != 0
                or type(entry[0]) is not int
            ):
                raise _refuse(f"{where}: value {ref} is not a list of keys")
            keys = []
            for r in entry[1:]:
                key = self.entries[self._ref(r, f"{where}: the keys of value {ref}")]
                if type(key) is not str:
                    raise _refuse(f"{where}: value {ref} is not a list of keys")
                keys.append(key)
            self._keys[ref] = keys
        return keys

    def _node(self, ref: int, entry: list[Any], where: str) -> list[Any]:
        """The references under node ``ref``, its head and keys checked."""
        head = entry[0] if entry else None
        if type(head) is not int or head < 0:
            raise _refuse(f"{where}: value {ref} is not a node")
        if head:
            keys = self.keys(self._ref(head - 1, f"{where}: value {ref}"), where)
            if len(keys) != len(entry) - 1:
                raise _refuse(
                    f"{where}: value {ref} has {len(entry) - 1} values for {len(keys)} keys"
                )
        return entry[1:]

    def size(self, ref: Any, where: str) -> int:
        """The bytes ``ref`` expands to (:func:`_own` of each array and object in it; at most the
        budget + 1: past it, it stops counting); ValueError naming ``where`` for an index or
        node that is wrong. Each node is counted once (memoised), without recursion."""
        ref = self._ref(ref, where)
        sizes, heights, cap, entries = self.sizes, self._height, self.cap, self.entries
        todo: list[tuple[int, int, bool]] = [(ref, 1, False)]  # (ref, its level, leaving)
        on_path: set[int] = set()
        count = len(entries)
        while todo:
            r, level, leaving = todo.pop()
            if leaving:
                on_path.discard(r)
                under = entries[r][1:]
                sizes[r] = min(cap, _own(entries[r]) + sum(map(sizes.__getitem__, under)))
                heights[r] = 1 + max(map(heights.__getitem__, under))
                continue
            if r in sizes:
                continue
            entry = entries[r]
            if type(entry) is not list:
                if type(entry) is dict:
                    raise _refuse(f"{where}: value {r} is an object, not a node [k, ...]")
                sizes[r], heights[r] = 0, 0
                continue
            if r in on_path:
                raise _refuse(f"{where}: value {r} contains itself")
            if level > MAX_VALUE_DEPTH:
                raise self._too_deep(ref, where)
            children = self._node(r, entry, where)
            if not children:
                sizes[r], heights[r] = _own(entry), 1
                continue
            on_path.add(r)
            todo.append((r, level, True))
            for c in children:
                if type(c) is not int or not 0 <= c < count:
                    self._ref(c, f"{where}: value {r}")
                if c not in sizes:
                    todo.append((c, level + 1, False))
                elif level + heights[c] > MAX_VALUE_DEPTH:
                    raise self._too_deep(ref, where)
        return sizes[ref]

    @staticmethod
    def _too_deep(ref: int, where: str) -> ValueError:
        return _refuse(f"{where}: value {ref} is nested more than {MAX_VALUE_DEPTH} levels deep")

    def value(self, ref: int) -> Any:
        """The value ``ref`` stands for, built afresh (no two spans share a dict or list); only
        for a reference :meth:`size` has measured."""
        entry = self.entries[ref]
        if not isinstance(entry, list):
            return entry
        if entry[0] == 0:
            return [self.value(r) for r in entry[1:]]
        keys = self._keys[entry[0] - 1]
        return {k: self.value(r) for k, r in zip(keys, entry[1:], strict=True)}


def _ticks_code(code: Any, i: int, name: str) -> Any:
    """A time code as stored: ticks (an integer), JSON text, or null."""
    if code is None or type(code) is str:
        return code
    if type(code) is not int:
        raise _refuse(f"span {i}'s {name!r} is {code!r:.40}: not ticks, JSON text or null")
    if not -_MAX_TICKS < code < _MAX_TICKS:
        raise _refuse(f"span {i}'s {name!r} is {code!r:.24} ticks: out of range")
    return code


def _text_time(code: str, i: int, name: str) -> Any:
    try:
        return json.loads(code)
    except (ValueError, RecursionError):
        raise _refuse(f"span {i}'s {name!r} is {code!r:.40}: not JSON text") from None


def _scales(time: Any) -> tuple[float, float, float]:
    """``base``, ``2**-q`` and ``2**-dq`` of the ``time`` table, each checked."""
    if not isinstance(time, Mapping):
        raise _refuse("its 'time' is not an object {base, q, dq}")
    base = time.get("base")
    if type(base) is int and -_MAX_TICKS < base < _MAX_TICKS:
        base = float(base)
    if not isinstance(base, float) or not math.isfinite(base):
        raise _refuse(f"its 'time.base' is {base!r:.40}: not a finite number")
    scales = []
    for key in ("q", "dq"):
        q = time.get(key)
        if type(q) is not int or not 0 <= q <= _MAX_Q:
            raise _refuse(f"its 'time.{key}' is {q!r:.40}: not a whole number from 0 to {_MAX_Q}")
        scales.append(2.0**-q)
    return base, scales[0], scales[1]


def expand(data: Mapping[str, Any]) -> dict[str, Any]:
    """The ``Trace.to_dict()`` JSON of a compact trace; ``ValueError`` saying what is wrong for
    a form or version it does not read, tables that do not fit together, or tables that would
    expand to more than the budget (:data:`MIN_BUDGET`, :data:`BUDGET_PER_BYTE`: refused before
    any of it is built) or nest deeper than :data:`MAX_VALUE_DEPTH`."""
    with _no_gc():
        try:
            return _expand(data)
        except RecursionError:
            raise _refuse("a value is nested too deep to read") from None


_NAMES = ("depth", *_REF_COLUMNS, "start", "end", "duration")


def _expand(data: Mapping[str, Any]) -> dict[str, Any]:
    fmt = data.get("format")
    if fmt not in READABLE_FORMATS:
        newer = isinstance(fmt, str) and fmt.startswith("kode_nb.compact/")
        hint = " (a newer kode_nb wrote it: update kode_nb)" if newer else ""
        raise ValueError(
            f"not a compact trace this version reads: format is {fmt!r}{hint}; "
            f"it reads {', '.join(READABLE_FORMATS)}"
        )
    text = data.get("data")
    if not isinstance(text, str):
        raise _refuse(f"its 'data' is {type(text).__name__}, not the JSON text of its tables")
    try:
        tables = json.loads(text)
        entries, time, cols = tables["values"], tables["time"], tables["columns"]
        n = len(cols["depth"])
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise _refuse(f"its data is not readable ({exc!r:.200})") from None
    base, scale, dscale = _scales(time)
    if not isinstance(entries, list):
        raise _refuse("its 'values' is not a list")
    if not isinstance(cols, dict) or n == 0:
        raise _refuse("its columns are missing or of different lengths")
    for name in _NAMES:
        if not isinstance(cols.get(name), list) or len(cols[name]) != n:
            raise _refuse(f"its columns are missing or of different lengths ({name!r})")
    extra = cols.get("extra")
    if extra is not None and (not isinstance(extra, list) or len(extra) != n):
        raise _refuse("its extra column is of another length")
    budget = max(MIN_BUDGET, BUDGET_PER_BYTE * len(text))
    reader = _Reader(entries, budget)
    _measure(reader, cols, n, budget, text)
    return _build(data, reader, cols, n, base, scale, dscale)


def _measure(reader: _Reader, cols: dict[str, Any], n: int, budget: int, text: str) -> None:
    """Refuse, before building anything, tables that expand past ``budget``."""
    used = SPAN_COST * n
    known = reader.sizes
    for name in (*_REF_COLUMNS, "extra"):
        column = cols.get(name)
        if column is None:
            continue
        if set(map(type, column)) == {int}:
            try:  # every value measured already (the usual case): counted at C speed
                used += sum(map(known.__getitem__, column))
                if used <= budget:
                    continue
                used -= sum(map(known.__getitem__, column))
            except KeyError:
                pass
        for i, ref in enumerate(column):
            size = known.get(ref) if type(ref) is int else None
            if size is None:
                size = reader.size(ref, f"span {i}'s {name!r}")
            used += size
            if used > budget:
                raise _refuse(
                    f"it would take more than {budget / 1e6:,.0f} MB once expanded (counted "
                    f"up to span {i}'s {name!r}), some {budget // len(text):,} bytes per "
                    "character of its 'data' or more, where a recorded trace takes 10 to 25: "
                    "its values refer to each other over and over, or its spans are too many "
                    "for their size; refused before any of it was built"
                )


def _build(
    data: Mapping[str, Any],
    reader: _Reader,
    cols: dict[str, Any],
    n: int,
    base: float,
    scale: float,
    dscale: float,
) -> dict[str, Any]:
    value = reader.value
    extra = cols.get("extra")
    stack: list[dict[str, Any]] = []
    root: dict[str, Any] | None = None
    k_start = 0
    for i in range(n):
        depth = cols["depth"][i]
        if type(depth) is not int or not 0 <= depth <= len(stack) or (depth == 0) != (i == 0):
            raise _refuse(f"span {i} has depth {depth!r:.40} after {len(stack) - 1}")
        code = _ticks_code(cols["start"][i], i, "start")
        end = _ticks_code(cols["end"][i], i, "end")
        duration = _ticks_code(cols["duration"][i], i, "duration")
        if type(end) is int and type(code) is not int:
            raise _refuse(f"span {i} has an end in ticks but no start in ticks")
        if type(code) is int:
            k_start += code
            if not -_MAX_TICKS < k_start < _MAX_TICKS:
                raise _refuse(f"span {i}'s 'start' adds up to {k_start!r:.24} ticks: out of range")
            started: Any = base + k_start * scale
        else:
            started = None if code is None else _text_time(code, i, "start")
        if type(end) is int:
            ended: Any = base + (k_start + end) * scale
        else:
            ended = None if end is None else _text_time(end, i, "end")
        if type(duration) is int:
            took: Any = duration * dscale
        else:
            took = None if duration is None else _text_time(duration, i, "duration")
        span: dict[str, Any] = {
            "kind": value(cols["kind"][i]),
            "name": value(cols["name"][i]),
            "span_id": value(cols["span_id"][i]),
            "started_at": started,
            "ended_at": ended,
            "duration": took,
            "status": value(cols["status"][i]),
            "error": value(cols["error"][i]),
            "attributes": value(cols["attributes"][i]),
            "events": value(cols["events"][i]),
            "children": [],
        }
        if extra is not None:
            more = value(extra[i])
            if not isinstance(more, dict):
                raise _refuse(f"span {i}'s extra keys are not an object")
            span.update(more)
        del stack[depth:]
        if stack:
            stack[-1]["children"].append(span)
        else:
            root = span
        stack.append(span)
    return {"schema": data.get("schema"), "trace_id": data.get("trace_id"), "root": root}
