"""Tool calls written as text: recognise them, so they can become real calls.

Small local models often write the call they mean to make into the answer text instead of the
server's ``tool_calls`` field (``docs/model-servers.md``): Qwen2.5 on llama-server writes
``{"name": "add", "arguments": {"a": 1, "b": 2}}``, sometimes in a fenced ``json`` block, sometimes
several one after the other. :func:`parse_text_calls` reads every form met on real servers:

- JSON objects with ``name`` and ``arguments`` (or ``parameters``), bare, fenced, one per line, a
  JSON list of them, or wrapped as ``{"function": {...}}`` / ``{"type": "function", ...}``
  (the Llama 3 JSON form); ``arguments`` may be an object or a string holding one;
- ``<tool_call>…</tool_call>`` blocks (Qwen, Hermes), ``<function_call>`` ones, and a leading
  ``<|python_tag|>`` (Llama 3);
- ``[TOOL_CALLS]`` followed by a JSON list (Mistral) or by ``name[ARGS]{...}`` pieces;
- ``functions.NAME:`` followed by the arguments object (llama-cpp-python's
  ``chatml-function-calling`` syntax, which a model writes into its answer, HTML-escaped too).

Text is read as calls only when it is *nothing but* calls with an object for arguments, at
least one of them to a tool in ``names`` (when given): an answer that mentions a tool, quotes a
call inside a sentence or calls only tools that were not offered stays text. A call to a tool not
offered beside one that was is kept as a call: the agent answers it with an error naming the
tools it has (it never runs).

Two malformed forms small models write are mended (:func:`read_text_calls` says which):

- the last call missing only its closing braces or brackets at the very end of the text (strings
  respected; nothing else may be missing): they are added;
- an answer cut at the length limit (``cut``) after one or more complete calls: the truncated
  fragment after them is dropped (never repaired: its arguments may be cut short).

A call written with its JSON and tags HTML-escaped (``&lt;tool_call&gt;{&quot;name&quot;: ...``,
``&#34;``), as a model copies from a chat template that escapes the messages it renders
(llama-cpp-python's ``chatml-function-calling``), is read unescaped when the text as it stands is
no call (``unescaped``).

The same call written several times (same tool, same arguments) is one call. A call-shaped
object that is no valid call (``arguments`` without a ``name``, say) written beside one or more
valid calls is dropped and counted (``malformed``); an answer with no valid call stays text.
"""

from __future__ import annotations

import dataclasses
import html
import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["TextCall", "TextCalls", "parse_text_calls", "read_text_calls"]


@dataclass(frozen=True, slots=True)
class TextCall:
    """One call read from text."""

    name: str
    """The tool's name."""
    arguments: str
    """The arguments as JSON text (always an object)."""


_TAG = re.compile(r"</?(?:tool_call|tool_calls|function_call|functioncall)>", re.I)
_FENCE_LINE = re.compile(r"(?m)^[ \t]*```[\w-]*[ \t]*$")
_PYTHON_TAG = "<|python_tag|>"
_MISTRAL = "[TOOL_CALLS]"
_MISTRAL_ARGS = re.compile(r"\s*([A-Za-z_][\w.-]*)\[ARGS\]")
_SEPARATORS = " \t\r\n,;"
_FUNCTIONS_ARGS = re.compile(r"functions\.([A-Za-z_][\w.-]*)[ \t]*:[ \t]*\n?")
"""``functions.NAME:`` then the arguments object: the call syntax of llama-cpp-python's
``chatml-function-calling`` template, which a model copies into its answer."""
_TAIL_OPENER = re.compile(r"`{1,3}[\w-]*|</?[A-Za-z_]*")
"""What an answer cut at the length limit may end with after its calls besides a JSON fragment:
the start of a fence or of a tag."""
_CLOSERS = {"{": "}", "[": "]"}
_decoder = json.JSONDecoder()


@dataclass(frozen=True, slots=True)
class TextCalls:
    """The calls read from text, and what was mended to read them."""

    calls: list[TextCall]
    """Each distinct call, in the order first written."""
    repaired: bool = False
    """The last call's missing closing braces or brackets were added."""
    truncated: bool = False
    """A fragment cut at the length limit after the complete calls was dropped."""
    repeats: int = 0
    """How many identical repeats of a call were dropped."""
    malformed: int = 0
    """How many call-shaped objects that are no valid call were dropped."""
    unescaped: bool = False
    """The text was read with its HTML entities (``&quot;``, ``&#34;``, ``&lt;``...) unescaped."""
    requoted: bool = False
    """The text was read with its Python-quoted strings, bare-word values and Python literals
    made JSON."""


