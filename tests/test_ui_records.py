"""Static records (``kode_nb.ui.records``): data per the record schemas, HTML that reads the same
after a sanitizer, bounded sizes, and the views that become records once final."""

from __future__ import annotations

import asyncio
import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest

import kode_nb
from kode_nb import ToolResult, define_tool
from kode_nb.agents import Agent
from kode_nb.events import ApprovalResolved
from kode_nb.execution import Executor
from kode_nb.models import ScriptedModel, call
from kode_nb.tools import ToolRegistry
from kode_nb.traces import Span, Trace
from kode_nb.traces._compact import expand
from kode_nb.ui.agent_static import StaticRunView
from kode_nb.ui.agent_view import RunView
from kode_nb.ui.call_view import CallView
from kode_nb.ui.record_html import MAX_SPANS
from kode_nb.ui.records import (
    LIVE_MIME,
    WIDGET_MIME,
    call_record,
    card_record,
    run_record,
    table_record,
    trace_record,
)
from kode_nb.ui.static_view import StaticCallView

ALLOWED_TAGS = {
    "div", "p", "b", "i", "code", "pre", "details", "summary", "table", "thead", "tbody", "tr",
    "th", "td", "blockquote", "ul", "ol", "li", "strong", "em", "h1", "h2", "h3", "h4", "a",
    "br", "hr", "del", "span",
}  # fmt: skip


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attrs: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        self.attrs.update(name for name, _ in attrs)


def assert_sanitizer_safe(html: str) -> None:
    """Semantic tags only; no style, script or event handler a sanitizer would strip."""
    parser = _Tags()
    parser.feed(html)
    assert parser.tags <= ALLOWED_TAGS, parser.tags - ALLOWED_TAGS
    assert parser.attrs <= {"class", "open", "align", "href"}, parser.attrs


def assert_record(bundle: dict[str, Any], kind: str) -> dict[str, Any]:
    mime = f"application/vnd.kode-nb.{kind}+json"
    assert set(bundle) == {mime, "text/html", "text/plain"}
    assert WIDGET_MIME not in bundle
    data: dict[str, Any] = bundle[mime]
    assert data["schema"] == ("kode_nb.trace/v3" if kind == "trace" else f"kode_nb.{kind}/v1")
    assert json.loads(json.dumps(data)) == data  # plain JSON
    assert_sanitizer_safe(bundle["text/html"])
    return data


# --------------------------------------------------------------------------- calls


def test_a_call_record_holds_status_approval_stream_and_result() -> None:
    result = ToolResult.from_text("Saved.", tool="write_note", call_id="c1", duration=0.25)
    event = ApprovalResolved(tool="write_note", call_id="c1", approved=True, always=True)
    from kode_nb.ui.records import approval_of

    record = call_record(
        tool="write_note", call_id="c1", kind="edit", arguments={"title": "a", "text": "b"},
        result=result, approval=approval_of(event), stream="1 2 3", updates=3,
    )  # fmt: skip
    data = assert_record(record.bundle(), "call")
    assert data["status"] == "ok"
    assert data["approval"] == {"decision": "always_allowed", "reason": None}
    assert data["updates"] == {"text": "1 2 3", "count": 3, "truncated": False}
    assert data["result"]["text"] == "Saved."
    assert data["duration"] == 0.25
    assert "✔ Always allowed" in record.html
    assert record.html.count("write_note") == 1  # one header, not repeated by the result
    assert record.text == "write_note: ok in 250 ms\n✔ Always allowed\nSaved."


@pytest.mark.parametrize(
    ("status", "text", "expected"),
    [
        ("denied", "The user denied this call: not now", "denied"),
        ("invalid_arguments", "bad", "invalid"),
        ("timed_out", "too slow", "timeout"),
        ("cancelled", "Tool 't' was cancelled (interrupted (kernel interrupt)).", "interrupted"),
        ("cancelled", "Tool 't' was cancelled (changed my mind).", "cancelled"),
    ],
)
def test_call_statuses_map_to_the_record_statuses(status: Any, text: str, expected: str) -> None:
    result = ToolResult.error(text, status=status, tool="t")
    record = call_record(tool="t", call_id="c", kind="", arguments=None, result=result)
    assert record.data["status"] == expected
    assert record.data["kind"] == "other"
    assert record.data["duration"] is None  # it never ran: unknown, not 0


