"""End to end in a real browser: JupyterLab in headless Chromium, a tool defined with
``%%tool``, a write call approved with a real click, a 20,000-update stream drawn exactly; agent
runs that end right after their approval, and calls that end at once (each live view replaced by
its record while it is still gaining rows), log no widget errors.

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``);
skipped without them. Saves ``test-artifacts/browser_lab.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    TOKEN,
    WRITE_NOTE,
    browser_page,
    docs_screenshot,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)  # fmt: skip
from .conftest import EXT

N_UPDATES = 20_000
CELLS = [
    f"%load_ext {EXT}",
    WRITE_NOTE,
    "h = %tool write_note path=note.txt text=hello-from-the-browser",
    '''%%tool --kind read
import time

from kode_nb import ToolContext

def count(n: int, ctx: ToolContext) -> str:
    """Stream the numbers below n, then rest a little (the live view is read meanwhile).

    Args:
        n: How many.
    """
    for i in range(n):
        ctx.on_update(f"{i},")
    time.sleep(4)
    return "counted"
''',
    f"s = %tool count n={N_UPDATES}",
    '''%%tool --kind read
def echo(text: str) -> str:
    """Echo the text.

    Args:
        text: What to echo.
    """
    return text
''',
    # approved, then a burst of calls and the answer at once: the view gains rows and is
    # replaced by its record within moments
    """from kode_nb.models import ScriptedModel, Turn, call

def burst():
    return ScriptedModel([
        call("write_note", path="burst.txt", text="x"),
        Turn(calls=[call("echo", text=str(i)) for i in range(4)]),
        "done.",
    ])

%model $burst""",
    "%%ask --tools write_note,echo --out r1\nGo.",
    "%%ask --tools write_note,echo --out r2\nGo.",
    "%%ask --tools write_note,echo --out r3\nGo.",
    # calls that end at once, one after another: each view is replaced as it is drawn
    "for i in range(5):\n    e = %tool echo text=quick\n    await e\nprint('quick done')",
]


def test_approve_in_jupyterlab_runs_the_tool_and_streams_exactly(lab: tuple[str, Path]) -> None:
    base, folder = lab
    upload(base, "kode_browser.ipynb", CELLS)
    with browser_page("browser_lab_failure.png") as (page, errors):
        _drive(page, base, folder, errors)


def _drive(page: Any, base: str, folder: Path, errors: list[str]) -> None:
    page.goto(f"{base}/lab/tree/kode_browser.ipynb?token={TOKEN}&reset")
    wait_for_idle_kernel(page)
    for i in (0, 1):
        run_cell(page, i)
    wait_output(page, 1, "write_note")
    run_cell(page, 2)
    approve = page.get_by_role("button", name="Approve")  # its name includes the icon
    approve.wait_for(timeout=20_000)
    assert not (folder / "note.txt").exists()  # waiting: nothing written yet
    docs_screenshot(page.locator(".jp-Notebook .jp-Cell").nth(2), "approval.png")
    approve.click()  # a real click, through JupyterLab's widget manager
    shown = wait_output(page, 2, "wrote 22 characters to note.txt")
    assert "Approved" in shown
    assert (folder / "note.txt").read_text() == "hello-from-the-browser"
    assert approve.count() == 0  # decided: one line, the buttons gone

    run_cell(page, 3)
    run_cell(page, 4)
    expected = "".join(f"{i}," for i in range(N_UPDATES))
    stream_js = """() => {
      const cell = window.jupyterapp.shell.currentWidget.content.widgets[4];
      const pre = cell.node.querySelector('.kode-stream');
      return pre ? pre.textContent : null;
    }"""
    page.wait_for_function(f"() => ({stream_js})() && ({stream_js})().length >= {len(expected)}",
                           timeout=30_000)  # fmt: skip
    assert page.evaluate(stream_js) == expected  # the live view, while the call still runs
    wait_output(page, 4, "counted")
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.scrollToItem(2)")
    page.screenshot(path=str(ARTIFACTS / "browser_lab.png"), full_page=True)
    assert not [e for e in errors if "rate exceeded" in e.lower()]

    run_cell(page, 5)
    run_cell(page, 6)
    for i in (7, 8, 9):
        run_cell(page, i)
        cell = page.locator(".jp-Notebook .jp-Cell").nth(i)
        cell.get_by_role("button", name="Approve").wait_for(timeout=20_000)
        cell.get_by_role("button", name="Approve").click()
        wait_output(page, i, "done.")
    run_cell(page, 10)
    wait_output(page, 10, "quick done")
    page.wait_for_timeout(1000)  # what the replaced views were still sent arrives
    widget_errors = ("processLuminoMessage", "Could not add child view")
    assert not [e for e in errors if any(w in e for w in widget_errors)], errors
    shutdown_kernel(page)
