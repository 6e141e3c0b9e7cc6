"""Hostile saved traces, built small: what a notebook someone hands you could hold. Used by
tests/test_trace_hostile.py and benchmarks/hostile_inputs.py.

* :func:`bomb` — a compact trace whose value table is a node of ``fan`` references to a node of
  ``fan`` references ... ``depth`` deep: a few hundred characters standing for ``fan**depth``
  values (8**8 is 16.7 million).
* :func:`padded` — a compact trace with an unused string added to its table, so that its ``data``
  is ``chars`` long (a long input earns a larger budget; the bomb must still be refused).
* :func:`nested_spans` — a plain ``kode_nb.trace/v3`` trace of ``n`` spans, each the only child
  of the one before.
"""

from __future__ import annotations

import json
from typing import Any

SCHEMA = "kode_nb.trace/v3"
FORMAT = "kode_nb.compact/1"
REF_COLUMNS = ("kind", "name", "span_id", "status", "error", "attributes", "events")

# a table's first entries, shared by every case: 0 "x", 1 "a", 2 the keys ["a"], 3 [] (also
# the keys of an empty object), 4 {}
BASE_VALUES: list[Any] = ["x", "a", [0, 1], [0], [4]]
EMPTY_LIST, EMPTY_OBJECT, KEYS_A = 3, 4, 2


def compact_trace(
    values: list[Any],
    spans: int = 1,
    *,
    columns: dict[str, Any] | None = None,
    time: Any = None,
) -> dict[str, Any]:
    """A compact trace of ``spans`` spans (the root and its children), every reference column 0
    ("x"), attributes ``{}``, events ``[]`` and no times, but for ``columns``."""
    cols: dict[str, Any] = {"depth": [0] + [1] * (spans - 1)}
    for name in REF_COLUMNS:
        cols[name] = [0] * spans
    cols["attributes"] = [EMPTY_OBJECT] * spans
    cols["events"] = [EMPTY_LIST] * spans
    for name in ("start", "end", "duration"):
        cols[name] = [None] * spans
    cols.update(columns or {})
    tables = {
        "values": values,
        "time": {"base": 0.0, "q": 0, "dq": 0} if time is None else time,
        "columns": cols,
    }
    return {
        "schema": SCHEMA,
        "format": FORMAT,
        "trace_id": "0" * 32,
        "spans": spans,
        "data": json.dumps(tables, separators=(",", ":")),
    }


def bomb(depth: int, fan: int = 8, *, leaf: int = 0) -> dict[str, Any]:
    """The root span's attributes ``{"a": N}``, N a node of ``fan`` references to a node of
    ``fan`` references ... ``depth`` levels over the value ``leaf``."""
    values = list(BASE_VALUES)
    below = leaf
    for _ in range(depth):
        values.append([0] + [below] * fan)
        below = len(values) - 1
    values.append([1 + KEYS_A, below])
    return compact_trace(values, columns={"attributes": [len(values) - 1]})


def padded(saved: dict[str, Any], chars: int) -> dict[str, Any]:
    """``saved`` with an unused string in its table, so its ``data`` is about ``chars`` long."""
    tables = json.loads(saved["data"])
    tables["values"].append("p" * max(0, chars - len(saved["data"]) - 8))
    return {**saved, "data": json.dumps(tables, separators=(",", ":"))}


def nested_spans(n: int) -> dict[str, Any]:
    """A plain v3 trace: ``n`` spans, each the only child of the one before."""

    def span(i: int) -> dict[str, Any]:
        return {
            "kind": "tool_call" if i % 2 else "run",  # a subagent under a tool call ...
            "name": f"s{i}",
            "span_id": f"{i:016x}",
            "started_at": 1.0 + i,
            "ended_at": 2.0 + i,
            "duration": 1.0,
            "status": "ok",
            "error": None,
            "attributes": {},
            "events": [],
            "children": [],
        }

    root = node = span(0)
    for i in range(1, n):
        child = span(i)
        node["children"].append(child)
        node = child
    return {"schema": SCHEMA, "trace_id": "0" * 32, "root": root}
