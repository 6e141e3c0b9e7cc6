"""Generate JSON values that satisfy a JSON Schema (for :class:`~kode_nb.models.TestModel`).

Supported: ``type`` (single or list), ``enum``, ``const``, ``$ref`` (local pointers, recursive
schemas are cut off by depth), ``allOf``/``anyOf``/``oneOf``, string ``minLength``/
``maxLength``/``format``/simple ``pattern``, number and integer bounds and ``multipleOf``, array
``items``/``prefixItems``/``minItems``/``maxItems``/``uniqueItems``, object ``properties``/
``required``/``additionalProperties``/``minProperties``. Other keywords are ignored, so a schema
leaning on them may still get an invalid value (the executor then reports it, as for any model).
"""

from __future__ import annotations

import importlib
import json
import math
import random
import re
import uuid
from collections.abc import Mapping
from typing import Any

__all__ = ["SchemaGenerationError", "generate_value"]

_MAX_DEPTH = 8
_WORDS = ("alpha", "bravo", "delta", "echo", "kilo", "lima", "oscar", "tango", "zulu")


class SchemaGenerationError(ValueError):
    """No value can be generated for the schema (``false``, contradictory bounds, bad ``$ref``)."""


def generate_value(schema: Mapping[str, Any] | bool, rng: random.Random) -> Any:
    """A value valid for ``schema`` (a whole schema: ``$ref`` pointers resolve against it)."""
    return _Generator(schema, rng).value(schema, 0)


