"""The fast path of :func:`kode_nb.tools._schema.function_schema`: simple signatures without a model.

Most tools take a handful of plain arguments (``city: str, days: int = 3``). For those,
building a pydantic model class and asking pydantic for its JSON Schema costs far more than the
schema itself: a class, a core schema, a validator, a ``TypeAdapter`` per default value.
This module writes both by hand for the simple types, **identically** to the model path:

* the JSON Schema is what pydantic generates for the model (same keys, same values, same key
  order: pydantic sorts keys recursively, except directly under ``properties`` and ``default``);
* the validator is a ``pydantic_core.SchemaValidator`` over a typed-dict core schema with the
  very field schemas pydantic builds for those types (lax mode, extra fields forbidden), so the
  arguments accepted, the values produced and the errors raised are pydantic's own.

Simple means: ``str``, ``int``, ``float``, ``bool``, ``None``, ``Any`` (not in a union),
``Literal`` of str/int/bool values, ``X | None`` of those, ``list``/``tuple``/``set``/
``frozenset``/``dict[str, ...]`` of those (nested too), optionally wrapped in
``Annotated[..., Field(description=...)]``, with a default that is plain JSON data (or none).
Anything else returns ``None`` and goes the model way. A property test
(``tests/test_simple_schema.py``) checks that both paths agree.

This second validator (besides the model's, which is then built only if asked for) stays for
defining tools: ~110 µs instead of ~1,090 µs a definition (target 3 of ``benchmarks/`` fails
without it). On a whole agent run it saves nothing measurable (-0.5 %, within noise; a call
validates ~0.5 µs faster): paired rounds, ``benchmarks/results/micro_opts.txt``, 2026-11-27.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Sequence
from typing import Annotated, Any, Literal, Union

from pydantic.fields import FieldInfo
from pydantic_core import SchemaValidator

__all__ = ["ParamInfo", "simple_schema"]

_Json = dict[str, Any]
_Field = tuple[_Json, _Json]  # (JSON Schema, core schema) of one type

_NONE = type(None)
_REQUIRED = inspect.Parameter.empty
_NO_JSON: Any = object()

_ATOMS: dict[Any, tuple[str, str]] = {
    str: ("string", "str"),
    int: ("integer", "int"),
    float: ("number", "float"),
    bool: ("boolean", "bool"),
    _NONE: ("null", "none"),
}
_LITERAL_TYPES = {str: "string", int: "integer", bool: "boolean"}
_UNIONS = (Union, types.UnionType)
_SEQUENCES: dict[Any, str] = {list: "list", set: "set", frozenset: "frozenset"}
_UNSORTED_UNDER = ("properties", "default")
"""pydantic keeps the key order of the dicts directly under these keys (and sorts all others)."""


class ParamInfo(typing.NamedTuple):
    """One parameter as the schema builders need it (here and in :mod:`kode_nb.tools._schema`)."""

    name: str
    annotation: Any
    default: Any
    """The default value, or ``inspect.Parameter.empty`` for a required parameter."""
    doc: str | None
    """Its description from the docstring, if any."""


def simple_schema(params: Sequence[ParamInfo]) -> tuple[_Json, SchemaValidator] | None:
    """The arguments' JSON Schema and validator, or ``None`` if a parameter is not simple."""
    properties: _Json = {}
    fields: _Json = {}
    required: list[str] = []
    for name, annotation, default, doc in params:
        if name in _UNSORTED_UNDER:
            return None  # pydantic would keep this property's own key order: not worth copying
        description = doc or None
        if typing.get_origin(annotation) is Annotated:
            annotation, description = _described(annotation, description)
            if annotation is None:
                return None
        found = _field(annotation)
        if found is None:
            return None
        prop, core = found
        if default is _REQUIRED:
            required.append(name)
            fields[name] = {"type": "typed-dict-field", "schema": core, "required": True}
        else:
            encoded = _json_default(default)
            if encoded is _NO_JSON:
                return None
            prop["default"] = encoded
            core = {"type": "default", "schema": core, "default": default}
            fields[name] = {"type": "typed-dict-field", "schema": core, "required": False}
        if description is not None:
            prop["description"] = description
        properties[name] = _sorted(prop, name)
    schema: _Json = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    schema["additionalProperties"] = False
    core_schema = {"type": "typed-dict", "fields": fields, "extra_behavior": "forbid"}
    return schema, SchemaValidator(core_schema)


def _described(annotation: Any, description: str | None) -> tuple[Any, str | None]:
    """``Annotated[X, Field(description=...)]`` -> ``(X, description)``; ``(None, _)`` for any
    other metadata (constraints, aliases... are the model path's business)."""
    base, *metadata = typing.get_args(annotation)
    if len(metadata) != 1:
        return None, None
    (info,) = metadata
    if not isinstance(info, FieldInfo) or info.metadata:
        return None, None
    text = info.description
    if set(info._attributes_set) != {"description"} or not isinstance(text, str) or not text:
        return None, None
    return base, text  # an explicit Field description wins over the docstring's


