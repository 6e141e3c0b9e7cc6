"""Tool calls written as text: every form real servers produce is read, anything else stays text."""

from __future__ import annotations

import json

import pytest

from kode_nb.models._text_calls import TextCall, parse_text_calls, read_text_calls

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
        '{"name": "add", "arguments": [1, 2]}',
        '{"name": "add", "arguments": "not json"}',
        '{"name": "add", "arguments": {"a": 1}, "comment": "extra"}',
        '{"answer": 3}',
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


# Malformed forms small models write (Qwen2.5-Coder-0.5B on llama-server, calling a subagent).
SUBAGENT = {"calculator", "get_weather"}
CALC = '{"name": "calculator", "arguments": {"task": "What is 48213 + 91877?"}}'
CALC_CALL = ("calculator", {"task": "What is 48213 + 91877?"})


def read(text: str, names: set[str] = SUBAGENT, *, cut: bool = False) -> list[object] | None:
    found = parse_text_calls(text, names, cut=cut)
    return None if found is None else [(c.name, json.loads(c.arguments)) for c in found]


@pytest.mark.parametrize(
    "text",
    [
        CALC[:-1],  # the outer object left open
        CALC[:-2],  # both left open
        f"```json\n{CALC[:-1]}\n```",  # inside its fence
        f"<tool_call>\n{CALC[:-1]}\n</tool_call>",
        f"[{CALC}",  # a list left open
        f"{CALC}\n{CALC[:-1]}",  # the last of a run
    ],
)
def test_a_call_missing_only_its_closing_brackets_at_the_end_is_repaired(text: str) -> None:
    found = read_text_calls(text, SUBAGENT)
    assert found is not None
    assert found.repaired
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [CALC_CALL]


def test_a_repaired_call_is_still_checked_like_any_call() -> None:
    assert read('{"name": "add", "arguments": {"a": 1', TOOLS) == [("add", {"a": 1})]
    assert read('{"name": "rm", "arguments": {"path": "/"') is None  # not offered
    assert read('{"name": "calculator", "arguments": [1, 2') is None  # not an object


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calculator", "arguments": {"task": "What is 48213',  # cut inside a string
        '{"name": "calculator", "arguments": {"task": "What is 48213 + 91877?",',  # a comma
        '{"name": "calculator", "arguments": {"task": ',  # a key without its value
        '{"name": "calculator", "arguments": {"task": "x"} and then I add them',  # words
        '{"name": "calculator", "arguments": {"task": "x"]}',  # a closer that does not match
        f"{CALC}}}",  # one too many
        f"I will call {CALC[:-1]}",  # a mention
        "{",
    ],
)
def test_anything_more_than_missing_closers_stays_text(text: str) -> None:
    assert read(text) is None


def test_a_call_repeated_several_times_is_one_call() -> None:
    found = read_text_calls(f"{CALC}\n{CALC}\n\n{CALC}", SUBAGENT)
    assert found is not None
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [CALC_CALL]
    assert found.repeats == 2
    same = '{"name": "calculator", "arguments": {"task": "What is 48213 + 91877?"} }'
    assert read(f"{CALC}\n{same}") == [CALC_CALL]  # the same call, spaced otherwise
    other = '{"name": "calculator", "arguments": {"task": "What is 1 + 2?"}}'
    assert read(f"{CALC}\n{other}\n{CALC}") == [
        CALC_CALL,
        ("calculator", {"task": "What is 1 + 2?"}),
    ]


