"""The kode_nb tools panel in Notebook 7's notebook page (``/notebooks/<name>.ipynb``), headless
Chromium: the panel is in the page's left area (hidden until opened, like every Notebook 7
sidebar), View > Left Sidebar and ``kode-nb:show-tools`` open it, and it shows a tool within seconds of
its ``%%tool`` cell. The trace viewer's "Expand into cells" works there too, and lists what the
kernel cannot reproduce (a tool removed since the run).

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``), and
the extension built into the dev venv (``bash scripts/dev.sh install``). Saves
``test-artifacts/notebook7_panel.png``.
"""

from __future__ import annotations

from pathlib import Path

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
)
from .conftest import EXT
from .test_browser_expand import RUN
from .test_browser_tools_panel import ADD, PANEL

pytestmark = NEEDS_LABEXTENSION

CELLS = [
    f"%load_ext {EXT}", ADD, "h = %tool add a=2 b=3",
    RUN.replace("define_tool(add, inline=True)\n", ""), "%tools remove add",
]  # fmt: skip


def test_the_tools_panel_in_notebook_7(notebook7: tuple[str, Path]) -> None:
    base, _ = notebook7
    upload(base, "panel7.ipynb", CELLS)
    with browser_page("notebook7_panel_failure.png") as (page, errors):
        page.goto(f"{base}/notebooks/panel7.ipynb?token={TOKEN}")
        wait_for_idle_kernel(page)
        assert page.evaluate("() => window.jupyterapp.name") == "Jupyter Notebook"
        # in the left area, which Notebook 7 keeps closed until asked
        left = page.evaluate("() => [...window.jupyterapp.shell.widgets('left')].map(w => w.id)")
        assert "kode-nb-tools-panel" in left
        assert page.evaluate("() => window.jupyterapp.shell.leftCollapsed") is True
        panel = page.locator(PANEL)
        assert not panel.is_visible()

        # View > Left Sidebar lists it (Notebook 7: one entry per sidebar widget, by its label)
        page.locator(".lm-MenuBar-itemLabel", has_text="View").click()
        page.locator(".lm-Menu-itemLabel", has_text="Left Sidebar").first.click()
        item = page.locator(".lm-Menu-itemLabel", has_text="kode_nb tools")
        item.first.wait_for(timeout=30_000)
        item.first.click()
        panel.wait_for(state="visible", timeout=30_000)
        assert page.evaluate("() => window.jupyterapp.shell.leftCollapsed") is False
        panel.get_by_text("kode_nb is not loaded in this kernel").wait_for(timeout=20_000)

        # closed again, then opened by the command
        page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
        panel.wait_for(state="hidden", timeout=30_000)
        page.evaluate("() => window.jupyterapp.commands.execute('kode-nb:show-tools')")
        panel.wait_for(state="visible", timeout=30_000)

        run_cell(page, 0)
        panel.get_by_text("No tools yet").wait_for(timeout=20_000)
        run_cell(page, 1)
        wait_output(page, 1, "add")
        row = panel.locator('.kode-nb-panel-row[data-tool="add"]')
        row.wait_for(timeout=30_000)
        assert "calls=0" in row.inner_text()
        run_cell(page, 2)
        wait_output(page, 2, "5")
        page.wait_for_function(
            """() => {
              const row = document.querySelector('.kode-nb-panel-row[data-tool="add"]');
              return row && row.textContent.includes('calls=1');
            }""",
            timeout=30_000,
        )
        page.screenshot(path=str(ARTIFACTS / "notebook7_panel.png"), full_page=True)

        # the trace viewer's Expand into cells, in Notebook 7's page
        run_cell(page, 3)
        wait_output(page, 3, "ANSWER: ")
        run_cell(page, 4)
        panel.locator('.kode-nb-panel-row[data-tool="add"]').wait_for(state="detached")
        viewer = page.locator(".jp-Cell").nth(3).locator(".kode-nb-trace").last  # the trace record
        viewer.get_by_role("button", name="Expand into cells").click()
        viewer.locator(".kode-nb-trace-status").get_by_text("Inserted").wait_for(timeout=20_000)
        notes = viewer.locator(".kode-nb-trace-notes li").all_inner_texts()
        assert len(notes) == 2, notes  # the helper's call of add, and the main run's
        assert all(n.startswith("tool `add` (call ") for n in notes), notes
        assert all("is not registered in this kernel" in n for n in notes), notes
        page.wait_for_function(
            "() => window.jupyterapp.shell.currentWidget.content.widgets.filter(c => c.isHidden)"
            ".length > 10",
            timeout=10_000,
        )
        first_new = page.evaluate(
            "() => window.jupyterapp.shell.currentWidget.content.widgets[4].model"
            ".getMetadata('kode_nb').role"
        )
        assert first_new == "setup"
        page.screenshot(path=str(ARTIFACTS / "notebook7_expand.png"), full_page=True)
        assert not [e for e in errors if "kode" in e.lower() or "comm" in e.lower()], errors
        shutdown_kernel(page)