def _field(annotation: Any) -> _Field | None:
    """The JSON Schema and core schema of a simple type (fresh dicts), else ``None``."""
    try:
        atom = _ATOMS.get(annotation)
    except TypeError:  # unhashable: not a simple type
        return None
    if atom is not None:
        if atom[1] == "float":  # NaN/Infinity need an opt-in (kode_nb._finite): the model path
            return {"type": "number"}, {"type": "float", "allow_inf_nan": False}
        return {"type": atom[0]}, {"type": atom[1]}
    if annotation is Any:
        return {}, {"type": "any"}
    if annotation is list or annotation is set or annotation is frozenset:
        return _sequence(annotation, {}, {"type": "any"})
    if annotation is tuple:
        return _tuple([({}, {"type": "any"})], variadic=True)
    if annotation is dict:
        any_core = {"type": "any"}
        return {"type": "object", "additionalProperties": True}, {
            "type": "dict",
            "keys_schema": any_core,
            "values_schema": {"type": "any"},
        }
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is Literal:
        return _literal(args)
    if origin in _UNIONS:
        return _optional(args)
    if origin in _SEQUENCES and len(args) == 1:
        item = _field(args[0])
        return None if item is None else _sequence(origin, *item)
    if origin is tuple:
        return _tuple_of(args)
    if origin is dict and len(args) == 2 and args[0] is str:
        value = _field(args[1])
        if value is None:
            return None
        value_json, value_core = value
        return {"type": "object", "additionalProperties": value_json or True}, {
            "type": "dict",
            "keys_schema": {"type": "str"},
            "values_schema": value_core,
        }
    return None


def _literal(values: tuple[Any, ...]) -> _Field | None:
    if not values or any(type(v) not in _LITERAL_TYPES for v in values):
        return None
    prop: _Json = {"const": values[0]} if len(values) == 1 else {"enum": list(values)}
    kinds = {type(v) for v in values}
    if len(kinds) == 1:
        prop["type"] = _LITERAL_TYPES[kinds.pop()]
    return prop, {"type": "literal", "expected": list(values)}


def _optional(args: tuple[Any, ...]) -> _Field | None:
    """``X | None`` (either order) for a simple ``X`` that is not ``Any`` nor a union itself."""
    if len(args) != 2 or _NONE not in args:
        return None
    other = args[1] if args[0] is _NONE else args[0]
    if other is Any or typing.get_origin(other) in _UNIONS:
        return None
    inner = _field(other)
    if inner is None:
        return None
    inner_json, inner_core = inner
    return {"anyOf": [inner_json, {"type": "null"}]}, {"type": "nullable", "schema": inner_core}


def _sequence(kind: Any, item_json: _Json, item_core: _Json) -> _Field:
    prop: _Json = {"type": "array", "items": item_json}
    if kind is not list:
        prop["uniqueItems"] = True
    return prop, {"type": _SEQUENCES[kind], "items_schema": item_core}


def _tuple_of(args: tuple[Any, ...]) -> _Field | None:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _field(args[0])
        return None if item is None else _tuple([item], variadic=True)
    if not args or Ellipsis in args:
        return None  # tuple[()] and odd forms: the model path
    items = [_field(arg) for arg in args]
    if any(item is None for item in items):
        return None
    return _tuple(typing.cast("list[_Field]", items), variadic=False)


def _tuple(items: list[_Field], *, variadic: bool) -> _Field:
    core: _Json = {"type": "tuple", "items_schema": [core for _, core in items]}
    if variadic:
        core["variadic_item_index"] = 0
        return {"type": "array", "items": items[0][0]}, core
    prefix = [json for json, _ in items]
    prop: _Json = {"type": "array", "prefixItems": prefix}
    prop["minItems"] = prop["maxItems"] = len(prefix)
    return prop, core


def _json_default(value: Any) -> Any:
    """The default as pydantic writes it into the schema (tuples and sets as lists), or
    ``_NO_JSON`` if it is not plain JSON data (pydantic's encoding of others is the model
    path's business)."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else _NO_JSON
    if kind is set or kind is frozenset:  # pydantic sorts them (when it can) for a stable schema
        try:
            value = sorted(value) if len(value) > 1 else list(value)
        except TypeError:
            value = list(value)
        kind = list
    if kind is list or kind is tuple:
        items = [_json_default(item) for item in value]
        return _NO_JSON if any(item is _NO_JSON for item in items) else items
    if kind is dict:
        out = {}
        for key, item in value.items():
            encoded = _json_default(item)
            if type(key) is not str or encoded is _NO_JSON:
                return _NO_JSON
            out[key] = encoded
        return out
    return _NO_JSON


def _sorted(value: Any, parent_key: str | None) -> Any:
    """pydantic's ``GenerateJsonSchema._sort_recursive``: the same key order, by construction."""
    if isinstance(value, dict):
        keys = value if parent_key in _UNSORTED_UNDER else sorted(value)
        return {key: _sorted(value[key], key) for key in keys}
    if isinstance(value, list):
        return [_sorted(item, parent_key) for item in value]
    return value
