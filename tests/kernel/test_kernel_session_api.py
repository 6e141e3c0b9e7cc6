"""The Python API is the notebook's too: in a kernel with kode_nb loaded, ``kode_nb.Executor()``
(and so ``kode_nb.Agent``, ``fork`` and the cells ``expand_trace`` makes) runs calls under the
session: its registry, policy and approvals; an explicit executor still wins. An
``AgentRunResult`` and a ``Trace`` display as the run record and the trace viewer."""

from __future__ import annotations

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
    kernel.ok(
        "from kode_nb.models import ScriptedModel, Turn, call\n"
        "agent = kode_nb.Agent(model=ScriptedModel([Turn(calls=[call('jot', text='hi')]), 'done']),"
        " tools=['secret', 'jot'])\n"
        "import asyncio\n"
        "task = asyncio.ensure_future(agent.run('go'))"
    )
    prompt = kernel.wait_for(
        lambda m: (
            m["msg_type"] in ("display_data", "update_display_data")
            and "Approve jot" in str(m["content"]["data"].get("text/plain", ""))
        ),
        timeout=20,
    )
    assert "application/vnd.jupyter.widget-view+json" in prompt["content"]["data"]
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
