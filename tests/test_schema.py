"""function_schema: JSON Schema per type, descriptions, context injection, modes, the lone model,
definition errors, and argument validation errors."""

from __future__ import annotations

import dataclasses
import functools
import subprocess
import sys
import typing
from collections.abc import AsyncIterator, Callable, Iterator
from enum import Enum, IntEnum
from types import MappingProxyType
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypedDict

from kode_nb.errors import FieldIssue, ToolDefinitionError, ToolValidationError
from kode_nb.tools._schema import FunctionSchema, function_schema
from kode_nb.types import ToolContext

# --------------------------------------------------------------------------- types used below


class Color(Enum):
    RED = "red"
    BLUE = "blue"


class Level(IntEnum):
    LOW = 1
    HIGH = 2


class Item(BaseModel):
    """A line item."""

    name: str
    qty: int = 1


@dataclasses.dataclass
class Point:
    x: float
    y: float = 0.0


class Options(TypedDict):
    verbose: bool


class Cat(BaseModel):
    kind: Literal["cat"]
    meows: int


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: int


class Loose(BaseModel):
    model_config = ConfigDict(extra="allow")
    a: int


class Unsupported:
    pass


class PlainTypedDict(typing.TypedDict):
    a: int


class Node(BaseModel):
    """A tree node."""

    name: str
    children: list[Node] = []

    @model_validator(mode="after")
    def _check(self) -> Node:
        if self.name == "bad":
            raise ValueError("bad is not a name")
        return self


def schema_of(fn: Any, **kw: Any) -> dict[str, Any]:
    return function_schema(fn, **kw).parameters


def props(fn: Any) -> dict[str, Any]:
    return schema_of(fn)["properties"]  # type: ignore[no-any-return]


def issues(fn: Any, raw: Any) -> list[FieldIssue]:
    with pytest.raises(ToolValidationError) as info:
        function_schema(fn).validator.validate(raw, tool="t")
    assert info.value.tool == "t"
    return list(info.value.issues)


# --------------------------------------------------------------------------- schemas


def test_scalars_defaults_and_docstring_descriptions() -> None:
    def search(query: str, limit: int = 10, ratio: float = 0.5, exact: bool = False) -> list[str]:
        """Search the index.

        Args:
            query: What to look for.
            limit: At most this many.
        """
        return []

    fs = function_schema(search)
    assert isinstance(fs, FunctionSchema)
    assert fs.description == "Search the index."
    assert fs.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to look for."},
            "limit": {"type": "integer", "default": 10, "description": "At most this many."},
            "ratio": {"type": "number", "default": 0.5},
            "exact": {"type": "boolean", "default": False},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    assert list(fs.parameters) == ["type", "properties", "required", "additionalProperties"]
    assert fs.param_descriptions == {"query": "What to look for.", "limit": "At most this many."}
    assert fs.context_param is None
    assert fs.mode == "sync"


class Opaque:
    def __repr__(self) -> str:
        return "Opaque()"


def test_default_without_json_form_is_left_out_quietly() -> None:
    marker = Opaque()

    def f(a: int, b: Any = marker) -> None: ...

    fs = function_schema(f)  # no warning (warnings are errors here)
    assert fs.parameters["properties"]["b"] == {}
    assert fs.parameters["required"] == ["a"]
    assert fs.validator.validate({"a": 1}, tool="t") == {"a": 1, "b": marker}
    assert fs.validator.dump({"a": 1, "b": marker}) == {"a": 1, "b": "Opaque()"}


def test_no_parameters() -> None:
    def now() -> str:
        return ""

    assert schema_of(now) == {"type": "object", "properties": {}, "additionalProperties": False}


def test_optional_forms() -> None:
    def f(a: Optional[int], b: int | None = None, c: Union[str, None] = "x") -> None: ...  # noqa: UP045 (the form under test)

    assert props(f) == {
        "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "b": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
        "c": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": "x"},
    }
    assert schema_of(f)["required"] == ["a"]


