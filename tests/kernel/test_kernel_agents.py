"""Agent runs in a real kernel: ``%%ask`` returns at once with a live view; a subagent's tool
call that needs approval shows its prompt inside the nested view, and the click — a comm
message, as a browser sends it — resolves it while the run waits in the background."""

from __future__ import annotations

import pytest

from .cells import NOTE_TOOL
from .harness import Kernel

MODELS = """
from kode_nb.magics import get_session
from kode_nb.models import ScriptedModel, call

def last_tool_text(request):
    return request.messages[-1].content[0].text

def make_scribe(path):
    def factory():
        return ScriptedModel([
            call("write_note", path=path, text="hello"),
            lambda request: "Scribe saw: " + last_tool_text(request),
        ])
    return factory

def make_main():
    return ScriptedModel([
        call("scribe", task="save the note"),
        lambda request: "Main saw: " + last_tool_text(request),
    ])
"""


AGENT = """%%agent scribe
---
description: Saves notes.
tools: [write_note]
model: $scribe_model
max_turns: 3
---
You save notes. Task: {task}
"""


def _inside(var: str) -> str:
    """Kernel code: is the (only) approval prompt a descendant of the run's view?"""
    return (
        "(lambda w, p: (lambda f: f(f, w))(lambda f, x: x is p or any(f(f, c) for c in "
        f"getattr(x, 'children', ()))))({var}.view, {var}.view.waiting_prompt())"
    )


@pytest.fixture(scope="module", autouse=True)
def _tools(kernel: Kernel) -> None:
    kernel.ok(NOTE_TOOL)
    kernel.ok(MODELS)


@pytest.mark.parametrize("button", ["Approve", "Deny"])
def test_a_click_resolves_the_approval_of_a_subagent_tool(kernel: Kernel, button: str) -> None:
    path = f"agent-{button}.txt"
    kernel.ok(f"scribe_model = make_scribe({path!r})")
    kernel.ok(AGENT)
    start = len(kernel.log)
    run = kernel.ok("%%ask --model $make_main\nPlease save the note.")
    # the cell returned at once, with the live view (a widget) and a text/html fallback
    first = run.outputs[0]
    assert "application/vnd.jupyter.widget-view+json" in first
    assert first["text/plain"].startswith("agent main: running")
    button_id = kernel.button(button, start)
    assert kernel.value("_.status") == "waiting for approval"
    kernel.ok("h = _")
    assert kernel.value(_inside("h")) == "True"  # the prompt is inside the run's view
    assert kernel.value("h.view.waiting_prompt().request.tool") == "write_note"
    if button == "Deny":
        text_id = next(
            m["content"]["comm_id"]
            for m in kernel.comm_opens(start)
            if m["content"]["data"]["state"].get("_model_name") == "TextModel"
        )
        kernel.set_value(text_id, "not today")
    kernel.click(button_id)
    kernel.ok("r = await h")
    assert kernel.value("r.status") == "completed"
    ran = kernel.value(f"{path!r} in RAN")
    answer = kernel.value("r.output")
    if button == "Approve":
        assert ran == "True"
        assert answer == f"Main saw: Scribe saw: wrote {path}"
    else:
        assert ran == "False"
        assert answer.startswith("Main saw: Scribe saw: ")
        assert "not today" in answer
    # the nested run is in the view and in the trace; the final refresh carries the answer
    assert kernel.value("[v.agent for v in h.view.runs.values()]") == "['main', 'scribe']"
    assert (
        kernel.value("[s.name for s in h.trace.spans() if s.kind == 'run']") == "['main', 'scribe']"
    )
    final = kernel.update_with("Main saw:", start)
    assert "<details" in final["content"]["data"]["text/html"]
    assert final["parent_header"]["msg_id"] == run.msg_id
    # no call is left registered for approvals
    assert kernel.value("get_session().views") == "{}"


def _scribe_run(kernel: Kernel, path: str) -> None:
    """``h``: a run of the scribe subagent that will ask to write ``path``."""
    kernel.ok(f"scribe_model = make_scribe({path!r})")
    kernel.ok(AGENT)
    kernel.ok("h = %agent scribe task=save")


