"""What a small model writes that is neither a call to an offered tool nor an answer.

Small models on local servers (``docs/model-servers.md``) copy from the tools' description they
were given instead of using it. Three forms met on the wire with Qwen2.5-Coder-0.5B on
llama-server, through the frameworks' own tool schemas:

- a call to the schema's *title* instead of the tool's name: the OpenAI Agents SDK titles
  ``get_weather``'s parameters ``get_weather_args``, and the model writes
  ``{"name": "get_weather_args", ...}``. :func:`schema_titles` maps each title that is no tool's
  name to the one tool it titles, so the call is read as a call to that tool;
- an answer that is nothing but calls to tools that are not offered (:func:`unoffered_calls`),
  or the tools' description itself (:func:`describes_tools`): no answer, so the model is asked
  again, told which tools there are;
- an argument whose value is its parameter's description, copied from the schema
  (``{"task": "The whole question, in words."}``; :func:`copied_description`): the call does not
  fit, so it is asked for again like any other call that does not fit.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from typing import Any

from kode_nb.models._text_calls import read_text_calls
from kode_nb.models.base import ToolSpec

__all__ = ["copied_description", "describes_tools", "schema_titles", "unoffered_calls"]


def schema_titles(specs: Sequence[ToolSpec]) -> dict[str, str]:
    """``{title: tool name}`` for each offered tool whose parameters schema has a ``title`` that
    is no offered tool's name and titles no other tool."""
    names = {spec.name for spec in specs}
    found: dict[str, list[str]] = {}
    for spec in specs:
        title = spec.parameters.get("title") if isinstance(spec.parameters, dict) else None
        if isinstance(title, str) and title.strip() and title not in names:
            found.setdefault(title.strip(), []).append(spec.name)
    return {title: tools[0] for title, tools in found.items() if len(tools) == 1}


def describes_tools(said: str) -> bool:
    """``said`` (spaces collapsed) is, or holds, the tools' description as the server's prompt
    template renders it (``<tools> {"type": "function", ...``)."""
    return "<tools>" in said or ('"type": "function"' in said and '"parameters"' in said)


def unoffered_calls(text: str, offered: Collection[str]) -> list[str]:
    """The tool names ``text`` calls when it is nothing but calls, none of them to a tool in
    ``offered`` (a name the model made up or copied from elsewhere); else ``[]``."""
    found = read_text_calls(text)
    if found is None or any(c.name in offered for c in found.calls):
        return []
    return list(dict.fromkeys(c.name for c in found.calls))


def _plain(text: str) -> str:
    return " ".join(text.split()).strip().rstrip(".").lower()


def copied_description(spec: ToolSpec, arguments: str) -> str | None:
    """The first argument of ``arguments`` (JSON text) whose value is its parameter's own
    description in ``spec``'s schema, copied instead of a value; else ``None``."""
    try:
        parsed: Any = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        return None
    properties = spec.parameters.get("properties") if isinstance(spec.parameters, dict) else None
    if not isinstance(parsed, dict) or not isinstance(properties, dict):
        return None
    for key, value in parsed.items():
        schema = properties.get(key)
        described = schema.get("description") if isinstance(schema, dict) else None
        if (
            isinstance(value, str)
            and isinstance(described, str)
            and _plain(described)
            and _plain(value) == _plain(described)
        ):
            return str(key)
    return None
