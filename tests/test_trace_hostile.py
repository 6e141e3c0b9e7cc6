"""Saved traces built to hurt (kode_nb/traces/_compact.py, _trace.py, _requests.py): the reader
counts what a compact table expands to, each node once, and refuses past its budget before it
builds anything; a refusal is a ValueError naming the field; times, indexes and nesting that no
writer writes are refused, not overflowed; spans nest to any depth.

Speed is the benchmark's job (benchmarks/hostile_inputs.py); here a refusal is proved by what
was allocated (tracemalloc's peak, with a generous bound) and by what was built (a reader that
counts)."""

from __future__ import annotations

import json
import math
import tracemalloc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kode_nb.errors import ConfigurationError
from kode_nb.traces import Trace, _compact
from kode_nb.traces._compact import MAX_VALUE_DEPTH, compact, expand
from kode_nb.traces._requests import RequestChainError, rebuild_request
from tests.hostile_traces import (
    BASE_VALUES,
    KEYS_A,
    bomb,
    compact_trace,
    nested_spans,
    padded,
)

MB = 1_000_000


@contextmanager
def peak_below(limit: int) -> Iterator[None]:
    """Fail when the block allocates more than ``limit`` bytes at its peak."""
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < limit, f"peak {peak / MB:.1f} MB"


