"""Widgets without a kernel (ipywidgets uses a dummy comm): prompts, call views, cards, handles.

The real-kernel behaviour (clicks arriving as comm messages, message counts) is in
``tests/kernel/``.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kode_nb import ToolResult, define_tool
from kode_nb.events import ApprovalRequested, ApprovalResolved, CallStarted
from kode_nb.policy import ApprovalRequest, approve
from kode_nb.ui.approval import ApprovalPrompt, WidgetApprover
from kode_nb.ui.call_view import CallView
from kode_nb.ui.handle import CallHandle
from kode_nb.ui.static_view import StaticCallView
from kode_nb.ui.stream import StreamView

pytestmark = pytest.mark.anyio

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _request(**kw: Any) -> ApprovalRequest:
    base: dict[str, Any] = {
        "tool": "write_file",
        "kind": "edit",
        "arguments": {"path": "a.txt"},
        "call_id": "c1",
    }
    return ApprovalRequest(**{**base, **kw})


async def _settle() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


# --------------------------------------------------------------------------- approval prompt


async def test_approve_click_resolves_and_disables_the_buttons() -> None:
    prompt = ApprovalPrompt(_request())
    prompt.approve_button.click()
    decision = await asyncio.wait_for(prompt.wait(), 1)
    assert decision.approved
    assert not decision.always
    assert decision.decided_by == "notebook"
    assert all(
        b.disabled for b in (prompt.approve_button, prompt.deny_button, prompt.always_button)
    )
    assert prompt.reason.disabled
    assert "Approved" in prompt.status.value


async def test_deny_click_takes_the_reason_from_the_text_box() -> None:
    prompt = ApprovalPrompt(_request())
    prompt.reason.value = "  not that file  "
    prompt.deny_button.click()
    decision = await prompt.wait()
    assert not decision.approved
    assert decision.reason == "not that file"
    assert "Denied" in prompt.status.value
    assert "not that file" in prompt.status.value
    empty = ApprovalPrompt(_request())
    empty.deny_button.click()
    assert (await empty.wait()).reason is None


async def test_always_allow_and_first_decision_wins() -> None:
    prompt = ApprovalPrompt(_request())
    prompt.always_button.click()
    prompt.deny_button.click()  # too late
    decision = await prompt.wait()
    assert decision.approved
    assert decision.always
    assert "Always allowed" in prompt.status.value
    assert prompt.decide(approve()) is False


async def test_a_click_from_another_thread_is_handed_to_the_loop() -> None:
    prompt = ApprovalPrompt(_request())
    seen: list[bool] = []

    def click() -> None:  # what a subshell thread does
        prompt.approve_button.click()
        seen.append(prompt.future.done())  # not decided here, but on the loop

    thread = threading.Thread(target=click)
    thread.start()
    thread.join()
    assert seen == [False]
    assert (await asyncio.wait_for(prompt.wait(), 1)).approved


async def test_no_decision_within_the_timeout_denies() -> None:
    prompt = ApprovalPrompt(_request(), timeout=0.05)
    assert "denied after 0.05 s" in prompt.status.value
    decision = await prompt.wait()
    assert not decision.approved
    assert decision.decided_by == "timeout"
    assert decision.reason == "No decision within 0.05 s; denied."
    assert prompt.approve_button.disabled


async def test_cancelling_the_wait_closes_the_prompt() -> None:
    prompt = ApprovalPrompt(_request())
    task = asyncio.ensure_future(prompt.wait())
    await _settle()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert prompt.future.cancelled()
    assert "Cancelled" in prompt.status.value
    assert prompt.deny_button.disabled


async def test_prompt_mimebundle_has_html_and_text_fallbacks() -> None:
    prompt = ApprovalPrompt(_request(preview="+new line"))
    data = prompt._repr_mimebundle_()
    assert WIDGET_VIEW in data
    assert "write_file" in data["text/html"]
    assert "Waiting for your decision" in data["text/html"]
    assert data["text/plain"].startswith("Approve write_file [edit]")
    assert data["text/plain"].endswith("waiting for a decision")
    assert data["application/vnd.kode-nb.live+json"] == {
        "schema": "kode_nb.live/v1",
        "kind": "approval",
    }


async def test_widget_approver_puts_the_prompt_in_the_calls_view() -> None:
    view = CallView(tool="write_file", kind="edit", call_id="c1")
    approver = WidgetApprover(find_view={"c1": view}.get, timeout=lambda: None)
    task = asyncio.ensure_future(approver(_request()))
    await _settle()
    assert view.state == "approval_requested"
    prompt = approver.prompts["c1"]
    assert view.children[-1] is prompt
    prompt.approve_button.click()
    assert (await task).approved
    assert approver.prompts == {}
    view.finish(ToolResult.from_text("ok", tool="write_file"))


# --------------------------------------------------------------------------- call view


async def test_call_view_follows_events_streams_updates_and_shows_the_result() -> None:
    view = CallView(tool="count", kind="read", arguments={"n": 3}, call_id="c9", rate=50)
    assert "starting" in view.header.value
    assert "count" in view.header.value
    view.on_event(ApprovalRequested(tool="count", call_id="c9"))
    assert "waiting for approval" in view.header.value
    view.on_event(ApprovalResolved(tool="count", call_id="c9", approved=True))
    view.on_event(CallStarted(tool="count", call_id="c9"))
    assert view.state == "started"
    assert "running" in view.header.value
    for i in range(1000):
        view.on_update(f"{i} ")
    view.on_update({"done": True})
    await _settle()
    assert view.stream is not None
    assert view.stream in view.children
    view.finish(ToolResult.from_text("3", tool="count", duration=0.5))
    expected = "".join(f"{i} " for i in range(1000)) + '{"done": true}\n'
    assert view.text == expected  # the final flush is exact
    assert view.updates == 1001
    assert view.state == "ok"
    assert "500 ms" in view.header.value
    data = view._repr_mimebundle_()  # final: the static record, no widget
    assert WIDGET_VIEW not in data
    record = data["application/vnd.kode-nb.call+json"]
    assert record["status"] == "ok"
    assert record["approval"] == {"decision": "approved", "reason": None}
    assert record["updates"] == {"text": expected, "count": 1001, "truncated": False}
    assert "999 " in data["text/html"]
    assert data["text/plain"] == "count: ok in 500 ms\n✔ Approved\n3"
    view.finish(ToolResult.error("ignored"))  # idempotent
    assert view.state == "ok"


async def test_call_view_without_updates_has_no_stream() -> None:
    view = CallView(tool="t", call_id="c")
    view.on_event(ApprovalResolved(tool="t", call_id="c", approved=False))
    view.finish(ToolResult.error("The user denied this call.", status="denied", tool="t"))
    assert view.stream is None
    assert view.text == ""
    assert "denied" in view.header.value
    assert view._tick is None


def test_stream_view_keeps_the_text_and_replays_it_to_a_late_front_end() -> None:
    stream = StreamView()
    sent: list[Any] = []
    stream.send = sent.append  # type: ignore[method-assign]
    stream.append("ab")
    stream.append("")
    stream.append("c")
    assert sent == [{"append": "ab"}, {"append": "c"}]
    assert stream.text == "abc"
    stream._on_front_end_msg(stream, {"event": "replay"}, [])
    assert sent[-1] == {"reset": "abc"}
    assert StreamView().key != stream.key


# --------------------------------------------------------------------------- card, static view, handle


def _tool() -> Any:
    def add(a: int, b: int = 2) -> int:
        """Add.

        Args:
            a: first
            b: second
        """
        return a + b

    return define_tool(add, kind="think", registry=None)


async def test_static_text_view_prints_the_stream_and_the_result(
    capsys: pytest.CaptureFixture[str],
) -> None:
    view = StaticCallView(tool="t", call_id="c", style="text")
    view.show()
    view.on_event(CallStarted(tool="t", call_id="c"))
    view.on_update("partial ")
    view.finish(ToolResult.from_text("whole", tool="t", duration=0.001))
    out = capsys.readouterr().out
    assert out.splitlines() == [
        "[t: starting] call c",
        "[t: running]",
        "partial ",
        "[ok] t (1 ms)",
        "whole",
    ]


async def test_handle_result_await_and_cancel() -> None:
    cancelled: list[str] = []
    handle = CallHandle(tool="t", call_id="c", cancel=cancelled.append)
    fut: asyncio.Future[ToolResult] = asyncio.get_running_loop().create_future()
    handle.task = fut
    assert not handle.done()
    assert handle.status == "running"
    with pytest.raises(asyncio.InvalidStateError, match="still running"):
        handle.result()
    assert handle.cancel("stop") is True
    assert cancelled == ["stop"]
    result = ToolResult.from_text("r", tool="t")
    handle._set_result(result)
    fut.set_result(result)
    assert await handle is result
    assert handle.result() is result
    assert handle.status == "ok"
    assert handle.cancel() is False
    assert repr(handle) == "<CallHandle t call=c ok>"


async def test_awaiting_a_handle_that_gets_interrupted_cancels_the_call() -> None:
    cancelled: list[str] = []
    handle = CallHandle(tool="t", call_id="c", cancel=cancelled.append)
    handle.task = asyncio.get_running_loop().create_future()
    waiter = asyncio.ensure_future(handle._wait())
    await _settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert cancelled == ["interrupted while awaited"]
