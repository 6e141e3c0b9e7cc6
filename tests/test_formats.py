"""Provider exports: snapshots for representative tools, plus each provider's rules checked directly.

Snapshots live in ``tests/snapshots/formats_<tool>.json`` (the input ``parameters`` and every
export). Rewrite them with ``KODE_NB_UPDATE_SNAPSHOTS=1 pytest tests/test_formats.py`` - and then
review the diff by hand: a snapshot must be right, not just stable.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator
from enum import Enum, IntEnum
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field

from kode_nb.errors import ConfigurationError
from kode_nb.tools import Tool, define_tool
from kode_nb.tools import _formats as formats

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("KODE_NB_UPDATE_SNAPSHOTS") == "1"


# --------------------------------------------------------------------------- representative tools


class Priority(str, Enum):
    LOW = "low"
    NORMAL = "normal"
    HIGH = "high"


class Severity(IntEnum):
    MINOR = 1
    MAJOR = 2
    CRITICAL = 3


class Address(BaseModel):
    """A postal address."""

    street: str
    city: str = Field(description="City name.")
    postcode: str | None = None


class Person(BaseModel):
    """A person on the team."""

    name: str = Field(description="Full name.")
    email: str | None = Field(None, description="Work e-mail address.")
    address: Address | None = None


def search_files(
    pattern: str,
    path: str = ".",
    max_results: Annotated[int, Field(ge=1, le=500)] = 50,
    case: Literal["sensitive", "insensitive"] = "insensitive",
    include_hidden: bool | None = None,
) -> list[str]:
    """Find files whose contents match a regular expression.

    Args:
        pattern: Regular expression to search for.
        path: Directory to search, relative to the workspace.
        max_results: Stop after this many matches.
        case: Whether matching is case-sensitive.
        include_hidden: Also search hidden files; null uses the project setting.
    """
    return []


def create_issue(
    title: Annotated[str, Field(max_length=80)],
    owner: Person,
    priority: Priority = Priority.NORMAL,
    severity: Severity = Severity.MINOR,
    labels: tuple[str, ...] = (),
    reviewers: list[Person] | None = None,
    kind: Literal["bug"] = "bug",
) -> str:
    """Open an issue in the tracker.

    Args:
        title: One-line summary.
        owner: Who is responsible.
        priority: How urgent it is.
        severity: Impact, from 1 (minor) to 3 (critical).
        labels: Labels to attach.
        reviewers: People asked to review the fix.
        kind: The issue type.
    """
    return "ISSUE-1"


def move_file(source: str, destination: str, overwrite: bool = False) -> None:
    """Move or rename a file.

    Args:
        source: The file to move.
        destination: Where it goes.
        overwrite: Replace an existing destination.
    """


def current_time() -> str:
    """The current time, ISO 8601."""
    return "2025-01-01T00:00:00Z"


TOOLS: dict[str, Callable[[], Tool]] = {
    "search_files": lambda: define_tool(
        search_files, kind="search", category="file", groups=("fs",), registry=None
    ),
    "create_issue": lambda: define_tool(
        create_issue, kind="edit", category="network", label="New issue", registry=None
    ),
    "move_file": lambda: define_tool(move_file, kind="move", category="file", registry=None),
    "current_time": lambda: define_tool(
        current_time, kind="read", category="system", registry=None
    ),
}


def exports(tool: Tool) -> dict[str, Any]:
    return {
        "parameters": tool.parameters,
        "openai": formats.openai_tool(tool),
        "openai_strict": formats.openai_tool(tool, strict=True),
        "anthropic": formats.anthropic_tool(tool),
        "gemini": formats.gemini_tool(tool),
        "mcp": formats.mcp_tool(tool),
    }


def walk(node: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) in a JSON document."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, f"{path}/{i}")


def schemas(root: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every sub-schema of a JSON Schema (not the dicts *of* properties or $defs)."""
    yield "", root
    for key in ("properties", "$defs", "definitions"):
        for name, sub in root.get(key, {}).items():
            for path, node in schemas(sub):
                yield f"/{key}/{name}{path}", node
    if isinstance(root.get("items"), dict):
        for path, node in schemas(root["items"]):
            yield f"/items{path}", node
    for i, member in enumerate(root.get("anyOf", [])):
        for path, node in schemas(member):
            yield f"/anyOf/{i}{path}", node


