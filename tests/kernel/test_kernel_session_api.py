"""The Python API is the notebook's too: in a kernel with kode_nb loaded, ``kode_nb.Executor()``
(and so ``kode_nb.Agent``, ``fork`` and the cells ``expand_trace`` makes) runs calls under the
session: its registry, policy and approvals; an explicit executor still wins. An
``AgentRunResult`` and a ``Trace`` display as the run record and the trace viewer."""

from __future__ import annotations

from typing import Any

from kode_nb.traces import Trace

from .conftest import EVERY_KERNEL
from .harness import Kernel

pytestmark = EVERY_KERNEL

RUN = "application/vnd.kode-nb.run+json"
TRACE = "application/vnd.kode-nb.trace+json"

TOOLS = '''%%tool --kind read
def peek(name: str) -> str:
    """Read a note.

    Args:
        name: The note.
    """
    return f"note {name}"


def secret(name: str) -> str:
    """Read a secret.

    Args:
        name: The secret.
    """
    return "the secret " + name'''

EDIT = '''%%tool --kind edit
def jot(text: str) -> str:
    """Write a note.

    Args:
        text: What to write.
    """
    return "wrote " + text'''


def _setup(kernel: Kernel) -> None:
    kernel.ok(TOOLS)
    kernel.ok(EDIT)
    kernel.ok("%policy deny secret")


def test_a_bare_executor_is_the_sessions(kernel: Kernel) -> None:
    _setup(kernel)
    out = kernel.ok(
        "import kode_nb\n"
        "from kode_nb.magics import get_session\n"
        "s = get_session()\n"
        "ex = kode_nb.Executor()\n"
        "print(ex.policy is s.policy, ex.approver is s.approver, ex.bus is s.bus)\n"
        "denied = await ex.call('secret', {'name': 'x'})\n"
        "print(denied.status)\n"
        "print((await ex.call('peek', {'name': 'a'})).text)\n"
        "own = kode_nb.Executor(kode_nb.ToolRegistry())\n"
        "print(own.policy is s.policy, own.approver is None)"
    ).stdout
    assert out.splitlines() == ["True True True", "denied", "note a", "False True"]


def test_an_edit_tool_asks_with_buttons_and_the_agent_follows_the_policy(kernel: Kernel) -> None:
    _setup(kernel)
    start = len(kernel.log)
    kernel.ok(
        "from kode_nb.models import ScriptedModel, Turn, call\n"
        "agent = kode_nb.Agent(model=ScriptedModel([Turn(calls=[call('jot', text='hi')]), 'done']),"
        " tools=['secret', 'jot'])\n"
        "import asyncio\n"
        "task = asyncio.ensure_future(agent.run('go'))"
    )
    kernel.button("Approve", start, timeout=20)  # in the run's live view
    kernel.ok(
        "from kode_nb.magics import get_session\n"
        "[p.decide(__import__('kode_nb.policy._approval', fromlist=['approve']).approve())"
        " for p in list(get_session().approver._widgets.prompts.values())]"
    )
    out = kernel.ok(
        "res = await task\n"
        "calls = res.trace.root.find(kind='tool_call')\n"
        "print([c.attributes['result']['status'] for c in calls])\n"
        "print([t['name'] for t in res.trace.root.attributes['tool_specs']])"
    ).stdout
    # the session denies `secret`: never offered to the model; `jot` asked, was approved, ran
    assert out.splitlines() == ["['ok']", "['jot']"]


def test_a_run_result_and_a_trace_display_as_records(kernel: Kernel) -> None:
    _setup(kernel)
    kernel.ok(
        "from kode_nb.models import ScriptedModel, call\n"
        "res = await kode_nb.Agent(model=ScriptedModel([call('peek', name='a'), 'fine']),"
        " tools=['peek']).run('look')"
    )
    shown = kernel.ok("res")
    (data,) = [d for d in shown.outputs if RUN in d]
    assert data[RUN]["status"] == "completed"
    assert data[RUN]["trace"]["schema"].startswith("kode_nb.trace/")
    assert {"text/html", "text/plain"} <= set(data)
    traced = kernel.ok("res.trace")
    (tdata,) = [d for d in traced.outputs if TRACE in d]
    assert Trace.from_dict(tdata[TRACE]).root.kind == "run"  # saved in the compact form


WIDGET = "application/vnd.jupyter.widget-view+json"


def _final_record(kernel: Kernel, start: int, parent: str) -> dict[str, Any]:
    """The run record that replaced a live view in place, sent for the cell ``parent``."""
    msg = kernel.wait_for(
        lambda m: (
            m in kernel.log[start:]
            and m["msg_type"] == "update_display_data"
            and RUN in m["content"]["data"]
        ),
        timeout=20,
    )
    assert msg["parent_header"]["msg_id"] == parent
    return dict(msg["content"]["data"])