def test_literal_and_enums() -> None:
    def f(
        mode: Literal["fast", "slow"], color: Color = Color.RED, level: Level = Level.LOW
    ) -> None:
        pass

    schema = schema_of(f)
    assert schema["properties"] == {
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "color": {"$ref": "#/$defs/Color", "default": "red"},
        "level": {"$ref": "#/$defs/Level", "default": 1},
    }
    assert schema["$defs"] == {
        "Color": {"type": "string", "enum": ["red", "blue"]},
        "Level": {"type": "integer", "enum": [1, 2]},
    }
    validated = function_schema(f).validator.validate('{"mode": "fast", "color": "blue"}', tool="t")
    assert validated == {"mode": "fast", "color": Color.BLUE, "level": Level.LOW}


def test_nested_model_dataclass_and_typeddict_keep_defs_without_titles() -> None:
    def f(items: list[Item], point: Point, options: Options | None = None) -> None: ...

    schema = schema_of(f)
    assert schema["properties"] == {
        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
        "point": {"$ref": "#/$defs/Point"},
        "options": {"anyOf": [{"$ref": "#/$defs/Options"}, {"type": "null"}], "default": None},
    }
    assert schema["$defs"] == {
        "Item": {
            "type": "object",
            "description": "A line item.",
            "properties": {"name": {"type": "string"}, "qty": {"type": "integer", "default": 1}},
            "required": ["name"],
        },
        # stdlib dataclasses and TypedDicts take the arguments model's config: extra="forbid"
        "Point": {
            "type": "object",
            "properties": {"x": {"type": "number"}, "y": {"type": "number", "default": 0.0}},
            "required": ["x"],
            "additionalProperties": False,
        },
        "Options": {
            "type": "object",
            "properties": {"verbose": {"type": "boolean"}},
            "required": ["verbose"],
            "additionalProperties": False,
        },
    }
    validated = function_schema(f).validator.validate(
        '{"items": [{"name": "a"}], "point": {"x": 1}, "options": {"verbose": true}}', tool="t"
    )
    assert validated == {
        "items": [Item(name="a")],
        "point": Point(x=1.0),
        "options": {"verbose": True},
    }
    assert isinstance(validated["items"][0], Item)


def test_containers() -> None:
    def f(
        tags: list[str],
        counts: dict[str, int],
        pair: tuple[int, str],
        unique: set[str] = set(),  # noqa: B006
    ) -> None: ...

    assert props(f) == {
        "tags": {"type": "array", "items": {"type": "string"}},
        "counts": {"type": "object", "additionalProperties": {"type": "integer"}},
        "pair": {
            "type": "array",
            "prefixItems": [{"type": "integer"}, {"type": "string"}],
            "minItems": 2,
            "maxItems": 2,
        },
        "unique": {
            "type": "array",
            "items": {"type": "string"},
            "uniqueItems": True,
            "default": [],
        },
    }


def test_annotated_field_description_wins_and_constraints() -> None:
    def f(
        n: Annotated[int, Field(ge=1, le=10, description="from Field")],
        s: Annotated[str, Field(min_length=2)] = "ab",
        m: int = Field(3, ge=0, description="field default"),
    ) -> None:
        """F.

        Args:
            n: from the docstring (loses).
            s: from the docstring.
        """

    assert props(f) == {
        "n": {"type": "integer", "minimum": 1, "maximum": 10, "description": "from Field"},
        "s": {
            "type": "string",
            "minLength": 2,
            "default": "ab",
            "description": "from the docstring.",
        },
        "m": {"type": "integer", "minimum": 0, "default": 3, "description": "field default"},
    }
    assert function_schema(f).validator.validate({"n": 2}, tool="t") == {"n": 2, "s": "ab", "m": 3}


def test_explicit_titles_are_kept_auto_titles_dropped() -> None:
    def f(a: Annotated[int, Field(title="The A")], b: int) -> None: ...

    assert props(f) == {"a": {"type": "integer", "title": "The A"}, "b": {"type": "integer"}}