def parse_text_calls(
    text: str, names: Collection[str] | None = None, *, cut: bool = False
) -> list[TextCall] | None:
    """The calls ``text`` consists of, or ``None`` when it is not nothing but calls (to tools in
    ``names``, when given); see :func:`read_text_calls`."""
    found = read_text_calls(text, names, cut=cut)
    return None if found is None else found.calls


def read_text_calls(
    text: str, names: Collection[str] | None = None, *, cut: bool = False
) -> TextCalls | None:
    """The calls ``text`` consists of, or ``None`` when it is not nothing but calls (to tools in
    ``names``, when given). ``cut``: the answer ended at the length limit, so a fragment after
    complete calls is dropped instead of its closing brackets being added."""
    found = _read(text, names, cut=cut)
    unescaped = False
    if found is None and _ENTITY.search(text):
        text = html.unescape(text)
        found = _read(text, names, cut=cut)
        unescaped = True
    if found is None and _CALL_START.match(text):
        json_text = _requoted(text)
        found = None if json_text in (None, text) else _read(json_text, names, cut=cut)
        if found is not None:
            found = dataclasses.replace(found, requoted=True)
    if found is not None and unescaped:
        found = dataclasses.replace(found, unescaped=True)
    return found


_CALL_START = re.compile(r"\s*(?:[{\[<`]|functions\.)")
"""How text that is nothing but calls starts (prose is never requoted)."""
_QUOTED = re.compile(r""""(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'""", re.S)
_IN_SINGLE_QUOTES = re.compile(r'\\(.)|"', re.S)
_PY_LITERALS = re.compile(r"\b(True|False|None)\b")
_JSON_LITERALS = {"True": "true", "False": "false", "None": "null"}
_LITERAL_WORDS = frozenset({*_JSON_LITERALS, *_JSON_LITERALS.values()})
_BARE_VALUE = re.compile(
    r"(:[ \t]*)([A-Za-z_][\w.\-]*(?:[ \t]+[A-Za-z_][\w.\-]*)*)(?=[ \t]*[,}\]])"
)
"""A value written as words without quotes (``{"city": Paris}``, ``{"city": New York}``)."""


_ENTITY = re.compile(r"&(?:quot|lt|gt|amp|apos|#34|#39|#x22|#x27);")
"""An HTML entity of a character JSON or a call tag is written with."""


def _requoted(text: str) -> str | None:
    """``text`` with each single-quoted string and each bare-word value written as a JSON string
    and ``True``, ``False`` and ``None`` outside strings as ``true``, ``false`` and ``null``;
    ``None`` when a quote is left unclosed. Double-quoted strings are kept as written."""
    out: list[str] = []
    end = 0
    for match in _QUOTED.finditer(text):
        gap = _json_literals(text[end : match.start()])
        if gap is None:
            return None
        quoted = match.group()
        if quoted[0] == "'":
            quoted = '"' + _IN_SINGLE_QUOTES.sub(_unquote_single, quoted[1:-1]) + '"'
        out += (gap, quoted)
        end = match.end()
    gap = _json_literals(text[end:])
    return None if gap is None else "".join(out) + gap


def _unquote_single(match: re.Match[str]) -> str:
    escaped = match.group(1)
    if escaped is None:  # a double quote inside single quotes
        return '\\"'
    return "'" if escaped == "'" else match.group()


def _json_literals(gap: str) -> str | None:
    """Text between strings with Python's literals made JSON's and values written as bare words
    quoted (``None``: a stray quote)."""
    if "'" in gap or '"' in gap:
        return None
    gap = _BARE_VALUE.sub(_quote_bare, gap)
    return _PY_LITERALS.sub(lambda m: _JSON_LITERALS[m.group(1)], gap)


def _quote_bare(match: re.Match[str]) -> str:
    word = match.group(2)
    if word in _LITERAL_WORDS:
        return match.group()
    return match.group(1) + json.dumps(word, ensure_ascii=False)


def _read(text: str, names: Collection[str] | None, *, cut: bool) -> TextCalls | None:
    body = text.strip()
    if not body:
        return None
    body = body.replace(_PYTHON_TAG, " ").replace("<|eom_id|>", " ").replace("<|eot_id|>", " ")
    if _MISTRAL in body:
        head, _, rest = body.partition(_MISTRAL)
        if head.strip():
            return None
        body = rest.replace(_MISTRAL, " ")
        calls = _headed_calls(body, _MISTRAL_ARGS)
        if calls is not None:
            return _checked(calls, names)
    if body.startswith("functions."):
        calls = _headed_calls(body, _FUNCTIONS_ARGS)
        return None if calls is None else _checked(calls, names)
    body = _FENCE_LINE.sub(" ", _TAG.sub(" ", body))
    read = _json_values(body, cut=cut)
    if read is None:
        return None
    values, mended = read
    if not values:
        return None
    calls = []
    malformed = 0
    for value in values:
        items = value if isinstance(value, list) else [value]
        if not items:
            return None
        for item in items:
            call = _call(item)
            if call is None:
                if not _call_shaped(item):
                    return None
                malformed += 1
                continue
            calls.append(call)
    found = _checked(calls, names, mended)
    return None if found is None else dataclasses.replace(found, malformed=malformed)


