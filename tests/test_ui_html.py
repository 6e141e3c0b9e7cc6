"""The static HTML / text renderings (what front ends without widgets show)."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest

from kode_nb import ToolRegistry, ToolResult, define_tool
from kode_nb.events import ApprovalResolved, CallCompleted
from kode_nb.policy import ApprovalRequest, Policy
from kode_nb.tools import Tool
from kode_nb.types import ImageBlock, JsonBlock, TextBlock
from kode_nb.ui import html as H
from kode_nb.ui import tool_html as T
from kode_nb.ui.formatters import BUNDLE, FORMATTED_TYPES, HTML, LIVE, TEXT


def _search(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "exact"] = "fast",
    tags: list[str] | None = None,
) -> str:
    """Search the notes.

    Args:
        query: What to look for <b>.
        limit: Most results.
        mode: How to match.
        tags: Only notes with these tags.
    """
    return query


def _tool(**kw: Any) -> Tool:
    return define_tool(
        _search, name="search_notes", kind="search", groups=("notes",), registry=None, **kw
    )


@pytest.mark.parametrize(
    ("schema", "text"),
    [
        ({"type": "integer"}, "integer"),
        ({"type": "array", "items": {"type": "string"}}, "array[string]"),
        ({"enum": ["a", "b"]}, '"a" | "b"'),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "string | null"),
        ({"$ref": "#/$defs/Point"}, "Point"),
        ({"type": "object", "additionalProperties": {"type": "number"}}, "object[string, number]"),
        ({"type": ["string", "null"]}, "string | null"),
        ({}, "any"),
        ({"const": 3}, "3"),
    ],
)
def test_schema_type(schema: dict[str, Any], text: str) -> None:
    assert T.schema_type(schema) == text


def test_parameter_table_lists_type_required_default_description() -> None:
    rows = {r.name: r for r in T.parameter_rows(_tool().parameters)}
    assert rows["query"].required
    assert rows["query"].type == "string"
    assert not rows["limit"].required
    assert rows["limit"].default == "10"
    assert rows["mode"].type == '"fast" | "exact"'
    text = T.params_table_text(_tool().parameters)
    assert text.splitlines()[0].split() == [
        "parameter",
        "type",
        "required",
        "default",
        "description",
    ]
    assert "Most results." in text
    assert T.params_table_text({"type": "object", "properties": {}}) == "No parameters."


def test_tool_card_html_escapes_and_holds_every_export_format() -> None:
    tool = _tool()
    page = T.tool_html(tool)
    assert "What to look for &lt;b&gt;." in page
    assert "<b>." not in page
    for label in T.FORMATS.values():
        assert f"<summary>{label}</summary>" in page
    assert "input_schema" in page  # Anthropic
    assert "inputSchema" in page  # MCP
    assert "search_notes [search]" in T.tool_text(tool)


def test_export_tool_gives_the_provider_dict_or_the_reason_it_cannot() -> None:
    tool = _tool()
    assert T.export_tool(tool, "openai")["function"]["name"] == "search_notes"  # type: ignore[index]

    def free(data: dict[str, Any]) -> str:
        """Free-form.

        Args:
            data: anything
        """
        return ""

    strict = T.export_tool(define_tool(free, registry=None), "openai-strict")
    assert isinstance(strict, str)
    assert strict.startswith("Cannot export to OpenAI strict:")
    assert "data" in strict


def test_result_html_renders_each_block_kind_and_escapes_text() -> None:
    result = ToolResult(
        content=(
            TextBlock(text="<script>x</script>"),
            JsonBlock(data={"a": 1}),
            ImageBlock(data="AAAA", mime_type="image/png"),
        ),
        tool="t",
        duration=0.25,
    )
    page = H.result_html(result)
    assert "&lt;script&gt;" in page
    assert "<script>" not in page
    assert "&quot;a&quot;: 1" in page
    assert 'src="data:image/png;base64,AAAA"' in page
    assert "250 ms" in page
    assert H.result_text(ToolResult.error("boom", tool="t")).startswith("[error] t")


def test_a_long_result_shows_its_start_and_says_how_much_was_left_out() -> None:
    text = "START" + "x" * 30
    assert (
        H.clip_head(text, 10) == "STARTxxxxx\n[… 25 more characters not shown; .text has them all]"
    )
    assert H.clip_head("short", 10) == "short"
    result = ToolResult.from_text("START" + "x" * 50_000, tool="t")
    assert "30,005 more characters not shown" in H.result_text(result)
    assert "30,005 more characters not shown" in H.result_html(result)
    assert len(H.result_html(result)) < 25_000


def test_clip_keeps_the_tail_and_says_how_much_was_left_out() -> None:
    text = "x" * 30 + "END"
    assert H.clip(text, 10).endswith("xxxxxxxEND")
    assert "23 earlier characters not shown" in H.clip(text, 10)
    assert H.clip("short", 10) == "short"


def test_registry_table_has_stats_columns() -> None:
    reg = ToolRegistry([_tool()])
    reg.record_call("search_notes", 0.5)
    reg.record_call("search_notes", 1.5, failed=True)
    text = T.registry_text(reg)
    header, _, row = text.splitlines()
    assert header.split() == ["name", "kind", "category", "groups", "calls", "failures", "mean"]
    assert row.split() == ["search_notes", "search", "custom", "notes", "2", "1", "1.00", "s"]
    assert "search_notes" in T.registry_html(reg)
    assert T.registry_text(ToolRegistry()) == "No tools."


def test_events_policy_and_approval_render() -> None:
    resolved = ApprovalResolved(
        tool="w", call_id="c1", approved=False, reason="no <way>", decided_by="notebook"
    )
    assert (
        H.event_text(resolved)
        == "approval_resolved w call=c1 reason='no <way>' decided_by='notebook'"
    )
    assert "no &lt;way&gt;" in H.event_html(resolved)
    done = CallCompleted(tool="w", call_id="c1", result=ToolResult.from_text("fine"))
    assert "result='fine'" in H.event_text(done)
    policy = Policy(deny=["group:net"], approval_mode="auto")
    assert "deny: group:net" in H.policy_text(policy)
    assert "approval_mode" in H.policy_html(policy)
    request = ApprovalRequest(
        tool="w",
        kind="edit",
        arguments={"path": "a"},
        call_id="c1",
        preview="--- a\n+++ b\n-old\n+new",
    )
    page = H.approval_html(request)
    assert "color:#2f855a" in page
    assert "color:#c53030" in page
    assert json.loads(H.approval_text(request).split("\n", 1)[1].rsplit("}", 1)[0] + "}") == {
        "path": "a"
    }


def test_every_formatted_type_has_renderers_and_exists() -> None:
    import importlib

    import kode_nb.events._events

    names = {name for module, name, _ in FORMATTED_TYPES if module == "kode_nb.events._events"}
    assert names == {t.__name__ for t in kode_nb.events._events.EVENT_TYPES}
    for module, name, key in FORMATTED_TYPES:
        assert hasattr(importlib.import_module(module), name), (module, name)
        assert (key in HTML and key in TEXT) or key in BUNDLE or key in LIVE, key


def test_token_counts_a_server_did_not_send_show_as_unknown_not_zero() -> None:
    from kode_nb.ui.agent_static import run_summary

    assert run_summary("main", "completed", 2, (None, None)) == (
        "agent main: completed, 2 turns, this run: tokens unknown"
    )
    assert run_summary("main", "completed", 1, (12, None)).endswith(
        "this run: 12 in / ? out tokens"
    )
    assert run_summary("main", "completed", 1, (0, 3)).endswith("this run: 0 in / 3 out tokens")
