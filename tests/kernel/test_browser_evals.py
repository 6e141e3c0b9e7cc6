"""An evaluation report in JupyterLab: drawn by the extension, a case opened with its trace
viewer, graded by hand (Fail with a note), saved; the saved record holds the grade; reopened
after the kernel is gone (in JupyterLab and in Notebook 7) it shows the grade and the trace.

Needs the Debian ``chromium`` package and Python ``playwright``, and the extension built by
``scripts/dev.sh``; skipped without them (a failure on CI). Saves ``test-artifacts/evals_*.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    TOKEN,
    browser_page,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)
from .conftest import EXT

EVAL = "application/vnd.kode-nb.eval+json"
CELLS = [
    f"%load_ext {EXT}",
    '''\
import kode_nb
from kode_nb import Agent, Executor, ToolRegistry, define_tool
from kode_nb.evals import Case, Dataset, EqualsExpected, ToolCalled
from kode_nb.models import ScriptedModel, call

reg = ToolRegistry()


def square(x: int) -> int:
    """Square a number."""
    return x * x


define_tool(square, registry=reg)
agent = Agent("squarer", tools=["square"], executor=Executor(reg), model=ScriptedModel([
    lambda r: call("square", x=int(r.messages[-1].content.split()[-1])),
    lambda r: f"squared: {r.messages[-1].content[0].data}",
]))
ds = Dataset([Case(name=f"sq{n}", inputs={"n": n}, expected_output=f"squared: {n * n}")
              for n in (2, 3, 4)], name="squares")
report = await kode_nb.evaluate(agent, ds, [EqualsExpected(), ToolCalled("square")],
                                prompt="square {n}", cache=False, show=False, name="v1")
report''',
]


def _open_case_and_check(page: Any, case: str) -> None:
    page.locator(f'.kode-nb-eval tr.kode-nb-eval-case[data-case="{case}"]').click()
    page.wait_for_selector(f'.kode-nb-eval-case-details[data-case="{case}"] .kode-nb-trace')
    page.wait_for_selector(".kode-nb-eval-case-details .kode-nb-span")


def test_grade_save_and_reopen(lab: tuple[str, Path], notebook7: tuple[str, Path]) -> None:
    base, folder = lab
    upload(base, "evals.ipynb", CELLS)
    with browser_page("evals_lab_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/evals.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        run_cell(page, 0)
        run_cell(page, 1)
        wait_output(page, 1, "Evaluation v1", timeout=60)
        page.wait_for_selector(".kode-nb-eval .kode-nb-eval-scorers")
        rows = page.eval_on_selector_all(
            ".kode-nb-eval tr.kode-nb-eval-case", "rs => rs.map(r => r.dataset.case)"
        )
        assert rows == ["sq2", "sq3", "sq4"]
        # sort by case, descending (two clicks on its header)
        page.locator('.kode-nb-eval th[data-key="case"]').click()
        page.locator('.kode-nb-eval th[data-key="case"]').click()
        rows = page.eval_on_selector_all(
            ".kode-nb-eval tr.kode-nb-eval-case", "rs => rs.map(r => r.dataset.case)"
        )
        assert rows == ["sq4", "sq3", "sq2"]
        _open_case_and_check(page, "sq3")
        page.screenshot(path=str(ARTIFACTS / "evals_lab_case.png"), full_page=True)
        page.locator(".kode-nb-eval-note").fill("the answer needs a sentence")
        page.locator(".kode-nb-eval-grade-fail").click()
        page.wait_for_function(
            "() => document.querySelector('.kode-nb-eval-grade-now')?.textContent"
            ".includes('Graded by hand: fail')"
        )
        assert page.locator('.kode-nb-eval tr[data-scorer="human"]').count() == 1
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")
        page.wait_for_timeout(500)
        page.screenshot(path=str(ARTIFACTS / "evals_lab_graded.png"), full_page=True)
        shutdown_kernel(page)

    nb = json.loads((folder / "evals.ipynb").read_text())
    record = next(
        o["data"][EVAL]
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if EVAL in o.get("data", {})
    )
    assert record["human"]["sq3"]["passed"] is False
    assert record["human"]["sq3"]["note"] == "the answer needs a sentence"
    text = next(
        "".join(o["data"]["text/plain"])
        for c in nb["cells"]
        for o in c.get("outputs", [])
        if EVAL in o.get("data", {})
    )
    assert "  human: 1 graded, 0 pass" in text

    def reopened(page: Any, shot: str) -> None:
        page.wait_for_selector(".kode-nb-eval .kode-nb-eval-scorers", timeout=60_000)
        human = page.locator('.kode-nb-eval tr[data-scorer="human"] .kode-nb-eval-result')
        assert human.inner_text() == "0.0%"
        _open_case_and_check(page, "sq3")
        assert (
            "Graded by hand: fail (the answer needs a sentence)"
            in page.locator(".kode-nb-eval-case-details").inner_text()
        )
        page.screenshot(path=str(ARTIFACTS / shot), full_page=True)

    with browser_page("evals_reopened_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/evals.ipynb?token={TOKEN}&reset")
        reopened(page, "evals_lab_reopened.png")

    base7, folder7 = notebook7
    (folder7 / "evals7.ipynb").write_text((folder / "evals.ipynb").read_text())
    with browser_page("evals_notebook7_failure.png") as (page, _errors):
        page.goto(f"{base7}/notebooks/evals7.ipynb?token={TOKEN}")
        reopened(page, "evals_notebook7_reopened.png")
