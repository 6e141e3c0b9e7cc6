"""Raw JSON Schema tools (jsonschema) and inputConfig tools."""

from __future__ import annotations

import subprocess
import sys
from types import MappingProxyType
from typing import Any

import pytest

from kode_nb.errors import FieldIssue, ToolDefinitionError, ToolValidationError
from kode_nb.tools._raw_schema import input_config_schema, input_config_validator, schema_validator

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "A file."},
        "mode": {"enum": ["r", "w"], "default": "r"},
        "limit": {"type": "integer", "minimum": 1, "default": 10},
        "tags": {"type": "array", "items": {"type": "string"}},
        "owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
            "additionalProperties": False,
        },
        "either": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
    },
    "required": ["path"],
    "additionalProperties": False,
}


def raw_issues(validator: Any, raw: Any) -> list[FieldIssue]:
    with pytest.raises(ToolValidationError) as info:
        validator.validate(raw, tool="raw")
    return list(info.value.issues)


# --------------------------------------------------------------------------- raw JSON Schema


def test_valid_arguments_get_top_level_defaults() -> None:
    validator = schema_validator(SCHEMA)
    assert validator.schema == SCHEMA
    assert validator.validate('{"path": "a.txt", "tags": ["x"]}', tool="raw") == {
        "path": "a.txt",
        "tags": ["x"],
        "mode": "r",
        "limit": 10,
    }
    assert validator.validate(MappingProxyType({"path": "p", "limit": 2}), tool="raw") == {
        "path": "p",
        "limit": 2,
        "mode": "r",
    }


def test_schema_is_copied() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"a": {"type": "integer", "default": [1]}},
    }
    validator = schema_validator(schema)
    schema["properties"]["a"]["type"] = "string"
    first = validator.validate(None, tool="raw")
    first["a"].append(2)  # the default is copied per call, too
    assert validator.validate("", tool="raw") == {"a": [1]}
    assert validator.schema["properties"]["a"]["type"] == "integer"


def test_issues_per_field() -> None:
    validator = schema_validator(SCHEMA)
    raw = '{"mode": "x", "limit": 0, "tags": ["ok", 3], "owner": {"nick": "n"}, "either": "s", "zz": 1}'
    assert raw_issues(validator, raw) == [
        FieldIssue(
            path="either",
            message="'s' is not valid under any of the given schemas",
            expected="integer or boolean",
            received="s",
        ),
        FieldIssue(
            path="limit",
            message="0 is less than the minimum of 1",
            expected="minimum 1",
            received=0,
        ),
        FieldIssue(
            path="mode",
            message='expected one of "r", "w"',
            expected='one of "r", "w"',
            received="x",
        ),
        FieldIssue(
            path="owner.name", message="required field is missing", expected="string", missing=True
        ),
        FieldIssue(
            path="owner.nick", message="unexpected field; allowed fields: name", received="n"
        ),
        FieldIssue(
            path="path", message="required field is missing", expected="string", missing=True
        ),
        FieldIssue(path="tags.1", message="expected string", expected="string", received=3),
        FieldIssue(
            path="zz",
            message="unexpected field; allowed fields: path, mode, limit, tags, owner, either",
            received=1,
        ),
    ]


@pytest.mark.parametrize(
    ("raw", "start"),
    [
        ("[1]", "arguments must be a JSON object of named arguments, not an array"),
        ("12", "arguments must be a JSON object of named arguments, not an integer"),
        ("{nope", "arguments must be a JSON object, but the text is not valid JSON"),
        (b"\xff", "arguments must be a JSON object, but the text is not valid JSON"),
        (["a"], "arguments must be a JSON object of named arguments, not an array"),
    ],
)
def test_not_an_object(raw: Any, start: str) -> None:
    [issue] = raw_issues(schema_validator(SCHEMA), raw)
    assert issue.path == ""
    assert issue.message.startswith(start)


def test_draft_is_taken_from_dollar_schema() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"type": "integer", "exclusiveMinimum": 0}},
    }
    validator = schema_validator(schema)
    assert "Draft7Validator" in repr(validator)
    [issue] = raw_issues(validator, {"n": 0})
    assert issue.path == "n"
    assert issue.expected == "exclusiveMinimum 0"


def test_dump_is_json_shaped() -> None:
    validator = schema_validator(SCHEMA)
    assert validator.dump({"path": "p", "tags": ("a",)}) == {"path": "p", "tags": ["a"]}


@pytest.mark.parametrize(
    ("schema", "message"),
    [
        ([], "parameters must be a JSON Schema (a dict), got list"),
        (
            {"properties": {}},
            'must have "type": "object" at the top level (tool arguments are a JSON object), got type None',
        ),
        ({"type": "array"}, "got type 'array'"),
        (
            {"type": "object", "properties": {"n": {"type": "integr"}}},
            "invalid JSON Schema at 'properties/n/type': 'integr' is not valid under any of the given schemas",
        ),
        (
            {"type": "object", "required": "a"},
            "invalid JSON Schema at 'required': 'a' is not of type 'array'",
        ),
        (
            {"type": "object", "$schema": "http://example.com/my-draft"},
            "unknown $schema 'http://example.com/my-draft'",
        ),
    ],
)
def test_bad_schemas(schema: Any, message: str) -> None:
    with pytest.raises(ToolDefinitionError) as info:
        schema_validator(schema)
    assert message in str(info.value)


