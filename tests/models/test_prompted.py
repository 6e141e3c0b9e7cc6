"""The prompted tool-calling forms: the tools in plain words, and the schema only a call fits."""

from __future__ import annotations

from typing import Literal

import jsonschema
import pytest
from pydantic import BaseModel

from kode_nb import ToolRegistry, define_tool, use_registry
from kode_nb.models import ToolSpec
from kode_nb.models._prompted import call_schema, plain_tools_prompt, tools_prompt


class Place(BaseModel):
    city: str
    country: str = "FR"


def specs() -> list[ToolSpec]:
    def add(a: int, b: int) -> str:
        """Add two integers exactly.

        Args:
            a: The first integer.
            b: The second integer.
        """
        return str(a + b)

    def forecast(place: Place, days: list[int], unit: Literal["C", "F"] = "C") -> str:
        """Forecast the weather
        for some days.

        Args:
            place: Where.
            days: Which days ahead.
            unit: Degrees unit.
        """
        return "foggy"

    with use_registry(ToolRegistry()) as registry:
        define_tool(add, inline=True)
        define_tool(forecast, inline=True)
        return [ToolSpec.from_tool(registry.get(n)) for n in ("add", "forecast")]


def test_the_plain_form_names_each_argument_its_type_and_whether_it_is_required() -> None:
    text = plain_tools_prompt(specs())
    lines = text.splitlines()
    assert lines[0] == "# Tools"
    assert "- add: Add two integers exactly." in lines
    assert "    a (integer, required): The first integer." in lines
    assert "- forecast: Forecast the weather for some days." in lines  # one line
    assert "    days (list of integer, required): Which days ahead." in lines
    assert "    unit (one of: C, F, optional): Degrees unit." in lines
    assert any(line.startswith("    place (object, required)") for line in lines)
    assert not set(text) & set("\"'<>&")  # nothing a template would HTML-escape


def test_the_hermes_form_is_json_inside_tools_tags() -> None:
    text = tools_prompt(specs())
    assert '"name": "add"' in text
    assert "<tools>" in text
    assert "<tool_call>" in text


@pytest.mark.parametrize(
    ("answer", "fits"),
    [
        ({"name": "add", "arguments": {"a": 1, "b": 2}}, True),
        ({"name": "forecast", "arguments": {"place": {"city": "Paris"}, "days": [1]}}, True),
        ({"name": "add", "arguments": {"a": 1}}, False),  # an argument missing
        ({"name": "add", "arguments": {"a": "1", "b": 2}}, False),  # a wrong type
        ({"name": "mul", "arguments": {"a": 1, "b": 2}}, False),  # no such tool
        ({"name": "forecast", "arguments": {"place": {}, "days": [1]}}, False),  # $ref resolved
        # what small models write without it: the schema itself as the arguments
        ({"name": "add", "arguments": specs()[0].parameters}, False),
        ({"type": "object", "properties": {}}, False),
    ],
)
def test_only_a_call_to_an_offered_tool_with_fitting_arguments_fits_the_schema(
    answer: dict[str, object], fits: bool
) -> None:
    schema = call_schema(specs())
    assert schema is not None
    valid = jsonschema.Draft202012Validator(schema).is_valid(answer)
    assert valid is fits


def test_one_tool_needs_no_union_and_conflicting_definitions_give_no_schema() -> None:
    add, forecast = specs()
    assert call_schema([add])["properties"]["name"] == {"const": "add"}  # type: ignore[index]
    other = ToolSpec(
        name="other",
        description="",
        parameters={"type": "object", "properties": {"p": {"$ref": "#/$defs/Place"}},
                    "$defs": {"Place": {"type": "string"}}},
    )  # fmt: skip
    assert "$defs" in forecast.parameters  # so the two tools' "Place" differ
    assert call_schema([forecast, other]) is None


def test_without_a_schema_the_plain_form_spells_out_the_calls_keys() -> None:
    """llama-cpp-python, several tools: the answer is constrained by a schema, so the prompt
    need not spell out the call's form; when two tools' definitions clash there is none, and
    the prompt names the two keys instead (still nothing its template would escape)."""
    from kode_nb.models import ModelRequest, OpenAIChatModel
    from kode_nb.models.base import UserMessage

    add, forecast = specs()
    other = ToolSpec(
        name="other", description="Other.",
        parameters={"type": "object", "properties": {"p": {"$ref": "#/$defs/Place"}},
                    "$defs": {"Place": {"type": "string"}}},
    )  # fmt: skip
    model = OpenAIChatModel(
        "m", base_url="http://127.0.0.1:9/v1", api_key_env=None, profile="llama-cpp-python"
    )
    constrained = model.request_body(
        ModelRequest(
            system="Be brief.", messages=(UserMessage(content="Hi."),), tools=(add, forecast)
        )
    )
    assert "response_format" in constrained
    assert "exactly two keys" not in constrained["messages"][0]["content"]
    free = model.request_body(
        ModelRequest(
            system="Be brief.", messages=(UserMessage(content="Hi."),), tools=(forecast, other)
        )
    )
    assert "response_format" not in free
    system = free["messages"][0]["content"]
    assert "exactly two keys: name, holding the function's name" in system
    assert not set(system.split("# Tools")[1]) & set('"<>&')