def test_a_run_from_python_shows_a_live_view_that_ends_as_its_record(kernel: Kernel) -> None:
    _setup(kernel)
    kernel.ok("from kode_nb.models import ScriptedModel, call")
    start = len(kernel.log)
    run = kernel.ok(
        "res = await kode_nb.Agent(model=ScriptedModel([call('peek', name='a'), 'fine']),"
        " tools=['peek', 'jot']).run('look')\n"
        "res"
    )
    first = run.outputs[0]
    assert WIDGET in first  # the live view, in the cell that runs it
    assert first["text/plain"].startswith("agent main: running")
    final = _final_record(kernel, start, run.msg_id)
    assert final[RUN]["status"] == "completed"  # replaced by the final record before the cell ended
    assert final[RUN]["output"] == "fine"
    # `res` as the cell's value refreshed that view: no second record
    assert not [
        m
        for m in run.messages
        if m["msg_type"] in ("display_data", "execute_result") and RUN in m["content"]["data"]
    ]
    again = kernel.ok("res")  # in another cell: the run record
    assert [d[RUN]["status"] for d in again.outputs if RUN in d] == ["completed"]
    assert kernel.value("get_session().views") == "{}"


def test_an_edit_tool_of_a_python_run_asks_with_buttons_in_its_view(kernel: Kernel) -> None:
    _setup(kernel)
    kernel.ok(
        "import asyncio\n"
        "from kode_nb.models import ScriptedModel, call\n"
        "agent = kode_nb.Agent(model=ScriptedModel([call('jot', text='hi'), 'done']),"
        " tools=['peek', 'jot'])"
    )
    start = len(kernel.log)
    run = kernel.ok("task = asyncio.ensure_future(agent.run('go'))")
    approve = kernel.button("Approve", start, timeout=20)
    shown = [m for m in kernel.log[start:] if m["msg_type"] == "display_data"]
    assert WIDGET in shown[0]["content"]["data"]  # the run's view ...
    assert (
        not [  # ... holds the prompt: no prompt of its own below it
            m for m in shown if "Approve jot" in str(m["content"]["data"].get("text/plain", ""))
        ]
    )
    assert "no approver" not in str(kernel.log[start:])
    kernel.click(approve)  # the comm_msg a browser sends for the click
    out = kernel.ok(
        "res = await task\n"
        "print(res.status, [c.attributes['result']['status']"
        " for c in res.trace.root.find(kind='tool_call')])"
    ).stdout
    assert out.strip() == "completed ['ok']"
    final = _final_record(kernel, start, run.msg_id)
    assert final[RUN]["status"] == "completed"


def test_fork_and_replay_from_python_show_their_runs_live(kernel: Kernel) -> None:
    _setup(kernel)
    kernel.ok(
        "from kode_nb.models import ScriptedModel, call\n"
        "res = await kode_nb.Agent(model=ScriptedModel([call('peek', name='a'), 'fine']),"
        " tools=['peek']).run('look')"
    )
    start = len(kernel.log)
    forked = kernel.ok(
        "forked = await kode_nb.fork(res, at=1, edit='look again', model=ScriptedModel(['seen']))"
    )
    assert WIDGET in forked.outputs[0]
    final = _final_record(kernel, start, forked.msg_id)
    records = [
        m["content"]["data"][RUN]
        for m in forked.messages
        if m["msg_type"] == "update_display_data" and RUN in m["content"]["data"]
    ]
    # marked after its run ended, the fork refreshed its view: saved with the link to its parent
    assert Trace.from_dict(records[-1]["trace"]).root.attributes["forked_from"]["turn"] == 1
    assert final[RUN]["output"] == "seen"
    start = len(kernel.log)
    replayed = kernel.ok("again = await kode_nb.replay(res, tools='execute')")
    assert WIDGET in replayed.outputs[0]  # its tools run on the session's executor: shown live
    assert _final_record(kernel, start, replayed.msg_id)[RUN]["output"] == "fine"
    offline = kernel.ok("again = await kode_nb.replay(res)")  # recorded results, offline
    assert offline.outputs == []


def test_a_run_on_an_executor_of_its_own_shows_no_view(kernel: Kernel) -> None:
    kernel.ok("from kode_nb.models import ScriptedModel")
    run = kernel.ok(
        "own = kode_nb.Executor(kode_nb.ToolRegistry())\n"
        "mine = await kode_nb.Agent(model=ScriptedModel(['ok']), executor=own).run('hi')"
    )
    assert run.outputs == []  # an explicit executor still wins: not the session's, no view


def test_run_many_runs_under_the_sessions_registry_and_policy(kernel: Kernel) -> None:
    _setup(kernel)
    out = kernel.ok(
        "from kode_nb.models import ScriptedModel, call\n"
        "script = lambda: ScriptedModel([call('peek', name='b'), 'ok'])\n"
        "agent = kode_nb.Agent(model=script(), tools=['peek', 'secret'])\n"
        "batch = kode_nb.run_many(agent, ['one', 'two'], model=script, cache=False, show=False)\n"
        "import asyncio\n"
        "while not batch.done():  # not `await batch`: its DataFrame needs pandas\n"
        "    await asyncio.sleep(0.05)\n"
        "print(agent.executor.policy is get_session().policy)\n"
        "print(sorted({t['name'] for i in range(2) for t in"
        " batch.trace(i).root.attributes['tool_specs']}))"
    ).stdout
    # the session's policy denies `secret`: not offered in any row; `peek` from its registry
    assert out.splitlines() == ["True", "['peek']"]
