"""Every way of starting a call in one notebook, Run All in JupyterLab with the approvals clicked,
saved and reopened with no kernel: only final states.

The notebook holds the cells a user gets from the trace viewer — a run's expanded cells (the
call awaited in its cell) and a "Fork from here" cell (made by the same code the viewer uses,
holding the saved trace and naming its model) — and a pydantic-ai run under
``kode_nb.interop.start``, besides ``%tool`` and ``%%ask``. Run All runs them in order; each
approval is clicked as it appears (an awaiting cell holds the kernel's shell: the click goes
through a subshell, as JupyterLab sends it). The saved file then holds no widget view and the
reopened page shows no "waiting", "Not finished" or "model not found". Saves
``test-artifacts/lifecycle_saved_*.png``.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from .browser import (
    ARTIFACTS,
    NEEDS_LABEXTENSION,
    TOKEN,
    WRITE_NOTE,
    browser_page,
    shutdown_kernel,
    upload,
    wait_for_idle_kernel,
)
from .cells import PYDANTIC_AI
from .conftest import EXT

pytestmark = NEEDS_LABEXTENSION

WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
RUN_MIME = "application/vnd.kode-nb.run+json"
BROKEN = ("Error displaying widget", "model not found", "Not finished", "waiting", "Waiting")


def _recorded_trace() -> dict[str, Any]:
    """A scripted run that wrote a note (approved by a rule): what the viewer expands and forks."""
    from kode_nb import Agent, Executor, Policy, ToolRegistry, define_tool
    from kode_nb.models import ScriptedModel, call

    registry = ToolRegistry()

    def write_note(path: str, text: str) -> str:
        """Write a note to a file.

        Args:
            path: The file.
            text: What to write.
        """
        return f"wrote {len(text)} characters to {path}"

    define_tool(write_note, kind="edit", registry=registry)
    executor = Executor(registry, policy=Policy(approval_mode="auto"))
    model = ScriptedModel([call("write_note", path="expanded.txt", text="kept"), "Saved."])
    agent = Agent(name="scribe", model=model, tools=["write_note"], executor=executor)
    result = asyncio.run(agent.run("Save a note."))
    executor.close()
    assert result.status == "completed"
    return result.trace.to_dict()


def _cells() -> list[str]:
    from kode_nb.debug._expand import expand_trace
    from kode_nb.debug._fork_cell import fork_cell
    from kode_nb.traces import Trace

    saved = _recorded_trace()
    trace = Trace.from_dict(saved)
    expanded = [
        "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        for c in expand_trace(trace).cells
        if c["cell_type"] == "code"
    ]
    turn = next(s.span_id for s in trace.root.walk() if s.kind == "turn")
    fork = fork_cell(saved, turn).source
    assert "ScriptedModel" in fork  # a scripted run's fork cell names its answers
    framework = (
        "model, seen = scripted(('write_note', {'path': 'framework.txt', 'text': 'kept'}), 'done')\n"
        "agent = Agent(model, name='writer', toolsets=[pydantic_ai_toolset(['write_note'])])\n"
        "run = start(agent.run('write framework.txt'))\n"
        "run"
    )
    return [
        f"%load_ext {EXT}",
        WRITE_NOTE,
        "h = %tool write_note path=tool.txt text=kept",
        "from kode_nb.models import ScriptedModel\n\n\ndef make_main():\n"
        '    return ScriptedModel(["**Final** answer: 42."])',
        "%%ask --model $make_main\nWhat is the answer?",
        *expanded,
        fork,
        PYDANTIC_AI,
        framework,
        "import kode_nb\n\nawait kode_nb.settle(timeout=60)\nprint((await run).output)",
    ]


def _counts(page: Any) -> list[int | None]:
    return list(
        page.evaluate(
            """() => window.jupyterapp.shell.currentWidget.content.widgets
                 .filter(c => c.model.type === 'code').map(c => c.model.executionCount)"""
        )
    )


def _run_all_clicking(page: Any, timeout: float = 240) -> int:
    """Run All, clicking each Approve as it appears, until every code cell has its count and
    nothing waits; returns how many clicks it took."""
    page.evaluate(  # not awaited: Run All goes on until the clicks below
        "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
    )
    approve = page.get_by_role("button", name="Approve")
    clicks = 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if approve.count():
            approve.first.click(timeout=10_000)
            clicks += 1
            page.wait_for_timeout(300)  # the decided prompt collapses to one line
            continue
        if all(c is not None for c in _counts(page)):
            wait_for_idle_kernel(page)
            if not approve.count():
                return clicks
        page.wait_for_timeout(200)
    raise AssertionError(f"Run All did not end: counts {_counts(page)}")


def test_run_all_with_clicks_saves_final_states_only(lab: tuple[str, Path]) -> None:
    base, folder = lab
    upload(base, "lifecycle.ipynb", _cells())
    with browser_page("lifecycle_saved_failure.png") as (page, errors):
        page.goto(f"{base}/lab/tree/lifecycle.ipynb?token={TOKEN}&reset")
        wait_for_idle_kernel(page)
        clicks = _run_all_clicking(page)
        # %tool, the expanded call, the fork's call, the framework's call
        assert clicks == 4, clicks
        page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
        page.wait_for_function(
            "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=20_000
        )
        page.screenshot(path=str(ARTIFACTS / "lifecycle_saved_live.png"), full_page=True)
        shutdown_kernel(page)
        assert not [e for e in errors if "model not found" in e]

    nb = json.loads((folder / "lifecycle.ipynb").read_text())
    outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c["outputs"]]
    assert not [o for o in outputs if WIDGET_MIME in o.get("data", {})]
    errors_saved = [o for o in outputs if o.get("output_type") == "error"]
    assert not errors_saved, errors_saved
    for path in ("tool.txt", "expanded.txt", "framework.txt"):
        assert (folder / path).read_text() == "kept", path
    runs = {
        "".join(c["source"]).split("\n")[0]: o["data"][RUN_MIME]
        for c in nb["cells"]
        if c["cell_type"] == "code"
        for o in c["outputs"]
        if RUN_MIME in o.get("data", {})
    }
    fork = next(r for first, r in runs.items() if first.startswith("# Fork of run"))
    framework = next(r for first, r in runs.items() if first.startswith("model, seen"))
    assert (fork["status"], fork["output"]) == ("completed", "Saved.")
    assert _decided(fork) == ["notebook"]  # the fork's own call, approved with a click
    assert (framework["status"], framework["output"]) == ("completed", "done")
    assert _decided(framework) == ["notebook"]

    with browser_page("lifecycle_reopened_failure.png") as (page, _errors):
        page.goto(f"{base}/lab/tree/lifecycle.ipynb?token={TOKEN}&reset")
        page.wait_for_selector(".jp-Notebook .jp-OutputArea-output", timeout=60_000)
        page.wait_for_function(
            "() => document.querySelector('.jp-Notebook').innerText.includes('Final answer: 42.')",
            timeout=30_000,
        )
        page.wait_for_timeout(1_500)  # a widget output that fails says so after its lookup
        text = str(page.evaluate("() => document.querySelector('.jp-Notebook').innerText"))
        page.screenshot(path=str(ARTIFACTS / "lifecycle_saved_reopened.png"), full_page=True)
        page.evaluate(
            """async () => {
              const nb = window.jupyterapp.shell.currentWidget.content;
              await nb.scrollToItem(nb.widgets.length - 3, 'start');
            }"""
        )
        page.wait_for_timeout(1_000)
        text += str(page.evaluate("() => document.querySelector('.jp-Notebook').innerText"))
        page.screenshot(path=str(ARTIFACTS / "lifecycle_saved_reopened_end.png"), full_page=True)
    for broken in BROKEN:
        assert broken not in text, f"{broken!r} in the reopened notebook"
    assert "wrote 4 characters to tool.txt" in text
    assert "wrote 4 characters to expanded.txt" in text  # the expanded cell and the fork
    assert "wrote 4 characters to framework.txt" in text
    assert "writer: running" not in text  # the run shown as the cell's value: once, final
    assert text.count("Approved") >= 3  # the calls' records (the fork's is in its run record)


def _decided(record: dict[str, Any]) -> list[str]:
    """``decided_by`` of every approval in a saved run record's trace."""
    from kode_nb.traces import Trace

    root = Trace.from_dict(record["trace"]).root
    return [
        str(e["attributes"].get("decided_by"))
        for span in root.walk()
        for e in span.events
        if e["name"] == "approval_resolved"
    ]
