"""Scorers: deterministic, trace-based, the LLM judge (offline), functions; and the stats."""

from __future__ import annotations

import math

import pytest
from evals_helpers import run_of, trace_with_calls
from pydantic import BaseModel

from kode_nb.evals import (
    Contains,
    Equals,
    EqualsExpected,
    IsInstance,
    LLMJudge,
    MatchesSchema,
    MaxCost,
    MaxDuration,
    MaxTokens,
    NoDeniedCalls,
    NoToolErrors,
    Regex,
    Score,
    Succeeded,
    ToolCalled,
    ToolNotCalled,
    Turns,
    scorer,
)
from kode_nb.evals._judge import read_verdict
from kode_nb.evals._scorers import run_scorer, to_score
from kode_nb.evals._stats import mean, percentile, stderr
from kode_nb.models import ScriptedModel, TestModel

pytestmark = pytest.mark.anyio


def test_equals_expected_and_equals() -> None:
    s = EqualsExpected()
    assert s.score(run_of(" Paris ", expected="Paris")).passed is True
    bad = s.score(run_of("Lyon", expected="Paris"))
    assert bad.passed is False
    assert bad.value == 0.0
    assert "expected Paris" in bad.reason
    assert s.score(run_of("x")).passed is None  # nothing expected: not judged
    assert EqualsExpected(case_sensitive=False).score(run_of("PARIS", expected="paris")).passed
    assert s.score(run_of('{"a": 1}', expected={"a": 1})).passed  # JSON text vs a value
    assert Equals(4).score(run_of(4)).passed
    assert not Equals(4).score(run_of(5)).passed


def test_contains_regex_instance() -> None:
    assert Contains("ar").score(run_of("Paris")).passed
    assert not Contains("AR").score(run_of("Paris")).passed
    assert Contains("AR", case_sensitive=False).score(run_of("Paris")).passed
    assert Contains().score(run_of("in Paris!", expected="Paris")).passed
    assert Contains({"a": 1}).score(run_of({"a": 1, "b": 2})).passed
    assert not Contains({"a": 2}).score(run_of({"a": 1})).passed
    assert Contains(3).score(run_of([1, 2, 3])).passed
    assert Regex(r"\d+ apples").score(run_of("I have 12 apples")).passed
    assert not Regex(r"\d+", fullmatch=True).score(run_of("12a")).passed
    assert IsInstance(str).score(run_of("x")).passed
    assert IsInstance("dict").score(run_of({})).passed
    assert IsInstance("int").score(run_of("1")).reason == "output is a str"


def test_json_schema_and_model() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    s = MatchesSchema(schema)
    assert s.score(run_of('{"n": 3}')).passed
    bad = s.score(run_of({"n": "3"}))
    assert bad.passed is False
    assert bad.reason.startswith("n:")

    class Out(BaseModel):
        city: str

    m = MatchesSchema(Out)
    assert m.score(run_of({"city": "Paris"})).passed
    assert m.score(run_of(Out(city="x"))).passed
    assert not m.score(run_of({"town": "Paris"})).passed
    with pytest.raises(Exception, match="JSON schema"):
        MatchesSchema("not a schema")


def test_limits() -> None:
    assert MaxDuration(1).score(run_of("x", duration=0.5)).passed
    assert not MaxDuration(1).score(run_of("x", duration=1.5)).passed
    assert MaxDuration(1).score(run_of("x")).passed is None  # unknown: not judged
    assert MaxTokens(10).score(run_of("x", input_tokens=4, output_tokens=6)).passed
    assert not MaxTokens(10).score(run_of("x", input_tokens=8, output_tokens=6)).passed
    assert MaxTokens(10).score(run_of("x")).passed is None
    assert not MaxCost(0.01).score(run_of("x", cost=0.02)).passed
    assert MaxCost(0.01).score(run_of("x")).passed is None
    assert not Succeeded().score(run_of(None, status="max_turns", error="limit")).passed


