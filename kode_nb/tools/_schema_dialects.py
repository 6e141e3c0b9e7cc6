"""Rewrites of a JSON Schema into the dialects providers accept: OpenAI strict mode and Gemini.

Both functions deep-copy (the input is never modified) and need an object root schema;
anything else raises ConfigurationError.

OpenAI strict (``openai_tool(tool, strict=True)``, Structured Outputs rules):
  every object gets ``additionalProperties: false`` and lists *all* its properties in
  ``required``; a property that was optional becomes nullable (``type: [T, "null"]``, or
  ``anyOf: [..., {"type": "null"}]`` for ``$ref``/enum/untyped schemas), so the model sends
  ``null`` for "not given"; ``default`` is removed and noted in the description
  (``"Default: 50."``); ``const`` becomes a one-value ``enum``, ``oneOf`` becomes ``anyOf``,
  ``allOf`` is merged and a ``$ref`` with sibling keys is inlined. Keywords strict mode rejects
  are removed (``minLength``/``maxLength``/``uniqueItems`` and unsupported ``format`` values are
  noted in the description). Free-form objects (``dict``), untyped values (``Any``) and arrays
  without an item type (``{"type": "array"}``, a tuple's ``prefixItems``) cannot be expressed in
  strict mode: they raise ConfigurationError naming the property.

Gemini (function declarations, an OpenAPI 3.0 subset): ``$ref``/``$defs`` are inlined (a
recursive type raises ConfigurationError: Gemini cannot express it); ``anyOf [X, null]`` and
``type: [X, "null"]`` become ``X`` with ``nullable: true``; ``const`` becomes ``enum``; only
string enums are kept (other values are listed in the description); ``exclusiveMinimum`` /
``exclusiveMaximum`` become ``minimum``/``maximum`` for integers; formats Gemini does not know
move to the description; every key outside :data:`GEMINI_KEYS` is dropped (``title``,
``default`` - noted in the description -, ``additionalProperties``, ``$schema``, ``examples``...).
:func:`~kode_nb.tools._formats.gemini_tool` leaves out ``parameters`` for a tool without any.
Free-form objects (``dict``) lose their value schema (Gemini has no ``additionalProperties``).

:func:`drop_strict_nulls` undoes strict mode's "``null`` means not given" on the arguments a
model sends, so that the function's defaults apply.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from typing import Any

from kode_nb.errors import ConfigurationError

__all__ = [
    "GEMINI_KEYS",
    "check_root",
    "drop_strict_nulls",
    "gemini_schema",
    "openai_strict_schema",
]

Schema = dict[str, Any]

GEMINI_KEYS = frozenset(
    {
        "type",
        "format",
        "description",
        "nullable",
        "enum",
        "properties",
        "required",
        "items",
        "minItems",
        "maxItems",
        "minimum",
        "maximum",
        "anyOf",
        "propertyOrdering",
        "minLength",
        "maxLength",
        "pattern",
    }
)
"""The OpenAPI-subset keys Gemini function declarations accept."""

_STRICT_KEYS = frozenset(
    {
        "type",
        "description",
        "title",
        "enum",
        "properties",
        "required",
        "additionalProperties",
        "items",
        "anyOf",
        "$ref",
        "$defs",
        "definitions",
        "pattern",
        "format",
        "multipleOf",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minItems",
        "maxItems",
    }
)
_STRICT_FORMATS = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
_GEMINI_FORMATS = {
    "string": {"enum", "date-time"},
    "number": {"float", "double"},
    "integer": {"int32", "int64"},
}
_NOTES: dict[str, Callable[[Any], str]] = {
    "minLength": lambda v: f"At least {v} characters.",
    "maxLength": lambda v: f"At most {v} characters.",
    "uniqueItems": lambda v: "Items must be unique." if v else "",
    "minProperties": lambda v: f"At least {v} entries.",
    "maxProperties": lambda v: f"At most {v} entries.",
}


def openai_strict_schema(schema: Schema, *, tool: str = "") -> Schema:
    """``schema`` (an object schema) rewritten for OpenAI strict mode; the input is not changed."""
    return _Strict(check_root(copy.deepcopy(schema), tool), tool).convert()


def drop_strict_nulls(schema: Schema, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """Undo strict mode's "``null`` means not given" before validating against ``schema``.

    In strict mode an optional argument is sent as ``null``. This drops every ``null`` whose
    property (in the *original* schema) is neither required nor nullable, in nested objects
    too, so the function's defaults apply. Other values are returned unchanged.
    """
    out = _drop_nulls(schema, schema, dict(arguments), 0)
    return out if isinstance(out, dict) else dict(arguments)


def gemini_schema(schema: Schema, *, tool: str = "") -> Schema:
    """``schema`` rewritten for Gemini: refs inlined, nullable, only :data:`GEMINI_KEYS`."""
    root = check_root(copy.deepcopy(schema), tool)
    return _Gemini(root, tool).convert(root, "parameters", ())


# --------------------------------------------------------------------------- helpers


def check_root(schema: Any, tool: str) -> Schema:
    """``schema`` itself if it is an object schema (``type`` defaults to ``object``)."""
    if not isinstance(schema, dict):
        raise ConfigurationError(f"tool {tool!r}: parameters must be a JSON Schema object")
    kind = schema.setdefault("type", "object")
    if kind != "object":
        raise ConfigurationError(
            f"tool {tool!r}: the parameters schema must have type 'object', not {kind!r} "
            "(providers require an object of named arguments)"
        )
    return schema


def _note(node: Schema, text: str) -> None:
    """Append a sentence to the node's description."""
    if text:
        desc = str(node.get("description") or "").rstrip()
        sep = " " if not desc or desc.endswith((".", "!", "?", ":")) else ". "
        node["description"] = f"{desc}{sep}{text}" if desc else text


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _resolve(root: Schema, ref: str, tool: str, path: str) -> Schema:
    node: Any = root
    if ref.startswith("#"):
        for part in ref[1:].split("/")[1:] if ref != "#" else []:
            part = part.replace("~1", "/").replace("~0", "~")
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            return node
    raise ConfigurationError(f"tool {tool!r}: cannot resolve $ref {ref!r} at {path}")


