"""``%tool NAME ...`` in terminal IPython: argument parsing, the call, approvals by ``input()``.

Without a running event loop (terminal IPython) the call runs to completion inside the magic;
the live, non-blocking path is tested in a real kernel (``tests/kernel``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from IPython.core.error import UsageError

from kode_nb.magics import get_session
from kode_nb.magics.call_line import parse_call_arguments
from kode_nb.policy import ApprovalRequest
from kode_nb.ui._notebook_approver import NotebookApprover
from kode_nb.ui.terminal import HEADLESS_REASON

TOOLS = '''
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b

def label(code: str, count: int | None = None) -> str:
    """Make a label.

    Args:
        code: A code such as 007.
        count: How many.
    """
    return f"{code}x{count}"
'''

WRITE = '''
def write_note(path: str, text: str) -> str:
    """Write a note.

    Args:
        path: Where.
        text: What.
    """
    return f"wrote {len(text)} chars to {path}"
'''


@pytest.fixture
def ip(kode_ip: Any) -> Any:
    kode_ip.run_cell_magic("tool", "", TOOLS)
    kode_ip.run_cell_magic("tool", "--kind edit", WRITE)
    return kode_ip


def test_call_with_key_values_runs_and_returns_a_done_handle(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    handle = ip.run_line_magic("tool", "add a=40 b=2")
    assert handle.done()
    assert handle.status == "ok"
    assert handle.result().text == "42"
    assert ip.user_ns["_kode_result"] is handle.result()
    assert [e.type for e in handle.events] == ["requested", "started", "completed"]
    out = capsys.readouterr().out
    assert "[add: starting]" in out
    assert "[ok] add" in out
    assert out.rstrip().endswith("42")


def test_call_with_json_and_with_notebook_variables(ip: Any) -> None:
    assert ip.run_line_magic("tool", 'add {"a": 1, "b": 5}').result().text == "6"
    ip.user_ns["n"] = 7
    assert ip.run_line_magic("tool", "add a=$n").result().text == "9"
    ip.user_ns["spaced"] = "a b"  # passed as the object: IPython does not expand it first
    assert ip.run_line_magic("tool", "label code=$spaced count=2").result().text == "a bx2"
    handle = ip.run_line_magic("tool", 'label {"code": "$spaced {n}"}')
    assert handle.result().text == "$spaced {n}xNone"


def test_values_are_strings_where_the_schema_says_string() -> None:
    schema = {
        "properties": {
            "code": {"type": "string"},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "count": {"type": "integer"},
            "mode": {"enum": ["1", "2"]},
        }
    }
    parsed = parse_call_arguments(
        "code=007 maybe=true count=3 mode=1 other='[1, 2]' word=hello 'spaced=a b'", schema, {}
    )
    assert parsed == {
        "code": "007", "maybe": "true", "count": 3, "mode": "1", "other": [1, 2],
        "word": "hello", "spaced": "a b",
    }  # fmt: skip
    assert parse_call_arguments("maybe=null", schema, {}) == {"maybe": None}


def test_values_may_be_python_literals_and_keep_their_spaces_in_brackets() -> None:
    """What a Python user types: ``True``, ``None``, single-quoted dicts, ``[1, 2]`` with a
    space, a tuple; a set is no JSON value, so it stays the text typed."""
    schema = {"properties": {"code": {"type": "string"}, "text": {"type": "string"}}}
    line = (
        "points=[{'x': 1, 'y': 2}] flag=True none=None pair=(1, 2) spaced=[1, 2] "
        "nested={'a': [1, {'b': None}]} code='[1, 2]' items={1, 2} sad=:( "
        "escaped=a\\ b text=[a,  b] nbsp=a\u00a0b"
    )
    assert parse_call_arguments(line, schema, {}) == {
        "points": [{"x": 1, "y": 2}], "flag": True, "none": None, "pair": [1, 2],
        "spaced": [1, 2], "nested": {"a": [1, {"b": None}]}, "code": "[1, 2]",
        "items": "{1, 2}", "sad": ":(", "escaped": "a b", "text": "[a,  b]", "nbsp": "a\u00a0b",
    }  # fmt: skip


def test_a_python_literal_reaches_the_tool_validated(ip: Any) -> None:
    assert ip.run_line_magic("tool", "label code=x count=None").result().text == "xxNone"
    assert ip.run_line_magic("tool", "add a=[1, 2]").status == "invalid_arguments"


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("", "%tool needs a tool name"),
        ("--kind read", "Options like --kind belong to the cell magic"),
        ("ad a=1", "no tool named 'ad'. Did you mean add?"),
        ("zzz", "Known tools: add, label, write_note."),
        ('add {"a": 1', "the arguments are not valid JSON (Expecting ',' delimiter"),
        ("add [1, 2]", "JSON arguments must be an object {...}, got list"),
        ("add 1 2", "expected key=value or a JSON object, got '1'"),
        ("add a=1 a=2", "argument 'a' is given twice"),
        ("add a=$missing", "there is no variable 'missing' in the notebook"),
        ("add a='1", "cannot split the arguments (No closing quotation)"),
        ("label code=don't", """in the other kind of quotes (text="don't")"""),
    ],
)
def test_bad_calls_are_usage_errors(ip: Any, line: str, message: str) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_line_magic("tool", line)
    assert message in str(info.value)


def test_arguments_the_schema_rejects_give_the_model_facing_result(ip: Any) -> None:
    handle = ip.run_line_magic("tool", "add a=one")
    assert handle.status == "invalid_arguments"
    assert "`a`" in handle.result().text


@pytest.mark.parametrize(
    ("answers", "status", "text"),
    [
        (["y"], "ok", "wrote 2 chars to n.txt"),
        (["maybe", "n too risky"], "denied", "too risky"),
        (["a"], "ok", "wrote 2 chars to n.txt"),
    ],
)
def test_terminal_approval_asks_with_input(
    ip: Any, monkeypatch: pytest.MonkeyPatch, answers: list[str], status: str, text: str
) -> None:
    asked = iter(answers)
    monkeypatch.setattr("builtins.input", lambda prompt: next(asked))
    handle = ip.run_line_magic("tool", "write_note path=n.txt text=hi")
    assert handle.status == status
    assert text in handle.result().text
    resolved = next(e for e in handle.events if e.type == "approval_resolved")
    assert resolved.decided_by == "terminal"
    always = "write_note" in get_session(ip).policy.always_allowed
    assert always == (answers == ["a"])


def test_end_of_input_denies(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    def eof(prompt: str) -> str:
        raise EOFError

    monkeypatch.setattr("builtins.input", eof)
    handle = ip.run_line_magic("tool", "write_note path=n.txt text=hi")
    assert handle.status == "denied"
    assert "end of input" in handle.result().text


def test_approval_mode_auto_runs_without_asking(ip: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builtins.input", lambda prompt: pytest.fail("asked"))
    ip.run_line_magic("approval", "auto")
    assert ip.run_line_magic("tool", "write_note path=n.txt text=hi").status == "ok"


def test_without_buttons_or_a_terminal_approval_is_denied_with_a_message() -> None:
    class Session:
        style = "html"
        shell = object()

    request = ApprovalRequest(tool="w", kind="edit", arguments={}, call_id="c")
    decision = asyncio.run(NotebookApprover(Session())(request))  # type: ignore[arg-type]
    assert not decision.approved
    assert decision.reason == HEADLESS_REASON
    assert "%approval auto" in HEADLESS_REASON


DEEP = 10_000


@pytest.mark.parametrize(
    "line",
    [
        'add {"a": ' + "[" * DEEP + "]" * DEEP + "}",
        "add " + "[" * DEEP + "]" * DEEP,
        'add {"a": ' + '{"x": ' * DEEP + "1" + "}" * DEEP + "}",
        "add a=" + "[" * DEEP + "]" * DEEP,
        "label code=x count=" + "[" * DEEP,
    ],
)
def test_deeply_nested_arguments_are_usage_errors(ip: Any, line: str) -> None:
    with pytest.raises(UsageError, match="nested too deeply"):
        ip.run_line_magic("tool", line)


def test_nesting_is_counted_outside_strings_only() -> None:
    text = '{"a": "' + "[" * 500 + '", "b": [[1]]}'
    assert parse_call_arguments(text, {}, {}) == {"a": "[" * 500, "b": [[1]]}
    from kode_nb.magics.nesting import MAX_NESTING

    ok = '{"a": ' + "[" * (MAX_NESTING - 1) + "]" * (MAX_NESTING - 1) + "}"
    assert parse_call_arguments(ok, {}, {})["a"] is not None
    with pytest.raises(UsageError, match="more than 64 levels"):
        parse_call_arguments('{"a": ' + "[" * MAX_NESTING + "]" * MAX_NESTING + "}", {}, {})


def test_under_a_runner_only_the_same_call_in_the_same_run_is_denied_at_once() -> None:
    """After a call went unanswered under a runner, the model asking for it again in that run
    is denied at once; the same call from another run (a later cell) is asked again, so code
    there can still approve it."""
    from types import SimpleNamespace

    from kode_nb.policy import approve

    shell = SimpleNamespace(kernel=SimpleNamespace(_allow_stdin=False))  # a runner's cells
    session = SimpleNamespace(style="widget", shell=shell, views={}, approval_timeout=lambda: 0.1)
    approver = NotebookApprover(session)  # type: ignore[arg-type]

    def request(run: str | None, call_id: str) -> ApprovalRequest:
        return ApprovalRequest(
            tool="write_note", kind="edit", arguments={"path": "a"}, call_id=call_id, run_id=run
        )

    async def scenario() -> list[tuple[bool, str, str]]:
        first = await approver(request("r1", "c1"))  # nobody answers: denied after the limit
        again = await approver(request("r1", "c2"))  # the model asks again: at once
        task = asyncio.ensure_future(approver(request("r2", "c3")))  # another run: asks
        for _ in range(100):
            if "c3" in approver._widgets.prompts:
                break
            await asyncio.sleep(0.001)
        approver._widgets.prompts["c3"].decide(approve(by="code"))
        other = await task
        alone = await approver(request(None, "c4"))  # no run (a %tool cell): asks, times out
        return [(d.approved, d.decided_by, d.reason or "") for d in (first, again, other, alone)]

    first, again, other, alone = asyncio.run(scenario())
    assert first[:2] == (False, "timeout")
    assert "nobody approved this call" in first[2]
    assert again[:2] == (False, "timeout")
    assert again[2].startswith("Denied at once")
    assert other[:2] == (True, "code")
    assert alone[:2] == (False, "timeout")
    assert "nobody approved this call" in alone[2]
