"""Doubts about a final answer: empty, or a tool call written as text (internal).

Small local models often answer with the call they meant to make instead of making it: a JSON
object with ``name`` and ``arguments`` (or ``parameters``), bare, fenced, or in ``<tool_call>``
tags, or a ``functions.name:`` line. :func:`answer_warning` says so in one sentence; the agent
loop records it on the run (``AgentRunResult.warnings``, the run span's ``warnings``) and, with
``Agent(reask=True)``, asks the model once more with :func:`reask_prompt`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

__all__ = ["answer_warning", "reask_prompt"]

_FUNCTIONS_LINE = re.compile(r"(?m)^\s*(?:to=)?functions\.([A-Za-z_][\w.-]*)\s*[:({]")
_TAGS = re.compile(r"</?(?:tool_call|tool_calls|function_call)>", re.I)
_FENCE = re.compile(r"^```[\w-]*\s*|\s*```$")


def answer_warning(text: str, tools: Iterable[str]) -> str | None:
    """Why ``text`` is a doubtful final answer, or ``None`` when it looks like an answer."""
    if not text.strip():
        return "the model's final answer is empty"
    names = set(tools)
    match = _FUNCTIONS_LINE.search(text)
    if match:
        return (
            f"the final answer looks like a tool call written as text "
            f"('functions.{match.group(1)}:'), not made through the tools interface"
        )
    called = _json_call(text)
    if called is not None:
        known = "" if called in names else " (no such tool)"
        return (
            f"the final answer looks like a call to '{called}'{known} written as text "
            '({"name": ..., "arguments": ...}), not made through the tools interface'
        )
    return None


def _json_call(text: str) -> str | None:
    body = _FENCE.sub("", _TAGS.sub("", text.strip())).strip()
    if not body.startswith(("{", "[")):
        return None
    try:
        value = json.loads(body)
    except ValueError:
        return None
    if isinstance(value, list) and value:
        value = value[0]
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("function"), dict):
        value = value["function"]
    name = value.get("name")
    if isinstance(name, str) and name and ("arguments" in value or "parameters" in value):
        return name
    return None


def reask_prompt(warning: str) -> str:
    """The user message that asks the model once more after a doubtful answer."""
    return (
        f"Your last answer was not usable: {warning}. If you need a tool, call it through the "
        "tools interface (not as text). Otherwise answer the question in plain words."
    )
