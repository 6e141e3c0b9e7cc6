"""expand_trace: a recorded run as notebook cells — collapsed headings, one code cell per tool
call with the recorded result as output, nested subagent runs, a replay cell — and notes for
what cannot be reproduced (newer format, unregistered tool, missing nested run)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import nbformat
import pytest
from pydantic import BaseModel

import kode_nb
from kode_nb import ConfigurationError, ToolRegistry, define_tool
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.models import ScriptedModel
from kode_nb.models.scripted import Turn, call

pytestmark = pytest.mark.anyio


class Question(BaseModel):
    objective: str


@pytest.fixture
def add(registry: ToolRegistry) -> ToolRegistry:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    define_tool(add, inline=True)
    register_subagent(AgentDefinition(
        name="helper", description="Adds.", system_prompt="Work on {objective}",
        input_model=Question, tools=["add"],
        model=ScriptedModel([call("add", a=1, b=1), "two"]),
    ))  # fmt: skip
    return registry


async def nested_run() -> kode_nb.AgentRunResult:
    model = ScriptedModel([
        Turn(text="Let me ask.", calls=[call("helper", objective="1+1")]),
        call("add", a=2, b=2),
        "Two, then four.",
    ])  # fmt: skip
    return await Agent(model=model, tools=["helper", "add"]).run("ask and add")


def sources(cells: list[dict[str, object]], kind: str) -> list[str]:
    return [str(c["source"]) for c in cells if c["cell_type"] == kind]


async def test_cells_follow_the_run_with_collapsed_headings(add: ToolRegistry) -> None:
    result = await nested_run()
    expansion = kode_nb.expand_trace(result, registered=set(add.names()))
    assert expansion.notes == []
    cells = expansion.cells
    headings = [s.splitlines()[0] for s in sources(cells, "markdown") if s.startswith("#")]
    assert headings == [
        "## Run `main` — completed", "### Turn 1 — 1 tool call(s): helper",
        "#### Run `main > helper` — completed", "##### Turn 1 — 1 tool call(s): add",
        "##### Turn 2 — answer", "### Turn 2 — 1 tool call(s): add", "### Turn 3 — answer",
        "## Replay `main`",
    ]  # fmt: skip
    collapsed = [c for c in cells if c["metadata"].get("jp-MarkdownHeadingCollapsed")]
    assert len(collapsed) == 7  # every heading but the replay one
    assert all(c["metadata"]["heading_collapsed"] is True for c in collapsed)
    assert all(c["metadata"]["kode_nb"]["trace_id"] == result.trace.trace_id for c in cells)
    assert "**`main`** (model):\n\nLet me ask." in sources(cells, "markdown")
    code = sources(cells, "code")
    assert code[0].startswith("import json\n\nimport kode_nb")
    assert "# `helper` is a subagent: calling it runs its model" in code[1]
    assert '\n# result = await executor.call(\'helper\', {"objective": "1+1"})' in code[1]
    assert 'result = await executor.call(\'add\', {"a": 1, "b": 1})' in code[2]
    outputs = [c["outputs"][0]["data"]["text/plain"] for c in cells if c["cell_type"] == "code"
               and c["outputs"]]  # fmt: skip
    assert outputs == ["two", "2", "4"]
    assert code[-1].startswith("replayed = await kode_nb.replay(TRACE)")


async def test_missing_tools_subagents_and_newer_formats_get_notes(add: ToolRegistry) -> None:
    data = (await nested_run()).trace.to_dict()
    helper_call = data["root"]["children"][0]["children"][1]
    helper_call["children"] = []  # the nested run is missing
    data["schema"] = "kode_nb.trace/v9"
    expansion = kode_nb.expand_trace(data, registered={"add"})
    assert expansion.notes == [
        "the trace is kode_nb.trace/v9, newer than this kode_nb reads (kode_nb.trace/v1, "
        "kode_nb.trace/v2, kode_nb.trace/v3): cells were made from the fields it knows; update "
        "kode_nb to replay it",
        f"tool `helper` (call {helper_call['attributes']['call_id']}) is not registered in this "
        "kernel: its cell will get a not_found result; the replay cell uses the recorded results",
        f"subagent `helper` (call {helper_call['attributes']['call_id']}) has no recorded nested "
        "run in the trace: its turns cannot be shown or replayed",
    ]
    code = sources(expansion.cells, "code")
    assert len(code) == 4  # setup, helper, add, replay: the rest is still made
    with pytest.raises(ConfigurationError, match="replay takes an AgentRunResult"):
        kode_nb.expand_trace([1, 2])


async def test_written_notebook_is_valid_and_never_overwrites(
    add: ToolRegistry, tmp_path: Path
) -> None:
    result = await nested_run()
    target = tmp_path / "run.ipynb"
    expansion = kode_nb.expand_trace(result, path=target)
    assert expansion.path == target
    nb = nbformat.read(target, as_version=4)
    nbformat.validate(nb)
    assert json.loads(target.read_text())["cells"] == expansion.cells
    with pytest.raises(ConfigurationError, match="exists; choose another path"):
        kode_nb.expand_trace(result, path=target)
    with pytest.raises(ConfigurationError, match=r"must end in \.ipynb"):
        kode_nb.expand_trace(result, path=tmp_path / "run.txt")


# --------------------------------------------------------------------------- hostile traces


HOSTILE = "x\nimport os; os.system('echo owned')  # "


def hostile_trace(data: dict[str, object]) -> dict[str, object]:
    """A trace (as a saved notebook could hold it) whose names, ids and text try to become code
    or markup in the expanded cells."""

    def walk(span: dict[str, object]) -> None:
        span["name"] = HOSTILE
        attributes = span.setdefault("attributes", {})
        assert isinstance(attributes, dict)
        if span.get("kind") == "tool_call":
            attributes["call_id"] = HOSTILE
            attributes["arguments"] = {"flag": True, "none": None, "text": HOSTILE}
        if span.get("kind") == "model_call" and isinstance(attributes.get("response"), dict):
            attributes["response"]["text"] = "## Not a heading\n<img src=x onerror=alert(1)>"
        for child in span.get("children") or []:
            walk(child)  # type: ignore[arg-type]

    walk(data["root"])  # type: ignore[arg-type]
    data["trace_id"] = HOSTILE
    return data


async def test_recorded_names_and_text_stay_data(add: ToolRegistry) -> None:
    expansion = kode_nb.expand_trace(hostile_trace((await nested_run()).trace.to_dict()))
    for source in sources(expansion.cells, "code"):  # every cell is valid Python, and data only
        tree = ast.parse(source.replace("await ", ""))
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert imported <= {"json", "kode_nb"}, source
        assert not any(isinstance(n, ast.Attribute) and n.attr == "system" for n in ast.walk(tree))
    calls = [s for s in sources(expansion.cells, "code") if "executor.call(" in s]
    assert any("{'flag': True, 'none': None, 'text':" in s for s in calls), calls
    markdown = sources(expansion.cells, "markdown")
    headings = [s for s in markdown if s.startswith("#")]
    assert all("\n" not in s.split("\n\n")[0] for s in headings)  # a heading stays one line
    text = next(s for s in markdown if "(model):" in s)
    assert "\\## Not a heading" in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text
    assert "<img" not in "".join(markdown)


EVIL = "<img src=x onerror=alert(1)>\x00\ud800 end\n## heading\n'''\"\"\"\\"
"""HTML, a null byte, a lone surrogate, newlines, quotes of every kind and a backslash."""


def evil_everywhere(value: object) -> object:
    """Every string of a trace's JSON (keys of arguments too) made hostile, numbers kept."""
    if isinstance(value, str):
        return value + EVIL
    if isinstance(value, list):
        return [evil_everywhere(v) for v in value]
    if isinstance(value, dict):
        out: dict[str, object] = {}
        for key, item in value.items():
            keep = key in {"schema", "kind", "started_at", "ended_at", "duration", "children",
                           "span_id", "role", "type"}  # fmt: skip
            out[key] = item if keep and not isinstance(item, list) else evil_everywhere(item)
            if key == "children":
                out[key] = [evil_everywhere(c) for c in item]  # type: ignore[union-attr]
        return out
    return value


