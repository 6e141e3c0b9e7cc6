"""``%tool``'s line reader (kode_nb/magics/call_line.py) reads in linear time what shlex and a
character loop read before, with the same answers; and arguments the call's view could not show
(nested too deep to write as JSON, holding themselves, or a lone surrogate) are UsageErrors
before anything runs or is shown.

Nothing is timed here (benchmarks/hostile_inputs.py times a 2 MB line); linear work is proved by
counting the function calls a 2 MB line costs."""

from __future__ import annotations

import json
import shlex
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError

from kode_nb.magics.call_line import _brackets, _pairs, _shell_word, parse_call_arguments
from kode_nb.magics.nesting import nesting_depth

# --------------------------------------------------------------------------- same answers


def _shlex_word(token: str) -> str:
    """What the reader did before: shlex, one word, every space kept."""
    lexer = shlex.shlex(token, posix=True)
    lexer.whitespace = ""
    lexer.whitespace_split = True
    lexer.commenters = ""
    return "".join(lexer)


def _loop_pairs(text: str) -> list[tuple[str, str]]:
    """What the reader did before: a loop over every character (quadratic with shlex)."""
    places: list[int] = []
    quote, i = "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch == "\\":
            i += 1
        elif ch in "'\"":
            quote = ch
        else:
            places.append(i)
        i += 1
    if quote:
        raise ValueError("No closing quotation")
    close = {"[": "]", "{": "}", "(": ")"}
    opened: list[int] = []
    grouped: set[int] = set()
    for i in places:
        if text[i] in close:
            opened.append(i)
        elif opened and text[i] == close[text[opened[-1]]]:
            grouped.update((opened.pop(), i))
    written, start, depth = [], 0, 0
    for i in places:
        if i in grouped:
            depth += 1 if text[i] in close else -1
        elif text[i] in " \t\r\n" and depth == 0:
            written.append(text[start:i])
            start = i + 1
    written.append(text[start:])
    return [(_shlex_word(t), t) for t in written if t.strip()]


def _outcome(read: Any, text: str) -> tuple[str, Any]:
    try:
        return ("read", read(text))
    except ValueError as exc:
        return ("error", str(exc))


_line = st.text(alphabet="ab=:,é '\"\\\n\t\u00a0\0[](){}", max_size=24)


@settings(max_examples=3000, deadline=None)
@given(_line)
def test_a_word_reads_as_shlex_reads_it(text: str) -> None:
    assert _outcome(_shell_word, text) == _outcome(_shlex_word, text)


@settings(max_examples=3000, deadline=None)
@given(_line)
def test_a_line_splits_as_the_character_loop_split_it(text: str) -> None:
    assert _outcome(lambda t: list(_pairs(t)), text) == _outcome(_loop_pairs, text)


@settings(max_examples=3000, deadline=None)
@given(st.text(alphabet='ab"\\[]{} ', max_size=30))
def test_the_brackets_nest_as_the_whole_text_does(text: str) -> None:
    assert nesting_depth(_brackets(text), 5) == nesting_depth(text, 5)
    assert nesting_depth(_brackets(text), 10**6) == nesting_depth(text, 10**6)


# --------------------------------------------------------------------------- linear work


def _calls_made(fn: Any, *args: Any) -> int:
    """The Python and C function calls ``fn(*args)`` makes (the work done per character shows
    as calls: shlex's read_token, len and append in a character loop)."""
    count = 0

    def profile(frame: Any, event: str, arg: Any) -> None:
        nonlocal count
        count += event in ("call", "c_call")

    sys.setprofile(profile)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return count


@pytest.mark.parametrize(
    "value",
    [
        json.dumps(list(range(300_000))),  # 2.3 MB, spaces inside its brackets
        json.dumps(list(range(330_000)), separators=(",", ":")),
        '"' + "x" * 2_000_000 + '"',
        "'" + "x y" * 700_000 + "'",
        "x\\ " * 700_000,
    ],
    ids=["list", "list-no-spaces", "double-quoted", "single-quoted", "escapes"],
)
def test_a_2_mb_value_is_read_with_a_bounded_number_of_calls(value: str) -> None:
    line = f"n=1 value={value} m=2"
    assert len(line) > 2_000_000
    args = parse_call_arguments(line, {"properties": {}}, {})
    assert args["n"] == 1
    assert args["m"] == 2
    assert len(args["value"]) > 100_000
    assert _calls_made(parse_call_arguments, line, {"properties": {}}, {}) < 2_000


def test_a_long_python_literal_is_refused_not_evaluated() -> None:
    literal = repr([True, None] * 60_000)
    with pytest.raises(UsageError, match="a Python literal longer than 100,000 is not read"):
        parse_call_arguments(f"value={literal}", {"properties": {}}, {})
    short = repr([True, None] * 100)
    assert parse_call_arguments(f"value={short}", {"properties": {}}, {}) == {
        "value": [True, None] * 100
    }
    text = "x" * 200_000  # not a literal: kept as the text it is
    assert parse_call_arguments(f"value={text}", {"properties": {}}, {}) == {"value": text}


# --------------------------------------------------------------------------- what cannot be shown

ANY_TOOL = '''
def t_any(value: object) -> str:
    """Take anything.

    Args:
        value: Anything.
    """
    CALLS.append(value)
    return "ok"
'''


@pytest.fixture
def ip(kode_ip: Any) -> Any:
    kode_ip.user_ns["CALLS"] = []
    kode_ip.run_cell_magic("tool", "", ANY_TOOL)
    return kode_ip


def _nested(levels: int) -> list[Any]:
    deep: list[Any] = []
    for _ in range(levels):
        deep = [deep]
    return deep


def _cycle() -> list[Any]:
    loop: list[Any] = []
    loop.append(loop)
    return loop


@pytest.mark.parametrize(
    ("line", "variable", "match"),
    [
        ("t_any value=$DEEP", _nested(100_000), r"value=\$DEEP: the value is nested more than 200"),
        ("t_any value=$DEEP", _nested(201), r"value=\$DEEP: the value is nested more than 200"),
        ("t_any value=$LOOP", _cycle(), r"value=\$LOOP: .*Circular reference"),
        ('t_any value="\\ud800"', None, r"lone surrogate \('\\ud800'\)"),
        ('t_any value={"k": ["\\udfff"]}', None, r"lone surrogate \('\\udfff'\)"),
        ("t_any value=$BAD", {"\ud800": 1}, r"value=\$BAD: .*lone surrogate"),
        ('t_any {"value": "\\ud800"}', None, r"the JSON arguments: .*lone surrogate"),
    ],
)
def test_what_no_view_can_show_is_a_usage_error_before_anything_runs_or_shows(
    ip: Any, capsys: pytest.CaptureFixture[str], line: str, variable: Any, match: str
) -> None:
    ip.user_ns["DEEP"] = ip.user_ns["LOOP"] = ip.user_ns["BAD"] = variable
    capsys.readouterr()
    with pytest.raises(UsageError, match=match):
        ip.run_line_magic("tool", line)
    assert ip.user_ns["CALLS"] == []
    assert "t_any" not in capsys.readouterr().out  # nothing half-shown


def test_deep_but_writable_values_still_run(ip: Any) -> None:
    ip.user_ns["DEEP"] = _nested(199)  # deeper than a line may nest (64)
    handle = ip.run_line_magic("tool", "t_any value=$DEEP")
    assert handle.status == "ok"
    assert ip.user_ns["CALLS"] == [_nested(199)]
