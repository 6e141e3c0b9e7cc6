"""``%%agent``, ``%agent``, ``%%ask`` and ``%model`` in terminal IPython, and the run views.

Without a running event loop the run completes inside the magic (printed as text); the live,
non-blocking path with widgets and clicks is tested in a real kernel
(``tests/kernel/test_kernel_agents.py``). The widget view is also fed a real run here, on a loop.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from IPython.core.error import UsageError

from kode_nb import ToolRegistry
from kode_nb.agents import Agent, AgentDefinition, register_subagent
from kode_nb.execution import Executor
from kode_nb.magics.agent_spec import parse_front_matter
from kode_nb.models import ScriptedModel, call
from kode_nb.ui.agent_static import StaticRunView, markdown_html
from kode_nb.ui.agent_view import RunView
from kode_nb.ui.trace_html import TraceDisplay, trace_html, trace_text

SETUP = """
from pydantic import BaseModel
from kode_nb.models import ScriptedModel, call

class Question(BaseModel):
    objective: str

FILES = {"a.py": "print(1)"}

def make_reader():
    return ScriptedModel([call("read_file", path="a.py"), "a.py prints 1."])

def make_main():
    return ScriptedModel([
        [call("reader", objective="a?"), call("reader", objective="again?")],
        lambda request: " | ".join(m.content[0].text for m in request.messages[-2:]),
    ])

