"""The front end's trace requests on the ``kode_nb.notebook`` comm (ops ``expand`` and ``fork``,
``kode_nb/ui/trace_ops.py``) against a recording comm object: the answer's cells and notes, the
trace remembered by id, the fork cell's source, and a specific ``ok: false`` reply for bad input
(no trace, not a trace, a newer schema, an unknown or unforkable span)."""

from __future__ import annotations

import ast
import json
from typing import Any

import pytest
from pydantic import BaseModel

from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import Turn, call
from kode_nb.traces import Trace, known_trace
from kode_nb.ui.notebook_comm import NotebookChannel
from tests.test_notebook_comm import RecordingComm

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    objective: str


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def trace(registry: ToolRegistry) -> dict[str, Any]:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    register_subagent(AgentDefinition(
        name="helper", description="Adds.", system_prompt="Work on {objective}",
        input_model=Question, tools=["add"], model=ScriptedModel([call("add", a=1, b=1), "two"]),
    ))  # fmt: skip
    model = ScriptedModel([
        Turn(text="Let me ask.", calls=[call("helper", objective="1+1")]),
        call("add", a=2, b=2),
        "Two, then four.",
    ])  # fmt: skip
    result = await Agent(model=model, tools=["helper", "add"]).run("ask and add")
    assert result.status == "completed"
    # what the front end sends: the record's JSON, as it arrives from the browser
    data: dict[str, Any] = json.loads(json.dumps(result.trace.to_dict(), default=str))
    return data


@pytest.fixture
async def comm(kode_ip: Any) -> Any:
    comm = RecordingComm()
    channel = NotebookChannel(comm, kode_ip.magics_manager.registry["KodeMagics"], [])
    yield comm
    channel.close()


def ask(comm: RecordingComm, data: dict[str, Any]) -> dict[str, Any]:
    comm.receive({"request_id": "f1", **data})
    reply = comm.sent[-1]
    assert (reply["op"], reply["request_id"]) == ("reply", "f1")
    return reply


async def test_expand_answers_the_cells_and_remembers_the_trace(
    comm: RecordingComm, trace: dict[str, Any], registry: ToolRegistry
) -> None:
    registry.unregister("add")  # the kernel's own tools decide the notes
    reply = ask(comm, {"op": "expand", "trace": trace})
    assert reply["ok"] is True, reply
    result = reply["result"]
    assert result["trace_id"] == trace["trace_id"]
    cells = result["cells"]
    assert cells[0]["metadata"]["kode_nb"]["role"] == "setup"
    assert cells[-1]["source"].startswith("replayed = await kode_nb.replay(TRACE)")
    headings = [c for c in cells if c["metadata"].get("jp-MarkdownHeadingCollapsed")]
    assert [h["source"].splitlines()[0] for h in headings[:3]] == [
        "## Run `main` — completed", "### Turn 1 — 1 tool call(s): helper",
        "#### Run `main > helper` — completed",
    ]  # fmt: skip
    assert len(result["notes"]) == 2
    assert all("tool `add`" in n and "not registered in this kernel" in n for n in result["notes"])
    assert known_trace(trace["trace_id"][:8]).root.name == "main"
    json.dumps(reply)  # the whole answer goes over the comm as JSON


async def test_fork_answers_the_cell_source(comm: RecordingComm, trace: dict[str, Any]) -> None:
    turn = trace["root"]["children"][1]
    assert turn["kind"] == "turn"
    reply = ask(comm, {"op": "fork", "trace": trace, "span_id": turn["span_id"]})
    assert reply["ok"] is True, reply
    tid = trace["trace_id"]
    result = reply["result"]
    assert (result["trace_id"], result["span_id"], result["notes"]) == (tid, turn["span_id"], [])
    source = result["source"]
    assert source.startswith(f"# Fork of run main (trace {tid[:8]}) at {turn['name']}: change ")
    code = [line for line in source.splitlines() if not line.startswith("#")]
    assert code[:4] == [
        "import kode_nb", "from kode_nb.models import ScriptedModel",
        "from kode_nb.models.scripted import call", "",
    ]  # fmt: skip
    saved = ast.literal_eval(code[4].removeprefix("TRACE = "))
    assert saved["format"] == "kode_nb.compact/1"  # the trace itself, as a notebook saves it
    assert Trace.from_dict(saved).to_dict() == Trace.from_dict(trace).to_dict()
    assert code[5:] == [
        "forked = await kode_nb.fork(", "    TRACE,", f'    at="{turn["span_id"]}",',
        "    edit=None,", "    model=ScriptedModel([", '        call("add", a=2, b=2),',
        '        "Two, then four.",', "    ]),", ")", "forked",
    ]  # fmt: skip
    assert known_trace(tid) is not None
    tool_call = turn["children"][-1]
    assert tool_call["kind"] == "tool_call"
    reply = ask(comm, {"op": "fork", "trace": trace, "span_id": tool_call["span_id"]})
    assert f'at="{tool_call["span_id"]}"' in reply["result"]["source"]
    assert '"Two, then four.",\n    ]),' in reply["result"]["source"]  # the answer after it


