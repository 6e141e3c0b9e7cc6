"""Stepping through a nested run in JupyterLab (headless Chromium), with real clicks:
``%%ask --step`` on an agent that calls a subagent; the pauses of both runs show their buttons
in the live view, an invalid argument edit is refused in place, a valid one goes through, and
the final record says what was changed by hand.

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``);
skipped without them. Saves ``test-artifacts/browser_step_paused.png``,
``browser_step_refused.png`` and ``browser_step_done.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    TOKEN,
    browser_page,
    click_only,
    output_text,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)  # fmt: skip
from .conftest import EXT

CELLS = [
    f"%load_ext {EXT}",
    '''%%tool --kind read
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b
''',
    """from kode_nb import ToolResult
from kode_nb.models import ScriptedModel, call

def last_text(request):
    return ToolResult(content=request.messages[-1].content).text

def make_helper():
    return ScriptedModel([call("add", a=2, b=3), lambda r: "Helper got " + last_text(r)])

def make_main():
    return ScriptedModel([call("helper", task="2+3"), lambda r: "Main got " + last_text(r)])
""",
    """%%agent helper
---
description: Adds two numbers.
tools: [add]
model: $make_helper
---
Add: {task}
""",
    "%%ask --step --model $make_main --tools helper --out h\nWhat is 2+3?",
]
ASK = 4


def test_stepping_through_a_nested_run_by_clicking(lab: tuple[str, Path]) -> None:
    base, _folder = lab
    upload(base, "kode_step.ipynb", CELLS)
    with browser_page("browser_step_failure.png") as (page, _errors):
        _drive(page, base)


def _paused_at(page: Any, text: str) -> None:
    """Wait until the one waiting prompt of the run cell says ``text``."""
    page.wait_for_function(
        """([i, text]) => {
          const cell = window.jupyterapp.shell.currentWidget.content.widgets[i];
          const boxes = [...cell.node.querySelectorAll('.jp-OutputArea .widget-vbox')]
            .filter(b => [...b.querySelectorAll(':scope > .widget-hbox button')]
              .some(x => x.innerText.trim() === 'Next'));
          return boxes.length === 1 && boxes[0].innerText.includes(text);
        }""",
        arg=[ASK, text],
        timeout=20_000,
    )


def _drive(page: Any, base: str) -> None:
    page.goto(f"{base}/lab/tree/kode_step.ipynb?token={TOKEN}&reset")
    wait_for_idle_kernel(page)
    for i in range(ASK):
        run_cell(page, i)
    wait_output(page, 3, "registered")
    run_cell(page, ASK)

    _paused_at(page, "before model request — agent main, turn 1")
    click_only(page, "Next")
    _paused_at(page, "before running tool helper — agent main, turn 1")
    click_only(page, "Next")
    _paused_at(page, "before model request — agent helper (subagent, depth 1), turn 1")
    page.screenshot(path=str(ARTIFACTS / "browser_step_paused.png"), full_page=True)
    click_only(page, "Next")
    _paused_at(page, "before running tool add — agent helper (subagent, depth 1), turn 1")
    editor = page.locator(".jp-OutputArea textarea").first
    assert '"a": 2' in editor.input_value()
    editor.fill('{"a": "seven", "b": 3}')
    click_only(page, "Edit")
    page.get_by_text("Edit refused").wait_for(timeout=20_000)
    assert "Invalid arguments for tool 'add'" in output_text(page, ASK)
    page.screenshot(path=str(ARTIFACTS / "browser_step_refused.png"), full_page=True)
    editor.fill('{"a": 7, "b": 3}')
    click_only(page, "Edit")
    _paused_at(page, "before model request — agent helper (subagent, depth 1), turn 2")
    shown = output_text(page, ASK)
    assert "arguments edited" in shown  # the decided pause, one line in the tool's row
    click_only(page, "Next")
    _paused_at(page, "before model request — agent main, turn 2")
    assert "Helper got 10" in output_text(page, ASK)
    click_only(page, "Next")
    final = wait_output(page, ASK, "Main got Helper got 10")
    assert "Main got Helper got 10" in final
    # the trace viewer: the add call's details list the edit among its events
    page.locator(".kode-nb-span", has_text="execute_tool add").last.click()
    page.get_by_text("step_edit").first.wait_for(timeout=20_000)
    details = output_text(page, ASK)
    assert 'before\n{"a":2,"b":3}\nafter\n{"a":7,"b":3}' in details  # its attributes, key by key
    assert "given_by_hand" not in details
    assert page.get_by_role("button", name="Next").count() == 0
    page.evaluate(f"() => window.jupyterapp.shell.currentWidget.content.scrollToItem({ASK})")
    page.screenshot(path=str(ARTIFACTS / "browser_step_done.png"), full_page=True)
    shutdown_kernel(page)
