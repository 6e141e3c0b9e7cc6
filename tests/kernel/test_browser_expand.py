"""The trace viewer's "Expand into cells" and "Fork from here" in a real JupyterLab (headless
Chromium): a notebook runs an agent with a nested subagent (ScriptedModel: no network) and shows
its trace; the button puts the run's cells directly below, its run and turn headings collapsed in
the page and in the saved file; the new cells, run, replay the run offline to the same answer.
"Fork from here" on a turn inserts the fork cell below the trace, which runs as written; Ctrl+S with
the focus in the viewer saves the notebook. Where the kernel has no kode_nb
(or there is no kernel) the button and the ``kode-nb:expand-trace`` command say so.

Needs the Debian ``chromium`` package and Python ``playwright`` (never ``playwright install``), and
the extension built into the dev venv (``bash scripts/dev.sh install``). Saves
``test-artifacts/expand_*.png``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    NEEDS_LABEXTENSION,
    TOKEN,
    api,
    browser_page,
    run_cell,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
    wait_output,
)  # fmt: skip
from .conftest import EXT
from .trace_records import saved_notebook

pytestmark = NEEDS_LABEXTENSION

RUN = '''from pydantic import BaseModel
from IPython.display import display

import kode_nb
from kode_nb import define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import Turn, call
from kode_nb.ui.records import trace_record


class Question(BaseModel):
    objective: str


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


define_tool(add, inline=True)
register_subagent(AgentDefinition(
    name="helper", description="Adds.", system_prompt="Work on {objective}",
    input_model=Question, tools=["add"],
    model=ScriptedModel([call("add", a=20, b=22), "forty-two"]),
))
model = ScriptedModel([
    Turn(text="Asking the helper.", calls=[call("helper", objective="20+22")]),
    call("add", a=42, b=1),
    "The helper said forty-two; plus one is 43.",
])
original = await Agent(model=model, tools=["helper", "add"]).run("go")
print("ANSWER:", original.output)
display(trace_record(original.trace))'''

CELLS = [f"%load_ext {EXT}", RUN, "after = 'the cell after the run'", "%expand_trace original"]
NB = "window.jupyterapp.shell.currentWidget.content"


def cells(page: Any) -> list[dict[str, Any]]:
    """Every cell of the open notebook: type, source, hidden, collapsed heading, kode_nb role."""
    result: list[dict[str, Any]] = page.evaluate(
        f"""() => {NB}.widgets.map(c => ({{
              type: c.model.type, source: c.model.sharedModel.getSource(), hidden: c.isHidden,
              collapsed: c.headingCollapsed === true,
              outputs: c.model.toJSON().outputs || [],
              button: !!c.node.querySelector('.jp-collapseHeadingButton.jp-mod-collapsed'),
              role: ((c.model.getMetadata('kode_nb') || {{}}).role) || null }}))"""
    )
    return result


def test_expand_into_cells_and_fork_from_here(lab: tuple[str, Path]) -> None:
    base, folder = lab
    upload(base, "expand.ipynb", CELLS)
    with browser_page("expand_failure.png") as (page, errors):
        page.goto(f"{base}/lab/tree/expand.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        run_cell(page, 0)
        run_cell(page, 1)
        answer = wait_output(page, 1, "ANSWER: ").split("ANSWER: ", 1)[1].splitlines()[0]
        assert answer == "The helper said forty-two; plus one is 43."
        # the trace record the cell displays, below the run's own record (its live view, ended)
        viewer = page.locator(".jp-Cell").nth(1).locator(".kode-nb-trace").last
        viewer.locator(".kode-nb-span").first.wait_for(timeout=20_000)

        viewer.get_by_role("button", name="Expand into cells").click()
        status = viewer.locator(".kode-nb-trace-status")
        status.get_by_text("Inserted").wait_for(timeout=20_000)
        assert "headings collapsed" in status.inner_text()
        assert "kode-nb-trace-status-ok" in (status.get_attribute("class") or "")
        page.wait_for_function(  # the page's collapsing is asynchronous (headings parse later)
            f"() => {NB}.widgets.filter(c => c.isHidden).length > 0", timeout=10_000
        )
        page.screenshot(path=str(ARTIFACTS / "expand_collapsed.png"), full_page=True)

        now = cells(page)
        new = now[2:-2]  # directly below the run's cell, above the cell that followed it
        assert [c["source"] for c in now[-2:]] == CELLS[2:]
        assert new[0]["role"] == "setup"
        assert new[-1]["role"] == "replay"
        headings = [c for c in new if c["role"] in ("run", "turn")]
        assert [h["source"].splitlines()[0] for h in headings] == [
            "## Run `main` — completed", "### Turn 1 — 1 tool call(s): helper",
            "#### Run `main > helper` — completed", "##### Turn 1 — 1 tool call(s): add",
            "##### Turn 2 — answer", "### Turn 2 — 1 tool call(s): add", "### Turn 3 — answer",
        ]  # fmt: skip
        assert all(h["collapsed"] for h in headings), headings
        top = headings[0]
        assert top["button"]
        assert not top["hidden"]
        assert all(c["hidden"] for c in new[new.index(top) + 1 : -2])  # its turns and calls
        assert not new[-1]["hidden"]
        assert not new[-2]["hidden"]
        visible = [c for c in new if not c["hidden"]]
        assert [c["role"] for c in visible] == ["setup", "run", "replay_heading", "replay"]
        tool_cells = [c for c in new if c["role"] == "tool_call"]
        assert len(tool_cells) == 3
        recorded = [c["outputs"][0]["data"]["text/plain"] for c in tool_cells]
        assert recorded == ["forty-two", "42", "43"]  # each call's recorded result, not yet run

        # saved: the collapsed headings are in the file's metadata too
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(f"() => !{NB}.model.dirty", timeout=10_000)
        saved = api(base, "/api/contents/expand.ipynb")["content"]["cells"]
        saved_headings = [c for c in saved if c["metadata"].get("kode_nb", {}).get("role") in
                          ("run", "turn")]  # fmt: skip
        assert len(saved_headings) == 7
        assert all(c["metadata"]["jp-MarkdownHeadingCollapsed"] is True for c in saved_headings)

        # run the new cells, and the ones below (no network: the replay answers from the trace)
        first_new, replay_index = 2, 2 + len(new) - 1
        page.evaluate(
            f"""async () => {{ {NB}.activeCellIndex = {first_new};
                await window.jupyterapp.commands.execute('notebook:run-all-below'); }}"""
        )
        replayed = wait_output(page, replay_index, "43", timeout=60)
        assert replayed.strip() == answer
        adds = [i for i, c in enumerate(new) if c["role"] == "tool_call" and "'add'" in c["source"]
                and not c["source"].splitlines()[-1].startswith("#")]  # fmt: skip
        shown = [wait_output(page, first_new + i, "ok add").strip() for i in adds]
        # "[5]:ok add 20 µs42": the status line, its duration, then the result as recorded
        assert [re.split(r"\d (?:µs|ms|s)", s)[-1] for s in shown] == ["42", "43"]
        page.screenshot(path=str(ARTIFACTS / "expand_replayed.png"), full_page=True)

        # Fork from here: on the run's second turn (after the helper's own turns)
        viewer.locator(".kode-nb-span", has_text="turn 2").last.click()
        viewer.get_by_role("button", name="Fork from here").click()
        status.get_by_text("Inserted a fork cell").wait_for(timeout=20_000)
        fork = cells(page)[2]
        assert fork["role"] == "fork"
        trace_id = page.evaluate(
            f"""() => {NB}.widgets[1].model.toJSON().outputs
                 .map(o => o.data && o.data['application/vnd.kode-nb.trace+json'])
                 .find(Boolean).trace_id"""
        )
        lines = fork["source"].splitlines()
        assert lines[0] == (f"# Fork of run main (trace {trace_id[:8]}) at turn 2: change what "
                            "should differ, then run.")  # fmt: skip
        assert any(line.startswith('TRACE = {"schema": "kode_nb.trace/') for line in lines)
        assert trace_id not in "\n".join(line for line in lines if not line.startswith("TRACE"))
        assert lines[-10:] == [
            "forked = await kode_nb.fork(", "    TRACE,", lines[-8], "    edit=None,",
            "    model=ScriptedModel([", '        call("add", a=42, b=1),',
            '        "The helper said forty-two; plus one is 43.",', "    ]),", ")", "forked",
        ]  # fmt: skip
        assert lines[-8].startswith('    at="')

        # Ctrl+S with the focus on a span row of the viewer saves the notebook
        assert page.evaluate(f"() => {NB}.model.dirty")
        viewer.locator(".kode-nb-span", has_text="turn 1").first.click()
        focused = "document.activeElement && document.activeElement.closest('.kode-nb-trace')"
        assert page.evaluate(f"() => !!({focused})")
        page.keyboard.press("Control+s")
        page.wait_for_function(f"() => !{NB}.model.dirty", timeout=10_000)
        saved = api(base, "/api/contents/expand.ipynb")["content"]["cells"]
        assert saved[2]["source"] == fork["source"]
        assert saved[2]["metadata"]["kode_nb"]["role"] == "fork"

        # the inserted cell runs as written: the ScriptedModel answers as the run did
        run_cell(page, 2)
        shown = wait_output(page, 2, "plus one is 43", timeout=60)
        assert "Error" not in shown, shown
        outputs = cells(page)[2]["outputs"]
        assert not [o for o in outputs if o["output_type"] == "error"], outputs
        page.screenshot(path=str(ARTIFACTS / "expand_fork.png"), full_page=True)

        # %expand_trace (the kernel's insert_cells request; run by run-all-below above): its
        # headings are collapsed in the page too
        sources = [c["source"] for c in cells(page)]
        magic = sources.index(CELLS[3])
        wait_output(page, magic, "Inserted 16 cells below this cell")
        below = cells(page)[magic + 1 :]
        assert [c["role"] for c in below if not c["hidden"]] == [
            "setup", "run", "replay_heading", "replay",
        ]  # fmt: skip
        assert len(below) == len(new)
        assert not [e for e in errors if "kode" in e.lower()], errors
        shutdown_kernel(page)
    assert (folder / "expand.ipynb").exists()


def test_without_kode_nb_in_the_kernel_it_says_what_to_do(lab: tuple[str, Path]) -> None:
    base, folder = lab
    nb = saved_notebook()  # a saved trace output; the kernel starts without kode_nb
    (folder / "saved.ipynb").write_text(json.dumps(nb))
    with browser_page("expand_no_kode_failure.png") as (page, errors):
        page.goto(f"{base}/lab/tree/saved.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        page.wait_for_selector(".kode-nb-trace .kode-nb-span", timeout=30_000)
        count = len(cells(page))
        viewer = page.locator(".kode-nb-trace").first
        viewer.get_by_role("button", name="Expand into cells").click()
        status = viewer.locator(".kode-nb-trace-status")
        status.get_by_text("needs a running kernel").wait_for(timeout=20_000)
        assert status.inner_text().startswith(
            "Expanding a trace needs a running kernel with kode_nb loaded: run `%load_ext kode_nb`"
            " (kode_nb is not loaded in this kernel)."
        )
        assert "kode-nb-trace-status-error" in (status.get_attribute("class") or "")
        page.screenshot(path=str(ARTIFACTS / "expand_no_kode.png"), full_page=True)

        # the palette command on the active cell: the same words, as a notification
        index = page.evaluate(
            f"""() => {NB}.widgets.findIndex(c => c.node.querySelector('.kode-nb-trace'))"""
        )
        outcome = page.evaluate(
            f"""async () => {{ {NB}.activeCellIndex = {index};
                return await window.jupyterapp.commands.execute('kode-nb:expand-trace'); }}"""
        )
        assert outcome["ok"] is False
        assert "needs a running kernel with kode_nb loaded" in outcome["message"]
        page.locator(".Toastify").get_by_text("needs a running kernel").first.wait_for(
            timeout=10_000
        )
        # the command on a cell with no trace, or naming a trace no cell shows, says that instead
        plain = page.evaluate(
            f"""() => {NB}.widgets.findIndex(c => !c.node.querySelector('.kode-nb-trace'))"""
        )
        outcome = page.evaluate(
            f"""async () => {{ {NB}.activeCellIndex = {plain};
                return await window.jupyterapp.commands.execute('kode-nb:expand-trace'); }}"""
        )
        assert outcome["message"].startswith("The active cell has no kode_nb trace output")
        outcome = page.evaluate(
            """async () => await window.jupyterapp.commands.execute(
                 'kode-nb:expand-trace', {traceId: 'feedface00'})"""
        )
        assert outcome["message"] == "No cell in this notebook shows the kode_nb trace feedface."
        # and with no kernel at all
        shutdown_kernel(page)
        page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.sessionContext.session", timeout=20_000
        )
        outcome = page.evaluate(
            f"""async () => {{ {NB}.activeCellIndex = {index};
                return await window.jupyterapp.commands.execute('kode-nb:expand-trace'); }}"""
        )
        assert outcome["message"] == (
            "Expanding a trace needs a running kernel with kode_nb loaded: run `%load_ext kode_nb`"
            " (this notebook has no running kernel)."
        )
        assert len(cells(page)) == count  # nothing was inserted
        page.screenshot(path=str(ARTIFACTS / "expand_no_kernel.png"), full_page=True)
        assert not [e for e in errors if "kode" in e.lower()], errors
