"""What a new user meets first: ``%tool?`` / ``%%ask?`` usage lines, "did you mean" for a mistyped
option, and the cells that wait for an MCP connection (``kode_nb.magics.awaiting``)."""

from __future__ import annotations

from typing import Any

import pytest
from IPython.core.error import UsageError

from kode_nb.magics.awaiting import wait_cells

CELL = "def f(x: int) -> int:\n    '''F.\n\n    Args:\n        x: X.\n    '''\n    return x\n"


def _magic(ip: Any, name: str) -> Any:
    return ip.magics_manager.registry["KodeMagics"].__getattribute__(name)


def test_usage_lines_show_how_each_magic_is_written(kode_ip: Any) -> None:
    tool_doc = _magic(kode_ip, "tool").__doc__
    assert "  %tool NAME key=value ..." in tool_doc
    assert "  %%tool [--name NAME]" in tool_doc
    assert "  %%ask [--agent AGENT]" in _magic(kode_ip, "ask").__doc__


@pytest.mark.parametrize(
    ("line", "hint"),
    [("--knd edit", "--knd: did you mean --kind?"), ("--timout 3", "did you mean --timeout?")],
)
def test_a_mistyped_option_gets_did_you_mean(kode_ip: Any, line: str, hint: str) -> None:
    with pytest.raises(UsageError, match="unrecognized arguments") as info:
        kode_ip.run_cell_magic("tool", line, CELL)
    assert hint in str(info.value)


def test_tools_separated_by_spaces_get_the_comma_hint(kode_ip: Any) -> None:
    with pytest.raises(UsageError, match="unrecognized arguments: b") as info:
        kode_ip.run_cell_magic("ask", "--tools a b", "hello")
    assert "--tools takes one comma-separated list: --tools a,b,c" in str(info.value)


def test_an_unknown_option_far_from_any_is_reported_as_it_is(kode_ip: Any) -> None:
    with pytest.raises(UsageError) as info:
        kode_ip.run_cell_magic("tool", "--zzzzzz", CELL)
    assert "did you mean" not in str(info.value)


def test_a_connect_line_is_followed_by_a_wait() -> None:
    lines = [
        "import sys\n",
        "get_ipython().run_line_magic('mcp', 'connect demo -- {sys.executable} s.py')\n",
        "x = 1\n",
    ]
    out = wait_cells(lines)
    assert out[0] == "import sys\n"
    assert out[1].endswith(".expect_wait()\n")
    assert out[2] == lines[1]
    assert out[3].startswith("await ")
    assert out[3].endswith(".wait_for_connections()\n")
    assert out[4] == "x = 1\n"
    compile("".join(out), "<cell>", "exec", flags=0x2000)  # PyCF_ALLOW_TOP_LEVEL_AWAIT


def test_other_cells_are_left_alone_when_nothing_connects() -> None:
    lines = ["    get_ipython().run_line_magic('mcp', 'connect a -- x')\n", "print(1)\n"]
    assert wait_cells(lines) == lines  # indented: not a top-level connect
