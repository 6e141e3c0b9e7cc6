"""What a notebook saves of each way a call or run shows a live view in a cell, once it ended:
its final record, never the live view.

Each entry point starts the same edit tool, ``write_note`` (it asks for approval), as a user
starts it: ``%tool``, ``%%ask``, ``await executor.call(...)`` and ``await Agent(...).run(...)``
in a cell (the forms expanded cells and the Python API write), a framework run
(``kode_nb.interop.start`` around pydantic-ai, with kode_nb's approval and with pydantic-ai's
own deferred approvals) and ``run_many``'s inbox. It is then approved with a click, denied with
a click (the ``comm_msg`` a browser sends), or left unanswered under a runner (cells sent with
``allow_stdin: false``, as nbclient sends them) until the approval timeout denies it.

The saved outputs are rebuilt from the kernel's messages twice: as a live front end keeps them
(JupyterLab, Notebook 7: every ``update_display_data`` applies to its display id), and as
nbclient keeps them (``nbconvert --execute``, papermill: only the messages of a cell it
executes, so an update sent from a background task after its cell ended is dropped). In both,
every output of the entry's cells must be a static record: no widget (reopened without a kernel
it reads "model not found"), no live marker, and no "waiting" or "Not finished" for work that
finished.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import pytest

from .cells import NOTE_TOOL
from .harness import Kernel, Msg

WIDGET = "application/vnd.jupyter.widget-view+json"
LIVE = "application/vnd.kode-nb.live+json"
RECORD = "application/vnd.kode-nb."
STALE = ("waiting", "Not finished", "Waiting for your decision")

SETUP = """
import json
import kode_nb
from kode_nb.models import ScriptedModel, call as scripted_call
from pydantic_ai import Agent as PaAgent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.tools import DeferredToolRequests
from kode_nb.interop import answer_deferred, pydantic_ai_toolset, start

executor = kode_nb.Executor()

def scripted(*answers):
    seen = []
    def fn(messages, info):
        seen.append(messages)
        a = answers[len(seen) - 1]
        return ModelResponse(parts=[TextPart(a) if isinstance(a, str) else ToolCallPart(*a)])
    return FunctionModel(fn)
