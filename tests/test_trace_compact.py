"""The compact saved form of a trace (kode_nb/traces/_compact.py): read back exactly what was
written, for real and synthetic traces and for generated ones (unicode, nulls, odd times, deep
nesting, huge strings, keys a later version adds); the plain form is still read; the shared
cases (tests/trace_compact_cases.json) are what this writer writes, and the extension's test
(labextension/test/compact.test.ts) reads the same cases into the same traces.

    .venv/bin/python tests/test_trace_compact.py    # rewrite tests/trace_compact_cases.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the repo root, for tests.kernel

from kode_nb.errors import ConfigurationError  # noqa: E402
from kode_nb.traces import Trace  # noqa: E402
from kode_nb.traces._compact import FORMAT, compact, expand, is_compact  # noqa: E402
from tests.kernel.trace_records import synthetic_trace  # noqa: E402

CASES_FILE = ROOT / "tests" / "trace_compact_cases.json"
SAMPLE = ROOT / "labextension" / "test" / "fixtures" / "sample-trace.json"


def _exact(value: Any) -> str:
    """JSON text that tells 1 from 1.0 and 0.0 from -0.0 (dict == does not)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=True)


def _span(i: int, **over: Any) -> dict[str, Any]:
    span: dict[str, Any] = {
        "kind": "tool_call", "name": f"execute_tool t{i}", "span_id": f"{i:016x}",
        "started_at": 1_764_000_000.25 + i * 0.125, "ended_at": 1_764_000_000.5 + i * 0.125,
        "duration": 0.25, "status": "ok", "error": None, "attributes": {}, "events": [],
        "children": [],
    }  # fmt: skip
    span.update(over)
    return span


def _trace(root: dict[str, Any], schema: str = "kode_nb.trace/v2") -> dict[str, Any]:
    return {"schema": schema, "trace_id": "0" * 31 + "1", "root": root}


def cases() -> list[tuple[str, dict[str, Any]]]:
    """The shared cases: name and plain trace (fixed ids and times, so the file is stable)."""
    real = json.loads(SAMPLE.read_text(encoding="utf-8"))
    odd = _span(0, kind="run", name="main", status="completed", attributes={
        "prompt": "naïve café ✓ 漢字 עברית 🤖 \u0000 nul, \u2028 line sep, \"quotes\" \\ back",
        "nulls": [None, {"a": None}, []], "numbers": [0, -1, 1.0, 1.5, -0.0, 2**53 - 1, 1e-300],
        "nested": {"a": {"b": {"c": [1, [2, [3, {"d": "deep"}]]]}}}, "same": {"x": 1},
        "again": {"x": 1}, "bools": [True, False, 1, 0, "1", "true"], "empty": "",
    })  # fmt: skip
    odd["children"] = [
        _span(1, started_at=0, ended_at=None, duration=None, status="running"),  # open
        _span(2, started_at=1.5, ended_at=0.1, duration=1e-9, error="boom", status="error"),
        _span(3, started_at=-5.0, ended_at=-0.0, duration=2**-40),
        _span(4, started_at=None, ended_at=1_764_000_000.75, duration=0.000123456789),
        _span(5, kind="future_kind", dropped_events=3, future_key={"new": [1, 2]},
              events=[{"name": "started", "time": 1_764_000_000.3, "attributes": {"k": "v"}}]),
    ]  # fmt: skip
    deep = node = _span(0, kind="run", name="deep")
    for i in range(1, 60):
        child = _span(i, name=f"level {i}")
        node["children"].append(child)
        node = child
    huge = _span(0, kind="run", name="huge", attributes={"output": "λ" * 20_000 + "end"})
    huge["children"] = [_span(1, attributes={"result": {"text": "x" * 30_000}})]
    synthetic = synthetic_trace(200, t0=1_700_000_000.0)
    for i, s in enumerate(_walk(synthetic["root"])):  # fixed ids, so the file is stable
        s["span_id"] = f"{i:016x}"
    synthetic["trace_id"] = "f" * 32
    return [
        ("a real run", real),
        ("odd values and times", _trace(odd)),
        ("a v1 trace", _trace(_span(0, kind="run", name="old"), schema="kode_nb.trace/v1")),
        ("60 levels deep", _trace(deep)),
        ("huge strings", _trace(huge)),
        ("synthetic 200 spans", synthetic),
    ]