# --------------------------------------------------------------------------- snapshots


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_snapshot(name: str) -> None:
    actual = exports(TOOLS[name]())
    path = SNAPSHOTS / f"formats_{name}.json"
    if UPDATE:
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(json.dumps(actual, indent=2, ensure_ascii=False) + "\n")
    assert path.exists(), f"{path} is missing: run with KODE_NB_UPDATE_SNAPSHOTS=1, then review it"
    expected = json.loads(path.read_text())
    for key in expected:
        assert actual[key] == expected[key], f"{name}: the {key!r} export changed"
    assert set(actual) == set(expected)


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_exports_do_not_mutate_the_tool(name: str) -> None:
    tool = TOOLS[name]()
    before = copy.deepcopy(tool.parameters)
    first = exports(tool)
    assert tool.parameters == before
    # and the exports do not share structure with the tool or each other
    first["anthropic"]["input_schema"]["properties"]["injected"] = {}
    first["openai"]["function"]["parameters"]["required"] = ["changed"]
    assert tool.parameters == before
    assert exports(tool) == exports(TOOLS[name]())


# --------------------------------------------------------------------------- OpenAI


def test_openai_shapes() -> None:
    tool = TOOLS["move_file"]()
    plain = formats.openai_tool(tool)
    assert plain == {
        "type": "function",
        "function": {
            "name": "move_file",
            "description": "Move or rename a file.",
            "parameters": tool.parameters,
        },
    }
    assert "strict" not in plain["function"]
    strict = formats.openai_tool(tool, strict=True)
    assert strict["function"]["strict"] is True


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_strict_every_object_closed_and_fully_required(name: str) -> None:
    params = formats.openai_tool(TOOLS[name](), strict=True)["function"]["parameters"]
    objects = [(p, s) for p, s in schemas(params) if "properties" in s]
    assert objects
    for path, node in objects:
        assert node["additionalProperties"] is False, path
        assert node["required"] == list(node["properties"]), path
    for path, value in walk(params):
        key = path.rsplit("/", 1)[-1]
        assert key not in {"default", "const", "oneOf", "allOf", "minLength", "maxLength"}, path
        if isinstance(value, dict) and "$ref" in value:
            assert len(value) == 1, f"$ref with siblings at {path}"


def test_strict_optional_properties_become_nullable() -> None:
    params = formats.openai_strict_schema(TOOLS["search_files"]().parameters)
    props = params["properties"]
    assert props["pattern"] == {
        "description": "Regular expression to search for.",
        "type": "string",
    }
    assert props["path"]["type"] == ["string", "null"]
    assert props["path"]["description"].endswith('Default: ".".')
    assert props["max_results"]["type"] == ["integer", "null"]
    assert (props["max_results"]["minimum"], props["max_results"]["maximum"]) == (1, 500)
    # an enum cannot take a type list (null would fail the enum): it is wrapped in anyOf
    assert props["case"]["anyOf"][1] == {"type": "null"}
    assert props["case"]["anyOf"][0]["enum"] == ["sensitive", "insensitive"]
    # already nullable: left alone, no "Default: null." noise
    assert props["include_hidden"]["anyOf"] == [{"type": "boolean"}, {"type": "null"}]
    assert "Default" not in props["include_hidden"]["description"]