def _merge_all_of(node: Schema, root: Schema, tool: str, path: str) -> Schema:
    members = node.pop("allOf")
    merged: Schema = {}
    for member in members:
        if isinstance(member, dict) and "$ref" in member and len(member) == 1:
            member = copy.deepcopy(_resolve(root, member["$ref"], tool, path))
        if not isinstance(member, dict):
            continue
        for key, value in member.items():
            if key == "properties":
                merged.setdefault("properties", {}).update(value)
            elif key == "required":
                merged["required"] = list(dict.fromkeys([*merged.get("required", []), *value]))
            else:
                merged.setdefault(key, value)
    merged.update(node)
    return merged


def _deref(root: Schema, node: Any) -> Any:
    for _ in range(32):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
            break
        try:
            node = _resolve(root, node["$ref"], "", "")
        except ConfigurationError:
            return {}
    return node


def _drop_nulls(root: Schema, node: Any, value: Any, depth: int) -> Any:
    node = _deref(root, node)
    if not isinstance(node, dict) or depth > 64:
        return value
    if isinstance(value, dict):
        if "properties" not in node:  # X | None: use the object member
            members = [_deref(root, m) for m in node.get("anyOf", ())]
            node = next((m for m in members if isinstance(m, dict) and "properties" in m), {})
        props = node.get("properties")
        if not isinstance(props, dict):
            return value
        required = set(node.get("required", ()))
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = _deref(root, props.get(key))
            optional = isinstance(sub, dict) and key not in required and not _is_nullable(sub)
            if item is None and optional:
                continue
            out[key] = _drop_nulls(root, sub, item, depth + 1)
        return out
    if isinstance(value, list):
        items = node.get("items")
        if items is None:
            for member in node.get("anyOf", ()):
                member = _deref(root, member)
                items = member.get("items") if isinstance(member, dict) else None
                if items is not None:
                    break
        return [_drop_nulls(root, items, v, depth + 1) for v in value]
    return value


