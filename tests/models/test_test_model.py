"""TestModel and its schema-driven argument generator: every generated call validates."""

from __future__ import annotations

import datetime
import enum
import json
import random
import uuid
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

import kode_nb
from kode_nb.errors import ToolValidationError
from kode_nb.models import (
    AssistantMessage,
    ModelError,
    ModelRequest,
    TestModel,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
    collect,
    generate_arguments,
)
from kode_nb.models._generate import SchemaGenerationError, generate_value
from kode_nb.tools import Tool, ToolRegistry
from kode_nb.tools._raw_schema import schema_validator
from kode_nb.types import TextBlock

pytestmark = pytest.mark.anyio
SEEDS = range(60)


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: int = Field(ge=-5, le=5)
    y: float = Field(gt=0, lt=1)


class Tree(BaseModel):
    label: str
    color: Color
    children: list[Tree] = []
    anchor: Point | None = None


def scalars(
    name: Annotated[str, Field(min_length=3, max_length=5)],
    count: Annotated[int, Field(gt=10, le=12)],
    ratio: Annotated[float, Field(ge=0.5, le=0.75)],
    step: Annotated[int, Field(multiple_of=7, ge=1, le=30)],
    flag: bool,
    mode: Literal["fast", "slow"] = "fast",
    code: Annotated[str, Field(pattern=r"^[A-Z]{2}-\d{3}$")] = "AB-123",
) -> str:
    """Scalars with constraints."""
    return name


def containers(
    tags: Annotated[list[str], Field(min_length=2, max_length=4)],
    scores: dict[str, int],
    pair: tuple[int, str],
    unique: Annotated[set[int], Field(min_length=3)],
    maybe: list[Point] | None = None,
) -> str:
    """Containers."""
    return "ok"


def nested(tree: Tree, when: datetime.date, at: datetime.datetime, ident: uuid.UUID) -> str:
    """Nested models, enums and formats."""
    return tree.label


def _tools(registry: ToolRegistry) -> list[Tool]:
    for fn in (scalars, containers, nested):
        kode_nb.define_tool(fn, registry=registry)
    return registry.list()


def test_generated_arguments_validate_for_function_tools(registry: ToolRegistry) -> None:
    for tool in _tools(registry):
        spec = ToolSpec.from_tool(tool)
        for seed in SEEDS:
            args = generate_arguments(spec, seed=seed)
            try:
                tool.validator.validate(json.dumps(args), tool=tool.name)
            except ToolValidationError as exc:  # pragma: no cover - the failure message
                pytest.fail(f"seed {seed}: {json.dumps(args)}\n{exc}")


RAW_SCHEMAS: list[dict[str, Any]] = [
    {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 3},
            "x": {"type": "number", "multipleOf": 0.25, "minimum": 1, "maximum": 2},
            "s": {"type": ["string", "null"], "enum": ["a", "b", None]},
            "c": {"const": "fixed"},
            "free": {},
            "t": {
                "type": "array",
                "prefixItems": [{"type": "integer"}, {"type": "boolean"}],
                "items": False,
            },
            "u": {
                "type": "array",
                "items": {"enum": [1, 2, 3]},
                "uniqueItems": True,
                "minItems": 3,
            },
            "m": {
                "allOf": [
                    {"$ref": "#/$defs/base"},
                    {"required": ["extra"], "properties": {"extra": {"type": "null"}}},
                ]
            },
            "o": {
                "oneOf": [{"type": "string", "format": "email"}, {"type": "integer", "maximum": -1}]
            },
            "p": {"type": "string", "pattern": "^(cat|dog)s?$"},
            "obj": {
                "type": "object",
                "minProperties": 2,
                "additionalProperties": {"type": "boolean"},
            },
        },
        "required": ["n", "x", "s", "c", "free", "t", "u", "m", "o", "p", "obj"],
        "additionalProperties": False,
        "$defs": {
            "base": {
                "type": "object",
                "properties": {"id": {"type": "integer"}},
                "required": ["id"],
            },
            "list": {
                "type": "object",
                "properties": {"head": {"type": "integer"}, "tail": {"$ref": "#/$defs/list"}},
                "required": ["head", "tail"],
            },
        },
    },
    {  # a recursive structure that must end: tail is required but may be null
        "type": "object",
        "properties": {"list": {"$ref": "#/$defs/node"}},
        "required": ["list"],
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "v": {"type": "integer"},
                    "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]},
                },
                "required": ["v", "next"],
            }
        },
    },
]


@pytest.mark.parametrize("schema", RAW_SCHEMAS)
def test_generated_arguments_validate_for_raw_schemas(schema: dict[str, Any]) -> None:
    validator = schema_validator(schema)
    spec = ToolSpec(name="raw", description="", parameters=schema)
    for seed in SEEDS:
        args = generate_arguments(spec, seed=seed)
        validator.validate(args, tool="raw")


def test_generation_is_deterministic_per_seed(registry: ToolRegistry) -> None:
    spec = ToolSpec.from_tool(_tools(registry)[0])
    assert generate_arguments(spec, seed=3) == generate_arguments(spec, seed=3)
    assert len({json.dumps(generate_arguments(spec, seed=s)) for s in range(10)}) > 5


