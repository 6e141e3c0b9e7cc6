"""Doubts about a final answer: empty, or a tool call written as text (internal).

Small local models often answer with the call they meant to make instead of making it: a JSON
object with ``name`` and ``arguments`` (or ``parameters``), bare, fenced, or in ``<tool_call>``
tags, or a ``functions.name:`` line. :func:`answer_warning` says so in one sentence; the agent
loop records it on the run (``AgentRunResult.warnings``, the run span's ``warnings``) and, with
``Agent(reask=True)``, asks the model once more with :func:`reask_prompt`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from kode_nb.models._text_calls import parse_text_calls

__all__ = ["answer_warning", "reask_prompt"]

_FUNCTIONS_LINE = re.compile(r"(?m)^\s*(?:to=)?functions\.([A-Za-z_][\w.-]*)\s*[:({]")


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
    if called:
        known = "" if set(called) <= names else " (no such tool)"
        listed = "', '".join(called)
        return (
            f"the final answer looks like a call to '{listed}'{known} written as text "
            '({"name": ..., "arguments": ...}), not made through the tools interface'
        )
    return None


def _json_call(text: str) -> list[str]:
    """The tools named by the calls ``text`` consists of, in order, each once."""
    return list(dict.fromkeys(c.name for c in parse_text_calls(text) or ()))


def reask_prompt(warning: str) -> str:
    """The user message that asks the model once more after a doubtful answer."""
    return (
        f"Your last answer was not usable: {warning}. If you need a tool, call it through the "
        "tools interface (not as text). Otherwise answer the question in plain words."
    )
