"""Tool calls written as text: every form real servers produce is read, anything else stays text."""

from __future__ import annotations

import json

import pytest

from kode_nb.models._text_calls import TextCall, parse_text_calls

TOOLS = {"add", "get_weather"}


ADD = ("add", {"a": 48213, "b": 91877})
PARIS = ("get_weather", {"city": "Paris"})


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"name": "add", "arguments": {"a": 48213, "b": 91877}}', [ADD]),
        ('  {"name": "add", "parameters": {"a": 48213, "b": 91877}}\n', [ADD]),
        ('```json\n{"name": "add", "arguments": {"a": 48213, "b": 91877}}\n```', [ADD]),
        ('```\n{"name": "add", "arguments": "{\\"a\\": 48213, \\"b\\": 91877}"}\n```', [ADD]),
        (
            '{"name": "add", "arguments": {"a": 48213, "b": 91877}}\n'
            '{"name": "get_weather", "arguments": {"city": "Paris"}}',
            [ADD, PARIS],
        ),
        (
            '```json\n{"name": "add", "arguments": {"a": 48213, "b": 91877}}\n```\n\n'
            '```json\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n```',
            [ADD, PARIS],
        ),
        (
            '[{"name": "add", "arguments": {"a": 48213, "b": 91877}}, '
            '{"name": "get_weather", "arguments": {"city": "Paris"}}]',
            [ADD, PARIS],
        ),
        (
            '<tool_call>\n{"name": "add", "arguments": {"a": 48213, "b": 91877}}\n</tool_call>\n'
            '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>',
            [ADD, PARIS],
        ),
        ('[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]', [PARIS]),
        ('[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', [PARIS]),
        (
            '<|python_tag|>{"type": "function", "name": "get_weather", "parameters": {"city": "Paris"}}',
            [PARIS],
        ),
        (
            '{"type": "function", "function": {"name": "add", "arguments": {"a": 48213, "b": 91877}}}',
            [ADD],
        ),
        ('{"name": "get_weather", "arguments": {"city": "Paris"}};', [PARIS]),
    ],
)
def test_calls_written_as_text_are_read(
    text: str, expected: list[tuple[str, dict[str, object]]]
) -> None:
    found = parse_text_calls(text, TOOLS)
    assert found is not None
    assert [(c.name, json.loads(c.arguments)) for c in found] == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "The weather in Paris is 18 degrees.",
        "I will call get_weather for Paris.",
        'To add them I would call {"name": "add", "arguments": {"a": 1, "b": 2}}.',
        '{"name": "add", "arguments": {"a": 1, "b": 2}} and that gives 3.',
        '{"name": "delete_everything", "arguments": {}}',  # not offered
        '{"name": "add", "arguments": {"a": 1}}\n{"name": "rm", "arguments": {}}',  # one not offered
        '{"name": "add", "arguments": [1, 2]}',
        '{"name": "add", "arguments": "not json"}',
        '{"name": "add", "arguments": {"a": 1}, "comment": "extra"}',
        '{"answer": 3}',
        '{"name": "add", "arguments": {"a": 1',
        "[]",
        "functions.get_weather:",
        '[TOOL_CALLS] sure, {"name": "add"}',
        'Here: [TOOL_CALLS][{"name": "add", "arguments": {}}]',
    ],
)
def test_anything_else_stays_text(text: str) -> None:
    assert parse_text_calls(text, TOOLS) is None


def test_without_names_any_tool_is_read() -> None:
    assert parse_text_calls('{"name": "rm", "arguments": {}}') == [TextCall("rm", "{}")]