def test_names_that_clash_with_basemodel_attributes() -> None:
    def f(
        json: str,
        schema: int,
        copy: bool,
        model_config: str,
        model_fields: int,
        validate: str,
        dict: int,
        _x: int = 0,
    ) -> None: ...

    fs = function_schema(f)  # warnings are errors in this test run: none may be emitted
    assert list(fs.parameters["properties"]) == [
        "json", "schema", "copy", "model_config", "model_fields", "validate", "dict", "_x",
    ]  # fmt: skip
    raw = '{"json": "j", "schema": 1, "copy": true, "model_config": "m", "model_fields": 2, "validate": "v", "dict": 3, "_x": 4}'
    assert fs.validator.validate(raw, tool="t") == {
        "json": "j", "schema": 1, "copy": True, "model_config": "m",
        "model_fields": 2, "validate": "v", "dict": 3, "_x": 4,
    }  # fmt: skip


def test_internal_field_names_are_not_accepted() -> None:
    def f(a: int) -> None: ...

    assert [i.path for i in issues(f, {"p0": 1})] == ["a", "p0"]


# --------------------------------------------------------------------------- context and modes


def test_context_param_is_injected_not_in_schema() -> None:
    def f(query: str, ctx: ToolContext) -> None: ...

    fs = function_schema(f)
    assert fs.context_param == "ctx"
    assert list(fs.parameters["properties"]) == ["query"]
    assert fs.validator.validate({"query": "q"}, tool="t") == {"query": "q"}


@pytest.mark.parametrize(
    "annotation", ["ToolContext | None", "Optional[ToolContext]", "Annotated[ToolContext, 'x']"]
)
def test_context_param_forms(annotation: str) -> None:
    namespace: dict[str, Any] = {}
    exec(
        f"def f(c: {annotation}, a: int) -> None: ...",
        {"ToolContext": ToolContext, "Optional": Optional, "Annotated": Annotated},
        namespace,
    )
    fs = function_schema(namespace["f"])
    assert fs.context_param == "c"
    assert list(fs.parameters["properties"]) == ["a"]


def test_two_context_params_is_an_error() -> None:
    def f(a: ToolContext, b: ToolContext) -> None: ...

    with pytest.raises(
        ToolDefinitionError, match=r"f\(\): parameter 'b': only one parameter"
    ) as info:
        function_schema(f)
    assert info.value.parameter == "b"


def test_modes() -> None:
    def sync(a: int) -> int:
        return a

    async def coro(a: int) -> int:
        return a

    async def agen(a: int) -> AsyncIterator[int]:
        yield a

    def gen(a: int) -> Iterator[int]:
        yield a

    assert [function_schema(f).mode for f in (sync, coro, agen, gen)] == [
        "sync",
        "async",
        "async_gen",
        "gen",
    ]


class Searcher:
    """Searches."""

    def search(self, query: str) -> str:
        """Search.

        Args:
            query: The query.
        """
        return query

    async def __call__(self, text: str, limit: int = 1) -> str:
        return text


def test_bound_method_partial_and_callable_object() -> None:
    method = function_schema(Searcher().search)
    assert method.parameters["properties"] == {
        "query": {"type": "string", "description": "The query."}
    }
    assert method.description == "Search."

    def f(a: int, b: str, c: bool = False) -> None:
        """Partial."""

    part = function_schema(functools.partial(f, 1, c=True))
    assert part.parameters["properties"] == {
        "b": {"type": "string"},
        "c": {"type": "boolean", "default": True},
    }
    assert part.description == "Partial."

    obj = function_schema(Searcher())
    assert obj.mode == "async"
    assert list(obj.parameters["properties"]) == ["text", "limit"]


# --------------------------------------------------------------------------- the lone model


