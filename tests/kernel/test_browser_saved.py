"""A notebook executed in a real JupyterLab, saved, and reopened (a new kernel; untrusted; in
Notebook 7) shows every kode_nb view's final state, never "Error displaying widget: model not
found": once final, a view's output is replaced in place by its static record (no widget MIME
type), whose HTML stays readable after the sanitizer of an untrusted notebook.

The kode_nb JupyterLab extension (built by ``scripts/dev.sh``) draws the records' JSON, in
untrusted notebooks too; the HTML fallback is checked in ``tests/test_ui_records.py``. Needs the Debian ``chromium`` package and Python
``playwright``; skipped without them (a failure on CI). Saves ``test-artifacts/saved_*.png``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .browser import (
    ARTIFACTS,
    TOKEN,
    WRITE_NOTE,
    api,
    browser_page,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)
from .conftest import EXT

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
CELLS = [
    f"%load_ext {EXT}",
    WRITE_NOTE,
    "h = %tool write_note path=saved.txt text=kept",
    "from kode_nb.models import ScriptedModel\n\n\ndef make_main():\n"
    '    return ScriptedModel(["**Final** answer: 42."])',
    "%%ask --model $make_main\nWhat is the answer?",
    "%tools",
    # the form expanded cells write: the call awaited in its cell, its approval clicked meanwhile
    "import kode_nb\nexecutor = kode_nb.Executor()\n"
    "r = await executor.call('write_note', {'path': 'awaited.txt', 'text': 'kept'})\nprint(r.status)",
]
AWAITED = 6
"""The cell awaiting a call that asks for approval."""
BROKEN = ("Error displaying widget", "model not found", "Not finished", "waiting", "Waiting")


def _page_text(page: Any) -> str:
    return str(page.evaluate("() => document.querySelector('.jp-Notebook').innerText"))


def _wait_rendered(page: Any, text: str) -> None:
    page.wait_for_selector(".jp-Notebook .jp-OutputArea-output", timeout=60_000)
    page.wait_for_function(
        "(t) => document.querySelector('.jp-Notebook').innerText.includes(t)", arg=text,
        timeout=30_000,
    )  # fmt: skip
    page.wait_for_timeout(1_500)  # a widget output that fails says so after its model lookup


def _saved_outputs(folder: Path, name: str) -> list[dict[str, Any]]:
    nb = json.loads((folder / name).read_text())
    return [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]


def _check_reopened(page: Any, shot: str) -> str:
    text = _page_text(page)
    page.screenshot(path=str(ARTIFACTS / shot), full_page=True)
    for broken in BROKEN:
        assert broken not in text, f"{broken!r} in the reopened notebook"
    assert "wrote 4 characters to saved.txt" in text  # the call's final result
    assert "wrote 4 characters to awaited.txt" in text  # the awaited call's record
    assert "Approved" in text  # the decided approval, on one line (✔ in the HTML fallback)
    assert "Final answer: 42." in text  # the run's answer, markdown rendered
    assert "starting" not in text
    assert "running" not in text
    return text


@pytest.fixture(scope="module")
def saved(lab: tuple[str, Path]) -> Path:
    """``saved.ipynb``, executed in JupyterLab (the write approved by a click) and saved; every
    test that reads it gets it from here, whichever test runs first or alone."""
    base, folder = lab
    upload(base, "saved.ipynb", CELLS)
    with browser_page("saved_lab_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/saved.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        for i in (0, 1, 2):
            run_cell(page, i)
        approve = page.get_by_role("button", name="Approve")
        approve.wait_for(timeout=20_000)
        approve.click()
        wait_output(page, 2, "wrote 4 characters to saved.txt")
        assert approve.count() == 0  # decided: the buttons are gone
        for i in (3, 4, 5):
            run_cell(page, i)
        wait_output(page, 4, "Final answer: 42.")
        wait_output(page, 5, "write_note")
        page.evaluate(  # not awaited: the cell runs until the click below
            """(i) => {
              const nb = window.jupyterapp.shell.currentWidget.content;
              nb.activeCellIndex = i;
              window.jupyterapp.commands.execute('notebook:run-cell');
            }""",
            AWAITED,
        )
        approve = page.get_by_role("button", name="Approve")
        approve.wait_for(timeout=20_000)
        approve.click()
        wait_output(page, AWAITED, "wrote 4 characters to awaited.txt")
        wait_output(page, AWAITED, "ok")
        assert approve.count() == 0
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_timeout(1_000)
        page.screenshot(path=str(ARTIFACTS / "saved_lab_live.png"), full_page=True)
        shutdown_kernel(page)
    return folder / "saved.ipynb"


def test_executed_saved_and_reopened_notebooks_show_final_states(
    lab: tuple[str, Path], saved: Path
) -> None:
    base, folder = lab
    outputs = _saved_outputs(folder, saved.name)
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    kinds = {k for o in outputs for k in o.get("data", {}) if k.startswith("application/vnd.kode")}
    assert kinds == {
        "application/vnd.kode-nb.card+json", "application/vnd.kode-nb.call+json",
        "application/vnd.kode-nb.run+json", "application/vnd.kode-nb.table+json",
    }  # fmt: skip

    # reopened: a new kernel, none of the widget models of the run that made it
    with browser_page("saved_lab_reopened_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/saved.ipynb?token={TOKEN}&reset")
        _wait_rendered(page, "Final answer: 42.")
        _check_reopened(page, "saved_lab_reopened.png")

    # untrusted: a copy saved by the contents API is not signed (the server signs what a trusted
    # session saves), so JupyterLab sanitizes its HTML (no style attributes survive)
    content = api(base, "/api/contents/saved.ipynb")["content"]
    for cell in content["cells"]:  # as a notebook from elsewhere: no trust marks, and not
        cell["metadata"].pop("trusted", None)  # the very content this server signed
    content["metadata"]["copied_from"] = "saved.ipynb"
    api(base, "/api/contents/untrusted.ipynb", "PUT",
        {"type": "notebook", "format": "json", "content": content})  # fmt: skip
    assert api(base, "/api/contents/untrusted.ipynb")["content"]["cells"][2]["metadata"].get(
        "trusted"
    ) in (None, False)
    with browser_page("saved_untrusted_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/untrusted.ipynb?token={TOKEN}&reset")
        _wait_rendered(page, "Final answer: 42.")
        trusted = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.model.cells.get(2).trusted"
        )
        assert trusted is False
        _check_reopened(page, "saved_untrusted.png")
        structure = page.evaluate(
            """() => {
              const outs = document.querySelectorAll('.jp-Notebook .jp-OutputArea-output');
              const html = Array.from(outs).map(o => o.innerHTML).join('');
              const kode = (c) => document.querySelectorAll(`.jp-Notebook .${c}`).length;
              return {call: kode('kode-nb-call'), run: kode('kode-nb-run'),
                      table: kode('kode-nb-table-record'), html: html.includes('<details')};
            }"""
        )
        # kode_nb's renderers are safe: they draw untrusted records too (not the HTML fallback)
        assert structure["call"] >= 1, structure
        assert structure["run"] >= 1, structure
        assert structure["table"] >= 1, structure


def test_a_saved_notebook_reopens_in_notebook_7(saved: Path, notebook7: tuple[str, Path]) -> None:
    base, folder = notebook7
    (folder / "saved7.ipynb").write_text(saved.read_text())
    with browser_page("saved_notebook7_failure.png") as (page, _errors):
        page.goto(f"{base}/notebooks/saved7.ipynb?token={TOKEN}")
        _wait_rendered(page, "Final answer: 42.")
        assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
        _check_reopened(page, "saved_notebook7.png")
