"""Other frameworks' agents in a real kernel: a pydantic-ai agent, an OpenAI Agents SDK agent and a
LangChain chain call a kode_nb ``--kind edit`` tool; the Approve/Deny click arrives through the comm while the
framework's run waits in the background; the run finishes and its saved run record holds the
captured trace; a denial and a validation error reach the framework's model; a kernel interrupt
cancels the framework's run."""

from __future__ import annotations

from typing import Any

import pytest

from kode_nb.traces import Trace

from .cells import LANGCHAIN, NOTE_TOOL, OPENAI_AGENTS, PYDANTIC_AI, WAIT_FOR_CANCEL
from .harness import Kernel, Msg


@pytest.fixture(scope="module", autouse=True)
def _setup(kernel: Kernel) -> None:
    kernel.ok(NOTE_TOOL)
    kernel.ok(WAIT_FOR_CANCEL)
    kernel.ok(PYDANTIC_AI)
    kernel.ok(OPENAI_AGENTS)
    kernel.ok(LANGCHAIN)


def _record(kernel: Kernel, start: int, timeout: float = 20) -> dict[str, Any]:
    """The framework run's final refresh: its saved run record."""
    msg: Msg = kernel.wait_for(
        lambda m: (
            m["msg_type"] == "update_display_data"
            and "application/vnd.kode-nb.run+json" in m["content"]["data"]
            and m in kernel.log[start:]
        ),
        timeout,
    )
    data: dict[str, Any] = msg["content"]["data"]["application/vnd.kode-nb.run+json"]
    assert "application/vnd.jupyter.widget-view+json" not in msg["content"]["data"]
    return data


def _spans(span: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    found = [span] if span["kind"] == kind else []
    for child in span["children"]:
        found += _spans(child, kind)
    return found


def _approved(kernel: Kernel, code: str, handle: str) -> dict[str, Any]:
    """Run ``code`` (it starts a framework's run as ``handle``), click Approve once the run waits
    for it, and return the run's saved record."""
    start = len(kernel.log)
    kernel.ok(code)
    kernel.until(f"{handle}.status", "waiting for approval")  # the cell returned; the run waits
    kernel.click(kernel.button("Approve", start))
    return _record(kernel, start)


def test_a_pydantic_ai_run_waits_for_the_approve_click_and_saves_its_trace(kernel: Kernel) -> None:
    record = _approved(
        kernel,
        "model, seen = scripted(('write_note', {'path': 'pa.txt', 'text': 'hi'}), 'done')\n"
        "agent = Agent(model, name='writer', toolsets=[pydantic_ai_toolset(['write_note'])])\n"
        "h = start(agent.run('write pa.txt'))\n"
        "h",
        "h",
    )
    assert (record["agent"], record["status"], record["output"]) == ("writer", "completed", "done")
    assert kernel.value("'pa.txt' in RAN, h.result().output") == "True done"
    (tool,) = _spans(Trace.from_dict(record["trace"]).to_dict()["root"], "tool_call")
    assert tool["status"] == "ok"
    assert tool["attributes"]["result"]["text"] == "wrote pa.txt"
    resolved = [e for e in tool["events"] if e["name"] == "approval_resolved"]
    assert resolved[0]["attributes"]["approved"] is True
    assert resolved[0]["attributes"]["decided_by"] == "notebook"
    assert len(_spans(Trace.from_dict(record["trace"]).to_dict()["root"], "model_call")) == 2


def test_a_denial_and_a_validation_error_reach_the_pydantic_ai_model(kernel: Kernel) -> None:
    kernel.ok(
        "model, seen = scripted(('write_note', {'path': 'no.txt'}),"
        " ('write_note', {'path': 'no.txt', 'text': 'x'}), 'ok')\n"
        "agent = Agent(model, name='writer', toolsets=[pydantic_ai_toolset(['write_note'])])\n"
        "h = start(agent.run('write no.txt'))"
    )
    kernel.until("h.status", "waiting for approval")
    assert kernel.value("h.deny('not this file')") == "True"  # as the Deny button does
    kernel.until("h.status", "completed")
    assert "required field is missing" in kernel.value("str(seen[1][-1].parts[0].content)")
    assert "not this file" in kernel.value("str(seen[2][-1].parts[0].content)")
    assert kernel.value("'no.txt' in RAN") == "False"


def test_an_openai_agents_run_waits_for_the_approve_click(kernel: Kernel) -> None:
    record = _approved(
        kernel,
        "sdk_model = ScriptedAgentsModel([('write_note', {'path': 'oa.txt', 'text': 'hi'}), 'done'])\n"
        "sdk_agent = SdkAgent(name='sdk_writer', model=sdk_model,"
        " tools=openai_agents_tools(['write_note']))\n"
        "s = start(Runner.run(sdk_agent, 'write oa.txt'), name='sdk_writer')\n"
        "s",
        "s",
    )
    assert (record["agent"], record["status"]) == ("sdk_writer", "completed")
    assert kernel.value("'oa.txt' in RAN, s.result().final_output") == "True done"
    (tool,) = _spans(Trace.from_dict(record["trace"]).to_dict()["root"], "tool_call")
    assert tool["attributes"]["result"]["text"] == "wrote oa.txt"


def test_a_langchain_run_waits_for_the_approve_click(kernel: Kernel) -> None:
    record = _approved(
        kernel,
        "call = {'name': 'write_note', 'args': {'path': 'lc.txt', 'text': 'hi'}, 'id': 'c1',"
        " 'type': 'tool_call'}\n"
        "chain = note_chain([AIMessage('', tool_calls=[call]), AIMessage('done')])\n"
        "l = start(chain.ainvoke('write lc.txt'), name='lc_writer')",
        "l",
    )
    assert (record["agent"], record["status"]) == ("lc_writer", "completed")
    assert kernel.value("'lc.txt' in RAN, l.result()") == "True done"
    (tool,) = _spans(Trace.from_dict(record["trace"]).to_dict()["root"], "tool_call")
    assert tool["attributes"]["call_id"] == "c1"
    assert tool["attributes"]["result"]["text"] == "wrote lc.txt"


def test_a_kernel_interrupt_cancels_the_frameworks_run(kernel: Kernel) -> None:
    start = len(kernel.log)
    kernel.ok(
        "model, seen = scripted(('wait_for_cancel', {'seconds': 20}), 'never')\n"
        "agent = Agent(model, name='waiter', toolsets=[pydantic_ai_toolset(['wait_for_cancel'])])\n"
        "w = start(agent.run('wait'))\n"
        "w"
    )
    kernel.until("len(get_session().executor.running())", "1")
    kernel.km.interrupt_kernel()
    record = _record(kernel, start)
    assert record["status"] == "cancelled"
    kernel.until("w.status", "cancelled")
    assert kernel.value("len(seen)") == "1"  # the model was not asked again
    kernel.until("get_session().executor.running()", "[]")