def _is_nullable(node: Schema) -> bool:
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in node.get("enum", ()):
        return True
    return any(isinstance(m, dict) and _is_nullable(m) for m in node.get("anyOf", ()))


class _Strict:
    """The OpenAI strict-mode rewrite of one (already copied) root schema."""

    def __init__(self, root: Schema, tool: str) -> None:
        self.root = root
        self.tool = tool

    def fail(self, path: str, problem: str) -> ConfigurationError:
        return ConfigurationError(
            f"tool {self.tool!r}: {path} {problem}; OpenAI strict mode cannot express it "
            "(use strict=False, or give it a precise type such as a pydantic model)"
        )

    def convert(self) -> Schema:
        root = self.root
        if "properties" not in root and root.get("additionalProperties") in (None, False):
            root = {**root, "properties": {}}  # a bare object root: a tool without arguments
        return self.node(root, "parameters", ())

    def node(self, src: Any, path: str, inlined: tuple[str, ...]) -> Schema:
        """Rewrite one schema; ``inlined`` are the refs expanded on the way here."""
        if not isinstance(src, dict):
            raise self.fail(path, f"is {src!r}, not a schema")
        node: Schema = dict(src)  # new containers all the way down: self.root stays as it was
        while "$ref" in node and len(node) > 1:  # a $ref with siblings: inline it
            ref = node.pop("$ref")
            if ref in inlined:  # recursive: keep the reference, drop the siblings
                node = {"$ref": ref}
                break
            inlined = (*inlined, ref)
            node = {**copy.deepcopy(_resolve(self.root, ref, self.tool, path)), **node}
        if "allOf" in node:
            return self.node(_merge_all_of(node, self.root, self.tool, path), path, inlined)
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        if "default" in node and (default := node.pop("default")) is not None:
            _note(node, f"Default: {_json(default)}.")
        if "format" in node and node["format"] not in _STRICT_FORMATS:
            _note(node, f"Format: {node.pop('format')}.")
        for key in [k for k in node if k not in _STRICT_KEYS]:
            value = node.pop(key)
            if key in _NOTES:
                _note(node, _NOTES[key](value))
        if not node.keys() & {"type", "anyOf", "$ref", "enum", "properties"}:
            raise self.fail(path, "accepts any value (it has no 'type')")
        for key in ("$defs", "definitions"):
            if key in node:
                node[key] = {n: self.node(d, f"{key}.{n}", ()) for n, d in node[key].items()}
        if "anyOf" in node:
            node["anyOf"] = [
                self.node(m, f"{path}.anyOf.{i}", inlined) for i, m in enumerate(node["anyOf"])
            ]
        if "items" in node:
            if not isinstance(node["items"], dict):
                raise self.fail(path, "uses tuple-style 'items'")
            node["items"] = self.node(node["items"], f"{path}.items", inlined)
        kind = node.get("type")
        is_array = kind == "array" or (isinstance(kind, list) and "array" in kind)
        if is_array and "items" not in node:
            raise self.fail(path, "is an array without an item type")  # OpenAI rejects it
        if (
            kind == "object"
            or (isinstance(kind, list) and "object" in kind)
            or "properties" in node
        ):
            self.object(node, path, inlined)
        return node

    def object(self, node: Schema, path: str, inlined: tuple[str, ...]) -> None:
        if "properties" not in node:
            if node.get("additionalProperties", True) is not False:
                raise self.fail(path, "is a free-form object (a dict without declared keys)")
            node["properties"] = {}
        required = set(node.get("required", ()))
        props: Schema = {}
        for name, sub in node["properties"].items():
            sub = self.node(sub, f"{path}.properties.{name}", inlined)
            props[name] = sub if name in required else self.nullable(sub)
        node["properties"] = props
        node["required"] = list(props)
        node["additionalProperties"] = False

    @staticmethod
    def nullable(node: Schema) -> Schema:
        if _is_nullable(node):
            return node
        kind = node.get("type")
        if isinstance(kind, str) and "enum" not in node:
            node["type"] = [kind, "null"]
            return node
        if isinstance(kind, list) and "enum" not in node:
            node["type"] = [*kind, "null"]
            return node
        if "anyOf" in node:
            node["anyOf"].append({"type": "null"})
            return node
        outer: Schema = {k: node.pop(k) for k in ("title", "description") if k in node}
        return {"anyOf": [node, {"type": "null"}], **outer}