@pytest.mark.parametrize(
    "text",
    [
        "\n".join([CALC] * 7) + '\n{"name": "calculator", "arguments": {"task": "What is 482',
        "\n".join([CALC] * 3) + '\n{"name": "calcu',
        "\n".join([CALC] * 3) + "\n{",
        "\n\n".join([f"```json\n{CALC}\n```"] * 4) + "\n\n``",
        "\n\n".join([f"```json\n{CALC}\n```"] * 4) + '\n\n```json\n{"name": "calculator", "ar',
        "\n".join([f"<tool_call>\n{CALC}\n</tool_call>"] * 3) + "\n<tool_ca",
    ],
)
def test_an_answer_cut_at_the_length_limit_keeps_its_complete_calls(text: str) -> None:
    found = read_text_calls(text, SUBAGENT, cut=True)
    assert found is not None
    assert found.truncated
    assert not found.repaired
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [CALC_CALL]
    assert found.repeats >= 2
    assert read(text) is None  # not cut at the limit: a fragment is not a call


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "calculator", "arguments": {"task": "What is 48213 + 91877?"',  # no whole call
        CALC[:-1],  # never repaired when cut: its arguments may be cut short
        f"{CALC}\nThe sum is",  # words after the calls
        f'{CALC}\n{{"name": "calculator"]',  # not the start of a JSON value
        '{"name": "rm", "arguments": {}}\n{"name',  # only a tool not offered
        "In the vast blue sea,\n",  # recorded: a poem cut at the limit
    ],
)
def test_a_cut_answer_without_complete_calls_or_with_words_stays_text(text: str) -> None:
    assert read(text, cut=True) is None


def test_a_call_shaped_object_that_is_no_call_beside_a_valid_call_is_dropped() -> None:
    # written by Qwen2.5-Coder-0.5B on llama-server in the live subagent case
    text = (
        '{"name": "calculator", "arguments": {"task": "add"}}\n'
        '{"arguments": {"task": "55120", "additionalProperties": false}, '
        '"arguments": {"task": "38967", "additionalProperties": false}}'
    )
    found = read_text_calls(text, {"calculator", "get_weather"})
    assert found is not None
    assert found.calls == [TextCall("calculator", '{"task": "add"}')]
    assert found.malformed == 1


@pytest.mark.parametrize(
    "text",
    [
        '{"arguments": {"a": 1, "b": 2}}',  # no valid call at all
        '{"name": "add", "arguments": {"a": 1, "b": 2}}\n{"result": 3, "arguments": 2}',  # data
        '{"name": "add", "arguments": {"a": 1, "b": 2}}\n{"name": "add"}',  # a name alone
    ],
)
def test_without_a_valid_call_or_beside_other_data_it_stays_text(text: str) -> None:
    assert read_text_calls(text, TOOLS) is None


def test_a_call_to_a_tool_not_offered_beside_an_offered_one_is_kept_as_a_call() -> None:
    # written by Qwen2.5-Coder-0.5B on llama-server in the live subagent case: the agent answers
    # the made-up tool with an error naming the tools it has, and runs the other call
    text = (
        '```json\n{"name": "calculator", "arguments": {"task": "add"}}\n'
        '{"name": "sum", "arguments": {"sum": 55120, "add": 38967}}\n```'
    )
    assert read(text) == [("calculator", {"task": "add"}), ("sum", {"sum": 55120, "add": 38967})]
    assert read('{"name": "sum", "arguments": {"a": 1}}') is None  # only made-up tools: text


ESCAPED = (  # llama-cpp-python, chatml-function-calling, two tools described in the system
    # prompt: the answer as the model wrote it, copying the template's HTML escaping
    "&lt;tool_call&gt;\n{&quot;name&quot;: &quot;add&quot;, &quot;arguments&quot;: "
    "{&quot;a&quot;: 48213, &quot;b&quot;: 91877}}\n&lt;/tool_call&gt;"
)


@pytest.mark.parametrize(
    "text",
    [ESCAPED, '{&#34;name&#34;: &#34;add&#34;, &#34;arguments&#34;: {&#34;a&#34;: 48213, '
              '&#34;b&#34;: 91877}}'],
)  # fmt: skip
def test_a_call_written_html_escaped_is_read_unescaped(text: str) -> None:
    found = read_text_calls(text, TOOLS)
    assert found is not None
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == [ADD]
    assert found.unescaped


def test_escaped_text_that_is_no_call_stays_text() -> None:
    assert read_text_calls("Use &quot;add&quot; for sums &lt;3", TOOLS) is None
    plain = read_text_calls('{"name": "add", "arguments": {"a": 48213, "b": 91877}}', TOOLS)
    assert plain is not None
    assert not plain.unescaped