def _refused(saved: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        expand(saved)
    with pytest.raises(ValueError, match=match):
        Trace.from_dict(saved)


# --------------------------------------------------------------------------- bombs


@pytest.mark.parametrize(("depth", "fan"), [(8, 8), (9, 8), (40, 2), (3, 400), (200, 8)])
def test_a_bomb_is_refused_before_it_is_built(depth: int, fan: int) -> None:
    saved = bomb(depth, fan)
    assert len(saved["data"]) < 8_000  # standing for fan**depth values
    with peak_below(5 * MB):
        _refused(saved, "MB once expanded|nested more than")


def test_a_bomb_padded_to_a_megabyte_is_refused_too() -> None:
    saved = padded(bomb(9), MB)
    with peak_below(8 * MB):  # the text and its parse; nothing of the expansion
        _refused(saved, r"more than 40 MB once expanded \(counted up to span 0's 'attributes'\)")


def _two_levels(k: int, m: int) -> dict[str, Any]:
    """The root's attributes ``{"a": B}``: B holds ``m`` references to A, A ``k`` to "x"."""
    values = [*BASE_VALUES, [0] + [0] * k]
    values.append([0] + [len(values) - 1] * m)
    values.append([1 + KEYS_A, len(values) - 1])
    return compact_trace(values, columns={"attributes": [len(values) - 1]})


def test_the_budget_is_counted_exactly_what_fits_is_built_one_more_is_refused() -> None:
    k, own = 1_000, _compact._own
    fixed = _compact.SPAN_COST + own([1 + KEYS_A, 0])  # the span, the attributes object

    def cost(m: int) -> int:
        return fixed + own([0] * (m + 1)) + m * own([0] * (k + 1))

    m = (_compact.MIN_BUDGET - fixed) // (own([0] * (k + 1)) + 10)
    while cost(m + 1) <= _compact.MIN_BUDGET:
        m += 1
    assert cost(m) <= _compact.MIN_BUDGET < cost(m + 1)
    assert len(_two_levels(k, m + 1)["data"]) * _compact.BUDGET_PER_BYTE < _compact.MIN_BUDGET
    built = expand(_two_levels(k, m))["root"]["attributes"]["a"]
    assert (len(built), len(built[-1]), built[-1][-1]) == (m, k, "x")
    _refused(_two_levels(k, m + 1), "more than 32 MB once expanded")
    assert Trace.from_dict(bomb(4, 8)).root.attributes["a"][7][7][7][7] == "x"


def test_the_comm_refuses_a_bomb_as_a_configuration_error() -> None:
    from kode_nb.ui.trace_ops import expand_request, fork_request

    with peak_below(5 * MB):
        with pytest.raises(ConfigurationError, match=r"not a usable kode_nb trace: .* MB once"):
            expand_request({"trace": bomb(8)}, registered=set())
        with pytest.raises(ConfigurationError, match="MB once expanded"):
            fork_request({"trace": bomb(9), "span_id": "x"})


def test_spans_count_against_the_budget() -> None:
    n = _compact.MIN_BUDGET // _compact.SPAN_COST + 10  # spans alone past the budget
    _refused(compact_trace(list(BASE_VALUES), n), "spans are too many")


# --------------------------------------------------------------------------- wrong tables


@pytest.mark.parametrize(
    ("values", "column", "match"),
    [
        (["x", [0, 1]], 1, "value 1 contains itself"),
        (["x", [0, 2], [0, 1]], 1, "value 1 contains itself"),
        (["x", [0, 0, 99]], 1, "99 is not an index into its values"),
        (["x", [0, -1]], 1, "-1 is not an index"),
        (["x", [0, True]], 1, "True is not an index"),
        (["x", [0, 0.0]], 1, "0.0 is not an index"),
        (["x", [5, 0]], 1, "value 1: 4 is not an index"),
        (["x", [-1, 0]], 1, "value 1 is not a node"),
        (["x", []], 1, "value 1 is not a node"),
        (["x", [2, 0]], 1, "value 1 is not a list of keys"),  # keys "x" is not a node
        (["x", {"a": 0}], 1, "value 1 is an object, not a node"),
        (["x"], 10**30, "is not an index"),
        (["x"], "0", "'0' is not an index"),
    ],
)
def test_a_table_that_does_not_fit_together_is_refused_naming_where(
    values: list[Any], column: Any, match: str
) -> None:
    _refused(compact_trace(values, columns={"name": [column]}), "span 0's 'name'.*" + match)


def test_a_value_nested_deeper_than_the_limit_is_refused() -> None:
    values: list[Any] = ["x"]
    for i in range(MAX_VALUE_DEPTH + 5):
        values.append([0, i])  # value r: r arrays, one in another, around "x"
    at_limit = compact_trace(values, columns={"name": [MAX_VALUE_DEPTH]})
    assert _depth(expand(at_limit)["root"]["name"]) == MAX_VALUE_DEPTH
    _refused(compact_trace(values, columns={"name": [MAX_VALUE_DEPTH + 1]}), "nested more than 200")
    # a node measured once, reached again from deeper down: its height is remembered
    both = compact_trace(values, 2, columns={"name": [100, 150]})
    assert _depth(expand(both)["root"]["children"][0]["name"]) == 150
    wrapped = [*values, [0, 150]]
    for _ in range(60):
        wrapped.append([0, len(wrapped) - 1])
    _refused(compact_trace(wrapped, 2, columns={"name": [100, len(wrapped) - 1]}), "nested more")
    # references that point forward are measured by the walk, level by level
    forward: list[Any] = [[0, i + 1] for i in range(1, 300)]
    _refused(compact_trace(["x", *forward, "y"], columns={"name": [1]}), "nested more than 200")
    fits: list[Any] = [[0, i + 1] for i in range(1, MAX_VALUE_DEPTH + 1)]
    assert (
        _depth(expand(compact_trace(["x", *fits, "y"], columns={"name": [1]}))["root"]["name"])
        == MAX_VALUE_DEPTH
    )


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    return depth


@pytest.mark.parametrize(
    ("time", "columns", "match"),
    [
        ({"base": 0.0, "q": -5000, "dq": 0}, {}, "'time.q' is -5000"),
        ({"base": 0.0, "q": 0, "dq": 10**6}, {}, "'time.dq' is 1000000"),
        ({"base": 0.0, "q": 1.5, "dq": 0}, {}, "'time.q' is 1.5"),
        ({"base": 0.0, "q": True, "dq": 0}, {}, "'time.q' is True"),
        ({"base": math.inf, "q": 0, "dq": 0}, {}, "'time.base' is inf"),
        ({"base": math.nan, "q": 0, "dq": 0}, {}, "'time.base' is nan"),
        ({"base": 10**400, "q": 0, "dq": 0}, {}, "'time.base' is 1000"),
        ({"base": "0", "q": 0, "dq": 0}, {}, "'time.base' is '0'"),
        ([], {}, "'time' is not an object"),
        (None, {"start": [10**400]}, "span 0's 'start' is 10000+ ticks: out of range"),
        (None, {"start": [-(10**30)]}, "span 0's 'start' is -10000+ ticks: out of range"),
        (None, {"start": [0], "end": [2**70]}, "span 0's 'end' is 1180591620717411303424 ticks"),
        (None, {"duration": [10**400]}, "span 0's 'duration' is 100000000000000000000000"),
        (None, {"duration": [1.5]}, "span 0's 'duration' is 1.5: not ticks"),
        (None, {"start": [True]}, "span 0's 'start' is True: not ticks"),
        (None, {"start": ["[[["]}, "span 0's 'start' is '\\[\\[\\[': not JSON text"),
        (None, {"end": [5]}, "span 0 has an end in ticks but no start in ticks"),
    ],
)
def test_odd_times_are_refused_naming_the_field(
    time: Any, columns: dict[str, Any], match: str
) -> None:
    _refused(compact_trace(list(BASE_VALUES), columns=columns, time=time), match)


def test_ticks_that_add_up_past_the_range_are_refused() -> None:
    step = 2**61 + 1
    saved = compact_trace(list(BASE_VALUES), 3, columns={"start": [0, step, step]})
    _refused(saved, "span 2's 'start' adds up to")


def test_the_writers_own_extremes_still_read_back() -> None:
    span = {
        "kind": "run", "name": "r", "span_id": "1", "started_at": 1.7976931348623157e308,
        "ended_at": 5e-324, "duration": 2.0**-1074, "status": "ok", "error": None,
        "attributes": {"n": [math.nan, math.inf, -(10**300)]}, "events": [], "children": [],
    }  # fmt: skip
    plain = {"schema": "kode_nb.trace/v3", "trace_id": "t", "root": span}
    back = expand(json.loads(json.dumps(compact(plain))))
    assert back["root"]["started_at"] == 1.7976931348623157e308
    assert back["root"]["duration"] == 2.0**-1074
    assert math.isnan(back["root"]["attributes"]["n"][0])


# --------------------------------------------------------------------------- plain traces


def test_a_plain_trace_of_5000_nested_spans_is_read_written_and_exported() -> None:
    plain = nested_spans(5_000)
    trace = Trace.from_dict(plain)
    spans = trace.spans()
    assert len(spans) == 5_000
    assert spans[-1].span_id == f"{4_999:016x}"
    assert _flat(trace.to_dict()["root"]) == _flat(plain["root"])  # (== recurses: too deep)
    assert len(trace.to_otel()) == 5_000
    assert len(trace.to_otlp()["resourceSpans"][0]["scopeSpans"][0]["spans"]) == 5_000
    assert _flat(Trace.from_dict(compact(plain)).to_dict()["root"]) == _flat(plain["root"])


def _flat(root: dict[str, Any]) -> list[Any]:
    """Each span without its children, depth first, with the number of its children."""
    out, todo = [], [root]
    while todo:
        span = todo.pop()
        out.append(({k: v for k, v in span.items() if k != "children"}, len(span["children"])))
        todo.extend(reversed(span["children"]))
    return out


@pytest.mark.parametrize(
    ("change", "match"),
    [
        (lambda d: d.pop("root"), "trace: it has no 'root'"),
        (lambda d: d.pop("trace_id"), "trace: it has no 'trace_id'"),
        (lambda d: d.update(root=[]), "the root span is list, not an object"),
        (lambda d: d["root"].pop("span_id"), "the root span has no 'span_id'"),
        (lambda d: d["root"].update(children={}), "span '0000000000000000''s 'children'"),
        (lambda d: d["root"]["children"].append(7), "child 1 of span '0000000000000000' is int"),
        (lambda d: d["root"].update(attributes=[1]), "'attributes' is not an object"),
        (lambda d: d["root"].update(events={}), "'events' is not a list"),
    ],
)
def test_a_plain_trace_that_is_not_a_tree_of_spans_is_refused_naming_where(
    change: Callable[[dict[str, Any]], Any], match: str
) -> None:
    plain = nested_spans(3)
    change(plain)
    with pytest.raises(ValueError, match=match):
        Trace.from_dict(plain)


# --------------------------------------------------------------------------- request chains


def _chain(n: int) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """``n`` stored requests, each adding one message to the previous (and sharing its tools),
    and the whole bodies they stand for."""
    stored: dict[str, dict[str, Any]] = {}
    wholes: list[dict[str, Any]] = []
    messages: list[Any] = []
    for i in range(n):
        messages = [*messages, {"role": "user", "content": f"m{i}"}]
        whole = {"provider": "p", "path": "/", "model": "m", "body": {"tools": [1, [2]],
                 "messages": messages, "n": i}}  # fmt: skip
        if i == 0:
            stored["0"] = json.loads(json.dumps(whole))
        else:
            body = {"tools": None, "messages": [messages[-1]], "n": i}
            extends = {"span_id": str(i - 1), "same": ["tools"], "keep": {"messages": i}}
            stored[str(i)] = {"provider": "p", "path": "/", "model": "m", "body": body,
                              "extends": extends}  # fmt: skip
        wholes.append(whole)
    return stored, wholes


def test_a_long_request_chain_rebuilds_exactly_and_shares_nothing() -> None:
    stored, wholes = _chain(3_000)
    before = json.dumps(stored)
    for i in (0, 1, 2_999):
        rebuilt = rebuild_request(stored[str(i)], stored.get)
        assert rebuilt == wholes[i]
        rebuilt["body"]["messages"].append("mine")
        rebuilt["body"]["tools"][1].append("mine")
    assert json.dumps(stored) == before  # the stored requests are untouched


def test_a_list_shared_by_two_keys_of_the_first_request_stays_apart() -> None:
    shared = [1, 2]
    first = {"body": {"a": shared, "b": shared}}
    step = {"body": {"a": [3], "b": None}, "extends": {"span_id": "0", "same": ["b"],
            "keep": {"a": 2}}}  # fmt: skip
    assert rebuild_request(step, {"0": first}.get)["body"] == {"a": [1, 2, 3], "b": [1, 2]}


@pytest.mark.parametrize(
    ("extends", "match"),
    [
        ({"span_id": "0", "keep": {"m": 5}}, "has no 5 items of 'm'"),
        ({"span_id": "0", "keep": {"m": True}}, "has no True items of 'm'"),
        ({"span_id": "0", "keep": ["m"]}, "has a bad 'extends'"),
        ({"span_id": "0", "same": "m"}, "has a bad 'extends'"),
        ({"span_id": "1"}, "extend each other in a loop"),
        ({"span_id": "9"}, "which the trace does not have"),
    ],
)
def test_a_chain_that_does_not_fit_is_a_request_chain_error(
    extends: dict[str, Any], match: str
) -> None:
    first = {"body": {"m": [1]}}
    loop = {"body": {"m": []}, "extends": {"span_id": "1"}}
    step = {"body": {"m": []}, "extends": extends}
    with pytest.raises(RequestChainError, match=match):
        rebuild_request(step, {"0": first, "1": loop}.get)


def test_a_request_nested_too_deep_to_copy_is_a_request_chain_error() -> None:
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    step = {"body": {"m": []}, "extends": {"span_id": "0"}}
    with pytest.raises(RequestChainError, match="nested too deep to rebuild"):
        rebuild_request(step, {"0": {"body": {"m": deep}}}.get)


# --------------------------------------------------------------------------- generated tables

_odd_numbers = st.sampled_from(
    [math.nan, math.inf, -math.inf, -0.0, 1e308, 5e-324, 2**53, -(2**63), 10**30, -1, 0, 1]
)
_scalar = st.none() | st.booleans() | st.text(max_size=3) | _odd_numbers | st.integers()
_ref = st.integers(-2, 12) | st.sampled_from([True, 1.0, "1", None, 10**20])
_node = st.builds(
    lambda head, refs: [head, *refs],
    st.integers(0, 4) | st.sampled_from([-1, True, 1.5, "0"]),
    st.lists(_ref, max_size=10),
)
_entry = _scalar | _node | st.just([]) | st.builds(lambda r: {"k": r}, _ref)


@st.composite
def _hostile(draw: st.DrawFn) -> dict[str, Any]:
    """A compact trace whose table is drawn at random: shared references, cycles, forward and
    out-of-range indexes, bombs (wide nodes over wide nodes), deep chains, odd numbers."""
    values = draw(st.lists(_entry, min_size=1, max_size=12))
    if draw(st.booleans()):  # a bomb of random fan and depth on top
        fan, depth = draw(st.integers(2, 60)), draw(st.integers(1, 12))
        for _ in range(depth):
            values.append([0] + [len(values) - 1] * fan)
    if draw(st.booleans()):  # a deep chain
        for _ in range(draw(st.integers(1, 2 * MAX_VALUE_DEPTH))):
            values.append([0, len(values) - 1])
    n = draw(st.integers(1, 4))
    top = len(values) - 1
    refs = st.integers(0, top) | _ref
    columns: dict[str, Any] = {
        "depth": [0] + [draw(st.integers(0, 2) | st.just(-1)) for _ in range(n - 1)],
        **{name: [draw(refs) for _ in range(n)] for name in ("name", "attributes", "events")},
        **{name: [draw(st.none() | st.integers() | _odd_numbers | st.sampled_from(["1.5",
           "x", "[]"])) for _ in range(n)] for name in ("start", "end", "duration")},
    }  # fmt: skip
    time = draw(
        st.fixed_dictionaries(
            {
                "base": _odd_numbers | st.floats(),
                "q": st.integers(-2000, 2000) | _odd_numbers,
                "dq": st.integers(-5, 1200),
            }
        )
        | st.just({"base": 0.0, "q": 0, "dq": 0})
    )
    saved = compact_trace(values, n, columns=columns, time=time)
    if draw(st.booleans()):
        saved = padded(saved, draw(st.integers(0, 100_000)))
    return saved


class _Counting(_compact._Reader):
    """A reader that counts the arrays and objects it builds."""

    built = 0

    def value(self, ref: int) -> Any:
        made = super().value(ref)
        _Counting.built += isinstance(made, list | dict)
        return made


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_hostile())
def test_any_table_is_read_within_its_budget_or_refused_with_a_value_error(
    saved: dict[str, Any],
) -> None:
    _Counting.built = 0
    original = _compact._Reader
    _compact._Reader = _Counting  # type: ignore[misc]
    try:
        expanded, error = expand(saved), ""
    except ValueError as exc:
        expanded, error = {}, str(exc)
    finally:
        _compact._Reader = original  # type: ignore[misc]
    if error:
        assert error.startswith("compact trace: ")
        return
    budget = max(_compact.MIN_BUDGET, _compact.BUDGET_PER_BYTE * len(saved["data"]))
    assert _Counting.built * 88 <= budget  # what was built is what was counted, at most
    assert expanded["root"] is not None
    try:
        Trace.from_dict(saved)
    except ValueError as exc:  # the spans' shapes: a name or attributes of the wrong kind
        error = str(exc)
    assert not error or error.startswith("trace: ")
