"""Built-in ``data`` tools (``group:data``): JSON and base64 conversions. Pure, no side effects.

============== ===== ==================================================================
json_parse     other JSON text -> ``{"data": value}``
json_stringify other a value -> JSON text (compact, or pretty with ``pretty=true``)
base64_encode  other text -> base64 (standard or URL-safe alphabet)
base64_decode  other base64 -> text (missing padding is tolerated)
============== ===== ==================================================================
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from kode_nb.builtins._common import make_tool
from kode_nb.builtins._files import check_encoding
from kode_nb.errors import ToolError
from kode_nb.tools._model import Tool

__all__ = ["data_tools"]


def json_parse(text: str) -> dict[str, Any]:
    """Parse JSON text into a value.

    Args:
        text: The JSON text.
    """
    try:
        return {"data": json.loads(text)}
    except json.JSONDecodeError as exc:
        raise ToolError(
            "json_parse",
            f"Invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno} "
            f"(character {exc.pos}).",
        ) from None


def json_stringify(data: Any, pretty: bool = False, sort_keys: bool = False) -> str:
    """Serialize a value as JSON text.

    Args:
        data: Any JSON value (object, array, string, number, boolean or null).
        pretty: Indent by two spaces, one item per line.
        sort_keys: Sort object keys.
    """
    return json.dumps(
        data,
        ensure_ascii=False,
        sort_keys=sort_keys,
        indent=2 if pretty else None,
        separators=None if pretty else (",", ":"),
    )


def base64_encode(text: str, encoding: str = "utf-8", url_safe: bool = False) -> str:
    """Encode text as base64.

    Args:
        text: The text to encode.
        encoding: How the text becomes bytes first.
        url_safe: Use the URL-safe alphabet ("-" and "_" instead of "+" and "/").
    """
    enc = check_encoding("base64_encode", encoding)
    try:
        data = text.encode(enc)
    except UnicodeEncodeError as exc:
        raise ToolError(
            "base64_encode",
            f"Character {text[exc.start]!r} at position {exc.start} cannot be "
            f"encoded as {enc}; use encoding='utf-8'.",
        ) from None
    encoded = base64.urlsafe_b64encode(data) if url_safe else base64.b64encode(data)
    return encoded.decode("ascii")


def base64_decode(encoded: str, encoding: str = "utf-8", url_safe: bool = False) -> str:
    """Decode base64 into text.

    Args:
        encoded: The base64 text (whitespace and missing "=" padding are tolerated).
        encoding: How the decoded bytes become text.
        url_safe: The input uses the URL-safe alphabet ("-" and "_").
    """
    enc = check_encoding("base64_decode", encoding)
    compact = "".join(encoded.split())
    compact += "=" * (-len(compact) % 4)
    try:
        raw = compact.encode("ascii")
        data = base64.b64decode(raw, altchars=b"-_" if url_safe else None, validate=True)
    except (binascii.Error, UnicodeEncodeError) as exc:
        hint = (
            ""
            if url_safe or not any(c in compact for c in "-_")
            else (" It contains '-' or '_': pass url_safe=true for URL-safe base64.")
        )
        raise ToolError("base64_decode", f"Invalid base64: {exc}.{hint}") from None
    try:
        return data.decode(enc)
    except UnicodeDecodeError:
        raise ToolError(
            "base64_decode",
            f"The decoded data ({len(data)} bytes) is not {enc} text; it may be "
            "binary. Pass encoding= if it is text in another encoding.",
        ) from None


def data_tools() -> list[Tool]:
    """New ``json_parse``, ``json_stringify``, ``base64_encode``, ``base64_decode`` tools."""
    return [
        make_tool(fn, "data", kind="other", category="data")
        for fn in (json_parse, json_stringify, base64_encode, base64_decode)
    ]