class _Gemini:
    """The Gemini rewrite of one root schema (reads the original, builds a new one)."""

    def __init__(self, root: Schema, tool: str) -> None:
        self.root = root
        self.tool = tool

    def convert(self, src: Any, path: str, refs: tuple[str, ...]) -> Schema:
        if not isinstance(src, dict):
            return {}
        node = copy.deepcopy(src)
        if "$ref" in node:
            ref = node.pop("$ref")
            if ref in refs:
                raise ConfigurationError(
                    f"tool {self.tool!r}: {path} refers back to {ref!r} (a recursive type); "
                    "Gemini function declarations cannot express recursion"
                )
            target = _resolve(self.root, ref, self.tool, path)
            return self.convert({**target, **node}, path, (*refs, ref))
        if "allOf" in node:
            return self.convert(_merge_all_of(node, self.root, self.tool, path), path, refs)
        if "oneOf" in node:
            node["anyOf"] = node.pop("oneOf")
        if "const" in node:
            node["enum"] = [node.pop("const")]
        nullable = False
        if "anyOf" in node:
            members = [m for m in node.pop("anyOf") if isinstance(m, dict)]
            others = [m for m in members if m.get("type") != "null"]
            if len(others) < len(members):
                node["nullable"] = True
            if len(others) == 1:  # X | None: X with the siblings (description wins) + nullable
                return self.convert({**others[0], **node}, path, refs)
            node["anyOf"] = [
                self.convert(m, f"{path}.anyOf.{i}", refs) for i, m in enumerate(others)
            ]
        kind = node.get("type")
        if isinstance(kind, list):
            nullable = nullable or "null" in kind
            types = [t for t in kind if t != "null"]
            if len(types) == 1:
                node["type"] = types[0]
            else:
                del node["type"]
                if types:
                    node["anyOf"] = [{"type": t} for t in types]
        if "enum" in node:
            self.enum(node)
            nullable = nullable or bool(node.pop("_null", False))
        if "default" in node and (default := node.pop("default")) is not None:
            _note(node, f"Default: {_json(default)}.")
        self.bounds(node)
        fmt = node.get("format")
        if fmt is not None and fmt not in _GEMINI_FORMATS.get(str(node.get("type")), ()):
            _note(node, f"Format: {node.pop('format')}.")
        if "properties" in node:
            node["properties"] = {
                name: self.convert(sub, f"{path}.properties.{name}", refs)
                for name, sub in node["properties"].items()
            }
            node["required"] = [r for r in node.get("required", []) if r in node["properties"]]
            if not node["required"]:
                del node["required"]
        if "items" in node:
            node["items"] = self.convert(node["items"], f"{path}.items", refs)
        if nullable:
            node["nullable"] = True
        return {k: v for k, v in node.items() if k in GEMINI_KEYS}

    @staticmethod
    def enum(node: Schema) -> None:
        values = list(node["enum"])
        if None in values:
            values.remove(None)
            node["_null"] = True
        if values and all(isinstance(v, str) for v in values):
            node["enum"] = values
            node.setdefault("type", "string")
        else:
            del node["enum"]
            _note(node, "Allowed values: " + ", ".join(_json(v) for v in values) + ".")

    @staticmethod
    def bounds(node: Schema) -> None:
        for key, base, sign, op in (
            ("exclusiveMinimum", "minimum", 1, ">"),
            ("exclusiveMaximum", "maximum", -1, "<"),
        ):
            if key not in node:
                continue
            value = node.pop(key)
            if node.get("type") == "integer" and isinstance(value, int):
                node[base] = value + sign
            else:
                _note(node, f"Must be {op} {value}.")