def test_a_denial_reads_denied_with_its_reason_and_long_arguments_fold() -> None:
    event = ApprovalResolved(tool="t", call_id="c", approved=False, reason="not today")
    from kode_nb.ui.records import approval_of

    result = ToolResult.error("denied", status="denied", tool="t")
    record = call_record(
        tool="t", call_id="c", kind="edit", arguments={"text": "x" * 500}, result=result,
        approval=approval_of(event),
    )  # fmt: skip
    assert record.data["approval"] == {"decision": "denied", "reason": "not today"}
    assert "✘ Denied: not today" in record.html
    assert "<details><summary>arguments (" in record.html
    short = call_record(tool="t", call_id="c", kind="", arguments={"a": 1}, result=result)
    assert "<code>{&quot;a&quot;: 1}</code>" in short.html


def test_a_subagent_answer_is_markdown_at_every_nesting_level() -> None:
    from kode_nb.ui.html import result_body_html

    answer = ToolResult.from_text("The answer is **42**.", tool="researcher")
    think = call_record(tool="researcher", call_id="c", kind="think", arguments={}, result=answer)
    assert "<strong>42</strong>" in think.html  # the record, as the run's own answer renders
    assert "<strong>42</strong>" in result_body_html(answer, markdown=True)  # the live view
    plain = call_record(tool="read", call_id="c", kind="read", arguments={}, result=answer)
    assert "**42**" in plain.html  # other tools: their text as it is
    assert "<strong>" not in plain.html
    failed = ToolResult.error("**boom**", tool="researcher")
    assert "<strong>" not in result_body_html(failed, markdown=True)


def test_a_huge_result_is_bounded_in_the_record() -> None:
    result = ToolResult.from_text("y" * 100_000, tool="t")
    record = call_record(tool="t", call_id="c", kind="read", arguments={}, result=result)
    assert record.data["result"]["truncated"] is True
    assert record.data["result"]["total_chars"] == 100_000
    assert len(record.html) < 10_000


# --------------------------------------------------------------------------- runs and traces


def _registry() -> ToolRegistry:
    reg = ToolRegistry(name="records")

    def reader(task: str) -> str:
        """Read.

        Args:
            task: What.
        """
        return f"read {task}"

    reg.register(define_tool(reader, kind="read", registry=None))
    return reg


def _agent() -> Agent:
    return Agent(
        "main", model=ScriptedModel([call("reader", task="x"), "**done**"]), tools=["reader"],
        executor=Executor(_registry()),
    )  # fmt: skip


def _run(prompt: str = "Go") -> Any:
    return asyncio.run(_agent().run(prompt))


def test_a_run_record_has_the_answer_the_usage_and_the_trace() -> None:
    result = _run()
    record = run_record(agent="main", model="scripted", result=result)
    data = assert_record(record.bundle(), "run")
    assert data["status"] == "completed"
    assert data["turns"] == 2
    assert data["output"] == "**done**"
    assert data["prompt"] == "Go"
    assert data["interrupted"] is None
    assert data["trace"]["format"] == "kode_nb.compact/1"  # saved compact, read back whole
    assert expand(data["trace"]) == json.loads(json.dumps(result.trace.to_dict()))
    assert "<strong>done</strong>" in record.html  # markdown, rendered
    assert record.text.startswith("agent main: completed, 2 turns")


def test_an_interrupted_run_says_in_which_turn() -> None:
    result = _run()
    from dataclasses import replace

    stopped = replace(result, status="cancelled", error="interrupted (kernel interrupt)", turns=2)
    record = run_record(agent="main", model=None, result=stopped)
    assert record.data["status"] == "interrupted"
    assert record.data["interrupted"] == {"turn": 2, "reason": "interrupted (kernel interrupt)"}
    assert record.data["output"] is None
    assert "interrupted in turn 2" in record.html
    assert "interrupted in turn 2" in record.text
    failed = run_record(agent="main", model=None, result=None, error="KeyError: 'api key'")
    assert failed.data["status"] == "error"
    assert failed.data["usage"] == {"input_tokens": None, "output_tokens": None}


def test_a_big_trace_shows_its_first_spans_and_how_many_more() -> None:
    root = Span(kind="run", name="main", status="completed", duration=1.0)
    for i in range(2_000):
        root.children.append(
            Span(kind="tool_call", name=f"t{i}", status="ok", duration=0.001,
                 attributes={"arguments": {"i": i}, "result": {"status": "ok", "text": "z" * 300}})
        )  # fmt: skip
    root.children.append(Span(kind="future_kind", name="new", attributes={"x": 1}))
    record = trace_record(Trace(root=root))
    data = assert_record(record.bundle(), "trace")
    assert len(expand(data)["root"]["children"]) == 2_001  # the JSON has everything
    assert record.html.count("<details") == MAX_SPANS + 1
    assert f"… {2_002 - MAX_SPANS:,} more spans not shown" in record.html
    assert len(record.html) < 100_000
    assert record.text.endswith(f"… {2_002 - MAX_SPANS} more spans")


