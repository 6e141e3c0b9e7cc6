"""``%tool NAME key=value ... | JSON``: parse the arguments of a call from a magic line.

* ``%tool add {"a": 1, "b": 2}`` — a JSON object, passed as is.
* ``%tool add a=1 b=2`` — shell-quoted ``key=value`` pairs. A value is a string when the
  parameter's schema says string; otherwise it is read as JSON (``3``, ``true``, ``[1, 2]``),
  else as a Python literal as written (``True``, ``None``, ``[{'x': 1}]``: quotes kept), and
  kept as a string if it is neither. Spaces inside brackets or quotes do not split a pair
  (``a=[1, 2]``). ``key=$var`` passes the notebook variable ``var``.

The line is read in linear time (the regex engine finds quotes, brackets and spaces; a 2 MB value
is read in a fraction of a second). An argument nested deeper than :data:`MAX_SHOWN_DEPTH`,
holding itself or holding a lone surrogate, and a Python literal longer than
:data:`MAX_LITERAL`, are UsageErrors before anything runs or is shown.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from IPython.core.error import UsageError

from kode_nb.magics.nesting import check_nesting, nesting_depth, too_deep

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
    if len(written) > MAX_LITERAL and written.lstrip()[:1] in ("[", "{", "("):
        raise UsageError(
            f"%tool: a value of {len(written):,} characters that is not JSON: a Python literal "
            f"longer than {MAX_LITERAL:,} is not read. Give it as JSON, or pass it from a notebook "
            "variable (key=$var)."
        )
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
_QUOTED = re.compile(
    r"""'[^']*'|"[^"\\]*(?:\\[\s\S][^"\\]*)*+"|(?=[^'"])[^'"\\]*(?:\\[\s\S]?[^'"\\]*)*+"""
)
"""A quoted string, or a run of text outside quotes (escaped characters in it), by the shell's
rules."""
_SPECIAL = " \t\r\n[]{}()'\""
"""What an escape takes the meaning away from."""
_ESCAPED = re.compile(r"\\([\s\S])")
_BRACKETS = re.compile(r"[\[\]{}()]")
_SPACE_RUN = re.compile(r"[ \t\r\n]+")
"""What separates pairs: the shell's whitespace (a no-break space is part of a value)."""
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*+"?')
"""A JSON string (to the end of the text if it does not close)."""
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
MAX_SHOWN_DEPTH = 200
"""The deepest nesting of an argument (a notebook variable's value) ``%tool`` takes."""
MAX_LITERAL = 100_000
"""The longest value read as a Python literal (``ast.literal_eval`` takes seconds and hundreds
of MB for a few MB of text); a longer one is read as JSON only."""


def _brackets(text: str) -> str:
    """The brackets of ``text`` outside JSON strings, in order: what
    :func:`~kode_nb.magics.nesting.check_nesting` looks at, found by the regex engine (a line of
    megabytes is checked in milliseconds)."""
    return _NOT_BRACKET.sub("", _JSON_STRING.sub("", text))


def _blank(match: re.Match[str]) -> str:
    """A quoted string as ``_``s; in a run outside quotes, each escaped character as ``__``."""
    text = match.group()
    if text[0] in "'\"":
        return "_" * len(text)
    if "\\" not in text:
        return text
    text = text.replace("\\\\", "__")  # pairs first, left to right: as the escapes run
    for char in _SPECIAL:  # then every other escape that would split or quote
        text = text.replace("\\" + char, "__")
    return text


def _pairs(text: str) -> Iterator[tuple[str, str]]:
    """The pairs of a line, each as the shell reads it and as written: split at spaces outside
    quotes and outside brackets that close (``a=[1, 2]`` is one pair, ``t=:( n=1`` two);
    ValueError when a quote does not close (or a line ends in a lone backslash), as they come
    (a generator). Linear: quoted
    text and then bracketed text are blanked out by the regex engine, and the line is split at
    the spaces left; Python visits only the quotes and the brackets."""
    masked = _QUOTED.sub(_blank, text)
    if "'" in masked or '"' in masked:
        raise ValueError("No closing quotation")  # as shlex says it
    opened: list[int] = []
    grouped: list[int] = []  # brackets that close, both ends
    for mark in _BRACKETS.finditer(masked):
        i = mark.start()
        ch = masked[i]
        if ch in _CLOSE:
            opened.append(i)
        elif opened and ch == _CLOSE[masked[opened[-1]]]:
            grouped += (opened.pop(), i)
    grouped.sort()
    pieces: list[str] = []
    start, depth = 0, 0
    for i in grouped:
        if masked[i] in _CLOSE:
            if depth == 0:
                pieces.append(masked[start:i])
                start = i
            depth += 1
        else:
            depth -= 1
            if depth == 0:
                pieces.append("_" * (i + 1 - start))
                start = i + 1
    pieces.append(masked[start:])
    flat = "".join(pieces)
    start = 0
    for gap in _SPACE_RUN.finditer(flat):
        token = text[start : gap.start()]
        if token.strip():
            yield _shell_word(token), token
        start = gap.end()
    token = text[start:]
    if token.strip():
        yield _shell_word(token), token


def _split(text: str) -> Iterator[tuple[str, str]]:
    """:func:`_pairs`, its ValueError a UsageError (a line of a million bad pairs ends at the
    first)."""
    try:
        yield from _pairs(text)
    except ValueError as exc:
        raise UsageError(
            f"%tool: cannot split the arguments ({exc}): {text:.300}. A value holding a quote "
            """goes in the other kind of quotes (text="don't"), or give the arguments as JSON."""
        ) from None


_PIECE = re.compile(
    r"""'[^']*'|"[^"\\]*(?:\\[\s\S][^"\\]*)*+"|(?=[^'"])[^'"\\]*(?:\\[\s\S][^'"\\]*)*+"""
)
"""One piece of a shell word: a '...' or "..." string, or a run of text outside quotes (escaped
characters in it)."""
_IN_DOUBLE = re.compile(r'\\([\\"])')
"""In double quotes a backslash escapes only a backslash or a double quote."""
_OPEN_ESCAPE = re.compile(r'"[^"\\]*(?:\\[\s\S][^"\\]*)*+\\')
"""A double-quoted string that ends in a lone backslash (shlex: "No escaped character")."""


def _unescaped(text: str, *, quoted: bool = False) -> str:
    """Text with its escaped characters taken as they are: outside quotes a backslash escapes
    any character (``\\x`` is ``x``), in double quotes only a backslash or a double quote
    (``\\x`` stays). Escapes run left to right, so each pair of backslashes is one backslash;
    done with ``str.replace`` (at C speed)."""
    if "\0" in text:
        return (_IN_DOUBLE if quoted else _ESCAPED).sub(lambda m: m.group(1), text)
    text = text.replace("\\\\", "\0")
    text = text.replace('\\"', '"') if quoted else text.replace("\\", "")
    return text.replace("\0", "\\")


def _shell_word(token: str) -> str:
    """``token`` as the shell reads one word (POSIX rules, as :mod:`shlex` reads them): quotes
    and escapes taken away, every space in it kept as typed (``[a,  b]`` keeps both spaces).
    One pass over the text (shlex adds a character at a time to a string: a 2 MB value took
    minutes); ValueError as shlex raises it for a quote that does not close or a lone backslash
    at the end."""
    out: list[str] = []
    pos, end = 0, len(token)
    while pos < end:
        piece = _PIECE.match(token, pos)
        if piece is None or piece.end() == pos:  # a quote that does not close, or a lone
            # backslash at the very end
            lone = token[pos] == "\\" or _OPEN_ESCAPE.fullmatch(token, pos) is not None
            raise ValueError("No escaped character" if lone else "No closing quotation")
        text = piece.group()
        if text[0] == "'":
            out.append(text[1:-1])
        elif text[0] == '"':
            out.append(_unescaped(text[1:-1], quoted=True))
        elif "\\" in text:
            out.append(_unescaped(text))
        else:
            out.append(text)
        pos = piece.end()
    return "".join(out)


def parse_call_arguments(
    text: str, parameters: Mapping[str, Any], namespace: Mapping[str, Any]
) -> dict[str, Any]:
    """The arguments dict of a ``%tool`` line (see the module docstring); UsageError if malformed."""
    if not text:
        return {}
    check_nesting(_brackets(text), "%tool")
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
        _check_shown("the JSON arguments", data)
        return data
    props = parameters.get("properties") or {}
    out: dict[str, Any] = {}
    for token, typed in _split(text):
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
        _check_shown(f"{key}={raw[:40].encode('utf-8', 'backslashreplace').decode()}", out[key])
    return out


def _check_shown(where: str, value: Any) -> None:
    """UsageError, before anything runs or is shown, for an argument the call cannot take or
    its view cannot show: one nested deeper than :data:`MAX_SHOWN_DEPTH` (a notebook variable
    can be: Python's JSON writer recurses once per level, and the call's checks stop at 255) or
    holding itself, or text holding a lone surrogate (``"\\ud800"``: not UTF-8, so no output
    can carry it). Checked on the JSON the view writes, at C speed."""
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
        text.encode("utf-8")
    except RecursionError:
        text = ""
    except UnicodeEncodeError as exc:
        raise UsageError(
            f"%tool: {where}: the value holds a lone surrogate "
            f"({exc.object[exc.start : exc.end]!r}), which is not text any output can carry "
            "(UTF-8 has no such character); pass the string it stands for, or its bytes"
        ) from None
    except ValueError as exc:  # "Circular reference detected"
        raise UsageError(f"%tool: {where}: the value cannot be shown as JSON ({exc})") from None
    if not text or nesting_depth(_brackets(text), MAX_SHOWN_DEPTH) > MAX_SHOWN_DEPTH:
        raise UsageError(
            f"%tool: {where}: the value is nested more than {MAX_SHOWN_DEPTH} levels deep, too "
            "deep to show or check; flatten it, or call the tool from code "
            "(kode_nb.Executor.call)"
        )