def test_strict_raw_schema_features() -> None:
    schema = {
        "type": "object",
        "properties": {
            "mode": {"const": "fast"},
            "choice": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "merged": {
                "allOf": [{"$ref": "#/$defs/Base"}, {"properties": {"extra": {"type": "integer"}}}]
            },
            "ref": {"$ref": "#/$defs/Base", "description": "Documented ref."},
            "name": {"type": "string", "minLength": 2, "format": "hostname"},
            "link": {"type": "string", "format": "uri"},
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        },
        "required": ["mode", "choice", "merged", "ref", "name", "link", "tags"],
        "$defs": {"Base": {"type": "object", "properties": {"id": {"type": "integer"}}}},
        "$schema": "https://json-schema.org/draft/2020-12/schema",
    }
    before = copy.deepcopy(schema)
    out = formats.openai_strict_schema(schema)
    assert schema == before
    props = out["properties"]
    assert props["mode"] == {"enum": ["fast"]}
    assert props["choice"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["merged"]["required"] == ["id", "extra"]
    assert props["merged"]["properties"]["extra"] == {"type": ["integer", "null"]}
    assert props["ref"]["description"] == "Documented ref."
    assert props["ref"]["properties"] == {"id": {"type": ["integer", "null"]}}
    assert props["name"] == {
        "type": "string",
        "format": "hostname",
        "description": "At least 2 characters.",
    }
    assert props["link"] == {"type": "string", "description": "Format: uri."}
    assert props["tags"]["description"] == "Items must be unique."
    assert "$schema" not in out
    assert out["$defs"]["Base"]["additionalProperties"] is False


def test_strict_keeps_recursive_refs() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node"}},
        "required": ["root"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            }
        },
    }
    out = formats.openai_strict_schema(schema)
    assert out["properties"]["root"] == {"$ref": "#/$defs/Node"}
    node = out["$defs"]["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert node["required"] == ["children"]


def test_strict_recursive_ref_with_siblings_is_not_inlined_forever() -> None:
    schema = {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/Node", "description": "The tree."}},
        "required": ["root"],
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "value": {"type": "integer"},
                    "parent": {"$ref": "#/$defs/Node", "description": "Up.", "default": None},
                },
                "required": ["value"],
            }
        },
    }
    out = formats.openai_strict_schema(schema)
    root = out["properties"]["root"]
    assert root["description"] == "The tree."
    assert root["properties"]["parent"] == {"anyOf": [{"$ref": "#/$defs/Node"}, {"type": "null"}]}
    node = out["$defs"]["Node"]
    assert node["properties"]["parent"]["description"] == "Up."
    assert node["required"] == ["value", "parent"]


@pytest.mark.parametrize(
    ("prop", "message"),
    [
        ({"type": "object", "additionalProperties": {"type": "integer"}}, "free-form object"),
        ({"type": "object"}, "free-form object"),
        ({}, "accepts any value"),
        ({"description": "anything"}, "accepts any value"),
        ({"type": "array", "items": [{"type": "string"}]}, "tuple-style 'items'"),
        ({"type": "array"}, "array without an item type"),
        ({"type": ["array", "null"]}, "array without an item type"),
        ({"type": "array", "prefixItems": [{"type": "string"}]}, "array without an item type"),
        ({"$ref": "#/$defs/Missing", "description": "x"}, "cannot resolve \\$ref"),
    ],
)
def test_strict_refuses_what_it_cannot_express(prop: dict[str, Any], message: str) -> None:
    schema = {"type": "object", "properties": {"value": prop}}
    with pytest.raises(ConfigurationError, match=message) as info:
        formats.openai_strict_schema(schema, tool="demo")
    assert "tool 'demo'" in str(info.value)


@pytest.mark.parametrize(
    "root", [{"type": "object"}, {}, {"type": "object", "additionalProperties": False}]
)
def test_strict_takes_a_bare_object_root_as_no_arguments(root: dict[str, Any]) -> None:
    assert formats.openai_strict_schema(root, tool="ping") == {
        "type": "object", "properties": {}, "required": [], "additionalProperties": False,
    }  # fmt: skip
    assert root.get("properties") is None  # the input is not changed


def test_strict_still_refuses_a_root_that_takes_any_keys() -> None:
    with pytest.raises(ConfigurationError, match="free-form object"):
        formats.openai_strict_schema({"type": "object", "additionalProperties": {"type": "string"}})


def test_strict_refuses_dict_parameters_of_a_real_tool() -> None:
    def tally(counts: dict[str, int]) -> int:
        """Sum counts."""
        return sum(counts.values())

    tool = define_tool(tally, registry=None)
    assert formats.openai_tool(tool)["function"]["parameters"] == tool.parameters
    with pytest.raises(ConfigurationError, match=r"'tally': parameters\.properties\.counts"):
        formats.openai_tool(tool, strict=True)


