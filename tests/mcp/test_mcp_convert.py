"""MCP ↔ kode_nb conversions: annotations → kinds, tool names, results, progress lines."""

from __future__ import annotations

import base64

import mcp_helpers  # noqa: F401 - skips this module when the MCP SDK is missing
import mcp_types as mt
import pytest

from kode_nb import ImageBlock, JsonBlock, TextBlock, ToolKind, ToolResult, define_tool
from kode_nb.mcp._convert import (
    from_mcp_result,
    kind_from_annotations,
    progress_text,
    to_mcp_result,
    tool_name_for,
)
from kode_nb.mcp._links import describe_error
from kode_nb.tools._formats import mcp_annotations
from kode_nb.types import validate_name

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()


@pytest.mark.parametrize(
    ("hints", "kind"),
    [
        (None, ToolKind.EXECUTE),
        ({}, ToolKind.EXECUTE),
        ({"openWorldHint": True}, ToolKind.EXECUTE),
        ({"readOnlyHint": True}, ToolKind.READ),
        ({"readOnlyHint": True, "destructiveHint": True}, ToolKind.READ),
        ({"readOnlyHint": False}, ToolKind.EXECUTE),
        ({"destructiveHint": True}, ToolKind.EDIT),
        ({"destructiveHint": True, "idempotentHint": True}, ToolKind.DELETE),
        ({"destructiveHint": False}, ToolKind.EDIT),
        ({"readOnlyHint": False, "destructiveHint": False, "idempotentHint": True}, ToolKind.EDIT),
    ],
)
def test_kind_from_annotations(hints: dict[str, bool] | None, kind: ToolKind) -> None:
    annotations = None if hints is None else mt.ToolAnnotations.model_validate(hints)
    assert kind_from_annotations(annotations) is kind


@pytest.mark.parametrize("kind", list(ToolKind))
def test_kinds_survive_a_round_trip_through_annotations(kind: ToolKind) -> None:
    tool = define_tool(lambda: "x", name="probe", kind=kind, registry=None)
    back = kind_from_annotations(mt.ToolAnnotations.model_validate(mcp_annotations(tool)))
    if kind in (ToolKind.READ, ToolKind.SEARCH, ToolKind.THINK, ToolKind.FETCH):
        assert back is ToolKind.READ
    elif kind is ToolKind.OTHER:  # exported as "not read-only": imported as asking, to be safe
        assert back is ToolKind.EDIT
    else:
        assert back.is_mutating
        if kind in (ToolKind.DELETE, ToolKind.EDIT):
            assert back is kind


@pytest.mark.parametrize(
    ("mcp_name", "prefix", "expected"),
    [
        ("read_file", None, "read_file"),
        ("files.read", None, "files_read"),
        ("github/create-issue", None, "github_create-issue"),
        ("2fa_code", None, "t_2fa_code"),
        ("...", None, "tool"),
        ("echo", "srv", "srv_echo"),
        ("2fa", "srv", "srv_2fa"),
    ],
)
def test_tool_names_are_made_valid(mcp_name: str, prefix: str | None, expected: str) -> None:
    assert tool_name_for(mcp_name, prefix) == expected


def test_long_tool_names_are_shortened_uniquely() -> None:
    a, b = tool_name_for("x" * 100 + "a"), tool_name_for("x" * 100 + "b")
    assert len(a) <= 64
    assert len(b) <= 64
    assert a != b
    assert validate_name(a) == a


def test_progress_text() -> None:
    assert progress_text(3, 5, "copying") == "[3/5] copying\n"
    assert progress_text(0.5, None, None) == "[0.5]\n"
    assert progress_text(2, 4.0, "") == "[2/4]\n"


def _result(**fields: object) -> mt.CallToolResult:
    return mt.CallToolResult.model_validate(fields)


