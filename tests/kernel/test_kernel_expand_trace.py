"""A run expanded into a notebook file reproduces itself offline: executed top to bottom by
nbclient in a fresh kernel (where the run's tools are not defined), the replay cell prints the
original answer, and the tool cells name what is missing instead of failing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

import kode_nb
from kode_nb import ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import Turn, call

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    objective: str


async def test_the_expanded_notebook_replays_the_run_in_a_real_kernel(
    registry: ToolRegistry, tmp_path: Path
) -> None:
    nbclient = pytest.importorskip("nbclient")
    nbformat = pytest.importorskip("nbformat")

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
    texts = [o["data"]["text/plain"] for c in tool_cells for o in c.outputs]
    assert all("not_found" in t for t in texts), texts  # the fresh kernel has no such tools