def _walk(span: dict[str, Any]) -> list[dict[str, Any]]:
    out, todo = [], [span]
    while todo:
        s = todo.pop()
        out.append(s)
        todo.extend(reversed(s["children"]))
    return out


def _cases_json() -> str:
    rows = [{"name": n, "plain": plain, "compact": compact(plain)} for n, plain in cases()]
    return json.dumps({"cases": rows}, indent=1, ensure_ascii=False) + "\n"


def test_the_shared_cases_are_what_this_writer_writes() -> None:
    assert CASES_FILE.read_text(encoding="utf-8") == _cases_json(), (
        "tests/trace_compact_cases.json is stale: run .venv/bin/python tests/test_trace_compact.py"
    )


@pytest.mark.parametrize(("name", "plain"), cases(), ids=[n for n, _ in cases()])
def test_a_case_reads_back_exactly(name: str, plain: dict[str, Any]) -> None:
    saved = compact(plain)
    assert set(saved) == {"schema", "format", "trace_id", "spans", "data"}
    assert saved["format"] == FORMAT
    assert saved["schema"] == plain["schema"]
    assert saved["spans"] == len(_walk(plain["root"]))
    assert is_compact(saved)
    assert not is_compact(plain)
    back = json.loads(json.dumps(saved))  # as a notebook stores and reads it
    assert _exact(expand(back)) == _exact(plain)


def test_the_trace_read_from_either_form_is_the_same() -> None:
    plain = json.loads(SAMPLE.read_text(encoding="utf-8"))
    from_compact, from_plain = Trace.from_dict(compact(plain)), Trace.from_dict(plain)
    assert _exact(from_compact.to_dict()) == _exact(from_plain.to_dict())
    assert from_compact.schema == from_plain.schema
    assert [s.span_id for s in from_compact.spans()] == [s.span_id for s in from_plain.spans()]


def test_spans_read_back_share_nothing() -> None:
    plain = _trace(_span(0, kind="run", name="r", attributes={"a": {"x": [1]}}))
    plain["root"]["children"] = [_span(1, attributes={"a": {"x": [1]}})]
    back = expand(compact(plain))
    back["root"]["attributes"]["a"]["x"].append(2)
    assert back["root"]["children"][0]["attributes"] == {"a": {"x": [1]}}


def test_a_100000_span_trace_is_small_and_exact() -> None:
    plain = synthetic_trace(100_000)
    saved = compact(plain)
    assert len(saved["data"].encode()) < 150 * 100_000  # B per span; the plain JSON is ~600
    assert _exact(expand(saved)) == _exact(plain)


def test_bad_compact_forms_say_what_is_wrong() -> None:
    saved = compact(_trace(_span(0, kind="run", name="r")))
    with pytest.raises(ValueError, match="a newer kode_nb wrote it"):
        expand({**saved, "format": "kode_nb.compact/9"})
    with pytest.raises(ValueError, match="not readable"):
        expand({**saved, "data": "{"})
    tables = json.loads(saved["data"])
    tables["columns"]["depth"] = [0, 0]
    with pytest.raises(ValueError, match="columns"):
        expand({**saved, "data": json.dumps(tables)})
    tables = json.loads(saved["data"])
    tables["columns"]["name"] = [10**6]
    with pytest.raises(ValueError, match="not an index"):
        expand({**saved, "data": json.dumps(tables)})
    with pytest.raises(ValueError, match="newer kode_nb"):
        Trace.from_dict({**saved, "format": "kode_nb.compact/2"})
    from kode_nb.debug._replay import load_trace

    with pytest.raises(ConfigurationError, match="not a usable trace"):
        load_trace({**saved, "data": "[]"})
    with pytest.raises(TypeError, match="not a JSON value"):
        compact(_trace(_span(0, attributes={"x": object()})))


