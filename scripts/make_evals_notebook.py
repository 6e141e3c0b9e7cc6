"""Build notebooks/07-evals.ipynb from the cells below and execute it, so the saved outputs are
exactly what the kernel sent (nbval checks them, strictly).

    .venv/bin/python scripts/make_evals_notebook.py            # rebuild + execute + write
    .venv/bin/python scripts/make_evals_notebook.py --no-run   # rebuild without outputs

Edit the cells here, not in the notebook file. Every model is a ``ScriptedModel``, so the
outputs are the same on every run (durations aside, which nbval's sanitizer masks).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _notebook_builder

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOK = ROOT / "notebooks" / "07-evals.ipynb"

CELLS: list[tuple[str, str]] = [
    (
        "md",
        """\
# Evaluations

Did a change of prompt, tool, model or framework make the agent better? `kode_nb.evals` runs
a **dataset of cases** through the agent (through `run_many`: local, Dask or Ray, cached,
one approval inbox), **scores** every run — deterministic checks, checks of the trace, an LLM
judge, your own functions — over several **epochs**, and shows a **report**: each scorer's pass
rate ± its standard error, cost, tokens, latency, and every case, failing first, one click from
its trace. You can **grade** a case by hand in the report, **compare** two reports, and gate
CI on the result.

Everything here runs offline: the agent and the judge are `ScriptedModel`s.""",
    ),
    (
        "py",
        """\
%load_ext kode_nb
import json

import kode_nb
from kode_nb.evals import (Case, Dataset, EqualsExpected, LLMJudge, NoDeniedCalls, Regex,
                           ToolCalled, Turns, scorer)
from kode_nb.models import ScriptedModel, call""",
    ),
    ("md", "An agent that converts temperatures with a tool. Version 1 rounds badly."),
    (
        "py",
        '''\
reg = kode_nb.ToolRegistry()


def to_fahrenheit(celsius: float) -> float:
    """Convert Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


kode_nb.define_tool(to_fahrenheit, registry=reg)


def ask(request):
    return call("to_fahrenheit", celsius=float(request.messages[-1].content.split()[-1]))


def answer_v1(request):
    value = float(kode_nb.ToolResult(content=request.messages[-1].content).text)
    return f"{int(value)} °F"  # truncates: 98.6 becomes 98


def converter(answer):
    return kode_nb.Agent("converter", model=ScriptedModel([ask, answer]),
                         tools=["to_fahrenheit"], executor=kode_nb.Executor(reg))''',
    ),
    (
        "md",
        "The dataset: inputs, the expected answer, tags. It could come from a YAML, JSON or "
        "JSONL file, a DataFrame or a pydantic-evals dataset file.",
    ),
    (
        "py",
        """\
ds = Dataset([
    Case(name="freezing", inputs={"c": 0}, expected_output="32 °F", tags=["easy"]),
    Case(name="boiling", inputs={"c": 100}, expected_output="212 °F", tags=["easy"]),
    Case(name="body", inputs={"c": 37}, expected_output="99 °F", tags=["rounding"]),
    Case(name="cold", inputs={"c": -40}, expected_output="-40 °F", tags=["negative"]),
    Case(name="warm", inputs={"c": 21.5}, expected_output="71 °F", tags=["rounding"]),
], name="temperatures")
ds.to_frame()""",
    ),
    (
        "md",
        "Scorers: the answer, its form, what the trace shows (the tool was called with the "
        "right argument, no call was denied, at most two turns), and an LLM judge with a rubric "
        "(scripted here; any kode_nb model judges for real).",
    ),
    (
        "py",
        """\
def verdict(request):
    sent = request.messages[-1].content
    ok = "°F" in sent.split("<output>")[-1]
    reason = "states the unit" if ok else "no unit"
    return json.dumps({"pass": ok, "score": 1.0 if ok else 0.0, "reason": reason})


scorers = [
    EqualsExpected(),
    Regex(r"^-?\\d+ °F$", name="format"),
    ToolCalled("to_fahrenheit", name="used the tool"),
    NoDeniedCalls(),
    Turns(max=2),
    LLMJudge("The answer is a temperature in Fahrenheit.", ScriptedModel([verdict])),
]
report = await kode_nb.evaluate(converter(answer_v1), ds, scorers, prompt="convert {c}",
                                epochs=2, cache=False, show=False, name="v1")
report""",
    ),
    (
        "md",
        """\
In JupyterLab or Notebook 7 the report above is interactive: sort the cases by any column,
filter them, and click a case to see its runs and open each run's **trace viewer**. The
**Pass** / **Fail** buttons grade the open case by hand, with a note; the grade is saved in
the notebook and counts as a scorer named `human`. From Python the same grade is:""",
    ),
    (
        "py",
        """\
report.grade("cold", True, "checked by hand")
print(report.score("human"), report.case("body").stat("equals_expected")["reason"])""",
    ),
    ("md", "Version 2 rounds to the nearest degree. Compare it with version 1:"),
    (
        "py",
        """\
def answer_v2(request):
    value = float(kode_nb.ToolResult(content=request.messages[-1].content).text)
    return f"{round(value)} °F"


v2 = await kode_nb.evaluate(converter(answer_v2), ds, scorers, prompt="convert {c}",
                            epochs=2, cache=False, show=False, name="v2")
v2.compare(report)""",
    ),
    (
        "md",
        """\
In CI, the same evaluation runs from a script or a pytest test and fails below a threshold or
on a regression against a saved baseline (`report.save("baseline.json")`):""",
    ),
    (
        "py",
        """\
v2.require(min={"equals_expected": 0.9}, baseline=report)
print(v2.check(min={"equals_expected": 0.9}, baseline=report))
print(report.check(min={"equals_expected": 0.9}))""",
    ),
]


def build() -> object:
    return _notebook_builder.build(CELLS)


def main(argv: list[str] | None = None) -> int:
    return _notebook_builder.main(CELLS, NOTEBOOK, __doc__.splitlines()[0], argv)


if __name__ == "__main__":
    raise SystemExit(main())
