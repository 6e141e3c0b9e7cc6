"""``%%tool`` in an in-process IPython shell: what it registers, what it refuses and why."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

from kode_nb import ToolRegistry, define_tool
from kode_nb.magics.define_cell import _forget_removed

ADD = '''
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b
'''


@pytest.fixture
def ip(kode_ip: Any) -> Any:
    return kode_ip


def test_defines_a_tool_with_every_option_and_shows_its_card(
    ip: Any, registry: ToolRegistry, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.run_cell_magic(
        "tool",
        "--name plus --kind read --category data --group math --group demo --timeout 5 "
        "--approval ask --inline",
        ADD,
    )
    tool = registry.get("plus")
    assert tool is not None
    assert (tool.kind.value, tool.category.value, tool.groups) == ("read", "data", ("math", "demo"))
    assert (tool.timeout, tool.approval, tool.inline) == (5.0, "ask", True)
    assert tool.description == "Add two numbers."
    assert ip.user_ns["add"](1, 2) == 3  # the cell ran in the user namespace
    out = capsys.readouterr().out
    assert out.startswith("plus [read]  category: data · groups: math, demo · timeout: 5 s")
    assert "b          integer  no        2        The second." in out


def test_rerunning_the_cell_replaces_the_tool(ip: Any, registry: ToolRegistry) -> None:
    ip.run_cell_magic("tool", "", ADD)
    ip.run_cell_magic("tool", "--kind think", ADD.replace("Add two numbers.", "Sum."))
    assert registry.names() == ["add"]
    tool = registry.require("add")
    assert tool.description == "Sum."
    assert tool.kind.value == "think"


def test_registers_every_public_function_the_cell_defines_and_nothing_else(
    ip: Any, registry: ToolRegistry
) -> None:
    ip.user_ns["already_there"] = len
    code = (
        ADD
        + '''
from os.path import join
import json

def _helper(x: int) -> int:
    return x

def shout(text: str) -> str:
    """Upper-case.

    Args:
        text: The text.
    """
    return _helper(len(text)) and text.upper()

already_there = already_there
'''
    )
    ip.run_cell_magic("tool", "", code)
    assert registry.names() == ["add", "shout"]


@pytest.mark.parametrize(
    ("line", "code", "message"),
    [
        ("", "x = 1", "the cell defines no function."),
        ("", "def _private(a: int) -> int:\n    return a", "it defines only _private"),
        ("", "def f(x, y: int):\n    return x", "f() has no type hint for parameter 'x'"),
        (
            "--name one",
            ADD + ADD.replace("add", "sub"),
            "--name 'one' names one tool, but the cell defines add, sub",
        ),
        ("--kind bogus", ADD, "argument --kind: invalid choice: 'bogus'"),
        ("--category nowhere", ADD, "argument --category: invalid choice: 'nowhere'"),
        ("--timeout soon", ADD, "argument --timeout: invalid float value: 'soon'"),
        ("--approval maybe", ADD, "argument --approval: invalid choice: 'maybe'"),
        ("--timeout -1", ADD, "timeout must be a positive number of seconds"),
        ("--name 9lives", ADD, "invalid tool name '9lives'"),
        ("--colour red", ADD, "unrecognized arguments: --colour red"),
    ],
)
def test_bad_cells_and_options_are_usage_errors(
    ip: Any, registry: ToolRegistry, line: str, code: str, message: str
) -> None:
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("tool", line, code)
    assert message in str(info.value)
    assert registry.names() == []


def test_a_name_taken_by_a_tool_from_elsewhere_is_a_usage_error(
    ip: Any, registry: ToolRegistry
) -> None:
    def add(a: int) -> int:
        """Library add."""
        return a

    registry.register(define_tool(add, registry=None).evolve(source="somelib.add"))
    with pytest.raises(UsageError, match="already registered"):
        ip.run_cell_magic("tool", "", ADD)
    assert registry.require("add").source == "somelib.add"


def test_an_exception_in_the_cell_propagates_and_registers_nothing(
    ip: Any, registry: ToolRegistry
) -> None:
    with pytest.raises(ZeroDivisionError):
        ip.run_cell_magic("tool", "", ADD + "\n1 / 0\n")
    assert registry.names() == []


def test_help_lists_the_options_and_both_uses(ip: Any) -> None:
    doc = ip.find_line_magic("tool").__doc__
    assert "%%tool [options]" in doc
    assert "%tool NAME key=value" in doc
    for option in (
        "--name",
        "--kind",
        "--category",
        "--group",
        "--timeout",
        "--approval",
        "--inline",
    ):
        assert option in doc


def test_a_rerun_cell_drops_the_tools_it_no_longer_defines(registry: ToolRegistry) -> None:
    class Shell:
        def get_parent(self) -> dict[str, Any]:
            return {"metadata": {"cellId": "cell-1"}}

    class Session:
        def __init__(self) -> None:
            self.registry = registry
            self.cell_tools: dict[str, tuple[str, ...]] = {}

    def a(x: int) -> int:
        """A."""
        return x

    def b(x: int) -> int:
        """B."""
        return x

    session = Session()
    first = [
        define_tool(a, registry=None).evolve(source="__main__.a"),
        define_tool(b, registry=None).evolve(source="__main__.b"),
    ]
    registry.register_many(first)
    _forget_removed(Shell(), session, first)  # type: ignore[arg-type]
    _forget_removed(Shell(), session, first[:1])  # type: ignore[arg-type]
    assert registry.names() == ["a"]
    assert session.cell_tools == {"cell-1": ("a",)}
