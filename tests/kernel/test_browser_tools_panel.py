"""The kode_nb tools panel in a real browser (JupyterLab in headless Chromium): its empty state
before ``%load_ext``, a tool's row within a second of its ``%%tool`` cell, the call count after a
call, the search box, the card, "Insert call cell" (a runnable ``%tool`` cell), and the notebook
tools answered by the real front end (``list_cells``).

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``), and
the extension built into the dev venv (``bash scripts/dev.sh install``). Saves
``test-artifacts/tools_panel_*.png``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    NEEDS_LABEXTENSION,
    TOKEN,
    browser_page,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)  # fmt: skip
from .conftest import EXT

pytestmark = NEEDS_LABEXTENSION

ADD = '''%%tool --kind read
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    return a + b'''

CELLS = [
    "x = 1",
    f"%load_ext {EXT}",
    ADD,
    "h = %tool add a=1 b=2",
    "from kode_nb.builtins import register_builtins\n_ = register_builtins(groups='notebook')",
    "c = %tool list_cells limit=3",
    "import asyncio\nfrom kode_nb.ui.notebook_comm import insert_cells\n"
    "async def later():\n"
    "    await asyncio.sleep(1)\n"
    "    return await insert_cells([{'cell_type': 'markdown', 'metadata': {},"
    " 'source': 'inserted below'}])\n"
    "t = asyncio.ensure_future(later())",
]
PANEL = "#kode-nb-tools-panel"


def _panel_text(page: Any) -> str:
    return str(page.locator(PANEL).inner_text())


def _cell_source(page: Any, index: int) -> str:
    return str(
        page.evaluate(
            "(i) => window.jupyterapp.shell.currentWidget.content.widgets[i].model"
            ".sharedModel.getSource()",
            index,
        )
    )


def test_the_panel_follows_the_kernel_tools(lab: tuple[str, Path]) -> None:
    base, _ = lab
    upload(base, "panel.ipynb", CELLS)
    with browser_page("tools_panel_failure.png") as (page, errors):
        _drive(page, base)
        assert not [e for e in errors if "kode" in e.lower() or "comm" in e.lower()], errors


def _drive(page: Any, base: str) -> None:
    page.goto(f"{base}/lab/tree/panel.ipynb?token={TOKEN}&reset")
    wait_for_idle_kernel(page)
    page.evaluate("() => window.jupyterapp.shell.activateById('kode-nb-tools-panel')")
    panel = page.locator(PANEL)
    panel.get_by_text("kode_nb is not loaded in this kernel").wait_for(timeout=20_000)
    assert "%load_ext kode_nb" in _panel_text(page)
    page.screenshot(path=str(ARTIFACTS / "tools_panel_empty.png"))

    run_cell(page, 0)
    run_cell(page, 1)  # the panel opens its comm again after a cell mentioning kode_nb
    panel.get_by_text("No tools yet").wait_for(timeout=20_000)

    run_cell(page, 2)
    wait_output(page, 2, "add")
    t0 = time.monotonic()
    row = panel.locator('.kode-nb-panel-row[data-tool="add"]')
    row.wait_for(timeout=30_000)
    shown_after = time.monotonic() - t0
    assert shown_after < 1.0, f"the row showed {shown_after:.2f} s after the cell's output"
    assert "calls=0" in row.inner_text()
    assert row.locator(".kode-nb-kind").text_content() == "read"

    run_cell(page, 3)
    wait_output(page, 3, "3")
    page.wait_for_function(
        """() => {
          const row = document.querySelector('.kode-nb-panel-row[data-tool="add"]');
          return row && row.textContent.includes('calls=1');
        }""",
        timeout=30_000,
    )

    search = panel.locator(".kode-nb-panel-search")
    search.fill("no-such-tool")
    assert row.count() == 0
    assert "0 of 1 tools" in _panel_text(page)
    search.fill("add")
    row.wait_for(timeout=30_000)
    search.fill("")

    # the notebook tools, answered by this front end
    run_cell(page, 4)
    wait_output(page, 4, "")
    panel.locator('.kode-nb-panel-row[data-tool="list_cells"]').wait_for(timeout=30_000)
    run_cell(page, 5)
    listed = wait_output(page, 5, "load_ext kode_nb")
    assert '"total": 7' in listed
    run_cell(page, 6)  # insert_cells: below the cell that asked, wherever the cursor is
    page.evaluate("() => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = 0; }")
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.length === 8", timeout=30_000
    )
    assert _cell_source(page, 7) == "inserted below"

    # the card and "Insert call cell" below the active cell
    page.evaluate("() => { window.jupyterapp.shell.currentWidget.content.activeCellIndex = 3; }")
    row.click()
    panel.locator(".kode-nb-card").wait_for(timeout=30_000)
    assert "Parameter" in _panel_text(page)
    page.screenshot(path=str(ARTIFACTS / "tools_panel_card.png"))
    panel.get_by_role("button", name="Insert call cell").click()
    page.wait_for_function(
        "() => window.jupyterapp.shell.currentWidget.content.widgets.length === 9", timeout=30_000
    )
    assert _cell_source(page, 4) == "%tool add a=... b=..."
    page.evaluate(
        """() => window.jupyterapp.shell.currentWidget.content.widgets[4].model.sharedModel
             .setSource('%tool add a=20 b=22')"""
    )
    run_cell(page, 4)
    wait_output(page, 4, "42")
    panel.get_by_role("button", name="← Tools").click()
    page.wait_for_function(
        """() => {
          const row = document.querySelector('.kode-nb-panel-row[data-tool="add"]');
          return row && row.textContent.includes('calls=2');
        }""",
        timeout=30_000,
    )
    page.screenshot(path=str(ARTIFACTS / "tools_panel.png"))
    shutdown_kernel(page)