def test_spans_nested_deeper_than_python_recursion_are_written_and_read() -> None:
    root = node = _span(0, kind="run", name="deep")
    for i in range(1, 5_000):
        child = _span(i)
        node["children"].append(child)
        node = child
    back = expand(compact(_trace(root)))
    assert len(_walk(back["root"])) == 5_000
    assert _walk(back["root"])[-1]["span_id"] == f"{4_999:016x}"


def test_a_saved_record_is_what_replay_expand_and_the_comm_take() -> None:
    from kode_nb.debug import expand_trace
    from kode_nb.debug._replay import load_trace
    from kode_nb.ui.trace_ops import expand_request

    plain = json.loads(SAMPLE.read_text(encoding="utf-8"))
    saved = json.loads(json.dumps(compact(plain)))  # as a notebook holds it
    assert load_trace(saved).trace_id == plain["trace_id"]
    assert expand_trace(saved).cells == expand_trace(plain).cells
    answer = expand_request({"trace": saved}, registered=set())
    assert answer["trace_id"] == plain["trace_id"]
    assert answer["cells"] == expand_trace(plain, registered=set()).cells
    # the comm's limits hold for the trace a compact form stands for
    deep = node = _span(0, kind="run", name="deep")
    for i in range(1, 120):  # 120 spans deep: some 240 JSON levels
        child = _span(i)
        node["children"].append(child)
        node = child
    with pytest.raises(ConfigurationError, match="nested more than 200 levels"):
        expand_request({"trace": compact(_trace(deep))}, registered=set())
    with pytest.raises(ConfigurationError, match="not a usable kode_nb trace"):
        expand_request({"trace": {**saved, "data": "[]"}}, registered=set())


# --------------------------------------------------------------------------- generated traces

_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | _text
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4),
    max_leaves=12,
)  # fmt: skip
_time = (
    st.none() | st.integers(-10, 2**40) | st.floats(allow_nan=False, allow_infinity=False)
    | st.floats(1.6e9, 1.9e9) | st.sampled_from([1_764_000_000.123456, 0.0, -0.0, 1e-300])
)  # fmt: skip
_duration = st.none() | st.floats(0, 1e4) | st.integers(0, 10) | st.just(2**-36 * 12345)


@st.composite
def _traces(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 25))
    spans = []
    for i in range(n):
        span = _span(
            i,
            kind=draw(st.sampled_from(["run", "turn", "model_call", "tool_call", "other"])),
            name=draw(_text), span_id=draw(_text), status=draw(_text),
            error=draw(st.none() | _text), started_at=draw(_time), ended_at=draw(_time),
            duration=draw(_duration),
            attributes=draw(st.dictionaries(_text, _json, max_size=5)),
            events=draw(st.lists(st.fixed_dictionaries(
                {"name": _text, "time": _time, "attributes": st.dictionaries(_text, _json, max_size=3)}
            ), max_size=3)),
        )  # fmt: skip
        if draw(st.booleans()):
            span.update(draw(st.dictionaries(st.sampled_from(["dropped_events", "new"]), _json)))
        if i:
            spans[draw(st.integers(0, i - 1))]["children"].append(span)
        spans.append(span)
    return _trace(spans[0])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_traces())
def test_any_trace_reads_back_exactly(plain: dict[str, Any]) -> None:
    saved = json.loads(json.dumps(compact(plain)))
    assert _exact(expand(saved)) == _exact(plain)


if __name__ == "__main__":
    CASES_FILE.write_text(_cases_json(), encoding="utf-8")
    print(f"wrote {CASES_FILE}")
