"""``--model $var``, ``model: $var`` and ``%model $var`` with a variable holding a model name:
the same as typing the name."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

ADD = '''
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b
'''


@pytest.fixture
def ip(kode_ip: Any) -> Any:
    kode_ip.run_cell_magic("tool", "", ADD)
    return kode_ip


def test_ask_with_a_model_name_in_a_variable_runs_like_the_typed_name(ip: Any) -> None:
    ip.user_ns["live"] = "test"
    by_var = ip.run_cell_magic("ask", "--model $live --tools add", "What is 40 + 2?").result()
    typed = ip.run_cell_magic("ask", "--model test --tools add", "What is 40 + 2?").result()
    assert by_var.ok
    assert by_var.output == typed.output
    assert by_var.trace.root.attributes["model"] == typed.trace.root.attributes["model"]


def test_model_line_and_front_matter_take_a_name_in_a_variable(
    ip: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ip.user_ns["live"] = " test "
    ip.run_line_magic("model", "$live")
    assert capsys.readouterr().out == "Default model: $live (test)\n"
    assert ip.run_cell_magic("ask", "--tools add", "Add 1 and 2.").result().ok
    ip.run_cell_magic(
        "agent", "adder", "---\ndescription: Adds.\ntools: [add]\nmodel: $live\n---\nAdd."
    )
    assert ip.run_line_magic("agent", "adder task=sum").result().ok


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("gpt5", "unknown model 'gpt5'"),
        ("scripted", "model 'scripted' needs its script"),
        ("", "model $live is str, not a Model"),
        (42, "model $live is int, not a Model"),
    ],
)
def test_a_variable_holding_no_model_name_says_why(ip: Any, value: Any, message: str) -> None:
    ip.user_ns["live"] = value
    with pytest.raises(UsageError) as info:
        ip.run_cell_magic("ask", "--model $live", "Hi.")
    assert message in str(info.value)