@pytest.mark.parametrize("root", [{"type": "array"}, {"type": "string"}, []])
@pytest.mark.parametrize("rewrite", [formats.openai_strict_schema, formats.gemini_schema])
def test_root_must_be_an_object(root: Any, rewrite: Callable[..., Any]) -> None:
    with pytest.raises(ConfigurationError, match=r"tool 'x': .*(type 'object'|JSON Schema object)"):
        rewrite(root, tool="x")


def test_drop_strict_nulls() -> None:
    params = TOOLS["create_issue"]().parameters
    args = {
        "title": "Crash",
        "owner": {"name": "Ada", "email": None, "address": None},
        "priority": None,
        "severity": None,
        "labels": None,
        "reviewers": [
            {
                "name": "Bob",
                "email": None,
                "address": {"street": "x", "city": "y", "postcode": None},
            }
        ],
        "kind": None,
    }
    assert formats.drop_strict_nulls(params, args) == {
        "title": "Crash",
        # email and address are nullable in the original schema: null is a real value there
        "owner": {"name": "Ada", "email": None, "address": None},
        "reviewers": [
            {
                "name": "Bob",
                "email": None,
                "address": {"street": "x", "city": "y", "postcode": None},
            }
        ],
    }
    assert formats.drop_strict_nulls(params, {"title": None}) == {"title": None}  # required


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_shape() -> None:
    tool = TOOLS["search_files"]()
    assert formats.anthropic_tool(tool) == {
        "name": "search_files",
        "description": "Find files whose contents match a regular expression.",
        "input_schema": tool.parameters,
    }


# --------------------------------------------------------------------------- Gemini


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_gemini_uses_only_supported_keys(name: str) -> None:
    decl = formats.gemini_tool(TOOLS[name]())
    assert set(decl) <= {"name", "description", "parameters"}
    params = decl.get("parameters", {})
    for path, node in schemas(params):
        assert set(node) <= formats.GEMINI_KEYS, path
        assert not isinstance(node.get("type"), list), path
        assert node.get("type") != "null", path
        if "enum" in node:
            assert node["type"] == "string"
            assert all(isinstance(v, str) for v in node["enum"])
        for member in node.get("anyOf", []):
            assert member.get("type") != "null", path
    for path, _ in walk(params):
        assert "$ref" not in path
        assert "$defs" not in path


def test_gemini_inlines_and_marks_nullable() -> None:
    params = formats.gemini_tool(TOOLS["create_issue"]())["parameters"]
    owner = params["properties"]["owner"]
    assert owner["type"] == "object"
    assert owner["required"] == ["name"]
    assert owner["description"] == "Who is responsible."  # the field's words beat the class's
    address = owner["properties"]["address"]
    assert address["nullable"] is True
    assert address["description"] == "A postal address."
    assert address["properties"]["postcode"] == {"type": "string", "nullable": True}
    assert params["properties"]["reviewers"]["nullable"] is True
    assert params["properties"]["reviewers"]["items"]["properties"]["name"]["type"] == "string"
    assert params["properties"]["kind"]["enum"] == ["bug"]
    severity = params["properties"]["severity"]
    assert "enum" not in severity
    assert "Allowed values: 1, 2, 3." in severity["description"]
    assert params["required"] == ["title", "owner"]


def test_gemini_omits_empty_parameters() -> None:
    assert formats.gemini_tool(TOOLS["current_time"]()) == {
        "name": "current_time",
        "description": "The current time, ISO 8601.",
    }