def _checked(
    calls: list[TextCall], names: Collection[str] | None, mended: str = ""
) -> TextCalls | None:
    if not calls or (names is not None and not any(c.name in names for c in calls)):
        return None
    first: dict[tuple[str, str], TextCall] = {}
    for call in calls:
        first.setdefault((call.name, json.dumps(json.loads(call.arguments), sort_keys=True)), call)
    distinct = list(first.values())
    return TextCalls(
        calls=distinct,
        repaired=mended == "repaired",
        truncated=mended == "truncated",
        repeats=len(calls) - len(distinct),
    )


def _json_values(body: str, *, cut: bool = False) -> tuple[list[Any], str] | None:
    """``body`` as one or more JSON values separated only by whitespace, commas or semicolons,
    and how its end was mended: ``""`` (it was not), ``"repaired"`` (the last value's missing
    closing brackets added) or ``"truncated"`` (``cut``: a fragment after the values dropped)."""
    values: list[Any] = []
    i, n = 0, len(body)
    while True:
        while i < n and body[i] in _SEPARATORS:
            i += 1
        if i >= n:
            return values, ""
        tail = body[i:].rstrip()
        if body[i] not in "{[":
            if cut and values and _TAIL_OPENER.fullmatch(tail):
                return values, "truncated"
            return None
        try:
            value, i = _decoder.raw_decode(body, i)
        except ValueError:
            opened = _open_brackets(tail)
            if opened is None:
                return None
            if cut:
                return (values, "truncated") if values else None
            closers, in_string = opened
            if in_string:
                return None
            try:
                value, end = _decoder.raw_decode(tail + closers)
            except ValueError:
                return None
            if end != len(tail) + len(closers):
                return None
            values.append(value)
            return values, "repaired"
        values.append(value)


def _open_brackets(tail: str) -> tuple[str, bool] | None:
    """For ``tail``, one JSON value cut before its end: the closing brackets it lacks (innermost
    first) and whether it was cut inside a string; ``None`` when it is no such value (a closer
    that does not match, or the value closed before the end)."""
    stack: list[str] = []
    in_string = escaped = False
    for index, char in enumerate(tail):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in _CLOSERS:
            stack.append(_CLOSERS[char])
        elif char in "}]":
            if not stack or stack.pop() != char:
                return None
            if not stack and index < len(tail) - 1:
                return None
    if not stack:
        return None
    return "".join(reversed(stack)), in_string


_CALL_KEYS = frozenset({"name", "arguments", "parameters", "function"})


def _call_shaped(item: Any) -> bool:
    """An object meant as a call that is no valid one: only call keys, ``arguments`` or
    ``parameters`` among them (plain JSON data never is)."""
    if not isinstance(item, dict) or not item or set(item) - _CALL_KEYS - {"type", "id"}:
        return False
    return bool({"arguments", "parameters", "function"} & set(item))


def _call(item: Any) -> TextCall | None:
    """One ``{"name": ..., "arguments": {...}}`` object (or a wrapped one) as a call."""
    if not isinstance(item, dict):
        return None
    if isinstance(item.get("function"), dict):
        if set(item) - {"function", "type", "id", "index"}:
            return None
        item = item["function"]
    item = {k: v for k, v in item.items() if k not in ("type", "id")}
    name = item.get("name")
    keys = set(item) - {"name"}
    if not isinstance(name, str) or not name.strip() or len(keys) != 1:
        return None
    key = keys.pop()
    if key not in ("arguments", "parameters", "args", "input"):
        return None
    arguments = item[key]
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return None
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        return None
    return TextCall(name=name.strip(), arguments=json.dumps(arguments, ensure_ascii=False))


def _headed_calls(body: str, head: re.Pattern[str]) -> list[TextCall] | None:
    """Pieces of ``head`` (its group 1 the tool's name) each followed by the arguments object:
    the newer Mistral form ``name[ARGS]{...}``, llama-cpp-python's ``functions.NAME: {...}``; or
    ``None`` when ``body`` is not nothing but those."""
    calls: list[TextCall] = []
    i, n = 0, len(body)
    while True:
        while i < n and body[i] in _SEPARATORS:
            i += 1
        if i >= n:
            return calls or None
        match = head.match(body, i)
        if match is None:
            return None
        try:
            arguments, i = _decoder.raw_decode(body, match.end())
        except ValueError:
            return None
        if not isinstance(arguments, dict):
            return None
        calls.append(TextCall(match.group(1), json.dumps(arguments, ensure_ascii=False)))
