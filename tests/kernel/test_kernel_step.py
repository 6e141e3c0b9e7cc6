"""Stepping through a run in a real kernel: ``%%ask --step`` and ``%agent NAME --step`` pause
before each model request and tool call; the buttons are clicked with the comm messages a
browser sends (Next, Edit with invalid then valid arguments, Give result, Stop), and the kernel
runs other cells while the run is paused. Every test runs on each kernel (ipykernel 7 and, under
``bash scripts/dev.sh test``, ipykernel 6)."""

from __future__ import annotations

import pytest

from .conftest import EVERY_KERNEL
from .harness import Kernel

pytestmark = EVERY_KERNEL

SETUP = '''%%tool --kind read
RAN = []

def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    RAN.append((a, b))
    return a + b
'''

MODELS = """
from kode_nb import ToolResult
from kode_nb.models import ScriptedModel, call

def last_text(request):
    return ToolResult(content=request.messages[-1].content).text

def make_adder():
    return ScriptedModel([
        call("add", a=1, b=2),
        call("add", a=3, b=4),
        lambda request: "Sum seen: " + last_text(request),
    ])

def make_helper():
    return ScriptedModel([call("add", a=2, b=3), lambda request: "Helper got " + last_text(request)])

def make_main():
    return ScriptedModel([call("helper", task="2+3"), lambda request: "Main got " + last_text(request)])
"""

HELPER = """%%agent helper
---
description: Adds two numbers.
tools: [add]
model: $make_helper
---
Add: {task}
"""


@pytest.fixture(scope="module", autouse=True)
def _setup(kernel: Kernel) -> None:
    kernel.ok(SETUP)
    kernel.ok(MODELS)
    kernel.ok(HELPER)


def _paused(kernel: Kernel, kind: str, tool: str = "") -> None:
    """Wait until the run pauses at a ``kind`` point (of ``tool``)."""
    kernel.until("(h.step.current.kind, h.step.current.tool) if h.step.current else None",
           repr((kind, tool)))  # fmt: skip


def test_ask_step_is_driven_by_button_clicks(kernel: Kernel) -> None:
    kernel.ok("RAN.clear()")
    first = len(kernel.log)
    run = kernel.ok("%%ask --step --model $make_adder --out h\nAdd some numbers.")
    _paused(kernel, "model_request")
    assert kernel.value("h.status") == "paused (step)"
    # the kernel is free while the run waits: another cell runs
    assert kernel.value("sum(range(10))") == "45"
    assert kernel.value("RAN") == "[]"
    assert kernel.value("h.step.current.body()['messages'][0]['content']") == "Add some numbers."

    start = len(kernel.log)
    kernel.click(kernel.button("Next", first))
    _paused(kernel, "tool_call", "add")
    assert kernel.value("h.step.current.arguments") == "{'a': 1, 'b': 2}"
    editor = kernel.widget("TextareaModel", start, value='{\n  "a": 1,\n  "b": 2\n}')
    edit = kernel.button("Edit", start)
    kernel.set_value(editor, '{"a": "many", "b": 2}')
    kernel.click(edit)
    kernel.until("h.step.current.error is not None", "True")
    error = kernel.value("h.step.current.error")
    assert "Invalid arguments for tool 'add'" in error
    assert kernel.value("h.status") == "paused (step)"  # still paused
    refused = kernel.wait_for(
        lambda m: (
            m["msg_type"] == "comm_msg"
            and "Edit refused" in str(m["content"]["data"].get("state", {}).get("value", ""))
            and m in kernel.log[start:]
        )
    )
    assert refused["content"]["data"]["state"]["value"].count("still paused") == 1
    assert kernel.value("RAN") == "[]"
    kernel.set_value(editor, '{"a": 10, "b": 20}')
    next_start = len(kernel.log)
    kernel.click(edit)
    _paused(kernel, "model_request")
    assert kernel.value("RAN") == "[(10, 20)]"
    # the model gets the result of the edited call
    assert kernel.value("h.step.current.body()['messages'][-1]['content']") == "30"

    start = len(kernel.log)
    kernel.click(kernel.button("Next", next_start))
    _paused(kernel, "tool_call", "add")
    result_box = kernel.widget("TextareaModel", start,
        placeholder="the result the model gets instead of running the tool",
    )  # fmt: skip
    kernel.set_value(result_box, "seven, given by hand")
    start_last = len(kernel.log)
    kernel.click(kernel.button("Give result", start))
    _paused(kernel, "model_request")
    kernel.click(kernel.button("Next", start_last))
    final = kernel.update_with("Sum seen: seven, given by hand", first)
    assert final["parent_header"]["msg_id"] == run.msg_id
    assert kernel.value("h.result().status") == "completed"
    assert kernel.value("RAN") == "[(10, 20)]"  # the second call never ran
    text = final["content"]["data"]["text/plain"]
    assert "stepped: 5 pauses, 2 changes by hand" in text
    assert 'add arguments edited by hand: {"a": 1, "b": 2} → {"a": 10, "b": 20}' in text
    assert "add result given by hand (not run): seven, given by hand" in text
    events = kernel.value(
        "[(e['name'], e['attributes'].get('after', e['attributes'].get('text'))) "
        "for s in h.trace.root.walk() for e in s.events if e['name'].startswith('step_')]"
    )
    assert events == "[('step_edit', {'a': 10, 'b': 20}), ('step_given', 'seven, given by hand')]"