"""


def _pa(p: str) -> list[str]:
    return [
        f"model = scripted(('write_note', {{'path': {p!r}, 'text': 'x'}}), 'done')\n"
        "agent = PaAgent(model, name='writer', toolsets=[pydantic_ai_toolset(['write_note'])])\n"
        "h = start(agent.run('write'))"
    ]


def _pa_deferred(p: str) -> list[str]:
    return [
        f"model = scripted(('write_note', {{'path': {p!r}, 'text': 'x'}}), 'done')\n"
        "agent = PaAgent(model, name='deferred', output_type=[str, DeferredToolRequests],\n"
        "    toolsets=[pydantic_ai_toolset(['write_note'], approval='deferred')])\n"
        "async def deferred_run():\n"
        "    first = await agent.run('write')\n"
        "    answers = await answer_deferred(first.output)\n"
        "    again = await agent.run(message_history=first.all_messages(),\n"
        "                            deferred_tool_results=answers)\n"
        "    return again.output\n"
        "h = start(deferred_run(), name='deferred')"
    ]


ENTRIES: dict[str, Callable[[str], list[str]]] = {
    "%tool": lambda p: [f"h = %tool write_note path={p} text=x"],
    "%%ask": lambda p: [
        f"m = lambda: ScriptedModel([scripted_call('write_note', path={p!r}, text='x'), 'done'])",
        "%%ask --model $m --tools write_note --out h\nWrite the note.",
    ],
    "executor.call": lambda p: [
        f"r = await executor.call('write_note', {{'path': {p!r}, 'text': 'x'}})\nprint(r.status)"
    ],
    "Agent.run": lambda p: [
        "r = await kode_nb.Agent(model=ScriptedModel([scripted_call('write_note',"
        f" path={p!r}, text='x'), 'done']), tools=['write_note']).run('Write.')\nprint(r.status)"
    ],
    "interop.start": _pa,
    "interop deferred": _pa_deferred,
    "run_many": lambda p: [
        f"h = kode_nb.run_many('write_note', [{{'path': {p!r}, 'text': 'x'}}], cache=False)"
    ],
}
AWAITED = {"executor.call", "Agent.run"}
"""Entries whose cell awaits the work: the click arrives while it still runs."""
OUTCOMES = ("approve", "deny", "runner")
_paths = itertools.count()


@pytest.fixture(scope="module", autouse=True)
def _setup(kernel: Kernel) -> None:
    kernel.ok(NOTE_TOOL)
    kernel.ok(SETUP)


def _text(data: dict[str, Any]) -> str:
    return "\n".join(str(data.get(m, "")) for m in ("text/plain", "text/html"))


def saved(kernel: Kernel, cells: list[str], *, headless: bool) -> list[dict[str, Any]]:
    """The outputs of ``cells`` (msg ids) as a front end saves them: each display's last
    update applied. ``headless``: as nbclient, which reads a cell's messages from its
    ``execute_input`` to its idle status and drops every other message: an update counts only
    when sent as output of the cell executing at that moment (it then applies to every output
    with that display id)."""
    executing: str | None = None
    outputs: list[dict[str, Any]] = []
    for m in kernel.log:
        parent = m["parent_header"].get("msg_id")
        kind = m["msg_type"]
        if kind == "execute_input":
            executing = parent
        elif kind == "status" and m["content"]["execution_state"] == "idle" and parent == executing:
            executing = None
        if kind in ("display_data", "execute_result") and parent in cells:
            shown = m["content"].get("transient", {}).get("display_id")
            outputs.append({"id": shown, "data": m["content"]["data"]})
        elif kind == "update_display_data" and (not headless or parent == executing):
            shown = m["content"].get("transient", {}).get("display_id")
            for out in outputs:
                if shown is not None and out["id"] == shown:
                    out["data"] = m["content"]["data"]
    return outputs


def _final_everywhere(kernel: Kernel, start: int, cells: list[str]) -> Callable[[Msg], bool]:
    """True once every display the cells showed has had a final (not live) update."""

    def done(_m: Msg) -> bool:
        shown = {o["id"] for o in saved(kernel, cells, headless=False) if o["id"]}
        final = {
            m["content"].get("transient", {}).get("display_id")
            for m in kernel.log[start:]
            if m["msg_type"] == "update_display_data" and LIVE not in m["content"]["data"]
        }
        return bool(shown) and shown <= final

    return done


def _run(kernel: Kernel, code: str, *, runner: bool) -> str:
    return kernel.run(code, 30, allow_stdin=not runner).msg_id


def _exercise(kernel: Kernel, entry: str, outcome: str) -> list[str]:
    path = f"{entry.replace(' ', '_').replace('%', '')}_{outcome}_{next(_paths)}.txt"
    runner = outcome == "runner"
    # under a runner nobody clicks: the approval is denied after this (a click never races it)
    kernel.ok(f"%config KodeMagics.approval_timeout = {1 if runner else 0}")
    start = len(kernel.log)
    cells = ENTRIES[entry](path)
    ids: list[str] = []
    for code in cells[:-1]:
        ids.append(_run(kernel, code, runner=runner))
    if entry in AWAITED and not runner:  # the cell awaits the decision: click meanwhile
        msg_id = str(kernel.kc.execute(cells[-1], allow_stdin=True))
        ids.append(msg_id)
        kernel.click(kernel.button("Approve" if outcome == "approve" else "Deny", start, 20))
        kernel.wait_for(
            lambda m: (
                m["parent_header"].get("msg_id") == msg_id
                and m["msg_type"] == "status"
                and m["content"]["execution_state"] == "idle"
            ),
            30,
        )
    else:
        ids.append(_run(kernel, cells[-1], runner=runner))
        if not runner:
            kernel.click(kernel.button("Approve" if outcome == "approve" else "Deny", start, 20))
    kernel.wait_for(_final_everywhere(kernel, start, ids), 30)
    _run(kernel, "pass", runner=runner)  # the next cell: final records sent again from it
    wrote = json.loads(kernel.value("json.dumps(RAN)"))
    assert (path in wrote) == (outcome == "approve"), (entry, outcome, wrote)
    return ids


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("entry", list(ENTRIES))
def test_the_saved_output_is_the_final_record(kernel: Kernel, entry: str, outcome: str) -> None:
    ids = _exercise(kernel, entry, outcome)
    for headless in (False, True):
        outputs = saved(kernel, ids, headless=headless)
        shown = [o for o in outputs if any(k.startswith(RECORD) for k in o["data"])]
        assert shown, (entry, outcome, headless, outputs)
        for out in outputs:
            data = out["data"]
            where = (entry, outcome, "nbclient" if headless else "live", _text(data)[:300])
            assert WIDGET not in data, where
            assert LIVE not in data, where
            assert not any(s in _text(data) for s in STALE), where
            if any(k.startswith(RECORD) for k in data):
                assert {"text/plain", "text/html"} <= set(data), where