class _Generator:
    def __init__(self, root: Mapping[str, Any] | bool, rng: random.Random) -> None:
        self.root = root
        self.rng = rng

    def value(self, schema: Mapping[str, Any] | bool, depth: int) -> Any:
        if schema is True:
            return self.rng.choice(_WORDS)
        if schema is False or not isinstance(schema, Mapping):
            raise SchemaGenerationError(f"no value satisfies the schema {schema!r}")
        schema = self._flatten(schema, depth)
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return self.rng.choice(schema["enum"])
        options = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(options, list) and options:
            return self.value(self._pick_option(options, depth), depth + 1)
        kind = self._type(schema)
        if kind == "null":
            return None
        if kind == "boolean":
            return self.rng.random() < 0.5
        if kind == "integer":
            return self._integer(schema)
        if kind == "number":
            return self._number(schema)
        if kind == "array":
            return self._array(schema, depth)
        if kind == "object":
            return self._object(schema, depth)
        return self._string(schema)

    # ------------------------------------------------------------------ structure

    def _resolve(self, ref: str) -> Any:
        if not ref.startswith("#"):
            raise SchemaGenerationError(f"only local $ref pointers are supported, got {ref!r}")
        node: Any = self.root
        for part in filter(None, ref[1:].split("/")):
            key = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, Mapping) and key in node:
                node = node[key]
            elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                raise SchemaGenerationError(f"$ref {ref!r} points at nothing")
        return node

    def _flatten(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        """Inline ``$ref`` and merge ``allOf`` into one schema."""
        out = dict(schema)
        for _ in range(_MAX_DEPTH * 4):
            ref = out.pop("$ref", None)
            if not isinstance(ref, str):
                break
            target = self._resolve(ref)
            if target is False:
                raise SchemaGenerationError(f"$ref {ref!r} is the false schema")
            if isinstance(target, Mapping):
                out = {**target, **out}
        parts = out.pop("allOf", None)
        if isinstance(parts, list):
            for part in parts:
                if isinstance(part, Mapping):
                    out = _merge(out, self._flatten(part, depth))
        return out

    def _pick_option(self, options: list[Any], depth: int) -> Any:
        usable = [o for o in options if o is not False]
        if not usable:
            raise SchemaGenerationError("anyOf/oneOf has no satisfiable option")
        non_null = [o for o in usable if not (isinstance(o, Mapping) and o.get("type") == "null")]
        pool = non_null or usable
        if depth >= _MAX_DEPTH:  # deep in a recursive schema: prefer options without a $ref
            flat = [o for o in pool if not (isinstance(o, Mapping) and "$ref" in o)]
            pool = flat or ([o for o in usable if o not in pool] or pool)
        return self.rng.choice(pool)

    def _type(self, schema: Mapping[str, Any]) -> str:
        kind = schema.get("type")
        if isinstance(kind, list):
            non_null = [k for k in kind if k != "null"] or kind
            kind = self.rng.choice(non_null) if non_null else None
        if isinstance(kind, str):
            return kind
        if "properties" in schema or "additionalProperties" in schema:
            return "object"
        if "items" in schema or "prefixItems" in schema:
            return "array"
        if any(k in schema for k in ("minimum", "maximum", "exclusiveMinimum", "multipleOf")):
            return "number"
        return "string"

    # ------------------------------------------------------------------ scalars

    def _bounds(self, schema: Mapping[str, Any], step: float) -> tuple[float, float]:
        lo, hi = -math.inf, math.inf
        if isinstance(schema.get("minimum"), (int, float)):
            lo = schema["minimum"]
        if isinstance(schema.get("exclusiveMinimum"), (int, float)):
            lo = max(lo, schema["exclusiveMinimum"] + step)
        if isinstance(schema.get("maximum"), (int, float)):
            hi = schema["maximum"]
        if isinstance(schema.get("exclusiveMaximum"), (int, float)):
            hi = min(hi, schema["exclusiveMaximum"] - step)
        if lo == -math.inf and hi == math.inf:
            lo, hi = 0, 100
        elif lo == -math.inf:
            lo = hi - 100
        elif hi == math.inf:
            hi = lo + 100
        if lo > hi:
            raise SchemaGenerationError(f"no number fits between {lo} and {hi}")
        return lo, hi

    def _integer(self, schema: Mapping[str, Any]) -> int:
        lo, hi = self._bounds(schema, 1)
        low, high = math.ceil(lo), math.floor(hi)
        step = schema.get("multipleOf")
        if isinstance(step, (int, float)) and step > 0:
            k_lo, k_hi = math.ceil(low / step), math.floor(high / step)
            for _ in range(20):
                value = self.rng.randint(k_lo, k_hi) * step if k_lo <= k_hi else None
                if value is not None and float(value).is_integer():
                    return int(value)
            raise SchemaGenerationError(f"no integer multiple of {step} fits in [{lo}, {hi}]")
        if low > high:
            raise SchemaGenerationError(f"no integer fits between {lo} and {hi}")
        return self.rng.randint(low, high)

    def _number(self, schema: Mapping[str, Any]) -> float | int:
        if isinstance(schema.get("multipleOf"), (int, float)):
            return (
                self._integer(schema)
                if float(schema["multipleOf"]).is_integer()
                else (self._multiple(schema))
            )
        lo, hi = self._bounds(schema, 1e-9)
        value = lo + (hi - lo) * self.rng.uniform(0.1, 0.9)
        rounded = round(value, 2)
        return rounded if lo <= rounded <= hi else value

    def _multiple(self, schema: Mapping[str, Any]) -> float:
        step = float(schema["multipleOf"])
        lo, hi = self._bounds(schema, step)
        k_lo, k_hi = math.ceil(lo / step), math.floor(hi / step)
        if k_lo > k_hi:
            raise SchemaGenerationError(f"no multiple of {step} fits in [{lo}, {hi}]")
        return self.rng.randint(k_lo, k_hi) * step

    def _string(self, schema: Mapping[str, Any]) -> str:
        fmt = schema.get("format")
        value = _format_value(fmt, self.rng) if isinstance(fmt, str) else None
        if value is None:
            lo = int(schema.get("minLength", 0) or 0)
            hi = int(schema.get("maxLength", max(lo, 12)))
            word = self.rng.choice(_WORDS)
            while len(word) < lo:
                word += "-" + self.rng.choice(_WORDS)
            value = word[: max(lo, min(hi, len(word)))]
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not _matches(pattern, value):
            value = _from_pattern(pattern, self.rng) or value
        return value

    # ------------------------------------------------------------------ containers

    def _array(self, schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        items = schema.get("items", True)
        if isinstance(items, list):  # draft 4-7 tuple form
            prefix, items = items, schema.get("additionalItems", True)
        prefix = prefix if isinstance(prefix, list) else []
        lo = int(schema.get("minItems", 0))
        hi = int(schema.get("maxItems", 1 << 30))
        if depth >= _MAX_DEPTH:
            count = max(lo, 0)
        else:
            count = self.rng.randint(max(lo, min(1, hi)), max(lo, min(hi, lo + 2, 3)))
        count = max(count, len(prefix)) if items is False else count
        out: list[Any] = [self.value(s, depth + 1) for s in prefix[:count]]
        seen = {json.dumps(v, sort_keys=True) for v in out}
        unique = bool(schema.get("uniqueItems"))
        while len(out) < count:
            if items is False:
                break
            for _ in range(20):
                value = self.value(items, depth + 1)
                if not unique or json.dumps(value, sort_keys=True) not in seen:
                    break
            else:
                if len(out) >= lo:
                    break
                raise SchemaGenerationError("cannot generate enough unique array items")
            seen.add(json.dumps(value, sort_keys=True))
            out.append(value)
        return out

    def _object(self, schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        props = schema.get("properties") or {}
        required = [r for r in schema.get("required", ()) if isinstance(r, str)]
        out: dict[str, Any] = {}
        for name, sub in props.items():
            if name in required or (depth < _MAX_DEPTH and self.rng.random() < 0.5):
                out[name] = self.value(sub, depth + 1)
        for name in required:
            if name not in out:  # required but not described: anything goes
                out[name] = self.value(schema.get("additionalProperties", True), depth + 1)
        extra = schema.get("additionalProperties")
        want = int(schema.get("minProperties", 0))
        if not props and isinstance(extra, Mapping) and depth < _MAX_DEPTH:
            want = max(want, 1)
        n = 0
        while len(out) < want and extra is not False:
            n += 1
            out[f"key{n}"] = self.value(extra if isinstance(extra, Mapping) else True, depth + 1)
        return out


def _merge(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(a)
    for key, value in b.items():
        if key == "properties" and isinstance(out.get(key), Mapping):
            out[key] = {**out[key], **value}
        elif key == "required" and isinstance(out.get(key), list):
            out[key] = list(dict.fromkeys([*out[key], *value]))
        else:
            out.setdefault(key, value)
    return out


def _format_value(fmt: str, rng: random.Random) -> str | None:
    day = rng.randint(1, 28)
    hour, minute = rng.randint(0, 23), rng.randint(0, 59)
    values = {
        "date": f"2024-03-{day:02d}",
        "date-time": f"2024-03-{day:02d}T{hour:02d}:{minute:02d}:00Z",
        "time": f"{hour:02d}:{minute:02d}:00",
        "duration": f"PT{hour + 1}H",
        "email": f"{rng.choice(_WORDS)}@example.com",
        "uri": f"https://example.com/{rng.choice(_WORDS)}",
        "url": f"https://example.com/{rng.choice(_WORDS)}",
        "uri-reference": f"/{rng.choice(_WORDS)}",
        "hostname": f"{rng.choice(_WORDS)}.example.com",
        "ipv4": f"192.0.2.{rng.randint(1, 254)}",
        "ipv6": f"2001:db8::{rng.randint(1, 0xFFFF):x}",
        "uuid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        "path": f"{rng.choice(_WORDS)}.txt",
    }
    return values.get(fmt)


def _matches(pattern: str, value: str) -> bool:
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return True  # an invalid pattern is not ours to judge


def _from_pattern(pattern: str, rng: random.Random) -> str | None:
    """A string matching a simple regex (literals, classes, repeats, groups, alternation)."""
    parser: Any = getattr(re, "_parser", None) or importlib.import_module("sre_parse")
    try:
        text = _emit(parser.parse(pattern), rng)
    except (re.error, _Unsupported, ValueError):
        return None
    return text if _matches(pattern, text) else None


class _Unsupported(Exception):
    pass


_CATEGORY_CHARS = {
    "CATEGORY_DIGIT": "0123456789",
    "CATEGORY_WORD": "abcdefghijklmnopqrstuvwxyz0123456789_",
    "CATEGORY_SPACE": " ",
    "CATEGORY_NOT_DIGIT": "abcxyz",
    "CATEGORY_NOT_WORD": "-. ",
    "CATEGORY_NOT_SPACE": "abcxyz",
}


def _emit(tokens: Any, rng: random.Random) -> str:
    out: list[str] = []
    for op, arg in tokens:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "ANY":
            out.append(rng.choice("abcxyz"))
        elif name == "IN":
            out.append(_emit_class(arg, rng))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, high, sub = arg
            count = rng.randint(low, max(low, min(high, low + 3)))
            out.extend(_emit(sub, rng) for _ in range(count))
        elif name == "SUBPATTERN":
            out.append(_emit(arg[-1], rng))
        elif name == "BRANCH":
            out.append(_emit(rng.choice(arg[1]), rng))
        elif name == "CATEGORY":
            out.append(rng.choice(_CATEGORY_CHARS.get(str(arg), "a")))
        elif name != "AT":
            raise _Unsupported(name)
    return "".join(out)


def _emit_class(items: Any, rng: random.Random) -> str:
    choices: list[str] = []
    for op, arg in items:
        name = str(op)
        if name == "NEGATE":
            raise _Unsupported(name)
        if name == "LITERAL":
            choices.append(chr(arg))
        elif name == "RANGE":
            choices.append(chr(rng.randint(arg[0], arg[1])))
        elif name == "CATEGORY":
            choices.append(rng.choice(_CATEGORY_CHARS.get(str(arg), "a")))
    if not choices:
        raise _Unsupported("empty class")
    return rng.choice(choices)
