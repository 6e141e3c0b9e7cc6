"""``%tool NAME key=value ... | JSON``: parse the arguments of a call from a magic line.

* ``%tool add {"a": 1, "b": 2}`` — a JSON object, passed as is.
* ``%tool add a=1 b=2`` — shell-quoted ``key=value`` pairs. A value is a string when the
  parameter's schema says string; otherwise it is read as JSON (``3``, ``true``, ``[1, 2]``),
  else as a Python literal as written (``True``, ``None``, ``[{'x': 1}]``: quotes kept), and
  kept as a string if it is neither. Spaces inside brackets or quotes do not split a pair
  (``a=[1, 2]``). ``key=$var`` passes the notebook variable ``var``.
"""

from __future__ import annotations

import ast
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


def _value(raw: str, written: str, schema: Any) -> Any:
    """The value of one pair: ``raw`` as the shell reads it, ``written`` as typed (quotes kept)."""
    types = _types(schema) - {"null"}
    if types == {"string"} and raw != "null":
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        pass
    except RecursionError:
        raise too_deep("%tool") from None
    try:
        return _json_shaped(ast.literal_eval(written))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return raw


def _json_shaped(value: Any) -> Any:
    """A Python literal as JSON data (a tuple becomes a list); TypeError for what JSON lacks."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_json_shaped(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _json_shaped(v) for k, v in value.items()}
    raise TypeError(f"not JSON data: {type(value).__name__}")


_CLOSE = {"[": "]", "{": "}", "(": ")"}
_SPACES = " \t\r\n"
"""What separates pairs: the shell's whitespace (a no-break space is part of a value)."""


def _unquoted(text: str) -> list[int] | None:
    """Where ``text`` is outside quotes (escaped characters excluded), by the shell's rules;
    None when a quote does not close."""
    found: list[int] = []
    quote, i = "", 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and quote == '"':
                i += 1
            elif ch == quote:
                quote = ""
        elif ch == "\\":
            i += 1  # an escaped character, taken as it is
        elif ch in "'\"":
            quote = ch
        else:
            found.append(i)
        i += 1
    return None if quote else found


def _pairs(text: str) -> list[tuple[str, str]]:
    """The pairs of a line, each as the shell reads it and as written: split at spaces outside
    quotes and outside brackets that close (``a=[1, 2]`` is one pair, ``t=:( n=1`` two);
    ValueError when a quote does not close (or a line ends in a lone backslash)."""
    places = _unquoted(text)
    if places is None:
        raise ValueError("No closing quotation")  # as shlex says it
    opened: list[int] = []
    grouped: set[int] = set()  # brackets that close, both ends
    for i in places:
        ch = text[i]
        if ch in _CLOSE:
            opened.append(i)
        elif opened and ch == _CLOSE[text[opened[-1]]]:
            grouped.update((opened.pop(), i))
    written: list[str] = []
    start, depth = 0, 0
    for i in places:
        ch = text[i]
        if i in grouped:
            depth += 1 if ch in _CLOSE else -1
        elif ch in _SPACES and depth == 0:
            written.append(text[start:i])
            start = i + 1
    written.append(text[start:])
    return [(_shell_word(token), token) for token in written if token.strip()]


def _shell_word(token: str) -> str:
    """``token`` as the shell reads one word: quotes and escapes taken away, every space in it
    kept as typed (``[a,  b]`` keeps both spaces)."""
    lexer = shlex.shlex(token, posix=True)
    lexer.whitespace = ""
    lexer.whitespace_split = True
    lexer.commenters = ""
    return "".join(lexer)


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
        pairs = _pairs(text)
    except ValueError as exc:
        raise UsageError(
            f"%tool: cannot split the arguments ({exc}): {text}. A value holding a quote goes "
            """in the other kind of quotes (text="don't"), or give the arguments as JSON."""
        ) from None
    props = parameters.get("properties") or {}
    out: dict[str, Any] = {}
    for token, typed in pairs:
        key, sep, raw = token.partition("=")
        written = typed.partition("=")[2] if typed.startswith(f"{key}=") else raw
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
            out[key] = _value(raw, written, props.get(key))
    return out