not_a_model = 42
"""

READ = '''
def read_file(path: str) -> str:
    """Read a file.

    Args:
        path: The path.
    """
    return FILES[path]
'''

READER = """---
description: Reads code to answer a question.
inputs: $Question
tools: [read_file]
model: $make_reader
max_turns: 3
---
Answer: {objective}
"""


@pytest.fixture
def ip(kode_ip: Any) -> Any:
    kode_ip.run_cell(SETUP)
    kode_ip.run_cell_magic("tool", "--kind read", READ)
    return kode_ip


def _agent(ip: Any, name: str, cell: str) -> None:
    ip.run_cell_magic("agent", name, cell)


def _error(fn: Any, *args: Any) -> str:
    with pytest.raises(UsageError) as info:
        fn(*args)
    return str(info.value)


# --------------------------------------------------------------------------- front matter


def test_front_matter_is_parsed_into_keys_and_the_body() -> None:
    meta, body = parse_front_matter(
        "\n---\ndescription: x\ntools:\n  - a\n  - b\nmax_turns: 2\n---\nPrompt {task}\n", "w"
    )
    assert meta == {"description": "x", "tools": ["a", "b"], "max_turns": 2}
    assert body == "Prompt {task}"


@pytest.mark.parametrize(
    ("cell", "message"),
    [
        ("Just a prompt", "the cell has no front matter"),
        ("---\ndescription: x\nPrompt", "the front matter is not closed"),
        ("---\ndescription: [x\n---\nPrompt", "not valid YAML (front matter line"),
        ("---\n- a\n- b\n---\nPrompt", "must be 'key: value' lines, got list"),
        ("---\ndescripton: x\n---\nP", "unknown front matter key 'descripton'. Did you mean 'description'?"),
    ],
)  # fmt: skip
def test_bad_front_matter_says_what_is_wrong(cell: str, message: str) -> None:
    assert message in _error(parse_front_matter, cell, "%%agent x")


def test_agent_cell_errors(ip: Any, registry: ToolRegistry) -> None:
    def define(cell: str, name: str = "reader") -> None:
        _agent(ip, name, cell)

    assert "needs 'description:'" in _error(define, "---\ntools: [read_file]\n---\nP")
    unknown = _error(define, "---\ndescription: d\ntools: [raed_file]\n---\nP")
    assert "raed_file" in unknown
    assert "read_file" in unknown  # the close match
    missing = _error(define, "---\ndescription: d\nmodel: $make_raeder\n---\nP")
    assert "no variable 'make_raeder'" in missing
    assert "Did you mean $make_reader?" in missing
    assert "not a Model" in _error(define, "---\ndescription: d\nmodel: $not_a_model\n---\nP")
    assert "ScriptedModel" in _error(define, "---\ndescription: d\nmodel: scripted\n---\nP")
    assert "unknown model 'gpt5'" in _error(define, "---\ndescription: d\nmodel: gpt5\n---\nP")
    assert "max_turns must be an integer" in _error(
        define, "---\ndescription: d\nmax_turns: lots\n---\nP"
    )
    assert "tools must be a list" in _error(define, "---\ndescription: d\ntools: {a: 1}\n---\nP")
    assert "not a pydantic model class" in _error(
        define, "---\ndescription: d\ninputs: $FILES\n---\nP"
    )
    bad_type = _error(define, "---\ndescription: d\ninputs:\n  q: {type: text}\n---\n{q}")
    assert "unknown type 'text'" in bad_type
    assert (
        "%%agent reader: subagent 'reader': system_prompt uses {other}, but 'other' is not an input"
        in _error(define, "---\ndescription: d\n---\nDo {other}")
    )
    assert "a tool named 'read_file' exists" in _error(
        define, "---\ndescription: d\n---\nP", "read_file"
    )
    assert "takes one name" in _error(define, "---\ndescription: d\n---\nP", "two names")
    assert registry.names() == ["read_file"]  # nothing was registered


def test_an_agent_cell_registers_a_think_tool_and_rerunning_replaces_it(
    ip: Any, registry: ToolRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    _agent(ip, "reader", READER)
    tool = registry.get("reader")
    assert tool is not None
    assert tool.kind.value == "think"
    assert list(tool.parameters["properties"]) == ["objective"]
    _agent(ip, "reader", READER.replace("max_turns: 3", "max_turns: 5"))
    assert registry.get("reader").metadata["subagent"].max_turns == 5  # type: ignore[union-attr]
    _agent(
        ip,
        "helper",
        "---\ndescription: Helps.\ninputs:\n  topic: string\n  depth: {type: number}\n---\nOn {topic}",
    )
    schema = registry.get("helper").parameters  # type: ignore[union-attr]
    assert schema["properties"]["topic"] == {"type": "string"}
    assert schema.get("required", []) == []


# --------------------------------------------------------------------------- runs


def test_ask_runs_a_main_agent_that_calls_a_subagent_twice_in_parallel(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _agent(ip, "reader", READER)
    capsys.readouterr()
    handle = ip.run_cell_magic("ask", "--model $make_main --out h", "Look at a.py twice.")
    assert ip.user_ns["h"] is handle
    out = capsys.readouterr().out
    assert handle.done()
    result = handle.result()
    assert result.status == "completed"
    assert result.output == "a.py prints 1. | a.py prints 1."  # each call had a fresh model
    assert "[reader] turn 1" in out
    assert ip.user_ns["_kode_run"] is result
    runs = [s for s in handle.trace.spans() if s.kind == "run"]
    assert [s.name for s in runs] == ["main", "reader", "reader"]
    text = repr(handle.show_trace())
    assert "execute_tool read_file [ok]" in text


def test_agent_line_runs_a_registered_agent_on_its_inputs(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    _agent(ip, "reader", READER)
    ip.user_ns["goal"] = "what is in a.py"
    handle = ip.run_line_magic("agent", "reader objective=$goal")
    assert handle.result().output == "a.py prints 1."
    first = handle.trace.root.attributes
    assert first["system_prompt"] == "Answer: what is in a.py"
    assert "<AgentHandle reader" in repr(handle)


def test_run_errors(ip: Any) -> None:
    _agent(ip, "reader", READER)
    assert "agent 'raeder' is not defined. Did you mean 'reader'?" in _error(
        ip.run_line_magic, "agent", "raeder objective=x"
    )
    assert "is a tool, not an agent" in _error(ip.run_line_magic, "agent", "read_file path=a")
    assert "needs an agent name" in _error(ip.run_line_magic, "agent", "")
    invalid = _error(ip.run_line_magic, "agent", "reader objectiv=x")
    assert "invalid inputs" in invalid
    assert "objective" in invalid
    assert "%agent reader: expected key=value" in _error(ip.run_line_magic, "agent", "reader oops")
    assert "no model" in _error(ip.run_cell_magic, "ask", "", "hello")
    assert "--out needs a variable name" in _error(
        ip.run_cell_magic, "ask", "--model $make_main --out 1x", "hi"
    )
    assert "the cell is empty" in _error(ip.run_cell_magic, "ask", "--model $make_main", "  ")
    assert "no variable 'nope'" in _error(ip.run_cell_magic, "ask", "--model $nope", "hi")
    assert "--max-turns must be >= 1" in _error(
        ip.run_cell_magic, "ask", "--model $make_main --max-turns 0", "hi"
    )
    _agent(ip, "two", "---\ndescription: d\ninputs:\n  a: string\n  b: string\n---\n{a}{b}")
    assert "takes inputs a, b, not one text" in _error(
        ip.run_cell_magic, "ask", "--agent two", "hi"
    )
    _agent(ip, "modelless", "---\ndescription: d\n---\nDo {task}")
    assert "no model of its own and no default" in _error(
        ip.run_line_magic, "agent", "modelless task=x"
    )


def test_ask_with_agent_fills_its_one_text_input(ip: Any) -> None:
    _agent(ip, "reader", READER)
    handle = ip.run_cell_magic("ask", "--agent reader", "What prints?")
    assert handle.result().output == "a.py prints 1."
    assert handle.trace.root.attributes["system_prompt"] == "Answer: What prints?"


def test_model_sets_the_session_default(ip: Any, capsys: pytest.CaptureFixture[str]) -> None:
    ip.run_line_magic("model", "")
    assert "Default model: none" in capsys.readouterr().out
    ip.run_line_magic("model", "$make_main")
    said = "Default model: $make_main (a function called for a fresh model at each run)\n"
    assert capsys.readouterr().out == said
    ip.run_line_magic("model", "")
    assert capsys.readouterr().out == said
    _agent(ip, "reader", READER)
    assert ip.run_cell_magic("ask", "", "Twice.").result().ok
    ip.run_line_magic("model", "test")
    assert capsys.readouterr().out.endswith("Default model: test\n")
    ip.user_ns["live"] = ip.user_ns["make_main"]()
    ip.run_line_magic("model", "$live")
    assert capsys.readouterr().out == f"Default model: $live ({ip.user_ns['live'].name})\n"
    ip.run_line_magic("model", "none")
    assert "Default model: none" in capsys.readouterr().out
    assert "unknown model" in _error(ip.run_line_magic, "model", "nonsense")


def test_a_failing_subagent_is_folded_as_unavailable(ip: Any) -> None:
    ip.run_cell(
        "def make_loop():\n    return ScriptedModel([call('read_file', path='a.py')] * 3)\n"
        "def make_boss():\n    return ScriptedModel([call('looper', task='go'), "
        "lambda r: r.messages[-1].content[0].text])"
    )
    _agent(
        ip,
        "looper",
        "---\ndescription: Loops.\ntools: [read_file]\nmodel: $make_loop\nmax_turns: 1\n---\nDo {task}",
    )
    result = ip.run_cell_magic("ask", "--model $make_boss", "Go.").result()
    assert result.ok
    assert result.output.startswith("Subagent 'looper' unavailable: it reached its turn limit")


# --------------------------------------------------------------------------- views


def _tools(registry: ToolRegistry) -> None:
    from kode_nb import define_tool

    def read_file(path: str) -> str:
        """Read a file."""
        return f"<contents of {path}> api_key=sk-live-1234567890abcdef"

    define_tool(read_file, kind="read")
    register_subagent(
        AgentDefinition(
            name="reader", description="Reads.", system_prompt="Read {task}",
            input_config={"inputs": {"task": {"type": "string", "required": True}}},
            tools=["read_file"],
            model=lambda: ScriptedModel([call("read_file", path="x.py"), "Read **x.py**."]),
        )
    )  # fmt: skip


@pytest.mark.anyio
async def test_the_widget_view_nests_subagent_runs_and_registers_tool_rows(
    registry: ToolRegistry,
) -> None:
    _tools(registry)
    registered: dict[str, Any] = {}
    seen: list[str] = []
    view = RunView(
        agent="main", run_id="run_1", kinds=lambda n: "read" if n == "read_file" else "think",
        register=lambda cid, row: (registered.__setitem__(cid, row), seen.append(cid)),
        unregister=lambda cid: registered.pop(cid, None), rate=1000.0,
    )  # fmt: skip
    agent = Agent(
        "main",
        model=ScriptedModel([call("reader", task="x"), "The answer: <b>x</b> reads fine."]),
        tools=["reader"],
        executor=Executor(),
    )
    result = await agent.run("Go", run_id="run_1", on_event=view.on_event)
    view.finish(result)
    assert [v.agent for v in view.runs.values()] == ["main", "reader"]
    assert len(seen) == 2  # the subagent call and the nested read_file call
    assert registered == {}  # each row was unregistered when its call finished
    row = view.rows["scripted-1-1"]
    assert row.child is view.runs[row.child.run_id]
    assert row.child.rows  # the nested read_file row
    html = view.html()
    assert html.split("<details", 1)[0].count(">agent</span>") == 2  # main and nested run
    assert "&lt;b&gt;x&lt;/b&gt;" in html  # the answer's HTML is escaped
    assert "<details" in html
    assert "sk-live-1234567890abcdef" not in html.split("<details", 1)[1]  # the trace is redacted
    assert view.text_summary().startswith("agent main: completed, 2 turns")
    assert "The answer" in view.text
    assert view.waiting_prompt() is None
    await asyncio.sleep(0)


def test_trace_html_and_text_show_the_nested_tree(registry: ToolRegistry) -> None:
    _tools(registry)
    agent = Agent("main", model=ScriptedModel([call("reader", task="x"), "ok"]), tools=["reader"])
    result = asyncio.run(agent.run("Go"))
    html = trace_html(result.trace, open_levels=1)
    assert html.count("<details") == len(result.trace.spans()) + 1
    assert "<details open>" in html
    assert html.count("<details open") == 1  # only the top level
    deep = trace_html(result.trace, open_levels=6)
    assert re.search(r"<details open[^>]*><summary><span[^>]*>agent</span> <b>reader</b>", deep)
    assert not re.search(r"<details open[^>]*><summary><span[^>]*>model</span>", deep)
    text = trace_text(result.trace)
    lines = text.splitlines()
    assert lines[0].startswith("main [completed]")
    assert any(line.startswith("    reader [completed]") for line in lines)
    bundle = TraceDisplay(result.trace)._repr_mimebundle_()
    assert bundle["text/plain"] == text
    static = StaticRunView(agent="main", run_id=result.run_id, style="html")
    static.finish(result)
    data = static._repr_mimebundle_()
    assert "<details" in data["text/html"]
    assert data["text/plain"].startswith("agent main: completed, 2 turns")


def test_markdown_answers_are_rendered_with_html_escaped() -> None:
    html = markdown_html("**bold** <script>x</script>\n\n- a")
    assert "<strong>bold</strong>" in html
    assert "<script>" not in html
    assert "<li>a</li>" in html


@pytest.mark.parametrize(
    "front",
    [
        "description: d\ntools: " + "[" * 10_000 + "]" * 10_000,
        "description: d\ntools:\n" + "".join("  " * i + "-\n" for i in range(3000)),
        "description: d\ntools:\n  " + "- " * 10_000 + "x",
    ],
)
def test_deeply_nested_front_matter_is_a_usage_error(front: str) -> None:
    message = _error(parse_front_matter, f"---\n{front}\n---\nPrompt", "%%agent x")
    assert "nested too deeply" in message


def test_an_agent_line_with_deeply_nested_inputs_is_a_usage_error(ip: Any) -> None:
    _agent(ip, "reader", READER)
    deep = "[" * 10_000 + "]" * 10_000
    assert "nested too deeply" in _error(ip.run_line_magic, "agent", f"reader objective={deep}")


def test_tool_choice_and_reask_from_front_matter_and_ask_options(ip: Any) -> None:
    ip.run_cell(
        "from kode_nb.models import ScriptedModel, call\n"
        "def make_forced():\n"
        "    return ScriptedModel([call('read_file', path='a.py'), '', 'a.py prints 1.'])\n"
    )
    _agent(
        ip,
        "forced",
        "---\ndescription: d\ntools: [read_file]\nmodel: $make_forced\n"
        "tool_choice: read_file\nreask: true\n---\nDo {task}",
    )
    result = ip.run_line_magic("agent", "forced task=x").result()
    assert result.output == "a.py prints 1."
    assert result.warnings == ("the model's final answer is empty",)
    settings = result.trace.root.attributes["settings"]
    assert settings["tool_choice"] == "read_file"
    handle = ip.run_cell_magic(
        "ask", "--model $make_forced --tools read_file --tool-choice required --reask", "Go."
    )
    assert handle.result().output == "a.py prints 1."
    assert handle.trace.root.attributes["settings"]["tool_choice"] == "required"
    assert "tool_choice must be auto" in _error(
        ip.run_cell_magic, "agent", "bad", "---\ndescription: d\ntool_choice: 3\n---\nx"
    )
    assert "reask must be true or false" in _error(
        ip.run_cell_magic, "agent", "bad", "---\ndescription: d\nreask: maybe\n---\nx"
    )
    assert "'nope' is not one of its tools" in _error(
        ip.run_cell_magic, "ask", "--model $make_forced --tools read_file --tool-choice nope", "Go."
    )


@pytest.mark.anyio
async def test_views_show_unknown_tokens_when_the_server_sends_no_usage() -> None:
    from kode_nb.agents import Agent
    from kode_nb.models import Finish, TextChunk

    class NoUsage:
        name = "no-usage"

        async def stream(self, request: Any) -> Any:
            yield TextChunk(text="Paris.")
            yield Finish(stop_reason="end_turn")

    static = StaticRunView(agent="main", run_id="run_x", style="text")
    assert static._repr_mimebundle_()["text/plain"].endswith("this run: 0 in / 0 out tokens")
    result = await Agent(model=NoUsage()).run("Capital?", run_id="run_x", on_event=static.on_event)
    assert static._repr_mimebundle_()["text/plain"].endswith("tokens unknown")
    static.finish(result)
    final = static._repr_mimebundle_()
    assert (
        final["text/plain"]
        == "agent main: completed, 1 turn, this run: tokens unknown, cost unknown\nParis."
    )
    assert "tokens unknown" in final["text/html"]
    data = final["application/vnd.kode-nb.run+json"]
    assert data["usage"] == {"input_tokens": None, "output_tokens": None}