def test_lone_model_is_the_whole_schema() -> None:
    def add_item(item: Item, ctx: ToolContext) -> None: ...

    fs = function_schema(add_item)
    assert fs.parameters == {
        "type": "object",
        "properties": {"name": {"type": "string"}, "qty": {"type": "integer", "default": 1}},
        "required": ["name"],
        "additionalProperties": False,
    }
    assert fs.description == "A line item."  # no docstring on the function: the model's
    assert fs.context_param == "ctx"
    validated = fs.validator.validate('{"name": "x", "qty": 2}', tool="t")
    assert validated == {"item": Item(name="x", qty=2)}
    assert isinstance(validated["item"], Item)
    assert fs.validator.dump(validated) == {"name": "x", "qty": 2}
    [issue] = issues(add_item, {"name": "x", "extra": 1})
    assert issue.path == "extra"
    assert issue.message == "unexpected field; allowed fields: name, qty"


def test_lone_model_with_extra_allowed_keeps_its_config() -> None:
    def f(payload: Loose) -> None:
        """Uses a loose model."""

    fs = function_schema(f)
    assert fs.parameters["additionalProperties"] is True
    assert fs.description == "Uses a loose model."
    assert fs.validator.validate({"a": 1, "b": 2}, tool="t")["payload"].model_extra == {"b": 2}


def test_recursive_lone_model_and_model_validator_errors() -> None:
    def f(node: Node) -> None: ...

    fs = function_schema(f)
    assert fs.parameters["properties"]["children"] == {
        "type": "array",
        "items": {"$ref": "#/$defs/Node"},
        "default": [],
    }
    assert fs.parameters["additionalProperties"] is False
    assert "additionalProperties" not in fs.parameters["$defs"]["Node"]  # nested: the model's own
    validated = fs.validator.validate({"name": "a", "children": [{"name": "b", "x": 1}]}, tool="t")
    assert validated == {"node": Node(name="a", children=[Node(name="b")])}
    assert issues(f, {"name": "bad"}) == [
        FieldIssue(
            path="", message="bad is not a name", expected="object", received={"name": "bad"}
        )
    ]


def test_lone_model_unknown_keys_reported_with_other_problems() -> None:
    def f(item: Item) -> None: ...

    assert issues(f, '{"qty": "x", "colour": "red"}') == [
        FieldIssue(
            path="name", message="required field is missing", expected="string", missing=True
        ),
        FieldIssue(path="qty", message="expected integer", expected="integer", received="x"),
        FieldIssue(
            path="colour", message="unexpected field; allowed fields: name, qty", received="red"
        ),
    ]


def test_model_next_to_other_params_is_nested() -> None:
    def f(item: Item, note: str) -> None: ...

    assert props(f) == {"item": {"$ref": "#/$defs/Item"}, "note": {"type": "string"}}


# --------------------------------------------------------------------------- definition errors


def test_missing_type_hint() -> None:
    def f(query, limit: int) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(ToolDefinitionError) as info:
        function_schema(f)
    assert (
        str(info.value)
        == "test_missing_type_hint.<locals>.f(): parameter 'query': has no type hint; annotate it, e.g. `query: str`"
    )
    assert (info.value.function, info.value.parameter) == (
        "test_missing_type_hint.<locals>.f",
        "query",
    )


def test_unsupported_type_names_the_parameter() -> None:
    def f(a: int, thing: Unsupported) -> None: ...

    with pytest.raises(
        ToolDefinitionError, match=r"f\(\): parameter 'thing': unsupported type Unsupported"
    ) as info:
        function_schema(f)
    assert "Unable to generate pydantic-core schema" in str(info.value)
    assert "arbitrary_types_allowed" not in str(info.value)


def test_type_without_json_schema_names_the_parameter() -> None:
    def f(a: int, callback: Callable[[int], int]) -> None: ...

    with pytest.raises(ToolDefinitionError, match=r"parameter 'callback': unsupported type"):
        function_schema(f)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic supports it on 3.12+")
def test_python_typing_typeddict_is_rejected_clearly() -> None:
    def f(p: PlainTypedDict) -> None: ...

    with pytest.raises(
        ToolDefinitionError, match=r"parameter 'p': unsupported type .*typing_extensions"
    ):
        function_schema(f)


