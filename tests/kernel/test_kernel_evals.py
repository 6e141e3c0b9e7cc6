"""An evaluation in a real kernel: its batch's approval inbox answered with a click, the report
displayed as its record (no widget), saved in a notebook as a front end keeps the outputs, and
read back from the saved notebook with a grade given there."""

from __future__ import annotations

import json
from pathlib import Path

from .harness import Kernel

SETUP = '''
import kode_nb
from kode_nb import Agent, Executor, ToolRegistry, define_tool
from kode_nb.evals import Case, Dataset, EqualsExpected, NoDeniedCalls, ToolCalled
from kode_nb.models import ScriptedModel, call

reg = ToolRegistry()

def square(x: int) -> int:
    """Square a number."""
    return x * x

define_tool(square, registry=reg, kind="edit")
agent = Agent("squarer", tools=["square"], executor=Executor(reg), model=ScriptedModel([
    lambda r: call("square", x=int(r.messages[-1].content.split()[-1])),
    lambda r: f"squared: {r.messages[-1].content[0].data}",
]))
ds = Dataset([Case(name=f"sq{n}", inputs={"n": n}, expected_output=f"squared: {n * n}")
              for n in (2, 3, 4)], name="squares")
'''

EVAL = "application/vnd.kode-nb.eval+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def test_an_evaluation_shows_its_inbox_then_its_report(kernel: Kernel, tmp_path: Path) -> None:
    kernel.ok(SETUP)
    start = len(kernel.log)
    # the evaluation awaited in a background task: the cell returns, the batch asks
    kernel.ok(
        "import asyncio\n"
        "task = asyncio.ensure_future(kode_nb.evaluate(agent, ds, "
        "[EqualsExpected(), ToolCalled('square', {'x': 3}), NoDeniedCalls()], "
        "prompt='square {n}', cache=False, name='v1'))"
    )
    kernel.click(kernel.button("Approve all (3)", start, timeout=30))
    shown = kernel.ok("report = await task\nreport", timeout=60)
    data = next(d for d in shown.outputs if EVAL in d)
    assert WIDGET not in data
    record = data[EVAL]
    assert record["schema"] == "kode_nb.eval/v1"
    assert [c["id"] for c in record["cases"]] == ["sq2", "sq3", "sq4"]
    by_name = {s["name"]: s for s in record["scorers"]}
    assert by_name["equals_expected"]["pass_rate"] == 1.0
    assert by_name["called square"]["passed"] == 1
    assert by_name["no_denied_calls"]["pass_rate"] == 1.0
    trace = record["cases"][0]["epochs"][0]["trace"]
    assert trace["format"] == "kode_nb.compact/1"
    assert data["text/plain"].startswith("Evaluation v1: 3 cases, 2 failing")
    assert "<table>" in data["text/html"]

    # saved as a front end keeps it, a grade given in the page, read back with no kernel
    record["human"] = {"sq3": {"passed": False, "note": "graded in the page", "at": 1.0}}
    nb = {
        "cells": [
            {"cell_type": "code", "outputs": [{"output_type": "execute_result", "data": data}]}
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    saved = tmp_path / "evals.ipynb"
    saved.write_text(json.dumps(nb))
    back = kernel.ok(
        "from kode_nb.evals import EvalReport\n"
        f"graded = EvalReport.from_notebook({str(saved)!r})\n"
        "print(graded.score('human'), graded.case_passed(graded.case('sq3')), "
        "graded.summary() [:3] == report.summary())"
    )
    assert back.stdout == "0.0 False True\n"

    # the comparison with the saved report is a record too
    compared = kernel.ok("report.compare(graded)")
    comparison = next(d for d in compared.outputs if EVAL in d)[EVAL]["comparison"]
    assert comparison["improved"] == ["sq3"]  # failed by hand in the baseline
