"""A tool whose only parameter is a pydantic model: its fields come at the top level, and
arguments wrapped in the parameter's name are read the way pydantic-ai reads them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict
from pydantic_ai._function_schema import function_schema as pydantic_ai_schema
from pydantic_ai.tools import GenerateToolJsonSchema

from kode_nb import Agent, AgentDefinition, Executor, ToolRegistry, register_subagent
from kode_nb.errors import ToolValidationError
from kode_nb.models import ScriptedModel, call
from kode_nb.tools import define_tool


class Query(BaseModel):
    """Count hot days."""

    city: str
    above: float = 30.0


class Loose(BaseModel):
    model_config = ConfigDict(extra="ignore")
    city: str = "Oslo"


class Ambiguous(BaseModel):
    """A model with a field named like the parameter."""

    query: dict[str, int] = {}
    n: int = 1


def hot_days(query: Query) -> str:
    """Count hot days."""
    return f"{query.city} above {query.above:g}"


def loose(query: Loose) -> str:
    """Loose."""
    return query.city


def ambiguous(query: Ambiguous) -> str:
    """Ambiguous."""
    return f"{query.query} {query.n}"


def validate(function: Any, raw: Any) -> Any:
    return define_tool(function, registry=None).validator.validate(raw, tool="t")["query"]


def by_pydantic_ai(function: Any, raw: dict[str, Any]) -> Any:
    schema = pydantic_ai_schema(function, GenerateToolJsonSchema)
    return schema.validator.validate_python(raw)["query"]


@pytest.mark.parametrize(
    "raw",
    [
        {"city": "Rome"},
        {"query": {"city": "Rome"}},
        '{"query": {"city": "Rome"}}',
        b'{"query": {"city": "Rome"}}',
        bytearray(b'{"query": {"city": "Rome"}}'),
        {"query": Query(city="Rome")},
    ],
)
def test_plain_and_wrapped_arguments_give_the_same_model(raw: Any) -> None:
    assert validate(hot_days, raw) == Query(city="Rome")


@pytest.mark.parametrize(
    ("function", "raw"),
    [
        (hot_days, {"city": "Rome", "above": 35}),
        (hot_days, {"query": {"city": "Rome", "above": 35}}),
        (loose, {"query": {"city": "Rome"}}),  # extras ignored, yet the wrapper is read
        (ambiguous, {"query": {"a": 1}}),  # a field of that name: the plain reading wins
        (ambiguous, {"query": {"query": {"a": 1}, "n": 2}}),
        (ambiguous, {"query": {"n": 2}}),
    ],
)
def test_decided_as_pydantic_ai_decides(function: Any, raw: dict[str, Any]) -> None:
    assert validate(function, raw) == by_pydantic_ai(function, raw)


def test_the_schema_is_the_models_own() -> None:
    tool = define_tool(hot_days, registry=None)
    assert set(tool.parameters["properties"]) == {"city", "above"}
    assert tool.parameters["additionalProperties"] is False


@pytest.mark.parametrize(
    "raw",
    [
        {"query": {"city": "Rome"}, "above": 35},  # the wrapper beside a real field
        {"query": "Rome"},  # not an object inside
        '{"query": "Rome"}',
    ],
)
def test_the_parameters_name_otherwise_is_an_error_saying_where_the_fields_go(raw: Any) -> None:
    with pytest.raises(ToolValidationError) as info:
        validate(hot_days, raw)
    (issue,) = [i for i in info.value.issues if i.path == "query"]
    assert issue.message == (
        "unexpected field; this tool's arguments are the fields of Query (`city`, `above`) at "
        "the top level, not inside `query`"
    )


def test_a_bad_wrapped_object_reports_its_own_fields() -> None:
    with pytest.raises(ToolValidationError) as info:
        validate(hot_days, {"query": {"town": "Rome"}})
    assert [(i.path, i.message) for i in info.value.issues] == [
        ("city", "required field is missing"),
        ("town", "unexpected field; allowed fields: city, above"),
    ]


def test_other_unexpected_fields_keep_the_plain_message() -> None:
    with pytest.raises(ToolValidationError) as info:
        validate(hot_days, {"city": "Rome", "days": 3})
    assert [(i.path, i.message) for i in info.value.issues] == [
        ("days", "unexpected field; allowed fields: city, above")
    ]


def test_percent_tool_takes_the_wrapped_form_and_an_instance(kode_ip: Any) -> None:
    kode_ip.user_ns["Query"] = Query
    kode_ip.run_cell_magic(
        "tool",
        "",
        "def hot_days(query: Query) -> str:\n"
        '    """Count hot days."""\n'
        '    return f"{query.city} above {query.above:g}"\n',
    )
    line = 'hot_days {"query": {"city": "Rome", "above": 35}}'
    assert kode_ip.run_line_magic("tool", line).result().text == "Rome above 35"
    kode_ip.user_ns["q"] = Query(city="Oslo")
    assert kode_ip.run_line_magic("tool", "hot_days query=$q").result().text == "Oslo above 30"
    assert kode_ip.run_line_magic("tool", "hot_days city=Bern").result().text == "Bern above 30"


@pytest.mark.anyio
async def test_a_subagents_scripted_wrapped_call_runs_the_tool() -> None:
    class Task(BaseModel):
        city: str

    registry = ToolRegistry()
    define_tool(hot_days, registry=registry)
    child = ScriptedModel([call("hot_days", query={"city": "Rome"}), "Rome: hot."])
    register_subagent(
        AgentDefinition(
            name="weather",
            description="Weather.",
            system_prompt="Weather in {city}",
            input_model=Task,
            tools=["hot_days"],
            model=child,
        ),
        registry=registry,
    )
    parent = ScriptedModel([call("weather", city="Rome"), "Done."])
    result = await Agent(model=parent, tools=["weather"], executor=Executor(registry)).run("go")
    assert result.status == "completed"
    (weather,) = [s for s in result.trace.root.walk() if s.name == "execute_tool weather"]
    assert weather.status == "ok"
    (hot,) = [s for s in result.trace.root.walk() if s.name == "execute_tool hot_days"]
    assert hot.status == "ok"
    assert json.dumps(hot.attributes, default=str).count("Rome above 30") >= 1
