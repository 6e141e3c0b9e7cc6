"""Approvals in a real kernel: clicks arrive as comm messages while the call waits in the
background, on the main shell and through a kernel subshell; interrupts cancel cleanly.

Every test runs on each kernel (ipykernel 7 and, under ``bash scripts/dev.sh test``, ipykernel 6);
the subshell cases only where the kernel has subshells."""

from __future__ import annotations

import time

import pytest

from .cells import NOTE_TOOL, WAIT_FOR_CANCEL
from .conftest import EVERY_KERNEL
from .harness import Kernel

pytestmark = EVERY_KERNEL


@pytest.fixture(scope="module", autouse=True)
def _tools(kernel: Kernel) -> None:
    kernel.ok(NOTE_TOOL)
    kernel.ok(WAIT_FOR_CANCEL)
    kernel.ok("from kode_nb.magics import get_session")


@pytest.mark.parametrize("channel", ["main", "subshell"])
@pytest.mark.parametrize("button", ["Approve", "Deny"])
def test_the_tool_runs_after_approve_and_not_after_deny(
    kernel: Kernel, channel: str, button: str
) -> None:
    if channel == "subshell" and not kernel.has_subshells:
        version = kernel.value("__import__('ipykernel').__version__")
        pytest.skip(f"ipykernel {version} has no kernel subshells (they came in ipykernel 7)")
    subshell = kernel.create_subshell() if channel == "subshell" else None
    path = f"{channel}-{button}.txt"
    start = len(kernel.log)
    run = kernel.ok(f"h = %tool write_note path={path} text=hi")
    assert kernel.value("h.status") == "waiting for approval"  # the cell returned; the call waits
    if button == "Deny":
        kernel.set_value(kernel.widget("TextModel", start), "not this one", subshell)
    button_id = kernel.button(button, start)
    kernel.click(button_id, subshell)
    final = kernel.update_with("write_note: ", start)
    assert final["parent_header"]["msg_id"] == run.msg_id
    ran = kernel.value(f"{path!r} in RAN")
    resolved = kernel.value(
        "[(e.approved, e.decided_by, e.reason) for e in h.events if e.type == 'approval_resolved']"
    )
    if button == "Approve":
        assert ran == "True"
        assert kernel.value("h.result().text") == f"wrote {path}"
        assert resolved == "[(True, 'notebook', None)]"
    else:
        assert ran == "False"
        assert kernel.value("h.status") == "denied"
        assert "not this one" in kernel.value("h.result().text")
        assert resolved == "[(False, 'notebook', 'not this one')]"
    # the buttons are disabled once decided
    assert any(
        m["msg_type"] == "comm_msg"
        and m["content"]["comm_id"] == button_id
        and m["content"]["data"].get("state", {}).get("disabled") is True
        for m in kernel.log[start:]
    )
    types = kernel.value("[e.type for e in h.events]")
    assert types.startswith("['requested', 'approval_requested', 'approval_resolved'")


@pytest.mark.parametrize("style", ["auto", "html"])
def test_the_final_refresh_goes_to_the_cell_that_started_the_call(
    kernel: Kernel, style: str
) -> None:
    """Even when other cells ran meanwhile (ipykernel 6 has one global parent: the last request)."""
    kernel.ok(f"%config KodeMagics.display_style = {style!r}")
    try:
        start = len(kernel.log)
        run = kernel.ok("w = %tool wait_for_cancel seconds=0.4")
        later = kernel.ok("x = 1")
        final = kernel.update_with("wait_for_cancel: ok in ", start)
        assert final["parent_header"]["msg_id"] == run.msg_id != later.msg_id
        assert kernel.value("w.result().text") == "finished"
    finally:
        kernel.ok("%config KodeMagics.display_style = 'auto'")


def test_the_handle_decides_like_the_buttons(kernel: Kernel) -> None:
    kernel.ok("h = %tool write_note path=h-approve.txt text=hi")
    assert kernel.value("h.status") == "waiting for approval"
    assert kernel.value("h.approve()") == "True"
    assert kernel.value("h.approve()") == "False"  # already decided
    kernel.ok("r = await h")
    assert kernel.value("r.text") == "wrote h-approve.txt"
    assert kernel.value("'h-approve.txt' in RAN") == "True"

    kernel.ok("h = %tool write_note path=h-deny.txt text=hi")
    assert kernel.value("h.deny('use another path')") == "True"
    kernel.ok("r = await h")
    assert kernel.value("r.status") == "denied"
    assert "use another path" in kernel.value("r.text")
    assert kernel.value("'h-deny.txt' in RAN") == "False"
    assert kernel.value("h.approve()") == "False"  # finished: nothing is waiting


def test_always_allow_skips_the_prompt_for_the_rest_of_the_session(kernel: Kernel) -> None:
    start = len(kernel.log)
    kernel.ok("h = %tool write_note path=always.txt text=hi")
    kernel.click(kernel.button("Always allow this tool", start))
    kernel.update_with("wrote always.txt", start)
    second = len(kernel.log)
    kernel.ok("h2 = %tool write_note path=again.txt text=hi")
    kernel.update_with("wrote again.txt", second)
    assert not [
        m for m in kernel.log[second:]
        if m["msg_type"] == "comm_open" and m["content"]["data"]["state"].get("_model_name") == "ButtonModel"
    ]  # fmt: skip
    assert kernel.value("get_session().policy.always_allowed") == "{'write_note'}"
    kernel.ok("get_session().policy.revoke_always_allow()")


