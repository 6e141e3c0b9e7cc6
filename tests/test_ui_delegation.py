"""The live delegation tree of a run view: one line per run and subagent run, with status,
turn, tokens, cost and a pending approval that can be decided from the tree."""

from __future__ import annotations

import asyncio

import pytest

from kode_nb import Executor, Policy, ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel, set_price
from kode_nb.models.scripted import call
from kode_nb.ui.agent_view import RunView
from kode_nb.ui.approval import WidgetApprover

pytestmark = [pytest.mark.anyio, pytest.mark.usefixtures("restore_prices")]

TASK = {"inputs": {"task": {"description": "What to do", "type": "string", "required": True}}}


async def _until(check: object, what: str) -> None:
    for _ in range(400):
        if callable(check) and check():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("allowed", [True, False])
async def test_the_tree_shows_each_run_and_decides_from_its_line(
    registry: ToolRegistry, allowed: bool
) -> None:
    def save(text: str) -> str:
        """Save a note."""
        return f"saved {text}"

    define_tool(save, kind="edit")
    set_price("boss", input=1.0, output=1.0)
    set_price("worker", input=2.0, output=2.0)
    register_subagent(AgentDefinition(
        name="writer", description="Writes notes.", system_prompt="Write.", input_config=TASK,
        tools=["save"], model=ScriptedModel([call("save", text="hi"), "written"], name="worker"),
    ))  # fmt: skip
    view = RunView(agent="main", run_id="run_tree")
    approver = WidgetApprover(find_view=lambda cid: view.all_rows.get(cid))
    executor = Executor(registry=registry, approver=approver,
                        policy=Policy(approval_mode="ask"))  # fmt: skip
    outer = ScriptedModel([call("writer", task="note"), "all done"], name="boss")
    agent = Agent(model=outer, tools=["writer"], executor=executor)
    assert view.tree is not None
    assert view.tree.layout.display == "none"  # no subagent yet: the header says it all

    task = asyncio.ensure_future(agent.run("start", run_id="run_tree", on_event=view.on_event))
    tree = view.tree
    await _until(lambda: "approve" in tree.text(), "an approval in the tree")
    header = view._header_html()  # waiting for a person, not "running 58 s"
    assert "for approval of <code>save</code>" in header, header
    assert "running" not in header
    lines = tree.text().splitlines()
    assert tree.layout.display == ""
    assert len(lines) == 2, lines
    assert lines[0].startswith("main · running · turn 1")
    assert "approve" not in lines[0]
    assert lines[1].startswith("  └ writer · running · turn 1")
    assert lines[1].endswith("⏸ approve save?")
    line = list(tree.lines.values())[1]
    assert line.buttons is not None
    allow, refuse = line.buttons
    assert allow in line.children
    assert refuse in line.children
    assert [allow.description, refuse.description] == ["✔ Allow", "✘ Refuse"]
    (allow if allowed else refuse).click()
    result = await asyncio.wait_for(task, 10)
    assert result.ok, result.error
    (save_call,) = result.trace.root.find(kind="tool_call", name="execute_tool save")
    assert save_call.status == ("ok" if allowed else "denied")
    resolved = [e for e in save_call.events if e["name"] == "approval_resolved"]
    assert resolved[0]["attributes"]["approved"] is allowed
    lines = tree.text().splitlines()
    assert "approve" not in tree.text()
    assert allow not in line.children
    assert lines[0].startswith("main · completed · turn 2")
    assert f"${result.cost:.6f}".rstrip("0") in lines[0]  # the root's cost includes the writer's
    assert lines[1].startswith("  └ writer · completed · turn 2")


async def test_an_unpriced_model_shows_cost_unknown(registry: ToolRegistry) -> None:
    register_subagent(AgentDefinition(
        name="helper", description="Helps.", system_prompt="Help.", input_config=TASK, tools=[],
        model=ScriptedModel(["ok"], name="unpriced-model"),
    ))  # fmt: skip
    view = RunView(agent="main", run_id="run_unpriced")

    outer = ScriptedModel([call("helper", task="x"), "done"], name="also-unpriced")
    result = await Agent(model=outer, tools=["helper"]).run(
        "go", run_id="run_unpriced", on_event=view.on_event
    )
    assert result.ok
    assert view.tree is not None
    lines = view.tree.text().splitlines()
    assert len(lines) == 2
    assert all("cost unknown" in line for line in lines)
    assert all("$0" not in line for line in lines)