@pytest.mark.parametrize(
    ("text", "expected", "unescaped"),
    [
        # llama-cpp-python 0.3.36, chatml-function-calling, Qwen2.5-Coder-0.5B: answers recorded
        # after tool results (benchmarks/results/local_models_llama_cpp_python.txt)
        ("functions.get_weather:\n{&#34;city&#34;: &#34;Paris&#34;}", [PARIS], True),
        ("functions.get_weather:\n{&#34;city&#34;:&#34;Paris&#34;}", [PARIS], True),
        ('functions.add:\n{"a": 48213, "b": 91877}', [ADD], False),
        (
            'functions.add: {"a": 48213, "b": 91877}\nfunctions.get_weather:\n{"city": "Paris"}',
            [ADD, PARIS],
            False,
        ),
    ],
)
def test_llama_cpp_pythons_call_syntax_is_read(
    text: str, expected: list[tuple[str, dict[str, object]]], unescaped: bool
) -> None:
    found = read_text_calls(text, TOOLS)
    assert found is not None
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == expected
    assert found.unescaped is unescaped


@pytest.mark.parametrize(
    ("text", "expected", "unescaped"),
    [
        # llama-cpp-python 0.3.36, chatml-function-calling, Qwen2.5-Coder-0.5B, in LangGraph
        # with kode_nb's model: the answer after a refused call, recorded
        # (benchmarks/results/local_models_llama_cpp_python.txt, approval case)
        ("functions.get_weather:\n{&#34;city&#34;: 'Paris'}", [PARIS], True),
        ("{'name': 'add', 'arguments': {'a': 48213, 'b': 91877}}", [ADD], False),
        # the same, in pydantic-ai with kode_nb's model: the value as a bare word, recorded
        ("functions.get_weather:\n{&#34;city&#34;:Paris}", [PARIS], True),
        (
            '{"name": "get_weather", "arguments": {"city": New York}}',
            [("get_weather", {"city": "New York"})],
            False,
        ),
        ("```json\n{'name': 'get_weather', 'arguments': {'city': 'Paris'}}\n```", [PARIS], False),
        (
            "{'name': 'say', 'arguments': {'text': 'it\\'s \"fine\"', 'loud': True, 'to': None}}",
            [("say", {"text": 'it\'s "fine"', "loud": True, "to": None})],
            False,
        ),
        (
            '{"name": "say", "arguments": {"text": "True \'as\' written", "loud": False}}',
            [("say", {"text": "True 'as' written", "loud": False})],
            False,
        ),
    ],
)
def test_calls_written_with_pythons_quoting_are_read(
    text: str, expected: list[tuple[str, dict[str, object]]], unescaped: bool
) -> None:
    found = read_text_calls(text, [*TOOLS, "say"])
    assert found is not None
    assert [(c.name, json.loads(c.arguments)) for c in found.calls] == expected
    assert found.unescaped is unescaped
    assert found.requoted  # and so it says


@pytest.mark.parametrize(
    "text",
    [
        "It's 'add' you want, isn't it?",  # prose with quotes
        "{'name': 'add', 'arguments': {'a': 1}} and it's done",  # text after it
        "{'name': 'add', 'arguments': {'a': 'x}}",  # a string never closed
        "{'name': 'lookup', 'arguments': {'q': 'x'}}",  # a tool not offered
        "{'a': 1, 'b': 2}",  # data, no call
        '{"name": "add", "arguments": {"a": one plus two}} then more',
        "{name: add, arguments: {}}",  # bare keys stay unread
        "{" + "'" * 20001,  # quotes by the thousand, one left open
        "{'name': 'add', 'arguments': {'a': '" + "x'" * 5000 + "}}",
    ],
)
def test_python_quoted_text_that_is_no_call_stays_text(text: str) -> None:
    assert read_text_calls(text, TOOLS) is None


@pytest.mark.parametrize(
    "text",
    [
        "functions.result:\n{ &amp;#34;result&amp;#34;: 150090 }",  # escaped twice
        'The answer: functions.add:\n{"a": 1, "b": 2}',  # text before it
        'functions.add:\n{"a": 1, "b": 2} and that is all',  # text after it
        "functions.add:\n[1, 2]",  # no arguments object
        'functions.lookup:\n{"name": "x"}',  # a tool not offered
    ],
)
def test_anything_else_in_that_syntax_stays_text(text: str) -> None:
    assert read_text_calls(text, TOOLS) is None