def test_no_decision_within_the_timeout_denies(kernel: Kernel) -> None:
    kernel.ok("%config KodeMagics.approval_timeout = 0.3")
    try:
        start = len(kernel.log)
        kernel.ok("h = %tool write_note path=late.txt text=hi")
        kernel.update_with("write_note: denied\n", start)
        assert "No decision within 0.3 s" in kernel.value("h.result().text")
        assert kernel.value("'late.txt' in RAN") == "False"
    finally:
        kernel.ok("%config KodeMagics.approval_timeout = 0")


def test_without_widgets_approval_is_denied_with_a_message(kernel: Kernel) -> None:
    kernel.ok("%config KodeMagics.display_style = 'html'")
    try:
        start = len(kernel.log)
        run = kernel.ok("h = %tool write_note path=html.txt text=hi")
        assert "application/vnd.jupyter.widget-view+json" not in run.outputs[0]
        final = kernel.update_with("write_note: denied\n", start)
        assert "%approval auto" in final["content"]["data"]["text/html"]
        assert kernel.value("h.result().status, 'html.txt' in RAN") == "denied False"
    finally:
        kernel.ok("%config KodeMagics.display_style = 'auto'")


def test_interrupting_the_idle_kernel_cancels_running_and_waiting_calls(kernel: Kernel) -> None:
    start = len(kernel.log)
    kernel.ok("w = %tool wait_for_cancel seconds=20")
    kernel.ok("p = %tool write_note path=never.txt text=hi")
    kernel.button("Approve", start)
    time.sleep(0.2)
    kernel.km.interrupt_kernel()
    waited = kernel.update_with("wait_for_cancel: interrupted in ", start)
    kernel.update_with("write_note: interrupted", start)
    record = waited["content"]["data"]["application/vnd.kode-nb.call+json"]
    assert record["status"] == "interrupted"  # the view records the interrupt, not a widget
    assert "application/vnd.jupyter.widget-view+json" not in waited["content"]["data"]
    assert kernel.value("w.status, p.status, 'never.txt' in RAN") == "cancelled cancelled False"
    # The worker thread notices the cancel token within 10 ms; its slot is freed once it ends.
    kernel.until("get_session().executor.running()", "[]")


def test_interrupting_a_cell_that_awaits_the_handle_cancels_the_call(kernel: Kernel) -> None:
    start = len(kernel.log)
    kernel.ok("w = %tool wait_for_cancel seconds=20")
    msg_id = kernel.begin("await w")
    time.sleep(0.3)
    kernel.km.interrupt_kernel()
    kernel.wait_for(
        lambda m: (
            m["parent_header"].get("msg_id") == msg_id
            and m["msg_type"] == "status"
            and m["content"]["execution_state"] == "idle"
        ),
    )
    kernel.update_with("wait_for_cancel: interrupted in ", start)  # the view records why
    assert kernel.value("w.status") == "cancelled"


def test_an_interrupted_blocking_cell_cancels_running_calls(kernel: Kernel) -> None:
    start = len(kernel.log)
    kernel.ok("w = %tool wait_for_cancel seconds=20")
    msg_id = kernel.begin("import time\ntime.sleep(20)")
    time.sleep(0.3)
    kernel.km.interrupt_kernel()
    error = kernel.wait_for(
        lambda m: m["parent_header"].get("msg_id") == msg_id and m["msg_type"] == "error"
    )
    assert error["content"]["ename"] == "KeyboardInterrupt"
    kernel.update_with("wait_for_cancel: interrupted in ", start)


def test_a_call_made_from_code_gets_a_prompt_in_the_cell_that_started_it(kernel: Kernel) -> None:
    start = len(kernel.log)
    run = kernel.ok(
        "import asyncio\n"
        "t = asyncio.ensure_future(get_session().executor.call("
        "'write_note', {'path': 'code.txt', 'text': 'hi'}))"
    )
    kernel.click(kernel.button("Approve", start))
    prompt = kernel.wait_for(lambda m: m["msg_type"] == "display_data" and m in kernel.log[start:])
    assert prompt["parent_header"]["msg_id"] == run.msg_id
    # the prompt is in the call's view, which ends as the call's record
    assert prompt["content"]["data"]["text/plain"].startswith("write_note: waiting for approval")
    assert prompt["content"]["data"]["application/vnd.kode-nb.live+json"]["kind"] == "call"
    assert kernel.ok("r = await t\nprint(r.text)").stdout.strip() == "wrote code.txt"
    shown = prompt["content"]["transient"]["display_id"]
    final = kernel.wait_for(
        lambda m: (
            m["msg_type"] == "update_display_data"
            and m["content"]["transient"]["display_id"] == shown
            and "application/vnd.kode-nb.call+json" in m["content"]["data"]
        )
    )
    assert final["content"]["data"]["application/vnd.kode-nb.call+json"]["status"] == "ok"
