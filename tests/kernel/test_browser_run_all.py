"""Run All in JupyterLab (headless Chromium, the kode_nb extension enabled) gives every code cell
its execution count: notebooks/02-teaching.ipynb (steps, awaited pauses, a fork, a divergence)
and a stress notebook of our own (approvals clicked by code, many runs, an MCP server served
and connected), each run with "Restart Kernel and Run All" several times in a row.

``KODE_NB_RUN_ALL_TIMES`` (default 3) sets how many times; 20 is the release check.
Saves ``test-artifacts/browser_run_all_failure.png`` when a cell is left without its count.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from .browser import NEEDS_LABEXTENSION, TOKEN, api, browser_page, wait_for_idle_kernel
from .conftest import EXT

pytestmark = NEEDS_LABEXTENSION

ROOT = Path(__file__).resolve().parents[2]
TIMES = int(os.environ.get("KODE_NB_RUN_ALL_TIMES", "3"))

STRESS = [
    f"%load_ext {EXT}",
    "%approval ask",
    '''%%tool --kind edit
NOTES = {}


def write_note(title: str, text: str) -> str:
    """Save a note.

    Args:
        title: The title.
        text: The text.
    """
    NOTES[title] = text
    return f"saved {title}"''',
    '''%%tool --kind read
def peek(title: str) -> str:
    """Read a note.

    Args:
        title: The title.
    """
    return NOTES.get(title, "no such note")''',
    "h = %tool write_note title=a text=one",
    "import asyncio\n\nwhile h.status != 'waiting for approval' and not h.done():\n"
    "    await asyncio.sleep(0.05)\nh.approve()\nprint((await h).text)",
    """from kode_nb.models import ScriptedModel, Turn, call


def make():
    return ScriptedModel([Turn(calls=[call("peek", title="a")]), "It says one."])

%model $make""",
    "%%ask --tools peek --out r1\nWhat does note a say?",
    "%%ask --tools peek --out r2\nWhat does note a say?",
    "%%ask --step --tools peek --out s\nWhat does note a say?",
    "point = await s.step.paused()\npoint.next()\npoint = await s.step.paused()\nprint(point.kind)",
    "point.run_to_end()\nprint((await s).output, (await r1).output, (await r2).output)",
    "%mcp serve --tools peek",
    "import kode_nb\nawait kode_nb.settle()\nprint('settled')",
]


def _cells(page: Any) -> list[dict[str, Any]]:
    return list(
        page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.widgets
                 .filter(c => c.model.type === 'code')
                 .map((c, i) => ({i, count: c.model.executionCount,
                                  prompt: c.node.querySelector('.jp-InputPrompt')?.innerText ?? '',
                                  error: [...c.node.querySelectorAll(
                                    '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')]
                                    .map(n => n.innerText).join(' | ').slice(-300),
                                  source: c.model.sharedModel.getSource().slice(0, 60)}))"""
        )
    )


def _run_all(page: Any, timeout: float) -> list[dict[str, Any]]:
    """Restart the kernel and run every cell; the code cells once the kernel has been idle for
    a while after the last cell got its count (or the time is up)."""
    page.evaluate(
        """async () => {
          const panel = window.jupyterapp.shell.currentWidget;
          if (window.kodeRunAllDone) { await panel.sessionContext.restartKernel(); }
          window.kodeRunAllDone = true;
          window.jupyterapp.commands.execute('notebook:run-all-cells');
        }"""
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(0.5)
        cells = _cells(page)
        if all(c["count"] is not None for c in cells):
            return cells
    return _cells(page)


@pytest.mark.parametrize("name", ["02-teaching.ipynb", "stress"])
def test_run_all_gives_every_cell_its_count(lab: tuple[str, Path], name: str) -> None:
    base, _ = lab
    if name == "stress":
        from .browser import upload

        upload(base, "stress.ipynb", STRESS)
        name = "stress.ipynb"
    else:
        content = json.loads((ROOT / "notebooks" / name).read_text(encoding="utf-8"))
        api(base, f"/api/contents/{name}", "PUT",
            {"type": "notebook", "format": "json", "content": content})  # fmt: skip
    hung: list[str] = []
    with browser_page(f"browser_run_all_{name}.png") as (page, errors):
        page.goto(f"{base}/lab/tree/{name}?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        for attempt in range(TIMES):
            cells = _run_all(page, timeout=120)
            left = [c for c in cells if c["count"] is None]
            errors_shown = [f"code cell {c['i'] + 1}: {c['error']}" for c in cells if c["error"]]
            if left and errors_shown:
                left = left[:1]
                left[0] = {**left[0], "prompt": "after an error: " + " | ".join(errors_shown)}
            if left:
                hung.append(f"run {attempt + 1}: " + "; ".join(
                    f"code cell {c['i'] + 1} {c['prompt']} {c['source']!r}" for c in left))  # fmt: skip
        print(f"{name}: {TIMES - len(hung)} of {TIMES} Run All without a hung cell")
        if hung:
            page.screenshot(path=f"test-artifacts/browser_run_all_{name}.png", full_page=True)
            print("console errors:", errors[-10:])
    assert not hung, "\n".join(hung)