async def test_a_fork_cell_keeps_recorded_names_in_its_comment(
    comm: RecordingComm, trace: dict[str, Any]
) -> None:
    trace = {
        **trace,
        "trace_id": "e" * 32,
        "root": {**trace["root"], "name": "main\nimport os  # "},
    }
    trace["root"]["attributes"] = {**trace["root"]["attributes"], "agent": "a\rb\u2028c"}
    turn = trace["root"]["children"][1]
    reply = ask(comm, {"op": "fork", "trace": trace, "span_id": turn["span_id"]})
    lines = reply["result"]["source"].splitlines()
    assert lines[0].startswith("# Fork of run a b c (trace ")
    code = [line for line in lines if not line.startswith("#")]
    assert "import os" not in "\n".join(code[:4] + code[5:])
    ast.parse(reply["result"]["source"].replace("await ", ""))  # one valid cell of code


async def test_bad_requests_get_a_specific_refusal(
    comm: RecordingComm, trace: dict[str, Any]
) -> None:
    def refused(data: dict[str, Any]) -> str:
        reply = ask(comm, data)
        assert reply["ok"] is False, reply
        assert "result" not in reply
        return str(reply["error"])

    assert "the request has no trace" in refused({"op": "expand"})
    assert "got list" in refused({"op": "expand", "trace": [1, 2]})
    assert refused({"op": "expand", "trace": {"schema": "kode_nb.run/v1"}}) == (
        "not a kode_nb trace: its schema is 'kode_nb.run/v1', expected kode_nb.trace/v1, /v2 or /v3"
    )
    broken = {"schema": "kode_nb.trace/v2", "trace_id": "ab" * 16}  # no root span
    assert "not a usable kode_nb trace" in refused({"op": "expand", "trace": broken})
    assert "no span 'nope' to fork at" in refused({"op": "fork", "trace": trace, "span_id": "nope"})
    root = trace["root"]["span_id"]
    assert "'main' is a run span" in refused({"op": "fork", "trace": trace, "span_id": root})
    newer = {**trace, "schema": "kode_nb.trace/v9", "trace_id": "cd" * 16}
    assert "a newer kode_nb wrote it" in refused({"op": "fork", "trace": newer, "span_id": root})

    # a newer schema still expands, from the fields this version knows, but is not remembered
    reply = ask(comm, {"op": "expand", "trace": newer})
    assert reply["ok"] is True, reply
    notes = reply["result"]["notes"]
    assert notes[0].startswith("the trace is kode_nb.trace/v9, newer than this kode_nb reads")
    assert notes[-1].startswith("kode_nb.known_trace('cdcdcdcd') will not find it:")
    assert reply["result"]["cells"][-1]["metadata"]["kode_nb"]["role"] == "replay"
    # the channel is still usable after bad input
    comm.receive({"op": "card", "name": "add"})
    assert comm.sent[-1]["card"]["name"] == "add"


async def test_too_deep_or_too_large_input_is_refused_clearly(
    comm: RecordingComm, trace: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from kode_nb.ui import trace_ops as expand

    deep: dict[str, Any] = {}
    node = deep
    for _ in range(900):  # what a front end can send: deeper than any recorded run
        node["x"] = {}
        node = node["x"]
    reply = ask(comm, {"op": "expand", "trace": {**trace, "root": {**trace["root"], "a": deep}}})
    assert reply["ok"] is False
    assert "nested more than 200 levels deep" in reply["error"]
    reply = ask(comm, {"op": "fork", "trace": {**trace, "junk": deep}, "span_id": "x"})
    assert "too deep to expand or fork" in reply["error"]
    monkeypatch.setattr(expand, "MAX_ITEMS", 50)
    reply = ask(comm, {"op": "expand", "trace": trace})
    assert reply["ok"] is False
    assert "more than 50 JSON values: too large" in reply["error"]
