"""kode_nb's one lifecycle, proven in a real kernel: every entry point by every way an approval
can end.

Each entry point starts the same edit tool, ``write_note`` (it asks for approval and records in
``RAN`` every path it wrote), as a user would start it: ``%tool``, ``%%ask``,
``interop.start()`` around pydantic-ai (a kode_nb toolset, and its deferred approvals), the
OpenAI Agents SDK (kode_nb's approval, and the SDK's own ``needs_approval``) and LangChain, and
``run_many``, each returning a handle; and ``executor.call``, ``Agent.run`` and ``kode_nb.fork``
awaited in their cell (the form expanded and fork cells write). Each is then approved or denied
with a click (the ``comm_msg`` a browser sends) or in code from a later cell, left unanswered
until the runner limit, interrupted (the idle kernel, or the cell awaiting it), given up by an
``asyncio.wait_for``, or cut off by a kernel restart. In every case:

* the tool ran exactly once when approved and never otherwise;
* the record of the call says who decided (``decided_by``), once;
* the handle speaks the one protocol (``phase``, ``approval()``, ``approve()``, ``deny()``,
  ``cancel()``, ``await``) and ends in the phase the case expects;
* an interrupted awaiting cell ends with one short ``Interrupted`` line and the work cancelled,
  and ``kode_nb.settle()`` returns.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from .cells import FRAMEWORKS, NOTE_TOOL
from .harness import Kernel, Msg

HELPERS = r'''
import asyncio, json
import kode_nb
from kode_nb._lifecycle import Handle
from kode_nb.magics import get_session
from kode_nb.models import ScriptedModel, call as scripted_call
from pydantic_ai.tools import DeferredToolRequests
from kode_nb.interop import answer_deferred, run_with_approvals

def _approvals(span, found):
    call_id = span.get("attributes", {}).get("call_id") or span.get("span_id")
    for e in span.get("events", []):
        if e["name"] == "approval_resolved":
            found.setdefault(call_id, []).append(e["attributes"].get("decided_by"))
    for child in span.get("children", []):
        _approvals(child, found)
    return found

def decided(h):
    """decided_by of each call's approval, one per call (a framework that stops for an
    approval and resumes records the decision on the request and on the call it let run: the
    same decision, kept once; two different deciders for one call are both kept)."""
    if hasattr(h, "call_id"):
        return [e.decided_by for e in h.events if e.type == "approval_resolved"]
    if hasattr(h, "inbox"):
        traces = [h.trace(0)]
    elif hasattr(h, "traces"):
        traces = h.traces
    else:
        traces = [h.trace]
    found = {}
    for t in traces:
        if t is not None:
            _approvals(t.to_dict()["root"], found)
    return [by for bys in found.values() for by in dict.fromkeys(bys)]

def state(h):
    return json.dumps({"phase": h.phase, "protocol": isinstance(h, Handle),
                       "decided": decided(h)})
'''


@dataclass(frozen=True)
class Entry:
    """One way to start the call: ``cells(path)`` binds ``h`` to its handle."""

    kind: str
    """``call``, ``run`` or ``batch``: what the handle stands for (a denial ends a call
    ``denied``; a run or a batch goes on, its model told, and ends ``ok``)."""
    cells: Callable[[str], list[str]]
    clicker: str = "notebook"
    """``decided_by`` of a click or of ``approve()`` / ``deny()`` in code."""
    timeout_by: str = "timeout"
    """``decided_by`` of the denial when nobody answers in time."""


def _pa(p: str) -> str:
    return (
        f"model, seen = scripted(('write_note', {{'path': {p!r}, 'text': 'x'}}), 'done')\n"
        "agent = Agent(model, name='writer', toolsets=[pydantic_ai_toolset(['write_note'])])\n"
        "h = start(agent.run('write'))"
    )


def _pa_deferred(p: str) -> str:
    return (
        f"model, seen = scripted(('write_note', {{'path': {p!r}, 'text': 'x'}}), 'done')\n"
        "agent = Agent(model, name='deferred', output_type=[str, DeferredToolRequests],\n"
        "    toolsets=[pydantic_ai_toolset(['write_note'], approval='deferred')])\n"
        "async def deferred_run():\n"
        "    first = await agent.run('write')\n"
        "    answers = await answer_deferred(first.output)\n"
        "    again = await agent.run(message_history=first.all_messages(),\n"
        "                            deferred_tool_results=answers)\n"
        "    return again.output\n"
        "h = start(deferred_run(), name='deferred')"
    )


def _sdk(p: str, approval: str) -> str:
    run = (
        "run_with_approvals(sdk_agent, 'write')"
        if approval == "sdk"
        else "Runner.run(sdk_agent, 'write')"
    )
    return (
        f"sdk_model = ScriptedAgentsModel([('write_note', {{'path': {p!r}, 'text': 'x'}}), 'done'])\n"
        "sdk_agent = SdkAgent(name='sdk_writer', model=sdk_model,\n"
        f"    tools=openai_agents_tools(['write_note'], approval={approval!r}))\n"
        f"h = start({run}, name='sdk_writer')"
    )


def _lc(p: str) -> str:
    return (
        f"lc_call = {{'name': 'write_note', 'args': {{'path': {p!r}, 'text': 'x'}}, 'id': 'c1',"
        " 'type': 'tool_call'}\n"
        "chain = note_chain([AIMessage('', tool_calls=[lc_call]), AIMessage('done')])\n"
        "h = start(chain.ainvoke('write'), name='lc_writer')"
    )


ENTRIES: dict[str, Entry] = {
    "%tool": Entry("call", lambda p: [f"h = %tool write_note path={p} text=x"]),
    "%%ask": Entry(
        "run",
        lambda p: [
            f"m = lambda: ScriptedModel([scripted_call('write_note', path={p!r}, text='x'), 'done'])",
            "%%ask --model $m --tools write_note --out h\nWrite the note.",
        ],
    ),
    "pydantic-ai": Entry("run", lambda p: [_pa(p)]),
    "pydantic-ai deferred": Entry("run", lambda p: [_pa_deferred(p)]),
    "agents-sdk": Entry("run", lambda p: [_sdk(p, "kode_nb")]),
    "agents-sdk needs_approval": Entry("run", lambda p: [_sdk(p, "sdk")]),
    "langchain": Entry("run", lambda p: [_lc(p)]),
    "run_many": Entry(
        "batch",
        lambda p: [
            f"h = kode_nb.run_many('write_note', [{{'path': {p!r}, 'text': 'x'}}], cache=False)"
        ],
        clicker="inbox",
        timeout_by="inbox timeout",
    ),
}

_paths = itertools.count()


def _setup(kernel: Kernel) -> None:
    kernel.ok(NOTE_TOOL)
    kernel.ok(FRAMEWORKS)
    kernel.ok(HELPERS)


@pytest.fixture(scope="module", autouse=True)
def _module_setup(kernel: Kernel) -> None:
    _setup(kernel)


def _start(kernel: Kernel, entry: Entry, *, allow_stdin: bool = True) -> tuple[str, int]:
    """Start the entry point's call; returns the path it writes and where the log stood."""
    path = f"n{next(_paths)}.txt"
    start = len(kernel.log)
    for cell in entry.cells(path):
        run = kernel.run(cell, allow_stdin=allow_stdin)
        assert run.status == "ok", run.error_text
    return path, start


