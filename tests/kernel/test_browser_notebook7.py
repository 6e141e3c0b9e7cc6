"""End to end in Notebook 7 (``jupyter notebook``) in headless Chromium: a notebook opened at
``/notebooks/<name>.ipynb``, a tool defined with ``%%tool``, a write call approved with a real
click on the Approve button, the result shown and the file written.

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``);
skipped without them (a failure on CI). Saves ``test-artifacts/browser_notebook7.png``.
"""

from __future__ import annotations

from pathlib import Path

from .browser import (
    ARTIFACTS,
    TOKEN,
    WRITE_NOTE,
    browser_page,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)
from .conftest import EXT

CELLS = [
    f"%load_ext {EXT}",
    WRITE_NOTE,
    "h = %tool write_note path=note7.txt text=hello-from-notebook-7",
]


def test_approve_in_notebook_7_runs_the_tool(notebook7: tuple[str, Path]) -> None:
    base, folder = notebook7
    upload(base, "kode_nb7.ipynb", CELLS)
    with browser_page("browser_notebook7_failure.png") as (page, errors):
        page.goto(f"{base}/notebooks/kode_nb7.ipynb?token={TOKEN}")
        wait_for_idle_kernel(page)
        # Notebook 7's own page, not JupyterLab's
        assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
        assert page.evaluate("() => window.jupyterapp.version").startswith("7.")
        for i in (0, 1):
            run_cell(page, i)
        wait_output(page, 1, "write_note")
        run_cell(page, 2)
        approve = page.get_by_role("button", name="Approve")
        approve.wait_for(timeout=20_000)
        wait_output(page, 2, "waiting for approval")
        assert not (folder / "note7.txt").exists()  # waiting: nothing written yet
        approve.click()  # a real click, through Notebook 7's widget manager
        shown = wait_output(page, 2, "wrote 21 characters to note7.txt")
        assert "Approved" in shown
        assert (folder / "note7.txt").read_text() == "hello-from-notebook-7"
        assert approve.count() == 0  # decided: one line, the buttons gone
        page.screenshot(path=str(ARTIFACTS / "browser_notebook7.png"), full_page=True)
        assert not [e for e in errors if "rate exceeded" in e.lower()]
        shutdown_kernel(page)
