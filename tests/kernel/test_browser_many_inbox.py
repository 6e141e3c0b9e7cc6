"""The many-runs inbox in JupyterLab (headless Chromium), clicked for real: six rows wait for
approval, grouped by tool and argument pattern into two groups, each with one "Approve all (N)"
and one "Deny all (N)" whose labels are whole (not clipped); one click answers a group, and the
view ends as the record.

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``);
skipped without them. Saves ``test-artifacts/browser_many_inbox.png``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    TOKEN,
    browser_page,
    click_only,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)  # fmt: skip
from .conftest import EXT

CELLS = [
    f"%load_ext {EXT}",
    '''import kode_nb
from kode_nb import Agent, Executor, ToolRegistry, define_tool
from kode_nb.models import ScriptedModel, call

reg = ToolRegistry()

def issue_refund(order: str) -> str:
    """Refund an order."""
    return "refunded " + order

def send_email(to: str) -> str:
    """Send an email."""
    return "sent to " + to

define_tool(issue_refund, registry=reg, kind="edit")
define_tool(send_email, registry=reg, kind="edit")

def first(r):
    verb, what = r.messages[-1].content.split()
    return call("issue_refund", order=what) if verb == "refund" else call("send_email", to=what)

def last(r):
    block = r.messages[-1].content[0]
    return "done: " + (getattr(block, "text", None) or str(getattr(block, "data", block)))

agent = Agent("clerk", model=ScriptedModel([first, last]), tools=["issue_refund", "send_email"],
              executor=Executor(reg))
print("ready")
''',
    "h = kode_nb.run_many(agent, ['refund A1', 'refund A2', 'email bob', 'refund A3', "
    "'email eve', 'refund A4'], cache=False)",
    "df = await h\nprint(list(df['output']))",
]
RUN = 2


def test_the_grouped_inbox_is_answered_by_clicking(lab: tuple[str, Path]) -> None:
    base, _folder = lab
    upload(base, "kode_many_inbox.ipynb", CELLS)
    with browser_page("browser_many_inbox_failure.png") as (page, _errors):
        _drive(page, base)


def _clipped(page: Any) -> list[str]:
    """Labels of the "... all (N)" buttons whose text does not fit their box."""
    return list(
        page.evaluate(
            """() => [...document.querySelectorAll('.jp-OutputArea button')]
                 .filter(b => / all \\(\\d+\\)$/.test(b.innerText.trim()))
                 .filter(b => b.scrollWidth > b.clientWidth + 1)
                 .map(b => b.innerText)"""
        )
    )


def _drive(page: Any, base: str) -> None:
    page.goto(f"{base}/lab/tree/kode_many_inbox.ipynb?token={TOKEN}&reset")
    wait_for_idle_kernel(page)
    run_cell(page, 0)
    run_cell(page, 1)
    wait_output(page, 1, "ready")
    run_cell(page, RUN)
    shown = wait_output(page, RUN, "send_email(to=*) — 2 waiting (rows 2, 4)", timeout=60)
    assert "issue_refund(order='A*') — 4 waiting (rows 0, 1, 3, 5)" in shown
    assert page.get_by_role("button", name="Approve all (4)", exact=True).count() == 1
    assert page.get_by_role("button", name="Deny all (2)", exact=True).count() == 1
    # one pair of "all" buttons per group, not one per waiting row
    all_buttons = page.get_by_role("button", name="Approve all", exact=False)
    assert all_buttons.count() == 2
    assert _clipped(page) == []
    page.screenshot(path=str(ARTIFACTS / "browser_many_inbox.png"), full_page=True)
    click_only(page, "Approve all (4)", exact=True)
    click_only(page, "Deny all (2)", exact=True)
    final = wait_output(page, RUN, "6 runs, finished — 6 ok, 0 failed", timeout=60)
    assert page.get_by_role("button", name="Approve all", exact=False).count() == 0
    assert "refund A1" in final  # the record's first rows
    run_cell(page, 3)
    out = wait_output(page, 3, "done: refunded A4", timeout=60)
    assert out.count("done: refunded") == 4
    assert out.count("denied from the inbox") == 2
    shutdown_kernel(page)