def _state(kernel: Kernel) -> dict[str, object]:
    loaded: dict[str, object] = json.loads(kernel.value("state(h)"))
    return loaded


def _ended(kernel: Kernel, timeout: float = 30) -> None:
    kernel.until("h.done()", "True", timeout)


def _said(m: Msg, msg_id: str, text: str) -> bool:
    return (
        m["parent_header"].get("msg_id") == msg_id
        and m["msg_type"] == "stream"
        and text in m["content"]["text"]
    )


def _interrupted(kernel: Kernel, msg_id: str) -> Msg:
    """The interrupted cell's error, once the kernel is idle again (a cell sent earlier would
    be aborted with it)."""
    error = kernel.wait_for(
        lambda m: m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "error", 20
    )
    kernel.wait_for(
        lambda m: (
            m["parent_header"].get("msg_id") == msg_id
            and m["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle"
        ),
        20,
    )
    return error


def _ran(kernel: Kernel, path: str) -> int:
    return int(kernel.value(f"RAN.count({path!r})"))


@pytest.mark.parametrize("name", list(ENTRIES))
@pytest.mark.parametrize("how", ["click", "code"])
@pytest.mark.parametrize("answer", ["Approve", "Deny"])
def test_an_answer_reaches_the_call_once_and_the_record_says_who_gave_it(
    kernel: Kernel, name: str, how: str, answer: str
) -> None:
    entry = ENTRIES[name]
    path, start = _start(kernel, entry)
    kernel.ok("assert await h.approval(timeout=20)")
    assert kernel.value("h.phase") == "waiting for approval"
    if how == "click":
        button = answer if entry.kind != "batch" else f"{answer} all (1)"
        kernel.click(kernel.button(button, start, timeout=20))
    else:
        code = "h.approve()" if answer == "Approve" else "h.deny('not now')"
        assert kernel.value(code) == "True"
        assert kernel.value(code) == "False"  # one decision per request: nothing waits now
    _ended(kernel)
    state = _state(kernel)
    assert state["protocol"] is True
    assert _ran(kernel, path) == (1 if answer == "Approve" else 0)
    assert state["decided"] == [entry.clicker]
    denied = "denied" if entry.kind == "call" else "ok"
    assert state["phase"] == ("ok" if answer == "Approve" else denied)


@pytest.mark.parametrize("name", list(ENTRIES))
def test_an_approval_nobody_gives_under_a_runner_is_denied_and_recorded(
    kernel: Kernel, name: str
) -> None:
    entry = ENTRIES[name]
    kernel.ok("%config KodeMagics.approval_timeout = 2")
    try:
        path, _ = _start(kernel, entry, allow_stdin=False)
        # the runner's next cell waits for the work (sent with allow_stdin false, as nbclient)
        waited = kernel.run("await asyncio.wait([h.task], timeout=60)", 90, allow_stdin=False)
        assert waited.status == "ok", waited.error_text
    finally:
        kernel.ok("%config KodeMagics.approval_timeout = 0")
    _ended(kernel)
    state = _state(kernel)
    assert _ran(kernel, path) == 0
    assert state["decided"] == [entry.timeout_by]
    assert state["phase"] == ("denied" if entry.kind == "call" else "ok")


@pytest.mark.parametrize("name", list(ENTRIES))
def test_interrupting_the_idle_kernel_cancels_a_waiting_call(kernel: Kernel, name: str) -> None:
    entry = ENTRIES[name]
    path, _ = _start(kernel, entry)
    kernel.ok("assert await h.approval(timeout=20)")
    kernel.km.interrupt_kernel()
    _ended(kernel)
    assert _ran(kernel, path) == 0
    assert _state(kernel)["phase"] == "cancelled"
    kernel.ok("await kode_nb.settle(timeout=20)")


@pytest.mark.parametrize("name", list(ENTRIES))
def test_interrupting_a_cell_that_awaits_the_work_cancels_it_in_one_line(
    kernel: Kernel, name: str
) -> None:
    entry = ENTRIES[name]
    path, _ = _start(kernel, entry)
    kernel.ok("assert await h.approval(timeout=20)")
    msg_id = kernel.begin("print('awaiting', flush=True)\nr = await h")
    kernel.wait_for(lambda m: _said(m, msg_id, "awaiting"), 20)
    kernel.km.interrupt_kernel()
    error = _interrupted(kernel, msg_id)
    assert error["content"]["ename"] == "Interrupted"
    assert error["content"]["traceback"] == [
        f"Interrupted: {error['content']['evalue']}"
    ]  # one line, no traceback
    assert "was cancelled: the cell awaiting it stopped" in error["content"]["evalue"]
    _ended(kernel)
    assert _ran(kernel, path) == 0
    assert _state(kernel)["phase"] == "cancelled"
    kernel.ok("await kode_nb.settle(timeout=20)")  # nothing left waiting


@pytest.mark.parametrize("name", list(ENTRIES))
def test_a_wait_for_that_times_out_cancels_the_work(kernel: Kernel, name: str) -> None:
    entry = ENTRIES[name]
    path, _ = _start(kernel, entry)
    kernel.ok("assert await h.approval(timeout=20)")
    timed = kernel.run("await asyncio.wait_for(h, 0.2)")
    assert timed.status == "error"
    assert "TimeoutError" in timed.error_text
    _ended(kernel)
    assert _ran(kernel, path) == 0
    assert _state(kernel)["phase"] == "cancelled"


AWAITED = {
    "executor.call": (
        "call",
        "result = await kode_nb.Executor().call('write_note', {{'path': {p!r}, 'text': 'x'}})",
    ),
    "Agent.run": (
        "run",
        "agent = kode_nb.Agent(name='scribe', tools=['write_note'], model=ScriptedModel(\n"
        "    [scripted_call('write_note', path={p!r}, text='x'), 'done']))\n"
        "result = await agent.run('Write the note.')",
    ),
    "fork": (
        "run",
        "base = await kode_nb.Agent(name='scribe', tools=['write_note'],\n"
        "    model=ScriptedModel(['Nothing to write.'])).run('Write the note.')\n"
        "result = await kode_nb.fork(base, at=1, model=ScriptedModel(\n"
        "    [scripted_call('write_note', path={p!r}, text='x'), 'done']))",
    ),
}
"""Entry points a cell awaits at once (the form expanded cells, fork cells and scripts use): the
cell holds the kernel's shell, so the click arrives on a subshell, as JupyterLab sends it."""


@pytest.mark.parametrize("name", list(AWAITED))
@pytest.mark.parametrize("answer", ["Approve", "Deny"])
def test_a_click_answers_a_call_awaited_in_the_cell(kernel: Kernel, name: str, answer: str) -> None:
    if not kernel.has_subshells:
        pytest.skip("a click while a cell runs needs kernel subshells (ipykernel >= 7)")
    _, code = AWAITED[name]
    path = f"n{next(_paths)}.txt"
    start = len(kernel.log)
    msg_id = kernel.begin(code.format(p=path))
    kernel.click(kernel.button(answer, start, timeout=20), kernel.create_subshell())
    kernel.wait_for(
        lambda m: (
            m["parent_header"].get("msg_id") == msg_id
            and m["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle"
        ),
        30,
    )
    assert _ran(kernel, path) == (1 if answer == "Approve" else 0)
    ended = {"executor.call": {"Approve": "ok", "Deny": "denied"}}.get(name, {})
    assert kernel.value("result.status") == ended.get(answer, "completed")


@pytest.mark.parametrize("name", list(AWAITED))
def test_interrupting_a_cell_awaiting_a_call_cancels_it(kernel: Kernel, name: str) -> None:
    _, code = AWAITED[name]
    path = f"n{next(_paths)}.txt"
    start = len(kernel.log)
    msg_id = kernel.begin(code.format(p=path))
    kernel.button("Approve", start, timeout=20)  # it waits for a decision now
    kernel.km.interrupt_kernel()
    _interrupted(kernel, msg_id)
    kernel.ok("await kode_nb.settle(timeout=20)")
    assert _ran(kernel, path) == 0
    assert kernel.value("len(get_session().executor.running())") == "0"


TOUCH_TOOL = '''%%tool --kind edit
from pathlib import Path


def touch_file(name: str) -> str:
    """Create an empty file.

    Args:
        name: Its name, in the kernel's folder.
    """
    Path(name).touch()
    return f"created {name}"
'''


def test_a_restart_while_a_call_waits_runs_nothing_and_a_late_click_is_harmless(
    kernel: Kernel,
) -> None:
    """Last in the module: it restarts the kernel (and sets the module's cells up again)."""
    kernel.ok(TOUCH_TOOL)
    start = len(kernel.log)
    kernel.ok("h = %tool touch_file name=restarted.txt")
    approve = kernel.button("Approve", start)
    kernel.km.restart_kernel(now=True)
    kernel.kc.wait_for_ready(timeout=60)
    kernel.click(approve)  # the click of a page that still shows the old prompt
    kernel.ok("import os")
    assert kernel.value("os.path.exists('restarted.txt')") == "False"
    kernel.ok("%load_ext kode_nb")  # the new kernel works as before
    kernel.ok(TOUCH_TOOL)
    kernel.ok("%approval auto")
    kernel.ok("h = %tool touch_file name=after.txt")
    kernel.until("h.done()", "True")
    assert kernel.value("h.result().text, os.path.exists('restarted.txt')") == (
        "created after.txt False"
    )
    kernel.ok("%approval ask")
    _setup(kernel)