def test_result_content_types() -> None:
    result = from_mcp_result(
        _result(
            content=[
                {"type": "text", "text": "hello"},
                {"type": "image", "data": PIXEL, "mimeType": "image/png"},
                {"type": "audio", "data": base64.b64encode(b"1234").decode(), "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inline text"}},
                {"type": "resource", "resource": {"uri": "file:///p.png", "mimeType": "image/png", "blob": PIXEL}},
                {"type": "resource", "resource": {"uri": "file:///z.bin", "blob": "AAAA"}},
                {"type": "resource_link", "uri": "file:///b.md", "name": "b.md", "description": "notes"},
            ]
        ),
        server="s", tool="t", mcp_tool="t",
    )  # fmt: skip
    assert result.status == "ok"
    assert not result.is_error
    assert result.content == (
        TextBlock(text="hello"),
        ImageBlock(data=PIXEL, mime_type="image/png"),
        TextBlock(text="[audio: audio/wav, 4 bytes]"),
        TextBlock(text="inline text"),
        ImageBlock(data=PIXEL, mime_type="image/png"),
        TextBlock(text="[resource file:///z.bin: application/octet-stream, 3 bytes]"),
        TextBlock(text="[resource link b.md <file:///b.md>: notes]"),
    )
    assert result.details == {"server": "s", "tool": "t"}


def test_structured_content_replaces_its_json_copy_only() -> None:
    data = {"min": 1, "max": 3}
    copy = from_mcp_result(
        _result(content=[{"type": "text", "text": '{"max": 3, "min": 1}'}], structuredContent=data),
        server="s", tool="t", mcp_tool="t",
    )  # fmt: skip
    assert copy.content == (JsonBlock(data=data),)
    alone = from_mcp_result(
        _result(content=[], structuredContent=data), server="s", tool="t", mcp_tool="t"
    )
    assert alone.content == (JsonBlock(data=data),)
    prose = from_mcp_result(
        _result(content=[{"type": "text", "text": "range 1..3"}], structuredContent=data),
        server="s", tool="t", mcp_tool="t",
    )  # fmt: skip
    assert prose.content == (TextBlock(text="range 1..3"),)
    assert prose.details["structured_content"] == data


def test_is_error_and_empty_results() -> None:
    failed = from_mcp_result(
        _result(content=[{"type": "text", "text": "no such file"}], isError=True),
        server="s", tool="read", mcp_tool="read",
    )  # fmt: skip
    assert failed.is_error
    assert failed.status == "error"
    assert failed.text == "no such file"
    silent = from_mcp_result(_result(content=[], isError=True), server="s", tool="x", mcp_tool="x")
    assert silent.text == "MCP tool 'x' on server 's' failed"
    empty = from_mcp_result(_result(content=[]), server="s", tool="x", mcp_tool="x")
    assert empty.text == "(no output)"
    assert not empty.is_error


def test_to_mcp_result() -> None:
    mixed = to_mcp_result(
        ToolResult(content=(TextBlock(text="hi"), ImageBlock(data=PIXEL, mime_type="image/png")))
    )
    assert mixed.content == [
        mt.TextContent(text="hi"),
        mt.ImageContent(data=PIXEL, mime_type="image/png"),
    ]
    assert mixed.structured_content is None
    assert not mixed.is_error
    data = to_mcp_result(ToolResult.from_json({"ok": True, "n": "é"}))
    assert data.structured_content == {"ok": True, "n": "é"}
    assert data.content == [mt.TextContent(text='{"ok": true, "n": "é"}')]
    listed = to_mcp_result(ToolResult.from_json([1, 2]))
    assert listed.structured_content is None
    assert listed.content == [mt.TextContent(text="[1, 2]")]
    error = to_mcp_result(ToolResult.error("nope", status="denied"))
    assert error.is_error
    assert error.content == [mt.TextContent(text="nope")]


class _Group(Exception):
    """Shaped like an ExceptionGroup (which Python 3.10 lacks)."""

    def __init__(self, *exceptions: BaseException) -> None:
        super().__init__("group")
        self.exceptions = exceptions


def test_describe_error_flattens_groups() -> None:
    group = _Group(OSError("refused"), _Group(OSError("refused"), KeyError("k")))
    assert describe_error(group) == "OSError: refused; KeyError: 'k'"
    assert describe_error(RuntimeError()) == "RuntimeError"
