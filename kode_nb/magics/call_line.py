"""``%tool NAME key=value ... | JSON``: parse the arguments of a call from a magic line.

* ``%tool add {"a": 1, "b": 2}`` — a JSON object, passed as is.
* ``%tool add a=1 b=2`` — shell-quoted ``key=value`` pairs. A value is a string when the
  parameter's schema says string; otherwise it is read as JSON (``3``, ``true``, ``[1, 2]``)
  and kept as a string if it is not JSON. ``key=$var`` passes the notebook variable ``var``.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from typing import Any

from IPython.core.error import UsageError

from kode_nb.magics.nesting import check_nesting, too_deep

__all__ = ["parse_call_arguments", "split_call"]


def split_call(line: str) -> tuple[str, str]:
    """``(tool name, the rest of the line)``."""
    parts = line.strip().split(None, 1)
    if not parts:
        raise UsageError(
            "%tool needs a tool name: %tool NAME key=value ... or %tool NAME {JSON}. "
            "To define tools use the cell magic %%tool (see %tool?)."
        )
    name = parts[0]
    if name.startswith("-"):
        raise UsageError(
            f"%tool: {name!r} is not a tool name. Options like --kind belong to the cell magic: "
            "write %%tool (two percent signs) on the first line of a cell that defines a function."
        )
    return name, parts[1].strip() if len(parts) > 1 else ""


def _types(schema: Any) -> set[str]:
    if not isinstance(schema, Mapping):
        return set()
    if "enum" in schema:
        return {"string" if isinstance(v, str) else "other" for v in schema["enum"]}
    kind = schema.get("type")
    found = {kind} if isinstance(kind, str) else set(kind or ())
    for key in ("anyOf", "oneOf"):
        for sub in schema.get(key, ()):
            found |= _types(sub)
    return found


def _value(raw: str, schema: Any) -> Any:
    types = _types(schema) - {"null"}
    if types == {"string"} and raw != "null":
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw
    except RecursionError:
        raise too_deep("%tool") from None


def parse_call_arguments(
    text: str, parameters: Mapping[str, Any], namespace: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments dict of a ``%tool`` line (see the module docstring); UsageError if malformed."""
    if not text:
        return {}
    check_nesting(text, "%tool")
    if text[0] in "{[":
        try:
            data = json.loads(text)
        except RecursionError:
            raise too_deep("%tool") from None
        except json.JSONDecodeError as exc:
            raise UsageError(
                f"%tool: the arguments are not valid JSON ({exc.msg} at column {exc.colno}): {text}"
            ) from None
        if not isinstance(data, dict):
            raise UsageError(
                f"%tool: JSON arguments must be an object {{...}}, got {type(data).__name__}"
            )
        return data
    try:
        tokens = shlex.split(text)
    except ValueError as exc:
        raise UsageError(f"%tool: cannot split the arguments ({exc}): {text}") from None
    props = parameters.get("properties") or {}
    out: dict[str, Any] = {}
    for token in tokens:
        key, sep, raw = token.partition("=")
        if not sep or not key.isidentifier():
            raise UsageError(
                f"%tool: expected key=value or a JSON object, got {token!r} "
                '(e.g. %tool NAME path=notes.txt count=3, or %tool NAME {"count": 3})'
            )
        if key in out:
            raise UsageError(f"%tool: argument {key!r} is given twice")
        if raw.startswith("$") and raw[1:].isidentifier():
            if raw[1:] not in namespace:
                raise UsageError(
                    f"%tool: {key}={raw}: there is no variable {raw[1:]!r} in the notebook"
                )
            out[key] = namespace[raw[1:]]
        else:
            out[key] = _value(raw, props.get(key))
    return out