@pytest.mark.parametrize(
    ("source", "param", "fragment"),
    [
        (
            "def f(a: int, *rest: str) -> None: ...",
            "rest",
            "*rest is not supported: take a list instead, e.g. `rest: list[str]`",
        ),
        ("def f(a: int, **extra: str) -> None: ...", "extra", "**extra is not supported"),
        (
            "def f(a: int, /, b: int) -> None: ...",
            "a",
            "positional-only parameters are not supported",
        ),
        ("def f(a: 'Nope') -> None: ...", "a", "cannot resolve its type hint 'Nope' (NameError"),
        (
            "def f(a: list['Nope']) -> None: ...",
            "a",
            "cannot resolve its type hint list['Nope']: name 'Nope' is not defined",
        ),
    ],
)
def test_bad_signatures(source: str, param: str, fragment: str) -> None:
    namespace: dict[str, Any] = {}
    exec(source, namespace)
    with pytest.raises(ToolDefinitionError) as info:
        function_schema(namespace["f"])
    assert str(info.value).startswith(f"f(): parameter '{param}': ")
    assert fragment in str(info.value)


def test_unresolvable_return_annotation_is_fine() -> None:
    namespace: dict[str, Any] = {}
    exec("def f(a: int) -> 'Missing': ...", namespace)
    assert list(props(namespace["f"])) == ["a"]


def test_require_descriptions() -> None:
    def f(a: int, b: Annotated[int, Field(description="B.")], c: int) -> None:
        """F.

        Args:
            a: The a.
        """

    with pytest.raises(ToolDefinitionError, match=r"f\(\): parameter 'c': has no description"):
        function_schema(f, require_descriptions=True)
    assert function_schema(f).param_descriptions == {"a": "The a.", "b": "B."}


@pytest.mark.parametrize(
    ("value", "what"), [(3, "got int: 3"), ("text", "got str"), (Item, "got a class")]
)
def test_not_a_function(value: object, what: str) -> None:
    with pytest.raises(ToolDefinitionError, match="a tool must be a function") as info:
        function_schema(value)  # type: ignore[arg-type]
    assert what in str(info.value)


def test_name_is_used_in_errors() -> None:
    def f(a) -> None:  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(ToolDefinitionError, match=r"^my_tool\(\): parameter 'a'"):
        function_schema(f, name="my_tool")


# --------------------------------------------------------------------------- validation


def order(items: list[Item], count: int, color: Color = Color.RED, note: str | None = None) -> None:
    pass


def test_validation_issue_paths_expected_and_received() -> None:
    raw = '{"items": [{"name": "a"}, {"name": 1}, {"qty": 2}], "count": "many", "color": "green", "zz": 1}'
    assert issues(order, raw) == [
        FieldIssue(path="items.1.name", message="expected string", expected="string", received=1),
        FieldIssue(
            path="items.2.name",
            message="required field is missing",
            expected="string",
            missing=True,
        ),
        FieldIssue(path="count", message="expected integer", expected="integer", received="many"),
        FieldIssue(
            path="color",
            message="expected 'red' or 'blue'",
            expected="'red' or 'blue'",
            received="green",
        ),
        FieldIssue(
            path="zz",
            message="unexpected field; allowed fields: items, count, color, note",
            received=1,
        ),
    ]


def test_missing_top_level_fields_say_expected_type() -> None:
    assert issues(order, "{}") == [
        FieldIssue(
            path="items", message="required field is missing", expected="array", missing=True
        ),
        FieldIssue(
            path="count", message="required field is missing", expected="integer", missing=True
        ),
    ]


def test_error_message_rendering() -> None:
    with pytest.raises(ToolValidationError) as info:
        function_schema(order).validator.validate({"items": [], "count": [1]}, tool="order")
    assert info.value.message == (
        "Invalid arguments for tool 'order':\n"
        "- `count`: expected integer; received [1] (array)\n"
        "Fix these arguments and call the tool again."
    )