def test_trace_scorers() -> None:
    trace = trace_with_calls(
        ("search", {"q": "paris weather", "n": 3}, "ok"),
        ("search", {"q": "lyon", "n": 1}, "ok"),
        ("delete", {"path": "/tmp/x"}, "denied"),
        ("fetch", {"url": "u"}, "error"),
    )
    run = run_of("x", trace_data=trace.to_dict(), turns=3)
    assert ToolCalled("search").score(run).passed
    assert ToolCalled("search", {"q": "paris*"}).score(run).reason == "1 matching call"
    assert not ToolCalled("search", {"q": "paris*", "n": 2}).score(run).passed
    assert ToolCalled("search", {"n": lambda n: n > 2}).score(run).passed
    assert not ToolCalled("search", min_times=3).score(run).passed
    assert not ToolCalled("search", max_times=1).score(run).passed
    assert ToolCalled("sea*").score(run).passed
    assert ToolNotCalled("write").score(run).passed
    assert not ToolNotCalled("delete").score(run).passed
    assert ToolNotCalled("search", {"q": "rome"}).score(run).passed
    denied = NoDeniedCalls().score(run)
    assert denied.passed is False
    assert "delete" in denied.reason
    errors = NoToolErrors().score(run)
    assert errors.passed is False
    assert errors.reason == "errors: fetch"
    assert Turns(max=3).score(run).passed
    assert not Turns(max=2).score(run).passed
    assert not Turns(min=4).score(run).passed
    no_trace = run_of("x")
    assert ToolCalled("search").score(no_trace).passed is None
    assert NoDeniedCalls().score(no_trace).passed is None
    # a compact trace (as a saved record holds it) reads the same
    from kode_nb.traces._compact import compact

    saved = run_of("x", trace_data=compact(trace.to_dict()))
    assert not NoDeniedCalls().score(saved).passed


def test_function_scorers_and_conversions() -> None:
    @scorer
    def short(run: object) -> bool:
        """Short answers."""
        return True

    assert short.name == "short"
    assert short.describe() == "Short answers."
    assert short.score(run_of("x")) == Score.of(True)
    assert to_score((False, "why")) == Score(passed=False, value=0.0, reason="why")
    assert to_score(0.25) == Score(value=0.25)
    assert to_score({"score": 0.5, "reason": "r"}) == Score(value=0.5, reason="r")
    assert to_score({"pass": True}) == Score(passed=True, value=1.0)
    assert to_score(math.nan).value is None
    with pytest.raises(TypeError, match="returned list"):
        to_score([1])
    named = scorer(name="n", kind="score")(lambda r: 1.0)
    assert named.name == "n"


async def test_async_and_broken_scorers() -> None:
    async def judge(run: object) -> tuple[bool, str]:
        return True, "async"

    assert await run_scorer(scorer(judge), run_of("x")) == Score.of(True, "async")

    def broken(run: object) -> bool:
        raise RuntimeError("boom")

    out = await run_scorer(scorer(broken), run_of("x"))
    assert out.value is None
    assert out.reason == "scorer error: RuntimeError: boom"


async def test_llm_judge_offline() -> None:
    seen: list[str] = []

    def verdict(request: object) -> str:
        text = request.messages[-1].content  # type: ignore[attr-defined]
        seen.append(request.system)  # type: ignore[attr-defined]
        good = "<output>\nParis" in text
        return (
            f'Here: {{"pass": {str(good).lower()}, "score": {0.9 if good else 0.1}, '
            '"reason": "checked"}'
        )

    judge = LLMJudge("Names the capital", ScriptedModel([verdict]), include_expected=True)
    ok = await judge.score(run_of("Paris", expected="Paris"))
    assert ok == Score(passed=True, value=0.9, reason="checked")
    bad = await judge.score(run_of("Lyon", expected="Paris"))
    assert bad.passed is False
    assert bad.value == 0.1
    assert "Rubric: Names the capital" in seen[0]
    prompt = judge.prompt(run_of("Lyon", expected="Paris"))
    assert "<expected_output>\nParis" in prompt
    assert "<input>" in prompt
    fixed = LLMJudge("r", TestModel(text='{"score": 0.7}'), threshold=0.8)
    assert await fixed.score(run_of("x")) == Score(passed=False, value=0.7, reason="")


def test_reading_verdicts() -> None:
    assert read_verdict('{"pass": true}') == Score.of(True)
    assert read_verdict('x {bad json} then {"score": 2}').value == 1.0  # clamped
    assert read_verdict("FAIL: wrong city").passed is False
    assert read_verdict("PASS").passed is True
    assert read_verdict("no idea").passed is None


def test_stats() -> None:
    assert mean([]) is None
    assert mean([1, 2, 3]) == 2
    assert stderr([1.0]) is None
    assert stderr([1.0, 0.0, 1.0, 0.0]) == pytest.approx(math.sqrt(1 / 3) / 2)
    assert percentile([], 50) is None
    assert percentile([5.0], 95) == 5.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(101)), 95) == 95
