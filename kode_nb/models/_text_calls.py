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
- ``[TOOL_CALLS]`` followed by a JSON list (Mistral) or by ``name[ARGS]{...}`` pieces.

Text is read as calls only when it is *nothing but* calls, each to a tool in ``names`` (when
given) with an object for arguments: an answer that mentions a tool, quotes a call inside a
sentence or calls a tool that was not offered stays text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

__all__ = ["TextCall", "parse_text_calls"]


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
_decoder = json.JSONDecoder()


def parse_text_calls(text: str, names: Collection[str] | None = None) -> list[TextCall] | None:
    """The calls ``text`` consists of, or ``None`` when it is not nothing but calls (to tools in
    ``names``, when given)."""
    body = text.strip()
    if not body:
        return None
    body = body.replace(_PYTHON_TAG, " ").replace("<|eom_id|>", " ").replace("<|eot_id|>", " ")
    if _MISTRAL in body:
        head, _, rest = body.partition(_MISTRAL)
        if head.strip():
            return None
        body = rest.replace(_MISTRAL, " ")
        calls = _mistral_args(body)
        if calls is not None:
            return _checked(calls, names)
    body = _FENCE_LINE.sub(" ", _TAG.sub(" ", body))
    values = _json_values(body)
    if not values:
        return None
    calls = []
    for value in values:
        items = value if isinstance(value, list) else [value]
        if not items:
            return None
        for item in items:
            call = _call(item)
            if call is None:
                return None
            calls.append(call)
    return _checked(calls, names)


def _checked(calls: list[TextCall], names: Collection[str] | None) -> list[TextCall] | None:
    if not calls or (names is not None and any(c.name not in names for c in calls)):
        return None
    return calls


def _json_values(body: str) -> list[Any] | None:
    """``body`` as one or more JSON values separated only by whitespace, commas or semicolons."""
    values: list[Any] = []
    i, n = 0, len(body)
    while True:
        while i < n and body[i] in _SEPARATORS:
            i += 1
        if i >= n:
            return values
        if body[i] not in "{[":
            return None
        try:
            value, i = _decoder.raw_decode(body, i)
        except ValueError:
            return None
        values.append(value)


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


def _mistral_args(body: str) -> list[TextCall] | None:
    """``name[ARGS]{...}`` pieces (the newer Mistral form), or ``None`` when not that form."""
    calls: list[TextCall] = []
    i, n = 0, len(body)
    while True:
        while i < n and body[i] in _SEPARATORS:
            i += 1
        if i >= n:
            return calls or None
        match = _MISTRAL_ARGS.match(body, i)
        if match is None:
            return None
        try:
            arguments, i = _decoder.raw_decode(body, match.end())
        except ValueError:
            return None
        if not isinstance(arguments, dict):
            return None
        calls.append(TextCall(match.group(1), json.dumps(arguments, ensure_ascii=False)))
