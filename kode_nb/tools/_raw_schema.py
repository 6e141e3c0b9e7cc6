"""Tools from a raw JSON Schema or a ``inputConfig``.

:func:`schema_validator` checks a raw JSON Schema against its metaschema and caches a
``jsonschema`` validator; ``jsonschema`` is imported only here, lazily (it costs ~650 ms).
:func:`input_config_schema` turns ``{"inputs": {name: {"description", "type", "required"}}}``
into a JSON Schema; :func:`input_config_validator` validates such arguments with a pydantic model
(fast, no ``jsonschema``). Unknown input types are errors, never silently strings.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Union

from pydantic import ConfigDict, Field, create_model
from pydantic_core import PydanticUndefined

from kode_nb.errors import ToolDefinitionError
from kode_nb.tools._validation import ConfigArgsValidator, JsonSchemaValidator

__all__ = ["input_config_schema", "input_config_validator", "schema_validator"]

_CONFIG = ConfigDict(extra="forbid", allow_inf_nan=False)


def schema_validator(schema: Mapping[str, Any]) -> JsonSchemaValidator:
    """A validator for a raw JSON Schema (checked against its metaschema first).

    The schema's top level must be ``"type": "object"``; a bad schema raises
    :class:`~kode_nb.errors.ToolDefinitionError` naming the problem and where it is.
    """
    if not isinstance(schema, Mapping):
        raise ToolDefinitionError(
            f"parameters must be a JSON Schema (a dict), got {type(schema).__name__}"
        )
    owned: dict[str, Any] = copy.deepcopy(dict(schema))
    if owned.get("type") != "object":
        raise ToolDefinitionError(
            'the parameters schema must have "type": "object" at the top level (tool arguments '
            f"are a JSON object), got type {owned.get('type')!r}"
        )
    import jsonschema  # type: ignore[import-untyped]  # lazy: importing it costs ~650 ms

    cls = jsonschema.validators.validator_for(owned, default=jsonschema.Draft202012Validator)
    if "$schema" in owned and jsonschema.validators.validator_for(owned, default=None) is None:
        raise ToolDefinitionError(
            f"unknown $schema {owned.get('$schema')!r}; use a JSON Schema draft URI or leave it out"
        )
    try:
        cls.check_schema(owned)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path)
        raise ToolDefinitionError(
            f"invalid JSON Schema{f' at {where!r}' if where else ''}: {exc.message}"
        ) from None
    return JsonSchemaValidator(owned, cls(owned))


_INPUT_TYPES: dict[str, tuple[dict[str, Any], Any]] = {
    "string": ({"type": "string"}, str),
    "number": ({"type": "number"}, Union[int, float]),
    "integer": ({"type": "integer"}, int),
    "boolean": ({"type": "boolean"}, bool),
    "string[]": ({"type": "array", "items": {"type": "string"}}, list[str]),
    "number[]": ({"type": "array", "items": {"type": "number"}}, list[Union[int, float]]),
}
_INPUT_KEYS = ("description", "type", "required")


def _input_specs(input_config: Mapping[str, Any]) -> list[tuple[str, str, str, bool]]:
    """Check an ``inputConfig`` and return (name, type, description, required) per input."""
    if not isinstance(input_config, Mapping) or not isinstance(input_config.get("inputs"), Mapping):
        raise ToolDefinitionError(
            'input_config must be a mapping like {"inputs": {"name": {"description": ..., '
            f'"type": "string", "required": True}}}}, got {input_config!r}'
        )
    specs = []
    for name, spec in input_config["inputs"].items():
        if not isinstance(name, str) or not name:
            raise ToolDefinitionError(
                f"input_config: input names must be non-empty strings, got {name!r}"
            )
        if not isinstance(spec, Mapping):
            raise ToolDefinitionError(
                f"input_config: input {name!r} must be a mapping, got {spec!r}"
            )
        unknown = [k for k in spec if k not in _INPUT_KEYS]
        if unknown:
            raise ToolDefinitionError(
                f"input_config: input {name!r} has unknown keys {unknown}; allowed: {', '.join(_INPUT_KEYS)}"
            )
        kind, description, required = (
            spec.get("type"),
            spec.get("description", ""),
            spec.get("required", False),
        )
        if kind not in _INPUT_TYPES:
            raise ToolDefinitionError(
                f"input_config: input {name!r} has unknown type {kind!r}; valid types: {', '.join(_INPUT_TYPES)}"
            )
        if not isinstance(description, str):
            raise ToolDefinitionError(f"input_config: input {name!r}: description must be a string")
        if not isinstance(required, bool):
            raise ToolDefinitionError(
                f"input_config: input {name!r}: required must be True or False"
            )
        specs.append((name, kind, description, required))
    return specs


def input_config_schema(input_config: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON Schema of a ``inputConfig`` (``{"inputs": {name: {...}}}``)."""
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, kind, description, is_required in _input_specs(input_config):
        prop = copy.deepcopy(_INPUT_TYPES[kind][0])
        if description:
            prop["description"] = description
        properties[name] = prop
        if is_required:
            required.append(name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    return schema


def input_config_validator(input_config: Mapping[str, Any]) -> ConfigArgsValidator:
    """A fast (pydantic) validator for an ``inputConfig``; returns the arguments given as a dict."""
    schema = input_config_schema(input_config)
    fields: dict[str, Any] = {}
    names: list[tuple[str, str]] = []
    for name, kind, _description, is_required in _input_specs(input_config):
        internal = f"p{len(names)}"
        names.append((name, internal))
        default = PydanticUndefined if is_required else None
        fields[internal] = (_INPUT_TYPES[kind][1], Field(default, alias=name))
    model = create_model("InputConfigArgs", __config__=_CONFIG, __module__=__name__, **fields)
    return ConfigArgsValidator(model, schema, names)