def test_stop_from_the_button_ends_the_run_cancelled(kernel: Kernel) -> None:
    kernel.ok("RAN.clear()")
    first = len(kernel.log)
    kernel.ok("%%ask --step --model $make_adder --out h\nAdd some numbers.")
    _paused(kernel, "model_request")
    start = len(kernel.log)
    kernel.click(kernel.button("Next", first))
    _paused(kernel, "tool_call", "add")
    kernel.set_value(kernel.widget("TextModel", start), "wrong numbers")
    kernel.click(kernel.button("Stop", start))
    final = kernel.update_with("cancelled", first)
    assert "stopped while stepping: wrong numbers" in final["content"]["data"]["text/plain"]
    assert kernel.value("h.status") == "cancelled"
    assert kernel.value("h.result().error") == "stopped while stepping: wrong numbers"
    assert kernel.value("RAN") == "[]"
    assert kernel.value("h.trace.root.status") == "cancelled"


def test_agent_step_top_runs_the_subagent_through_and_the_handle_decides(kernel: Kernel) -> None:
    kernel.ok("RAN.clear()")
    # %agent NAME --step: the helper's own run pauses (it is the top run here)
    kernel.ok("h = %agent helper --step task=2+3")
    _paused(kernel, "model_request")
    assert kernel.value("h.step.next()") == "True"
    _paused(kernel, "tool_call", "add")
    assert kernel.value("h.step.edit({'a': 4, 'b': 4})") == "True"
    _paused(kernel, "model_request")
    assert kernel.value("h.step.run_to_end()") == "True"
    kernel.ok("r = await h")
    assert kernel.value("r.output") == "Helper got 8"
    # %%ask --step top: the subagent call pauses in the main run, its own run goes through
    kernel.ok("%%ask --step top --model $make_main --tools helper --out h\nGo.")
    seen = []
    for _ in range(3):
        kernel.until("h.step.current is not None", "True")
        seen.append(kernel.value("(h.step.current.agent, h.step.current.kind)"))
        assert kernel.value("h.step.next()") == "True"
    kernel.ok("r = await h")
    assert seen == [
        "('main', 'model_request')", "('main', 'tool_call')", "('main', 'model_request')",
    ]  # fmt: skip
    assert kernel.value("r.output") == "Main got Helper got 5"
    assert kernel.value("RAN") == "[(4, 4), (2, 3)]"


def test_step_flag_errors_are_clear(kernel: Kernel) -> None:
    err = kernel.run("%agent helper --step=sometimes task=x").error_text
    assert "--step takes all or top (--step=top), got 'sometimes'" in err
    err = kernel.run("%%ask --step sometimes --model $make_adder\nx").error_text
    assert "invalid choice: 'sometimes'" in err


def test_interrupting_a_paused_run_cancels_it(kernel: Kernel) -> None:
    kernel.ok("%%ask --step --model $make_adder --out h\nAdd some numbers.")
    _paused(kernel, "model_request")
    assert kernel.value("h.cancel('no time')") == "True"
    kernel.until("h.status", "cancelled")
    assert kernel.value("h.result().error") == "no time"
    assert kernel.value("h.step.ended") == "True"
    assert kernel.value("h.step.pending()") == "[]"
