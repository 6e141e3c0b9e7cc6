"""Prompted tool calling: the tools described in the system prompt, the calls read from text.

For a server whose own tool-calling path is broken for the request at hand (llama-cpp-python's
``chatml-function-calling`` ``auto`` step, which small models fail), the request is sent with
``tool_choice: "none"`` and the tools are described in the system prompt. The calls the model
writes are read back by :mod:`kode_nb.models._text_calls`.

Two forms:

- :func:`tools_prompt`, the Hermes form that Qwen2.5's and many other models' chat templates use
  (function signatures as JSON inside ``<tools>``, each call answered as a JSON object inside
  ``<tool_call>`` tags);
- :func:`plain_tools_prompt`, the tools in plain words with no quotes or angle brackets of its
  own, for a server that constrains the answer to :func:`call_schema` (so the prompt need not
  teach the call's syntax) and whose chat template HTML-escapes the messages (llama-cpp-python:
  a small model copies ``&#34;`` and ``&lt;tool_call&gt;`` back into its answers).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from kode_nb.models.base import ToolSpec

__all__ = ["call_schema", "plain_tools_prompt", "tools_prompt", "with_tools_prompt"]

_HEAD = (
    "# Tools\n\n"
    "You may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
)
_TAIL = (
    "\n</tools>\n\n"
    "For each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n"
    '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)
_PLAIN_HEAD = (
    "# Tools\n\n"
    "Call one of these functions to assist with the user query. Answer with the call: a JSON "
    "object with the name of the function and its arguments.\n"
)


def tools_prompt(tools: Sequence[ToolSpec]) -> str:
    """The system-prompt section describing ``tools`` and how to call them (Hermes form)."""
    lines = [
        json.dumps(
            {
                "type": "function",
                "function": {
                    "name": spec.name,
                    "description": spec.description,
                    "parameters": spec.parameters,
                },
            },
            ensure_ascii=False,
        )
        for spec in tools
    ]
    return _HEAD + "\n".join(lines) + _TAIL


_PLAIN_KEYS = (
    "Write it as a JSON object with exactly two keys: name, holding the function's name as a "
    "string, and arguments, holding an object with one key per argument.\n"
)
"""Said when no ``response_format`` schema gives the call its form (two tools' ``$defs``
clash): the keys spelled out, still with no quotes or angle brackets."""


def plain_tools_prompt(tools: Sequence[ToolSpec], *, keys: bool = False) -> str:
    """The system-prompt section describing ``tools`` in plain words: each tool's name and
    description, then one line per argument (``name (type, required): description``);
    ``keys``: the call's two keys spelled out too (when nothing else constrains its form)."""
    lines = [_PLAIN_HEAD + (_PLAIN_KEYS if keys else "")]
    for spec in tools:
        lines.append(f"- {spec.name}: {_one_line(spec.description) or 'no description'}")
        properties = spec.parameters.get("properties")
        required = spec.parameters.get("required") or ()
        if not isinstance(properties, Mapping) or not properties:
            lines.append("    (no arguments)")
            continue
        for name, schema in properties.items():
            need = "required" if name in required else "optional"
            described = _one_line(schema.get("description")) if isinstance(schema, Mapping) else ""
            lines.append(
                f"    {name} ({_type_words(schema)}, {need})"
                + (f": {described}" if described else "")
            )
    return "\n".join(lines)


def call_schema(tools: Sequence[ToolSpec]) -> dict[str, Any] | None:
    """A JSON Schema that only one call to one of ``tools`` satisfies:
    ``{"name": <tool>, "arguments": <that tool's parameters>}``; ``None`` when two tools define
    the same ``$defs`` name differently (their references could not both resolve)."""
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": spec.name}, "arguments": spec.parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for spec in tools
    ]
    schema: dict[str, Any] = calls[0] if len(calls) == 1 else {"anyOf": calls}
    defs: dict[str, Any] = {}
    for spec in tools:  # a tool's own $defs are referenced from the root ("#/$defs/...")
        for key in ("$defs", "definitions"):
            found = spec.parameters.get(key)
            if not isinstance(found, Mapping):
                continue
            known = defs.setdefault(key, {})
            for name, definition in found.items():
                if known.setdefault(name, definition) != definition:
                    return None
    return {**schema, **defs}


def with_tools_prompt(
    system: str, tools: Sequence[ToolSpec], *, plain: bool = False, keys: bool = False
) -> str:
    """``system`` followed by the tools' section (``plain``: :func:`plain_tools_prompt`, with
    ``keys``)."""
    section = plain_tools_prompt(tools, keys=keys) if plain else tools_prompt(tools)
    return f"{system.rstrip()}\n\n{section}" if system.strip() else section


def _one_line(text: object) -> str:
    return " ".join(str(text).split()) if text else ""


def _type_words(schema: object) -> str:
    """A parameter's type in words: ``integer``, ``list of string``, ``one of: a, b``."""
    if not isinstance(schema, Mapping):
        return "any"
    if "enum" in schema and isinstance(schema["enum"], list):
        return "one of: " + ", ".join(str(v) for v in schema["enum"])
    if "const" in schema:
        return f"always {schema['const']}"
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array":
        return f"list of {_type_words(schema.get('items'))}"
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list):
            return " or ".join(_type_words(o) for o in options)
    if "$ref" in schema:
        return "object"
    return "any"