def test_gemini_raw_schema_features() -> None:
    schema = {
        "type": "object",
        "title": "Args",
        "properties": {
            "when": {"type": "string", "format": "date-time"},
            "site": {"type": "string", "format": "uri", "description": "Home page"},
            "count": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
            "ratio": {"type": "number", "exclusiveMinimum": 0},
            "either": {"type": ["string", "integer", "null"]},
            "flag": {"const": True},
            "maybe": {"enum": ["a", None]},
            "pick": {"oneOf": [{"type": "string"}, {"type": "integer"}], "examples": ["x"]},
            "both": {"allOf": [{"$ref": "#/$defs/A"}, {"properties": {"b": {"type": "string"}}}]},
            "mapping": {"type": "object", "additionalProperties": {"type": "integer"}},
        },
        "required": ["when", "ghost"],
        "$defs": {"A": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        "$schema": "https://json-schema.org/draft/2020-12/schema",
    }
    out = formats.gemini_schema(schema)
    props = out["properties"]
    assert "title" not in out
    assert "$defs" not in out
    assert "$schema" not in out
    assert out["required"] == ["when"]
    assert props["when"] == {"type": "string", "format": "date-time"}
    assert props["site"] == {"type": "string", "description": "Home page. Format: uri."}
    assert props["count"] == {"type": "integer", "minimum": 1, "maximum": 9}
    assert props["ratio"] == {"type": "number", "description": "Must be > 0."}
    assert props["either"] == {
        "anyOf": [{"type": "string"}, {"type": "integer"}],
        "nullable": True,
    }
    assert props["flag"] == {"description": "Allowed values: true."}
    assert props["maybe"] == {"enum": ["a"], "type": "string", "nullable": True}
    assert props["pick"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["both"]["properties"] == {"a": {"type": "integer"}, "b": {"type": "string"}}
    assert props["mapping"] == {"type": "object"}


class Node(BaseModel):
    value: int
    children: list[Node] = []


def test_gemini_refuses_recursive_types() -> None:
    def walk_tree(tree: Node) -> int:
        """Sum a tree."""
        return tree.value

    tool = define_tool(walk_tree, registry=None)
    with pytest.raises(
        ConfigurationError,
        match=r"'walk_tree'.*refers back to '#/\$defs/Node' \(a recursive type\)",
    ):
        formats.gemini_tool(tool)
    # the other providers handle recursion with $ref
    assert formats.openai_tool(tool, strict=True)["function"]["strict"] is True


# --------------------------------------------------------------------------- MCP


@pytest.mark.parametrize(
    ("kind", "category", "read_only", "destructive", "idempotent", "open_world"),
    [
        ("read", "file", True, False, True, False),
        ("search", "data", True, False, True, False),
        ("think", "agent", True, False, True, False),
        ("fetch", "custom", True, False, True, True),
        ("edit", "file", False, True, False, False),
        ("delete", "file", False, True, True, False),
        ("move", "file", False, True, False, False),
        ("execute", "system", False, True, False, False),
        ("other", "network", False, False, False, True),
        ("other", "mcp", False, False, False, True),
    ],
)
def test_mcp_annotations(
    kind: str, category: str, read_only: bool, destructive: bool, idempotent: bool, open_world: bool
) -> None:
    tool = TOOLS["move_file"]().evolve(kind=kind, category=category)
    assert formats.mcp_annotations(tool) == {
        "title": "Move file",
        "readOnlyHint": read_only,
        "destructiveHint": destructive,
        "idempotentHint": idempotent,
        "openWorldHint": open_world,
    }


def test_mcp_shape_and_metadata_override() -> None:
    tool = TOOLS["create_issue"]().evolve(metadata={"mcp_annotations": {"idempotentHint": True}})
    out = formats.mcp_tool(tool)
    assert list(out) == ["name", "title", "description", "inputSchema", "annotations"]
    assert out["title"] == "New issue"
    assert out["inputSchema"] == tool.parameters
    assert out["annotations"]["idempotentHint"] is True
    assert out["annotations"]["destructiveHint"] is True


def test_tool_without_description_omits_the_key() -> None:
    def bare(x: int) -> int:
        return x

    tool = define_tool(bare, registry=None)
    assert tool.description == ""
    assert "description" not in formats.openai_tool(tool)["function"]
    assert "description" not in formats.anthropic_tool(tool)
    assert "description" not in formats.gemini_tool(tool)
    assert "description" not in formats.mcp_tool(tool)
