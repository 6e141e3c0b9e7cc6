"""A run expanded into a notebook file reproduces itself offline: executed top to bottom by
nbclient in a fresh kernel (where the run's tools are not defined), the replay cell prints the
original answer, and the tool cells name what is missing instead of failing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nbclient
import nbformat
import pytest
from pydantic import BaseModel

import kode_nb
from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import Turn, call

from .harness import Kernel

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    objective: str


async def test_the_expanded_notebook_replays_the_run_in_a_real_kernel(
    registry: ToolRegistry, tmp_path: Path
) -> None:

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    register_subagent(AgentDefinition(
        name="helper", description="Adds.", system_prompt="Work on {objective}",
        input_model=Question, tools=["add"],
        model=ScriptedModel([call("add", a=20, b=22), "forty-two"]),
    ))  # fmt: skip
    model = ScriptedModel([
        Turn(text="Asking.", calls=[call("helper", objective="20+22")]),
        call("add", a=42, b=1),
        "The helper said forty-two; plus one is 43.",
    ])  # fmt: skip
    original = await Agent(model=model, tools=["helper", "add"]).run("go")
    assert original.status == "completed"
    path = tmp_path / "expanded.ipynb"
    kode_nb.expand_trace(original, path=path)
    nb = nbformat.read(path, as_version=4)
    client: Any = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError if any cell fails
    last = nb.cells[-1]
    printed = "".join(o.get("text", "") for o in last.outputs if o.get("name") == "stdout")
    assert printed.strip() == original.output == "The helper said forty-two; plus one is 43."
    tool_cells = [c for c in nb.cells if c.metadata.get("kode_nb", {}).get("role") == "tool_call"]
    assert len(tool_cells) == 3
    assert tool_cells[0].outputs == []  # the subagent's call is commented: nothing ran
    texts = [o["data"]["text/plain"] for c in tool_cells[1:] for o in c.outputs]
    assert len(texts) == 2
    assert all("not_found" in t for t in texts), texts  # the fresh kernel has no such tools


MAGIC_RUN = '''
from kode_nb import define_tool
from kode_nb.agents import Agent
from kode_nb.models import ScriptedModel, call

def mul(a: int, b: int) -> int:
    """Multiply."""
    return a * b

define_tool(mul, inline=True)
result = await Agent(model=ScriptedModel([call("mul", a=6, b=7), "42"]), tools=["mul"]).run("6*7?")
'''


def test_the_magic_writes_next_to_the_notebook_and_links_it(kernel: Kernel, tmp_path: Path) -> None:
    folder = tmp_path / "work"
    folder.mkdir()
    kernel.ok(f"__session__ = {str(folder / 'lesson.ipynb')!r}")
    kernel.ok(MAGIC_RUN)
    run = kernel.ok("%expand_trace result")
    written = list(folder.glob("lesson-result-*.ipynb"))
    assert len(written) == 1
    html = run.text("text/html")
    assert "Expanded into <a href=" in html
    assert written[0].name in html
    assert "<li>" not in html  # mul is registered in that kernel: nothing to note
    nb = nbformat.read(written[0], as_version=4)
    nbformat.validate(nb)
    again = kernel.ok("%expand_trace result")  # a second expansion never overwrites the first
    assert len(list(folder.glob("lesson-result-*.ipynb"))) == 2
    assert "-2.ipynb" in again.text("text/html")
    bad = kernel.run("%expand_trace nothing_here")
    assert "no variable named 'nothing_here'" in bad.error_text
    assert kernel.value("1 + 1") == "2"  # the kernel lives on


def test_with_the_front_end_comm_the_cells_go_below_the_cell(
    kernel: Kernel, tmp_path: Path
) -> None:
    kernel.ok(MAGIC_RUN)
    comm_id = "notebook-comm-1"
    opening = kernel.kc.session.msg(
        "comm_open", {"comm_id": comm_id, "target_name": "kode_nb.notebook", "data": {}}
    )
    kernel.kc.shell_channel.send(opening)
    kernel.drain()
    start = len(kernel.log)
    run = kernel.ok("%expand_trace result", cell_id="cell-abc")
    assert "Inserting 8 cells below this cell" in run.text("text/html")
    request = kernel.wait_for(
        lambda m: m["msg_type"] == "comm_msg" and m in kernel.log[start:]
        and m["content"]["data"].get("op") == "insert_cells"
    )  # fmt: skip
    data = request["content"]["data"]
    assert request["content"]["comm_id"] == comm_id
    roles = [c["metadata"]["kode_nb"]["role"] for c in data["cells"]]
    assert roles == ["setup", "run", "turn", "tool_call", "turn", "model_text", "replay_heading",
                     "replay"]  # fmt: skip
    closing = kernel.kc.session.msg("comm_close", {"comm_id": comm_id, "data": {}})
    kernel.kc.shell_channel.send(closing)
    kernel.drain()
    target = tmp_path / "after_close.ipynb"
    again = kernel.ok(f"%expand_trace result --path {target}")
    assert target.exists()
    assert "after_close.ipynb" in again.text("text/html")