@pytest.mark.parametrize(
    ("schema", "match"),
    [
        ({"type": "object", "properties": {"a": False}, "required": ["a"]}, "no value satisfies"),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "integer", "minimum": 5, "maximum": 1}},
                "required": ["a"],
            },
            "no number fits",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "#/$defs/missing"}}, "required": ["a"]},
            "points at nothing",
        ),
        (
            {"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}, "required": ["a"]},
            "only local",
        ),
        ({"type": "string"}, "does not describe an object"),
    ],
)
def test_impossible_schemas_are_reported(schema: dict[str, Any], match: str) -> None:
    spec = ToolSpec(name="bad", description="", parameters=schema)
    with pytest.raises(
        ModelError, match=f"TestModel cannot generate arguments for tool 'bad'.*{match}"
    ):
        generate_arguments(spec)
    with pytest.raises(SchemaGenerationError):
        generate_value(schema, random.Random(0)) if match != "does not describe an object" else (
            generate_value(False, random.Random(0))
        )


def _conversation(*messages: Any, tools: tuple[ToolSpec, ...]) -> ModelRequest:
    return ModelRequest(system="", messages=(UserMessage(content="go"), *messages), tools=tools)


async def test_calls_every_tool_then_summarizes(registry: ToolRegistry) -> None:
    specs = tuple(ToolSpec.from_tool(t) for t in _tools(registry))
    model = TestModel(seed=1)
    first = await collect(model.stream(_conversation(tools=specs)))
    assert [c.name for c in first.tool_calls] == ["containers", "nested", "scalars"]
    assert first.stop_reason == "tool_calls"
    assert len({c.id for c in first.tool_calls}) == 3
    for c, tool in zip(first.tool_calls, registry.list(), strict=True):
        tool.validator.validate(c.arguments, tool=tool.name)

    results = (
        ToolResultMessage(
            call_id=first.tool_calls[0].id, name="containers", content=(TextBlock(text="ok"),)
        ),
        ToolResultMessage(
            call_id=first.tool_calls[1].id,
            name="nested",
            content=(TextBlock(text="boom\nline 2"),),
            is_error=True,
        ),
    )
    second = await collect(model.stream(_conversation(first.to_message(), *results, tools=specs)))
    assert second.stop_reason == "end_turn"
    lines = second.text.splitlines()
    assert lines[0] == "Called 3 tool call(s):"
    assert lines[1] == f"- containers({first.tool_calls[0].arguments}) -> ok"
    assert lines[2].endswith("-> error: boom line 2")
    assert lines[3].endswith("-> no result")

    # a new user message starts a new round of calls
    again = _conversation(
        first.to_message(), *results, AssistantMessage(text=second.text), tools=specs
    )
    again = ModelRequest(
        system="", messages=(*again.messages, UserMessage(content="again")), tools=specs
    )
    assert (await collect(model.stream(again))).tool_calls


async def test_allowlist_calls_per_tool_and_custom_text(registry: ToolRegistry) -> None:
    specs = tuple(ToolSpec.from_tool(t) for t in _tools(registry))
    model = TestModel(tools=["scalars", "not_offered"], calls_per_tool=2, text="Done.")
    first = await collect(model.stream(_conversation(tools=specs)))
    assert [c.name for c in first.tool_calls] == ["scalars", "scalars"]
    assert first.tool_calls[0].arguments != first.tool_calls[1].arguments
    second = await collect(model.stream(_conversation(first.to_message(), tools=specs)))
    assert second.text == "Done."


async def test_without_tools_it_just_answers() -> None:
    for model, req_tools in (
        (TestModel(), ()),
        (
            TestModel(calls_per_tool=0),
            (ToolSpec(name="t", description="", parameters={"type": "object"}),),
        ),
    ):
        response = await collect(model.stream(_conversation(tools=req_tools)))
        assert response.text == "No tools were called."
        assert response.tool_calls == ()


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="calls_per_tool must be an integer >= 0"):
        TestModel(calls_per_tool=-1)
    with pytest.raises(TypeError, match="list of tool names"):
        TestModel(tools="add")


async def test_a_loop_through_the_executor_runs_every_generated_call(
    registry: ToolRegistry,
) -> None:
    from kode_nb.execution import Executor, ToolCall
    from kode_nb.policy import Policy

    tools = _tools(registry)
    specs = tuple(ToolSpec.from_tool(t) for t in tools)
    executor = Executor(registry, policy=Policy(approval_mode="auto"))
    model = TestModel(seed=5)
    messages: list[Any] = [UserMessage(content="try everything")]
    for _ in range(3):
        req = ModelRequest(system="", messages=tuple(messages), tools=specs)
        response = await collect(model.stream(req))
        messages.append(response.to_message())
        if not response.tool_calls:
            break
        results = await executor.call_many(
            [
                ToolCall(name=c.name, arguments=c.arguments, call_id=c.id)
                for c in response.tool_calls
            ]
        )
        assert [r.status for r in results] == ["ok", "ok", "ok"]
        messages.extend(
            ToolResultMessage(call_id=c.id, name=c.name, content=r.content, is_error=r.is_error)
            for c, r in zip(response.tool_calls, results, strict=True)
        )
    assert len(messages) == 6  # user, calls, 3 results, summary
    assert messages[-1].text.startswith("Called 3 tool call(s):")
    assert "error:" not in messages[-1].text
