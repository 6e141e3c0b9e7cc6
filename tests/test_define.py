"""@tool and define_tool: building a Tool, defaults, registration, raw-schema tools, errors."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import pytest

from kode_nb.errors import DuplicateToolError, ToolDefinitionError
from kode_nb.tools import Tool, ToolRegistry, default_registry, define_tool, tool
from kode_nb.types import ToolCategory, ToolContext, ToolKind


def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def other_add(a: int) -> int:
    return a


other_add.__name__ = "add"


def test_bare_decorator_registers_in_the_current_registry(registry: ToolRegistry) -> None:
    @tool
    def greet(name: str) -> str:
        """Say hello."""
        return f"hello {name}"

    assert isinstance(greet, Tool)
    assert greet("ann") == "hello ann"  # calling the Tool calls the function
    assert registry.get("greet") is greet
    assert default_registry() is registry
    assert greet.name == "greet"
    assert greet.label == "Greet"
    assert greet.description == "Say hello."
    assert (
        greet.source
        == f"{__name__}.test_bare_decorator_registers_in_the_current_registry.<locals>.greet"
    )
    assert (greet.kind, greet.category, greet.mode) == (ToolKind.OTHER, ToolCategory.CUSTOM, "sync")
    assert greet.parameters == {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
        "additionalProperties": False,
    }
    assert (greet.can_update_output, greet.context_param, greet.arguments_param) == (
        False,
        None,
        None,
    )


def test_decorator_with_options(registry: ToolRegistry) -> None:
    def check(args: Mapping[str, Any]) -> bool:
        return True

    @tool(
        name="find-files",
        description="Find files.",
        label="Find",
        kind="search",
        category=ToolCategory.FILE,
        groups="fs",
        timeout=5,
        approval=check,
        is_output_markdown=True,
        inline=True,
        metadata={"origin": "test"},
    )
    def find(pattern: str) -> list[str]:
        """Docstring description (overridden)."""
        return []

    assert registry.get("find_files") is find
    assert (find.name, find.description, find.label) == ("find-files", "Find files.", "Find")
    assert (find.kind, find.category, find.groups) == (ToolKind.SEARCH, ToolCategory.FILE, ("fs",))
    assert (find.timeout, find.approval, find.is_output_markdown, find.inline) == (
        5.0,
        check,
        True,
        True,
    )
    assert find.metadata == {"origin": "test"}


def test_define_tool_defaults_from_the_function() -> None:
    t = define_tool(add, registry=None)
    assert t.name == "add"
    assert t.description == "Add two numbers."
    assert t.source == f"{__name__}.add"
    assert t.parameters["properties"]["a"] == {"type": "integer", "description": "The first."}
    assert t.validator.validate('{"a": 1}', tool="add") == {"a": 1, "b": 2}


def test_registry_none_and_explicit_registry(registry: ToolRegistry) -> None:
    define_tool(add, registry=None)
    assert len(registry) == 0
    own = ToolRegistry(name="own")
    t = define_tool(add, registry=own)
    assert own.get("add") is t
    assert len(registry) == 0


def test_registry_duck_type_gets_replace_flag() -> None:
    calls: list[tuple[str, bool]] = []

    class Fake:
        def register(self, tool: Tool, *, replace: bool = False) -> Tool:
            calls.append((tool.name, replace))
            return tool

    define_tool(add, registry=Fake(), replace=True)  # type: ignore[arg-type]
    assert calls == [("add", True)]


def test_redefining_the_same_function_replaces(registry: ToolRegistry) -> None:
    first = define_tool(add)
    second = define_tool(add, description="Changed.")
    assert registry.get("add") is second is not first
    with pytest.raises(DuplicateToolError):
        define_tool(other_add)
    third = define_tool(other_add, replace=True)
    assert registry.get("add") is third


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("edit", ToolKind.EDIT), (ToolKind.THINK, ToolKind.THINK), ("fetch", ToolKind.FETCH)],
)
def test_kind_accepts_strings_and_enums(kind: Any, expected: ToolKind) -> None:
    assert define_tool(add, kind=kind, registry=None).kind is expected


def test_bad_kind_and_category_list_valid_values() -> None:
    with pytest.raises(ToolDefinitionError) as info:
        define_tool(add, kind="write", registry=None)
    assert str(info.value) == (
        "add(): unknown kind 'write'; valid values: read, edit, delete, move, search, execute, "
        "fetch, think, other"
    )
    with pytest.raises(
        ToolDefinitionError,
        match=r"^add\(\): unknown category 'web'; valid values: system, file, network",
    ):
        define_tool(add, category="web", registry=None)


def test_can_update_output_defaults() -> None:
    def gen(a: int) -> Iterator[str]:
        yield "x"

    async def agen(a: int) -> AsyncIterator[str]:
        yield "x"

    async def with_ctx(a: int, ctx: ToolContext) -> str:
        return ""

    assert define_tool(add, registry=None).can_update_output is False
    assert define_tool(gen, registry=None).can_update_output is True
    assert define_tool(agen, registry=None).mode == "async_gen"
    assert define_tool(agen, registry=None).can_update_output is True
    made = define_tool(with_ctx, registry=None)
    assert (made.mode, made.context_param, made.can_update_output) == ("async", "ctx", True)
    assert define_tool(gen, can_update_output=False, registry=None).can_update_output is False


def test_require_descriptions() -> None:
    def undocumented(a: int) -> None:
        pass

    def nothing() -> None:
        pass

    with pytest.raises(
        ToolDefinitionError,
        match=r"^test_require_descriptions.<locals>.nothing\(\): has no description",
    ):
        define_tool(nothing, registry=None, require_descriptions=True)
    with pytest.raises(
        ToolDefinitionError, match=r"undocumented\(\): parameter 'a': has no description"
    ):
        define_tool(
            undocumented, description="Described.", registry=None, require_descriptions=True
        )
    assert define_tool(add, registry=None, require_descriptions=True).name == "add"


def test_callable_object_and_partial_names() -> None:
    class Counter:
        """Counts."""

        def __call__(self, n: int) -> int:
            return n

    made = define_tool(Counter(), registry=None)
    assert (made.name, made.description) == ("Counter", "Counts.")
    assert made.source.endswith("test_callable_object_and_partial_names.<locals>.Counter")
    part = define_tool(functools.partial(add, b=5), registry=None)
    assert part.name == "add"
    assert part.validator.validate({"a": 1}, tool="add") == {"a": 1, "b": 5}


# --------------------------------------------------------------------------- raw-schema tools

SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def test_raw_schema_tool() -> None:
    def run(args: dict[str, Any], ctx: ToolContext) -> str:
        """Run a query."""
        return str(args)

    made = define_tool(run, parameters=SCHEMA, registry=None)
    assert (made.arguments_param, made.context_param) == ("args", "ctx")
    assert made.parameters == SCHEMA
    assert made.description == "Run a query."
    assert made.validator.validate('{"q": "x"}', tool="run") == {"q": "x"}


def test_input_config_tool() -> None:
    async def investigate(inputs):  # type: ignore[no-untyped-def]  # annotations are optional here
        return inputs

    made = define_tool(
        investigate,
        description="Investigate the codebase.",
        input_config={"inputs": {"objective": {"type": "string", "required": True}}},
        kind="think",
        registry=None,
    )
    assert (made.arguments_param, made.context_param, made.mode) == ("inputs", None, "async")
    assert made.parameters["required"] == ["objective"]
    assert made.validator.validate({"objective": "o"}, tool="investigate") == {"objective": "o"}


def test_raw_schema_tool_errors() -> None:
    def none() -> None: ...

    def two(args: dict[str, Any], other: int) -> None: ...

    def kw(*, args: dict[str, Any]) -> None: ...

    def ok(args: dict[str, Any], other: int = 0) -> None: ...

    cases: list[tuple[Callable[..., Any], str]] = [
        (none, "a schema-defined tool receives the validated arguments as one dict"),
        (two, "parameter 'other': a schema-defined tool is called with the arguments dict"),
        (kw, "parameter 'args': the arguments dict is passed positionally"),
    ]
    for fn, message in cases:
        with pytest.raises(ToolDefinitionError) as info:
            define_tool(fn, parameters=SCHEMA, registry=None)
        assert message in str(info.value)
        assert f"{fn.__name__}()" in str(info.value)
    assert define_tool(ok, parameters=SCHEMA, registry=None).arguments_param == "args"
    with pytest.raises(
        ToolDefinitionError, match=r"ok\(\): give parameters= or input_config=, not both"
    ):
        define_tool(ok, parameters=SCHEMA, input_config={"inputs": {}}, registry=None)
    with pytest.raises(ToolDefinitionError, match=r"ok\(\): invalid JSON Schema at 'required'"):
        define_tool(ok, parameters={"type": "object", "required": 3}, registry=None)
    with pytest.raises(
        ToolDefinitionError, match=r"ok\(\): input_config: input 'x' has unknown type 'text'"
    ):
        define_tool(ok, input_config={"inputs": {"x": {"type": "text"}}}, registry=None)


# --------------------------------------------------------------------------- misuse


@pytest.mark.parametrize(
    ("target", "message"),
    [
        (42, "a tool must be a function (or a callable object), got int: 42"),
        (Tool, "a tool must be a function (or a callable object), got a class"),
        (None, "define_tool() needs the function"),
    ],
)
def test_not_a_function(target: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        define_tool(target, registry=None)
    assert message in str(info.value)


def test_a_tool_is_not_wrapped_twice() -> None:
    made = define_tool(add, registry=None)
    with pytest.raises(ToolDefinitionError, match=r"'add' is already a Tool; use its .evolve"):
        define_tool(made, registry=None)


def test_decorator_misuse() -> None:
    with pytest.raises(ToolDefinitionError, match=r"use @tool\(name='search'\) to name a tool"):
        tool("search")  # type: ignore[call-overload]
    with pytest.raises(
        ToolDefinitionError, match=r"unknown option\(s\) kindd for @tool; valid: approval,"
    ):
        tool(kindd="read")


def test_lambda_needs_a_name() -> None:
    with pytest.raises(ToolDefinitionError, match=r"'<lambda>' cannot be a tool name; pass name="):
        define_tool(lambda a: a, registry=None)
    with pytest.raises(ToolDefinitionError, match="has no type hint"):
        define_tool(lambda a: a, name="ident", registry=None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"timeout": 0}, "timeout must be a positive number of seconds or None, got 0"),
        ({"timeout": "30"}, "timeout must be a positive number of seconds or None, got '30'"),
        ({"timeout": True}, "got True"),
        (
            {"approval": "maybe"},
            "approval must be 'auto', 'ask', 'deny', a predicate or None, got 'maybe'",
        ),
        ({"preview": "diff"}, "preview must be a callable or None, got str"),
        ({"name": "bad name!"}, "invalid tool name 'bad name!'"),
        ({"groups": ["fs", 3]}, "groups must be non-empty strings, got 3"),
        ({"kind": ["read"]}, "unknown kind ['read']; valid values: read,"),
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        define_tool(add, registry=None, **options)
    assert message in str(info.value)
    assert str(info.value).startswith(("add():", f"{__name__}.add():"))
