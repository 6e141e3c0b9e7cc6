"""A notebook executed headless by ``jupyter nbconvert --execute`` (how docs sites, CI and
scheduled reports run notebooks), opened afterwards in a real JupyterLab and in Notebook 7 with
no kernel: every kode_nb output is its final record, never "model not found" or a first state,
and the run records draw the trace viewer. The notebook is the one
``test_kernel_headless.py`` checks as JSON (calls and runs that end in the background, a run
from Python, an approval nobody can give); here it is what a person sees. Saves
``test-artifacts/headless_*.png``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .browser import ARTIFACTS, TOKEN, browser_page
from .test_kernel_headless import _notebook, nbformat, run_nbconvert

BROKEN = ("Error displaying widget", "model not found", "Loading widget")


@pytest.fixture(scope="module")
def executed(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The notebook's JSON as ``jupyter nbconvert --execute`` saved it."""
    tmp = tmp_path_factory.mktemp("headless-browser")
    src, out = tmp / "headless.ipynb", tmp / "headless.out.ipynb"
    nbformat.write(_notebook(), src)
    run_nbconvert(src, out, tmp)
    return out.read_text(encoding="utf-8")


def _check(page: Any, shot: str) -> None:
    page.wait_for_selector(".jp-Notebook .kode-nb-trace .kode-nb-span", timeout=60_000)
    page.wait_for_function(
        "() => document.querySelector('.jp-Notebook').innerText.includes('It said PEAR.')",
        timeout=30_000,
    )
    page.wait_for_timeout(1_500)  # a widget output that fails says so after its model lookup
    text = str(page.evaluate("() => document.querySelector('.jp-Notebook').innerText"))
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    for broken in BROKEN:
        assert broken not in text, f"{broken!r} in the executed notebook"
    for final in ("KIWI", "PLUM", "It said FIG.", "It said LIME."):  # calls' results, runs' answers
        assert final in text, final
    assert "Not finished when this output was saved" in text  # the call still going, in words
    assert "nobody approved this call within 2 s" in text  # the runner's denial, in words
    assert "running, 0 turns" not in text
    counts = page.evaluate(
        """() => ({
          run: document.querySelectorAll('.jp-Notebook .kode-nb-run').length,
          call: document.querySelectorAll('.jp-Notebook .kode-nb-call').length,
          trace: document.querySelectorAll('.jp-Notebook .kode-nb-trace').length,
        })"""
    )
    assert counts["run"] >= 3, counts  # %%ask, and the two runs from Python
    assert counts["call"] >= 3, counts
    assert counts["trace"] >= 3, counts  # each run record draws its trace


def test_a_headless_executed_notebook_opens_final_in_jupyterlab(
    lab: tuple[str, Path], executed: str
) -> None:
    base, folder = lab
    (folder / "headless.ipynb").write_text(executed, encoding="utf-8")
    with browser_page("headless_lab_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/headless.ipynb?token={TOKEN}&reset")
        _check(page, "headless_lab.png")


def test_a_headless_executed_notebook_opens_final_in_notebook_7(
    notebook7: tuple[str, Path], executed: str
) -> None:
    base, folder = notebook7
    (folder / "headless7.ipynb").write_text(executed, encoding="utf-8")
    with browser_page("headless_notebook7_failure.png") as (page, _errors):
        page.goto(f"{base}/notebooks/headless7.ipynb?token={TOKEN}")
        _check(page, "headless_notebook7.png")
