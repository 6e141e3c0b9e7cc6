"""evaluate(): an agent, a tool, a function through run_many; epochs, cache, approvals,
reports (JSON, notebooks, grades), regressions and CI checks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from evals_helpers import square, squarer, squares

from kode_nb import define_tool
from kode_nb.errors import ConfigurationError
from kode_nb.evals import (
    Case,
    Dataset,
    EqualsExpected,
    EvalFailed,
    EvalReport,
    LLMJudge,
    NoDeniedCalls,
    Succeeded,
    ToolCalled,
    Turns,
    check,
    compare_reports,
    evaluate,
    run_eval,
    scorer,
)
from kode_nb.many import Inbox
from kode_nb.models import TestModel
from kode_nb.tools import ToolRegistry

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def _cache_keys_apart(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """The run caches' key files go to a state folder of this test's own, not to ``~``."""
    state = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_STATE_HOME", str(state))
    return state


SCORERS = [EqualsExpected(), ToolCalled("square"), NoDeniedCalls(), Turns(max=2)]


async def test_an_agent_through_run_many() -> None:
    report = await evaluate(squarer(wrong=2), squares(), SCORERS, prompt="square {n}", cache=False)
    assert len(report) == 4
    assert report.epochs == 1
    summary = {s["name"]: s for s in report.summary()}
    assert summary["equals_expected"]["pass_rate"] == 0.75
    assert summary["equals_expected"]["stderr"] == pytest.approx(0.25)
    assert summary["called square"]["pass_rate"] == 1.0
    assert [c.id for c in report.failing()] == ["sq2"]
    failing = report.case("sq2")
    assert failing.stat("equals_expected")["reason"] == ("expected squared: 4, got squared: 5")
    assert failing.epochs[0].trace is not None
    usage = report.usage()
    assert usage["runs"] == 4
    assert usage["failed_runs"] == 0
    assert usage["input_tokens"] > 0
    assert usage["latency_p95"] >= usage["latency_p50"] > 0


async def test_a_denied_tool_fails_the_trace_scorers() -> None:
    report = await evaluate(
        squarer(deny=True), squares(2), SCORERS, prompt="square {n}", cache=False
    )
    assert report.score("no_denied_calls") == 0.0
    assert report.case("sq0").stat("no_denied_calls")["reason"] == "denied: square"


async def test_a_tool_and_an_async_function() -> None:
    reg = ToolRegistry()
    tool = define_tool(square, registry=reg)
    ds = Dataset([Case(inputs={"x": i}, expected_output=str(i * i)) for i in range(3)])
    report = await evaluate(tool, ds, [EqualsExpected(), Succeeded()], cache=False)
    assert report.score("equals_expected") == 1.0
    assert report.case("case 1").epochs[0].trace is not None  # a tool row has its trace

    async def shout(row: dict[str, Any]) -> str:
        return str(row["prompt"]).upper()

    words = Dataset(
        [Case(inputs="hi", expected_output="HI"), Case(inputs="a", expected_output="b")]
    )
    out = await evaluate(shout, words, [EqualsExpected()], cache=False)
    assert out.score("equals_expected") == 0.5
    assert out.case("case 1").epochs[0].trace is None


async def test_epochs_give_standard_errors_and_cache_apart(tmp_path: Path) -> None:
    import os

    async def coin(row: dict[str, Any]) -> str:
        return "heads" if os.urandom(1)[0] % 2 else "tails"

    ds = Dataset([Case(name=f"c{i}", inputs={"i": i}, expected_output="heads") for i in range(6)])
    first = await evaluate(coin, ds, [EqualsExpected()], epochs=4, cache=tmp_path)
    assert all(len(c.epochs) == 4 for c in first.cases)
    outputs = [[e.output for e in c.epochs] for c in first.cases]
    assert len({tuple(o) for o in outputs}) > 1
    st = first.case("c0").stat("equals_expected")
    assert st["stderr"] is not None or len(set(outputs[0])) == 1
    # resumed: every epoch from the cache, each its own answer
    again = await evaluate(coin, ds, [EqualsExpected()], epochs=4, cache=tmp_path)
    assert all(e.cached for c in again.cases for e in c.epochs)
    assert [[e.output for e in c.epochs] for c in again.cases] == outputs
    with pytest.raises(ConfigurationError, match="epochs"):
        await evaluate(coin, ds, epochs=0)


async def test_approvals_go_to_one_inbox() -> None:
    from kode_nb import Agent, Executor, ToolResult
    from kode_nb.models import ScriptedModel, call

    reg = ToolRegistry()

    def refund(order: str) -> str:
        """Refund an order."""
        return "refunded " + order

    define_tool(refund, registry=reg, kind="edit")
    clerk = Agent(
        "clerk",
        model=ScriptedModel(
            [
                lambda r: call("refund", order=str(r.messages[-1].content).split()[-1]),  # type: ignore[union-attr]
                lambda r: "done: " + ToolResult(content=r.messages[-1].content).text,  # type: ignore[arg-type, union-attr]
            ]
        ),
        tools=["refund"],
        executor=Executor(reg),
    )
    inbox = Inbox()
    ds = Dataset(
        [Case(inputs=f"refund A{i}", expected_output=f"done: refunded A{i}") for i in range(3)]
    )
    task = asyncio.ensure_future(
        evaluate(clerk, ds, [EqualsExpected(), NoDeniedCalls()], inbox=inbox, cache=False, epochs=2)
    )
    six = asyncio.Event()
    inbox.on_change(lambda: six.set() if len(inbox.pending()) >= 6 else None)
    await asyncio.wait_for(six.wait(), 30)
    inbox.approve_matching("refund", order="A0")
    inbox.approve_matching("refund", order="A1")
    for p in inbox.pending():
        inbox.deny(p, "not this one")
    report = await task
    assert report.case("case 1").stat("equals_expected")["passed"] is True
    assert report.case("case 3").stat("no_denied_calls")["passed"] is False
    assert report.score("equals_expected") == pytest.approx(2 / 3)


async def test_judge_and_custom_scorers_in_a_run() -> None:
    judge = LLMJudge(
        "says squared", TestModel(text='{"pass": true, "score": 0.75, "reason": "ok"}')
    )

    @scorer(kind="score")
    async def length(run: Any) -> float:
        return float(len(run.output))

    def broken(run: Any) -> bool:
        raise ValueError("nope")

    report = await evaluate(
        squarer(), squares(2), [judge, length, scorer(broken)], prompt="square {n}", cache=False
    )
    s = {x["name"]: x for x in report.summary()}
    assert s["judge"]["pass_rate"] == 1.0
    assert s["judge"]["kind"] == "pass"
    assert report.case("sq0").stat("judge")["value"] == 0.75
    assert s["length"]["kind"] == "score"
    assert s["length"]["mean"] == len("squared: 0")
    assert s["broken"]["errors"] == 2
    assert s["broken"]["judged"] == 0


async def test_scorers_from_a_pydantic_evals_file() -> None:
    async def capital(row: dict[str, Any]) -> str:
        return {"France": "Paris", "Japan": "Tokyo"}.get(row["country"], "Sydney")

    path = Path(__file__).parent / "pydantic_evals_capitals.yaml"
    report = await evaluate(capital, path, cache=False)
    names = [s["name"] for s in report.summary()]
    assert names == ["EqualsExpected", "IsInstance", "MaxDuration", "LLMJudge", "Contains"]
    assert report.score("EqualsExpected") == pytest.approx(2 / 3)
    assert report.case("france").stat("Contains")["passed"] is True
    assert report.case("japan").stat("Contains")["passed"] is None
    # the file names the test model as judge: its answer has no verdict, so it judges nothing
    assert report.summary()[3]["judged"] == 0


def test_run_eval_in_a_script_and_not_in_a_loop() -> None:
    report = run_eval(squarer(), squares(2), [EqualsExpected()], prompt="square {n}", cache=False)
    assert report.score("equals_expected") == 1.0

    async def inside() -> None:
        run_eval(squarer(), squares(1), [EqualsExpected()])

    with pytest.raises(ConfigurationError, match=r"await kode_nb\.evals\.evaluate"):
        asyncio.run(inside())


def test_duplicate_scorer_names_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="share a name"):
        run_eval(squarer(), squares(1), [EqualsExpected(), EqualsExpected()], cache=False)


async def test_reports_round_trip_and_grades(tmp_path: Path) -> None:
    report = await evaluate(squarer(wrong=1), squares(3), SCORERS, prompt="square {n}", cache=False)
    report.grade("sq0", False, "too terse")
    report.grade("sq2", True)
    with pytest.raises(KeyError):
        report.grade("nope", True)
    data = report.to_dict()
    assert data["schema"] == "kode_nb.eval/v1"
    assert data["cases"][0]["epochs"][0]["trace"]["format"] == "kode_nb.compact/1"
    human = next(s for s in data["scorers"] if s["name"] == "human")
    assert human["judged"] == 2
    assert human["pass_rate"] == 0.5
    assert data["cases"][0]["passed"] is False  # the human grade counts
    path = report.save(tmp_path / "report.json")
    back = EvalReport.load(path)
    assert back.summary() == report.summary()
    assert back.human["sq0"]["note"] == "too terse"
    assert back.case("sq1").epochs[0].trace is not None
    # traces kept for the failing cases first
    small = report.to_dict(max_traces=1)
    kept = [c["id"] for c in small["cases"] if c["epochs"][0]["trace"] is not None]
    assert len(kept) == 1
    assert kept[0] in ("sq0", "sq1")
    assert "traces kept for 1 of 3 cases" in small["notes"][-1]
    # exported with the dataset
    graded = report.dataset_with_grades()
    assert graded["sq0"].metadata["human"] == {"passed": False, "note": "too terse"}
    out = graded.to_file(tmp_path / "graded.yaml")
    assert Dataset.from_file(out)["sq2"].metadata["human"]["passed"] is True
    frame = report.frame()
    assert list(frame["human_note"][:1]) == ["too terse"]


def test_reading_a_report_from_a_saved_notebook(tmp_path: Path) -> None:
    report = run_eval(squarer(), squares(2), [EqualsExpected()], prompt="square {n}", cache=False)
    data = report.to_dict()
    data["human"] = {"sq1": {"passed": False, "note": "graded in the browser", "at": 1.0}}
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "x"},
            {
                "cell_type": "code",
                "outputs": [
                    {"output_type": "display_data", "data": {"text/plain": "x"}},
                    {
                        "output_type": "display_data",
                        "data": {"application/vnd.kode-nb.eval+json": data, "text/plain": "r"},
                    },
                ],
            },
        ]
    }
    path = tmp_path / "n.ipynb"
    path.write_text(json.dumps(nb))
    back = EvalReport.from_notebook(path)
    assert back.human["sq1"]["note"] == "graded in the browser"
    assert back.score("human") == 0.0
    assert EvalReport.from_notebook(path, report.report_id).report_id == report.report_id
    with pytest.raises(ConfigurationError, match="no report named"):
        EvalReport.from_notebook(path, "nope")
    with pytest.raises(ConfigurationError, match="not a kode_nb evaluation report"):
        EvalReport.from_dict({"schema": "kode_nb.run/v1"})
    with pytest.raises(ConfigurationError, match="newer kode_nb"):
        EvalReport.from_dict({"schema": "kode_nb.eval/v2"})


async def test_regressions_and_noise() -> None:
    base = await evaluate(squarer(), squares(4), SCORERS, prompt="square {n}", cache=False)
    worse = await evaluate(squarer(wrong=3), squares(4), SCORERS, prompt="square {n}", cache=False)
    reg = compare_reports(base, worse)
    assert reg.regressed == ["sq3"]
    assert reg.improved == []
    eq = next(s for s in reg.scorers if s["name"] == "equals_expected")
    assert eq["delta"] == -0.25
    assert eq["noise"] == pytest.approx(0.25)  # 0 ± 0 and 0.75 ± 0.25
    assert eq["significant"] is False  # within 2 noises
    assert not reg.ok  # a case went from pass to fail
    assert reg.cases[0]["id"] == "sq3"
    assert reg.cases[0]["change"] == "pass→fail"
    assert "pass→fail: sq3" in reg.summary()
    back = worse.compare(base)
    assert back.regressed == ["sq3"]
    record = reg.to_dict()
    assert record["comparison"]["regressed"] == ["sq3"]
    # fail -> pass the other way round
    assert compare_reports(worse, base).improved == ["sq3"]


async def test_a_case_delta_beyond_its_epochs_noise() -> None:
    calls = {"n": 0}

    async def drifting(row: dict[str, Any]) -> float:
        calls["n"] += 1
        return float(row["base"]) + (calls["n"] % 2) * 0.01

    @scorer(kind="score")
    def value(run: Any) -> float:
        return float(run.output)

    ds = Dataset([Case(name="a", inputs={"base": 0.5})])
    a = await evaluate(drifting, ds, [value], epochs=4, cache=False)
    ds2 = Dataset([Case(name="a", inputs={"base": 0.9})])
    b = await evaluate(drifting, ds2, [value], epochs=4, cache=False)
    reg = compare_reports(a, b)
    case = reg.cases[0]["scores"]["value"]
    assert case["delta"] == pytest.approx(0.4)
    assert case["significant"] is True


async def test_ci_checks(tmp_path: Path) -> None:
    base = await evaluate(squarer(), squares(4), SCORERS, prompt="square {n}", cache=False)
    path = base.save(tmp_path / "baseline.json")
    worse = await evaluate(squarer(wrong=3), squares(4), SCORERS, prompt="square {n}", cache=False)
    assert check(base, min={"equals_expected": 1.0}, baseline=path).ok
    result = check(worse, min={"equals_expected": 0.9}, baseline=path)
    assert not result
    assert len(result.problems) == 2
    assert "equals_expected: 0.750 < 0.900" in result.problems[0]
    assert "1 case(s) went from pass to fail: sq3" in result.problems[1]
    with pytest.raises(EvalFailed, match="went from pass to fail"):
        worse.require(baseline=path)
    assert check(worse, baseline=path, max_regressed=1).ok
    strict = check(worse, baseline=path, max_regressed=1, noise_only=False)
    assert strict.problems == ["equals_expected: 1.000 → 0.750 (-0.250, noise ±0.250)"]
    assert check(worse, min={"nope": 1}).problems[0].startswith("no scorer 'nope'")
    assert check(worse, baseline=tmp_path / "missing.json", missing_baseline_ok=True).ok
    with pytest.raises(FileNotFoundError):
        check(worse, baseline=tmp_path / "missing.json")