async def test_cells_from_a_hostile_trace_parse_encode_and_load(add: ToolRegistry) -> None:
    data = evil_everywhere((await nested_run()).trace.to_dict())
    assert isinstance(data, dict)
    expansion = kode_nb.expand_trace(data)
    notebook = expansion.notebook()
    json.dumps(notebook, ensure_ascii=False).encode("utf-8")  # no lone surrogate in any cell
    for source in sources(expansion.cells, "code"):
        source.encode("utf-8")
        assert "\x00" not in source
        compile(source.replace("await ", ""), "<cell>", "exec")
    for source in sources(expansion.cells, "markdown"):
        assert "<img" not in re.sub(r"`[^`\n]*`", "", source), source  # code spans show it as text
        assert "\x00" not in source
        source.encode("utf-8")
    setup = next(s for s in sources(expansion.cells, "code") if "TRACE = " in s)
    namespace: dict[str, object] = {}
    exec(setup.replace("executor = kode_nb.Executor()", ""), namespace)
    trace = namespace["TRACE"]
    assert isinstance(trace, dict)
    assert trace["trace_id"] == json.loads(json.dumps(data))["trace_id"]


async def test_a_huge_run_is_expanded_in_part_and_loaded_by_id(
    add: ToolRegistry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kode_nb.debug import _expand
    from kode_nb.traces import known_trace

    monkeypatch.setattr(_expand, "MAX_CELLS", 4)
    monkeypatch.setattr(_expand, "MAX_EMBED", 100)
    model = ScriptedModel([call("add", a=i, b=i) for i in range(12)] + ["done"])
    result = await Agent(model=model, tools=["add"], max_turns=20).run("add a lot")
    expansion = kode_nb.expand_trace(result)
    assert len(expansion.cells) < 12
    assert any("more turn(s) were not expanded" in n for n in expansion.notes)
    assert any("loads it by its id" in n for n in expansion.notes)
    setup = sources(expansion.cells, "code")[0]
    assert f"known_trace({json.dumps(result.trace.trace_id)})" in setup
    assert known_trace(result.trace.trace_id).trace_id == result.trace.trace_id
    namespace: dict[str, object] = {}
    exec(setup.replace("executor = kode_nb.Executor()", ""), namespace)
    assert isinstance(namespace["TRACE"], dict)