def test_constraint_errors() -> None:
    def f(n: Annotated[int, Field(ge=1)], s: Annotated[str, Field(max_length=2)] = "") -> None: ...

    assert issues(f, {"n": 0, "s": "abc"}) == [
        FieldIssue(
            path="n", message="should be greater than or equal to 1", expected=">= 1", received=0
        ),
        FieldIssue(
            path="s",
            message="should have at most 2 characters",
            expected="at most 2 characters",
            received="abc",
        ),
    ]


def test_union_failures_are_one_issue() -> None:
    def f(value: int | list[str]) -> None: ...

    assert issues(f, {"value": "x"}) == [
        FieldIssue(
            path="value",
            message="expected integer or array",
            expected="integer or array",
            received="x",
        )
    ]


def test_discriminated_union_paths_skip_the_tag() -> None:
    def f(pet: Annotated[Union[Cat, Dog], Field(discriminator="kind")]) -> None: ...

    assert issues(f, {"pet": {"kind": "dog", "barks": "loud"}}) == [
        FieldIssue(
            path="pet.barks", message="expected integer", expected="integer", received="loud"
        )
    ]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("[1, 2]", "arguments must be a JSON object of named arguments, not an array"),
        ("3", "arguments must be a JSON object of named arguments, not an integer"),
        ('"text"', "arguments must be a JSON object of named arguments, not a string"),
        (
            "{bad",
            "arguments must be a JSON object, but the text is not valid JSON (key must be a string",
        ),
        (b"[]", "arguments must be a JSON object of named arguments, not an array"),
        ([1], "arguments must be a JSON object of named arguments, not an array"),
        (7, "arguments must be a JSON object of named arguments, not an integer"),
    ],
)
def test_arguments_that_are_not_an_object(raw: Any, message: str) -> None:
    def f(a: int = 0) -> None: ...

    [issue] = issues(f, raw)
    assert issue.path == ""
    assert issue.message.startswith(message)
    assert issue.expected == "object"


@pytest.mark.parametrize("raw", [None, "", "  \n", b"", "{}", {}, MappingProxyType({})])
def test_empty_arguments_mean_no_arguments(raw: Any) -> None:
    def f(a: int = 5) -> None: ...

    assert function_schema(f).validator.validate(raw, tool="t") == {"a": 5}


def test_bytes_and_mapping_inputs() -> None:
    validator = function_schema(order).validator
    expected = {"items": [], "count": 2, "color": Color.RED, "note": None}
    assert validator.validate(b'{"items": [], "count": 2}', tool="t") == expected
    assert validator.validate(MappingProxyType({"items": [], "count": 2}), tool="t") == expected


def test_lax_coercion_of_numeric_strings() -> None:
    def f(n: int, x: float) -> None: ...

    assert function_schema(f).validator.validate('{"n": "3", "x": 2}', tool="t") == {
        "n": 3,
        "x": 2.0,
    }


def test_dump_is_json_shaped_by_argument_name() -> None:
    def f(
        items: list[Item], color: Color, pair: tuple[int, str], tags: set[str], json: Point
    ) -> None: ...

    validator = function_schema(f).validator
    validated = validator.validate(
        '{"items": [{"name": "a"}], "color": "blue", "pair": [1, "x"], "tags": ["t"], "json": {"x": 1}}',
        tool="t",
    )
    assert validator.dump(validated) == {
        "items": [{"name": "a", "qty": 1}],
        "color": "blue",
        "pair": [1, "x"],
        "tags": ["t"],
        "json": {"x": 1.0, "y": 0.0},
    }


def test_validator_exposes_its_schema() -> None:
    fs = function_schema(order)
    assert fs.validator.schema is fs.parameters


def test_importing_schema_and_defining_does_not_import_jsonschema() -> None:
    code = (
        "import sys\n"
        "from kode_nb.tools._schema import function_schema\n"
        "def f(a: int) -> int: return a\n"
        "function_schema(f).validator.validate('{\"a\": 1}', tool='f')\n"
        "assert 'jsonschema' not in sys.modules, 'jsonschema was imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