# --------------------------------------------------------------------------- cards and tables


def test_a_card_record_has_parameters_and_each_providers_schema() -> None:
    tool = _registry().get("reader")
    assert tool is not None
    data = assert_record(card_record(tool).bundle(), "card")
    assert data["parameters"] == [
        {"name": "task", "type": "string", "required": True, "default": None,
         "description": "What."},
    ]  # fmt: skip
    assert data["schemas"]["anthropic"]["input_schema"]["required"] == ["task"]
    assert data["schemas"]["openai"]["function"]["name"] == "reader"
    assert set(data["schemas"]) >= {"openai", "anthropic", "gemini", "mcp"}


def test_a_table_record_and_its_text() -> None:
    record = table_record(
        "2 servers", [("name", "name"), ("tools", "tools", "right")],
        [{"name": "a", "tools": 3}, {"name": "b", "tools": None}], note="a note",
    )  # fmt: skip
    data = assert_record(record.bundle(), "table")
    assert data["columns"][1] == {"key": "tools", "label": "tools", "align": "right"}
    assert record.text.splitlines() == [
        "2 servers",
        "NAME  TOOLS",
        "----  -----",
        "a     3",
        "b     —",
        "a note",
    ]
    empty = table_record("0 servers", [("name", "name")], [], empty="None here.")
    assert "None here." in empty.html
    assert_sanitizer_safe(empty.html)


def test_values_are_escaped() -> None:
    result = ToolResult.from_text("<script>alert(1)</script>", tool="<b>")
    record = call_record(tool="<b>", call_id="c", kind="", arguments={"x": "<i>"}, result=result)
    assert "<script>" not in record.html
    assert "&lt;script&gt;" in record.html
    assert_sanitizer_safe(record.html)


# --------------------------------------------------------------------------- views


@pytest.mark.anyio
async def test_views_become_records_once_final() -> None:
    view = CallView(tool="t", kind="read", call_id="c1")
    live = view._repr_mimebundle_()
    assert WIDGET_MIME in live
    assert live[LIVE_MIME] == {"schema": "kode_nb.live/v1", "kind": "call"}
    assert not view.final
    view.finish(ToolResult.from_text("ok", tool="t", duration=0.1))
    assert view.final
    assert_record(view._repr_mimebundle_(), "call")
    assert LIVE_MIME not in view._repr_mimebundle_()

    static = StaticCallView(tool="t", call_id="c2", style="html")
    static.finish(ToolResult.from_text("ok", tool="t"))
    assert_record(static._repr_mimebundle_(), "call")

    run = RunView(agent="main", run_id="run_1")
    assert WIDGET_MIME in run._repr_mimebundle_()
    assert run._repr_mimebundle_()[LIVE_MIME]["kind"] == "run"
    run.finish(None, "interrupted (kernel interrupt)")
    assert LIVE_MIME not in run._repr_mimebundle_()
    data = assert_record(run._repr_mimebundle_(), "run")
    assert data["status"] == "interrupted"
    assert data["interrupted"] == {"turn": 0, "reason": "interrupted (kernel interrupt)"}

    result = await _agent().run("Go")
    srv = StaticRunView(agent="main", run_id=result.run_id, style="html")
    srv.finish(result)
    assert assert_record(srv._repr_mimebundle_(), "run")["trace"] is not None


def test_no_style_attributes_in_any_record_html() -> None:
    result = _run()
    html = run_record(agent="main", model="m", result=result).html
    assert not re.search(r"\sstyle=", html)
    assert_sanitizer_safe(html)


# --------------------------------------------------------------------------- divergence


