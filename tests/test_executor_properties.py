"""Property: whatever arguments a model sends, a call returns a result and leaves nothing running."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kode_nb import Executor, ToolRegistry, ToolResult, define_tool


async def typed(a: int, b: str = "x", c: list[float] | None = None) -> str:
    """A tool with a few typed parameters."""
    return f"{a}|{b}|{c}"


def typed_inline(a: int, flag: bool = False) -> dict[str, Any]:
    """An inline sync tool."""
    return {"a": a, "flag": flag}


REGISTRY = ToolRegistry(name="properties")
define_tool(typed, registry=REGISTRY)
define_tool(typed_inline, inline=True, registry=REGISTRY)
EXECUTOR = Executor(REGISTRY)  # one executor across many event loops

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4)
    ),
    max_leaves=12,
)
# Objects that use the tools' own parameter names, so some calls are valid and some nearly so.
near_misses = st.dictionaries(
    st.sampled_from(["a", "b", "c", "flag", "d"]), json_values, max_size=4
)
raw_arguments = st.one_of(
    json_values,
    json_values.map(lambda v: json.dumps(v)),
    near_misses,
    near_misses.map(lambda v: json.dumps(v)),
    st.text(max_size=30),
    st.binary(max_size=30),
)


async def call(tool: str, arguments: Any) -> ToolResult:
    result = await EXECUTOR.call(tool, arguments)
    assert EXECUTOR.running() == []
    return result


@settings(max_examples=300, deadline=None)
@given(tool=st.sampled_from(["typed", "typed_inline"]), arguments=raw_arguments)
def test_any_arguments_give_a_result_and_leave_nothing_running(tool: str, arguments: Any) -> None:
    result = asyncio.run(call(tool, arguments))
    assert isinstance(result, ToolResult)
    assert result.status in ("ok", "invalid_arguments")
    assert result.is_error == (result.status != "ok")
    assert result.tool == tool
    assert result.text
    if result.status == "invalid_arguments":
        assert result.text.startswith(f"Invalid arguments for tool '{tool}'")


@settings(max_examples=100, deadline=None)
@given(a=st.integers(), b=st.text(max_size=10), c=st.none() | st.lists(st.floats(-1e6, 1e6)))
def test_well_typed_arguments_always_run(a: int, b: str, c: list[float] | None) -> None:
    result = asyncio.run(call("typed", json.dumps({"a": a, "b": b, "c": c})))
    assert result.status == "ok"
    assert result.text == f"{a}|{b}|{c}"
