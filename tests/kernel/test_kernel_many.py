"""Many runs in a real kernel: the live view's inbox buttons, the final record replacing the
view in place, and a kernel interrupt that cancels what runs and keeps what finished."""

from __future__ import annotations

from pathlib import Path

from .harness import Kernel

SETUP = '''
%load_ext kode_nb
import kode_nb
from kode_nb import Agent, Executor, ToolRegistry
from kode_nb import define_tool
from kode_nb.models import ScriptedModel, call

reg = ToolRegistry()

def square(x: int) -> int:
    """Square a number."""
    return x * x

define_tool(square, registry=reg, kind="edit")
agent = Agent("squarer", tools=["square"], executor=Executor(reg), model=ScriptedModel([
    lambda r: call("square", x=int(r.messages[-1].content)),
    lambda r: f"squared: {r.messages[-1].content[0].data}",
]))
'''


def test_inbox_buttons_answer_every_row_and_the_record_replaces_the_view(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.ok(SETUP)
    start = len(kernel.log)
    shown = kernel.ok(f"h = kode_nb.run_many(agent, ['2', '3', '4'], cache={str(tmp_path)!r})")
    view = next(m["content"] for m in shown.messages if m["msg_type"] == "display_data")
    assert "application/vnd.jupyter.widget-view+json" in view["data"]
    display_id = view["transient"]["display_id"]
    kernel.ok("await h.until_stalled(timeout=20)")
    kernel.click(kernel.button("Approve all square (3)", start, timeout=20))
    done = kernel.ok("df = await h\nprint(list(df['output']))", timeout=60)
    assert done.stdout == "['squared: 4', 'squared: 9', 'squared: 16']\n"
    updates = [
        m for m in kernel.log[start:]
        if m["msg_type"] == "update_display_data"
        and m["content"]["transient"]["display_id"] == display_id
    ]  # fmt: skip
    assert updates
    final = updates[-1]["content"]["data"]
    assert "application/vnd.jupyter.widget-view+json" not in final
    assert final["application/vnd.kode-nb.table+json"]["rows"][2]["output"] == "squared: 16"
    assert final["text/plain"].startswith("squarer: 3 runs, finished — 3 ok, 0 failed")


def test_a_kernel_interrupt_cancels_what_runs_and_keeps_what_finished(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.ok(SETUP)
    kernel.ok(f"h = kode_nb.run_many(agent, ['2', '3', '4'], cache={str(tmp_path)!r})")
    kernel.ok("await h.until_stalled(timeout=20)\nh.inbox.approve(h.inbox.pending()[1])")
    kernel.ok("import asyncio\nwhile h.progress.done < 1:\n    await asyncio.sleep(0.02)")
    kernel.km.interrupt_kernel()
    kernel.ok("df = await h\nprint(h.status, list(df['status']), df['output'][1])", timeout=30)
    assert kernel.value("h.status, list(h.frame()['status'])") == (
        "cancelled ['cancelled', 'completed', 'cancelled']"
    )