# --------------------------------------------------------------------------- inputConfig

SEED_CONFIG = {
    "inputs": {
        "objective": {"description": "Investigation goal", "type": "string", "required": True},
        "max_files": {
            "description": "Maximum files to analyze",
            "type": "integer",
            "required": False,
        },
    }
}


def test_seed_example_converts_exactly() -> None:
    assert input_config_schema(SEED_CONFIG) == {
        "type": "object",
        "properties": {
            "objective": {"type": "string", "description": "Investigation goal"},
            "max_files": {"type": "integer", "description": "Maximum files to analyze"},
        },
        "required": ["objective"],
        "additionalProperties": False,
    }


def test_every_input_type() -> None:
    config = {
        "inputs": {
            name: {"type": kind}
            for name, kind in [
                ("s", "string"), ("n", "number"), ("i", "integer"),
                ("b", "boolean"), ("ss", "string[]"), ("ns", "number[]"),
            ]
        }
    }  # fmt: skip
    assert input_config_schema(config) == {
        "type": "object",
        "properties": {
            "s": {"type": "string"},
            "n": {"type": "number"},
            "i": {"type": "integer"},
            "b": {"type": "boolean"},
            "ss": {"type": "array", "items": {"type": "string"}},
            "ns": {"type": "array", "items": {"type": "number"}},
        },
        "additionalProperties": False,
    }
    validator = input_config_validator(config)
    raw = '{"s": "x", "n": 3, "i": 2, "b": true, "ss": ["a"], "ns": [1, 2.5]}'
    validated = validator.validate(raw, tool="cfg")
    assert validated == {"s": "x", "n": 3, "i": 2, "b": True, "ss": ["a"], "ns": [1, 2.5]}
    assert type(validated["n"]) is int  # a JSON integer stays an integer for "number"
    assert validator.dump(validated) == validated


def test_input_config_validator_returns_only_given_arguments() -> None:
    validator = input_config_validator(SEED_CONFIG)
    assert validator.schema == input_config_schema(SEED_CONFIG)
    assert validator.validate('{"objective": "find auth"}', tool="agent") == {
        "objective": "find auth"
    }


def test_input_config_validation_issues() -> None:
    validator = input_config_validator(SEED_CONFIG)
    assert raw_issues(validator, '{"max_files": "many", "depth": 2}') == [
        FieldIssue(
            path="objective", message="required field is missing", expected="string", missing=True
        ),
        FieldIssue(
            path="max_files", message="expected integer", expected="integer", received="many"
        ),
        FieldIssue(
            path="depth",
            message="unexpected field; allowed fields: objective, max_files",
            received=2,
        ),
    ]
    number = input_config_validator({"inputs": {"x": {"type": "number", "required": True}}})
    assert raw_issues(number, {"x": "a"}) == [
        FieldIssue(path="x", message="expected number", expected="number", received="a")
    ]
    assert raw_issues(validator, {"objective": None}) == [
        FieldIssue(path="objective", message="expected string", expected="string", received=None)
    ]


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"inputs": {"a": {"type": "str"}}},
            "input 'a' has unknown type 'str'; valid types: string, number, integer, boolean, string[], number[]",
        ),
        ({"inputs": {"a": {"description": "no type"}}}, "input 'a' has unknown type None"),
        ({"objective": {"type": "string"}}, "input_config must be a mapping like"),
        ([], "input_config must be a mapping like"),
        ({"inputs": {"a": "string"}}, "input 'a' must be a mapping, got 'string'"),
        ({"inputs": {"": {"type": "string"}}}, "input names must be non-empty strings, got ''"),
        (
            {"inputs": {"a": {"type": "string", "requried": True}}},
            "input 'a' has unknown keys ['requried']; allowed: description, type, required",
        ),
        (
            {"inputs": {"a": {"type": "string", "required": "yes"}}},
            "input 'a': required must be True or False",
        ),
        (
            {"inputs": {"a": {"type": "string", "description": 3}}},
            "input 'a': description must be a string",
        ),
    ],
)
def test_bad_input_configs(config: Any, message: str) -> None:
    for build in (input_config_schema, input_config_validator):
        with pytest.raises(ToolDefinitionError) as info:
            build(config)
        assert message in str(info.value)


def test_input_config_tools_do_not_import_jsonschema() -> None:
    code = (
        "import sys\n"
        "from kode_nb.tools._raw_schema import input_config_validator\n"
        "v = input_config_validator({'inputs': {'a': {'type': 'string', 'required': True}}})\n"
        "v.validate('{\"a\": \"x\"}', tool='t')\n"
        "assert 'jsonschema' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
