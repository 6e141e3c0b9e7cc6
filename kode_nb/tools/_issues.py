"""Explaining invalid arguments: pydantic and ``jsonschema`` errors -> :class:`FieldIssue` list.

Issues are located by the *argument* names the model used (``"items.2.name"``): pydantic's
union-member tags are dropped from locations, a value that fails every member of a union gets one
issue ("expected integer or string"), unexpected fields list the allowed ones, and missing fields
say what type was expected (read from the JSON Schema).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from kode_nb._finite import NOT_FINITE
from kode_nb.errors import FieldIssue, _json_type

__all__ = [
    "describe",
    "jsonschema_issues",
    "not_an_object",
    "pydantic_issues",
    "schema_at",
    "unexpected_field",
]


def not_an_object(value: object, detail: str = "") -> FieldIssue:
    """The issue for arguments that are not a JSON object at all (path ``""``)."""
    kind = _json_type(value)
    article = "an" if kind[:1] in "aeiou" else "a"
    message = detail or f"arguments must be a JSON object of named arguments, not {article} {kind}"
    return FieldIssue(path="", message=message, expected="object", received=value)


# --------------------------------------------------------------------------- pydantic errors

_EXPECTED_BY_ERROR = {
    "int_type": "integer",
    "int_parsing": "integer",
    "int_from_float": "integer",
    "float_type": "number",
    "float_parsing": "number",
    "string_type": "string",
    "bool_type": "boolean",
    "bool_parsing": "boolean",
    "list_type": "array",
    "tuple_type": "array",
    "set_type": "array",
    "frozen_set_type": "array",
    "iterable_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
    "dataclass_type": "object",
    "dataclass_exact_type": "object",
    "none_required": "null",
    "bytes_type": "string",
}
_CONSTRAINTS = {
    "greater_than": "> {gt}",
    "greater_than_equal": ">= {ge}",
    "less_than": "< {lt}",
    "less_than_equal": "<= {le}",
    "multiple_of": "a multiple of {multiple_of}",
    "string_too_short": "at least {min_length} characters",
    "string_too_long": "at most {max_length} characters",
    "too_short": "at least {min_length} items",
    "too_long": "at most {max_length} items",
    "string_pattern_mismatch": "a string matching {pattern}",
}
_SCALARS = (str, bytes, int, float, bool, type(None))


def pydantic_issues(
    exc: ValidationError, raw: object, schema: Mapping[str, Any]
) -> list[FieldIssue]:
    """Turn a pydantic ``ValidationError`` into issues located by argument names."""
    data = raw
    if isinstance(raw, (str, bytes, bytearray)):
        try:
            data = json.loads(raw)
        except ValueError:
            data = None
    issues: list[FieldIssue] = []
    for error in exc.errors(include_url=False):
        kind = error["type"]
        ctx = error.get("ctx") or {}
        loc = error["loc"]
        if not loc and kind in ("model_type", "dict_type", "model_attributes_type"):
            issues.append(not_an_object(error["input"]))
            continue
        if not loc and kind == "json_invalid":
            detail = f"arguments must be a JSON object, but the text is not valid JSON ({ctx.get('error', '')})"
            issues.append(not_an_object(error["input"], detail))
            continue
        segments = _real_path(loc, data, missing=kind == "missing")
        path = ".".join(segments)
        if kind == "missing":
            expected = describe(schema_at(schema, segments), schema)
            issues.append(
                FieldIssue(
                    path=path, message="required field is missing", expected=expected, missing=True
                )
            )
            continue
        if kind == "extra_forbidden":
            message = unexpected_field(schema_at(schema, segments[:-1]))
            issues.append(FieldIssue(path=path, message=message, received=error["input"]))
            continue
        expected = _EXPECTED_BY_ERROR.get(kind)
        if kind == "finite_number":
            expected, message = "number", NOT_FINITE
        elif expected is not None:
            message = f"expected {expected}"
        elif kind in ("literal_error", "enum") and "expected" in ctx:
            expected = str(ctx["expected"])
            message = f"expected {expected}"
        else:
            template = _CONSTRAINTS.get(kind)
            expected = (
                template.format(**ctx)
                if template
                else describe(schema_at(schema, segments), schema)
            )
            message = re.sub(r"^\w+ should\b", "should", error["msg"])
            message = re.sub(r"^(Value error|Assertion failed), ", "", message)
        issues.append(
            FieldIssue(path=path, message=message, expected=expected, received=error["input"])
        )
    return _merge_union_branches(issues)


def _real_path(loc: tuple[int | str, ...], data: object, *, missing: bool) -> list[str]:
    """Drop the union-member tags pydantic puts in ``loc``, keeping real keys and indexes."""
    node = data
    out: list[str] = []
    for i, seg in enumerate(loc):
        last = i == len(loc) - 1
        if isinstance(node, Mapping) and isinstance(seg, str):
            if seg in node:
                out.append(seg)
                node = node[seg]
            elif last and missing:
                out.append(seg)
            continue  # a union tag (or a field we cannot see): not part of the path
        if isinstance(node, (list, tuple)) and isinstance(seg, int) and 0 <= seg < len(node):
            out.append(str(seg))
            node = node[seg]
            continue
        if isinstance(node, _SCALARS) and not (last and missing):
            continue  # tags below a scalar value
        out.append(str(seg))
        node = None if isinstance(node, _SCALARS) else getattr(node, str(seg), None)
    return out


def _merge_union_branches(issues: list[FieldIssue]) -> list[FieldIssue]:
    """One issue per path: a value that failed every member of a union says "expected A or B"."""
    by_path: dict[tuple[str, bool], list[FieldIssue]] = {}
    for issue in issues:
        by_path.setdefault((issue.path, issue.missing), []).append(issue)
    merged: list[FieldIssue] = []
    for (path, _missing), group in by_path.items():
        if len(group) == 1:
            merged.append(group[0])
            continue
        if any(i.message == NOT_FINITE for i in group):  # a number, but not a finite one
            merged.append(next(i for i in group if i.message == NOT_FINITE))
            continue
        expected = list(dict.fromkeys(i.expected for i in group if i.expected))
        if "number" in expected and "integer" in expected:
            expected.remove("integer")
        text = " or ".join(expected) or None
        message = f"expected {text}" if text else "; ".join(dict.fromkeys(i.message for i in group))
        merged.append(
            FieldIssue(
                path=path,
                message=message,
                expected=text,
                received=group[0].received,
                missing=group[0].missing,
            )
        )
    return merged


def unexpected_field(parent: Mapping[str, Any] | None) -> str:
    """The message for a field the object at ``parent`` (a schema) does not allow."""
    allowed = list((parent or {}).get("properties") or ())
    if not allowed:
        return "unexpected field; no fields are allowed here"
    return "unexpected field; allowed fields: " + ", ".join(allowed)


# --------------------------------------------------------------------------- jsonschema errors


def jsonschema_issues(errors: Sequence[Any], root: Mapping[str, Any]) -> list[FieldIssue]:
    """Turn ``jsonschema`` validation errors into issues, one per field, in path order."""
    issues: dict[tuple[str, bool], FieldIssue] = {}
    for error in errors:
        parent = [str(p) for p in error.absolute_path]
        keyword, value, instance = error.validator, error.validator_value, error.instance
        found: list[FieldIssue] = []
        if keyword == "required" and isinstance(instance, Mapping):
            for name in value:
                if name not in instance:
                    where = _child(error.schema, name, root)
                    found.append(
                        FieldIssue(
                            path=".".join([*parent, name]),
                            message="required field is missing",
                            expected=describe(where, root),
                            missing=True,
                        )
                    )
        elif keyword == "additionalProperties" and isinstance(instance, Mapping):
            known = error.schema.get("properties") or {}
            patterns = list(error.schema.get("patternProperties") or {})
            for name in instance:
                if name not in known and not any(re.search(p, name) for p in patterns):
                    found.append(
                        FieldIssue(
                            path=".".join([*parent, name]),
                            message=unexpected_field(error.schema),
                            received=instance[name],
                        )
                    )
        else:
            expected: str | None
            if keyword == "type":
                expected = " or ".join(value) if isinstance(value, list) else str(value)
                message = f"expected {expected}"
            elif keyword == "enum":
                expected = "one of " + ", ".join(json.dumps(v) for v in value)
                message = f"expected {expected}"
            else:
                expected = (
                    describe(error.schema, root)
                    if keyword in ("anyOf", "oneOf")
                    else f"{keyword} {json.dumps(value, default=str)}"
                )
                message = error.message
            found.append(
                FieldIssue(
                    path=".".join(parent), message=message, expected=expected, received=instance
                )
            )
        for issue in found:
            issues.setdefault((issue.path, issue.missing), issue)
    return [issues[key] for key in sorted(issues)]


# --------------------------------------------------------------------------- schema walking


def _resolve(node: Any, root: Mapping[str, Any]) -> Any:
    for _ in range(32):
        if not (isinstance(node, Mapping) and isinstance(node.get("$ref"), str)):
            return node
        ref: str = node["$ref"]
        if not ref.startswith("#"):
            return None
        target: Any = root
        for part in [p for p in ref[1:].split("/") if p]:
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        node = target
    return None


def schema_at(root: Mapping[str, Any], segments: Sequence[str]) -> Mapping[str, Any] | None:
    """The subschema describing the value at ``segments`` (best effort; ``None`` if unknown)."""
    node = _resolve(root, root)
    for seg in segments:
        node = _child(node, seg, root)
        if node is None:
            return None
    return node if isinstance(node, Mapping) else None


def _child(node: Any, seg: str, root: Mapping[str, Any]) -> Any:
    if not isinstance(node, Mapping):
        return None
    options = [node] + [
        _resolve(n, root) for k in ("anyOf", "oneOf", "allOf") for n in node.get(k) or ()
    ]
    for option in options:
        if not isinstance(option, Mapping):
            continue
        if seg.isdigit():
            prefix = option.get("prefixItems")
            if isinstance(prefix, list) and int(seg) < len(prefix):
                return _resolve(prefix[int(seg)], root)
            if isinstance(option.get("items"), Mapping):
                return _resolve(option["items"], root)
        props = option.get("properties")
        if isinstance(props, Mapping) and seg in props:
            return _resolve(props[seg], root)
        extra = option.get("additionalProperties")
        if isinstance(extra, Mapping):
            return _resolve(extra, root)
    return None


def describe(node: Mapping[str, Any] | None, root: Mapping[str, Any] | None = None) -> str | None:
    """A short human description of a subschema's type (``"integer"``, ``"'a' or 'b'"``...)."""
    node = _resolve(node, root or {})
    if not isinstance(node, Mapping):
        return None
    if "enum" in node:
        return " or ".join(json.dumps(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    kind = node.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    for key in ("anyOf", "oneOf"):
        if isinstance(node.get(key), list):
            parts = [describe(n, root) for n in node[key]]
            return " or ".join(dict.fromkeys(p for p in parts if p)) or None
    if "properties" in node:
        return "object"
    return None