def test_the_handle_approves_like_the_button(kernel: Kernel) -> None:
    _scribe_run(kernel, "handle.txt")
    kernel.ok("asked = await h.approval(timeout=10)")
    assert kernel.value("asked, h.status") == "True waiting for approval"
    assert kernel.value("h.approve()") == "True"
    kernel.ok("r = await h")
    assert kernel.value("r.output") == "Scribe saw: wrote handle.txt"
    assert kernel.value("h.approve(), 'handle.txt' in RAN") == "False True"


def test_cancel_stops_a_run_waiting_for_approval(kernel: Kernel) -> None:
    _scribe_run(kernel, "cancelled.txt")
    kernel.ok("await h.approval(timeout=10)")
    assert kernel.value("h.cancel()") == "True"
    kernel.ok("r = await h")
    assert kernel.value("r.status, 'cancelled.txt' in RAN") == "cancelled False"
    assert kernel.value("get_session().views") == "{}"


def test_interrupting_the_idle_kernel_cancels_a_waiting_agent_run(kernel: Kernel) -> None:
    _scribe_run(kernel, "interrupted.txt")
    kernel.ok("await h.approval(timeout=10)")
    kernel.km.interrupt_kernel()
    kernel.ok("r = await h")
    assert kernel.value("r.status, 'interrupted.txt' in RAN") == "cancelled False"


SLOW = '''%%tool --kind read
import asyncio

async def slow(seconds: float) -> str:
    """Take a while.

    Args:
        seconds: How long.
    """
    await asyncio.sleep(seconds)
    return "slept"
'''


def test_an_interrupted_run_records_the_turn_it_stopped_in(kernel: Kernel) -> None:
    kernel.ok(SLOW)
    kernel.ok(
        "def make_sleeper():\n"
        "    return ScriptedModel([call('slow', seconds=1), call('slow', seconds=30), 'never'])"
    )
    start = len(kernel.log)
    run = kernel.ok("%%ask --model $make_sleeper --tools slow\nSleep.")
    kernel.wait_for(lambda m: "turn 2" in str(m.get("content", {})) and m in kernel.log[start:])
    kernel.km.interrupt_kernel()
    final = kernel.wait_for(
        lambda m: (
            m["msg_type"] == "update_display_data"
            and "application/vnd.kode-nb.run+json" in m["content"]["data"]
            and m in kernel.log[start:]
        )
    )
    assert final["parent_header"]["msg_id"] == run.msg_id
    data = final["content"]["data"]
    assert "application/vnd.jupyter.widget-view+json" not in data
    record = data["application/vnd.kode-nb.run+json"]
    assert record["status"] == "interrupted"
    assert record["interrupted"]["turn"] == 2
    assert "interrupt" in record["interrupted"]["reason"]
    assert "interrupted in turn 2" in data["text/plain"]


def test_settle_waits_for_the_runs_and_calls_in_flight(kernel: Kernel) -> None:
    kernel.ok("def make_napper():\n    return ScriptedModel([call('slow', seconds=0.5), 'rested'])")
    kernel.ok("%%ask --model $make_napper --tools slow --out nap\nNap.")
    kernel.ok("c = %tool slow seconds=0.5")
    assert kernel.value("nap.done(), c.done()") == "False False"
    start = len(kernel.log)
    settled = kernel.ok("import kode_nb\nn = await kode_nb.settle(timeout=20)")
    assert kernel.value("nap.status, c.status, n") == "completed ok 2"
    # the final records are sent again from the settling cell (nbclient keeps only those)
    resent = [
        m for m in kernel.log[start:]
        if m["msg_type"] == "update_display_data"
        and m["parent_header"]["msg_id"] == settled.msg_id
    ]  # fmt: skip
    records = [d for m in resent for k, d in m["content"]["data"].items() if "kode-nb" in k]
    call_id = kernel.value("c.call_id")
    assert [r["status"] for r in records if r.get("call_id") == call_id] == ["ok"]
    assert [r["status"] for r in records if r.get("output") == "rested"] == ["completed"]
    again = kernel.ok("await kode_nb.settle(timeout=0.01)")  # nothing pending: at once
    assert not [m for m in again.messages if m["msg_type"] == "update_display_data"]