@pytest.mark.anyio
async def test_a_divergence_record_keeps_to_the_record_rules(registry: Any) -> None:
    from kode_nb.agents import Agent
    from kode_nb.models import ScriptedModel
    from kode_nb.models.scripted import call
    from kode_nb.ui.records import divergence_record

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    kode_nb.define_tool(add, inline=True)
    run = await Agent(model=ScriptedModel([call("add", a=1, b=2), "3"]), tools=["add"]).run("go")
    forked = await kode_nb.fork(run, at=2, model=ScriptedModel(["<three>"]))
    record = divergence_record(kode_nb.diverge(run, forked))
    data = assert_record(record.bundle(), "divergence")
    assert (data["turn"], data["what"]) == (2, "answer")
    assert "&lt;three&gt;" in record.html
    assert record.text.startswith("◆ parent and fork first differ at turn 2: answer")


def test_a_shown_traces_text_tree_keeps_its_first_lines_and_says_how_many_more() -> None:
    from kode_nb.ui.trace_html import TEXT_LINES, trace_bundle, trace_text

    root = Span(kind="run", name="main", status="completed", duration=1.0)
    turn = Span(kind="turn", name="turn 1", status="ok", duration=1.0)  # folded: no line
    root.children.append(turn)
    turn.children.extend(
        Span(kind="tool_call", name=f"t{i}", status="ok", duration=0.001) for i in range(500)
    )
    text = trace_bundle(Trace(root=root))["text/plain"]
    lines = text.splitlines()
    assert len(lines) == TEXT_LINES + 1
    assert lines[1].startswith("  t0 [ok]")  # the turn's spans one level under the run
    assert lines[-1] == f"… {501 - TEXT_LINES} more spans (the trace viewer shows all)"
    assert trace_text(Trace(root=root)).count("\n") == 500  # uncapped: every span


# --------------------------------------------------------------------------- approvals


@pytest.mark.anyio
async def test_a_prompt_shown_on_its_own_becomes_its_approval_record() -> None:
    """A question with no call view around it (another framework's own approval request) is a
    live widget while it waits and, once decided, the approval record: no widget, no "waiting"."""
    from kode_nb.policy._approval import ApprovalRequest, deny
    from kode_nb.ui.approval import ApprovalPrompt

    request = ApprovalRequest(
        tool="write_note", kind="edit", arguments={"path": "a.txt", "token": "sk-" + "a" * 40},
        call_id="fw_1", reason="pydantic-ai asks for approval",
    )  # fmt: skip
    prompt = ApprovalPrompt(request)
    live = prompt._repr_mimebundle_()
    assert WIDGET_MIME in live
    assert live[LIVE_MIME]["kind"] == "approval"
    assert not prompt.final

    assert prompt.decide(deny("not <now>", by="notebook"))
    assert prompt.final
    bundle = prompt._repr_mimebundle_()
    data = assert_record(bundle, "approval")
    assert data["approval"] == {"decision": "denied", "reason": "not <now>"}
    assert (data["tool"], data["kind"], data["call_id"]) == ("write_note", "edit", "fw_1")
    assert data["asked"] == "pydantic-ai asks for approval"
    assert "a" * 40 not in json.dumps(bundle)  # redacted
    assert bundle["text/plain"] == "approval of write_note [edit]: ✘ Denied: not <now>"
    assert "not &lt;now&gt;" in bundle["text/html"]
    assert "waiting" not in bundle["text/plain"] + bundle["text/html"]


@pytest.mark.anyio
async def test_a_prompt_cancelled_before_a_decision_says_so_in_its_record() -> None:
    from kode_nb.policy._approval import ApprovalRequest
    from kode_nb.ui.approval import ApprovalPrompt

    request = ApprovalRequest(tool="write_note", kind="edit", arguments={}, call_id="fw_2")
    prompt = ApprovalPrompt(request)
    waiting = asyncio.ensure_future(prompt.wait())
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    data = assert_record(prompt._repr_mimebundle_(), "approval")
    assert data["approval"]["decision"] == "cancelled"
    assert "Cancelled before a decision" in prompt._repr_mimebundle_()["text/plain"]


def test_a_view_displayed_in_a_cell_is_kept_by_the_installed_relay_once() -> None:
    """``display_in_cell`` hands every live view (``final`` False) to the session's relay,
    whatever made it; a final one, or anything that is not a view, is not kept."""
    from kode_nb.ui import _finals

    class View:
        final = False

    relay = _finals.FinalRelay()
    _finals.install(relay)
    try:
        view = View()
        _finals.shown(view)
        _finals.shown(view)
        relay.remember(view)
        done = View()
        done.final = True
        _finals.shown(done)
        _finals.shown(object())
        assert len(relay) == 1
    finally:
        _finals.uninstall(relay)
    _finals.shown(View())  # none installed: nothing kept anywhere
    assert len(relay) == 1
